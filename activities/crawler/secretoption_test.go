package crawler_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
)

type logInOptions struct {
	User     string `json:"user"`
	Password string `json:"password" baton:"secret"`
	Retries  int    `json:"retries" baton:"secret"`
}

// A field tagged baton:"secret" is advertised as secret, without its
// default, and no error about it repeats its value.
func TestSecretOptions(t *testing.T) {
	c := crawler.New("login", "1")
	c.Options(&logInOptions{User: "ann", Password: "compiled-in-default", Retries: 3})
	specs := c.OptionSpecs()
	assert.Equal(t, []crawler.OptionSpec{{Key: "password", Kind: "string", Secret: true}, {Key: "retries", Kind: "int", Secret: true},
		{Key: "user", Kind: "string", Default: "ann"}}, specs)
	assert.Equal(t, map[string]bool{"password": true, "retries": true}, crawler.SecretKeys(specs))

	err := crawler.CheckSets("login", specs, map[string]string{"retries": "not-a-number-s3cret"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	_, err = c.DecodeOptions(map[string]string{"retries": "not-a-number-s3cret"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	v, err := c.DecodeOptions(map[string]string{"password": "pw"})
	require.NoError(t, err)
	assert.Equal(t, "pw", v.(*logInOptions).Password)
}
