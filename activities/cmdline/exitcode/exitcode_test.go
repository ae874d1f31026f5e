package exitcode

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	assert.Equal(t, OK, Of(nil))
	assert.Equal(t, Failure, Of(errors.New("boom")))
	assert.Equal(t, Usage, Of(Usagef("--depth: is %d, must be >= 0", -1)))
	assert.Equal(t, Unavailable, Of(fmt.Errorf("status: %w", With(Unavailable, errors.New("dial")))), "wrapped")
	assert.Equal(t, NotFound, Of(With(NotFound, With(Unavailable, errors.New("x")))), "the outermost code")
	assert.NoError(t, With(Usage, nil))
	assert.Equal(t, "--depth: is -1, must be >= 0", Usagef("--depth: is %d, must be >= 0", -1).Error())
}
