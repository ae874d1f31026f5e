package crawl

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Compiled options fetch what the same options fetch uncompiled, and
// Compile names a bad field as Validate does.
func TestCompile(t *testing.T) {
	t.Parallel()
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, extractHTMLPage)
	})
	o := testOptions()
	o.IgnoreRobots = true
	o.Selectors = map[string]string{"title": "h1.title", "x_hrefs": "xpath://a[@class='img']/@href"}
	co, err := o.Compile()
	require.NoError(t, err)
	require.NotNil(t, co.compiled)
	assert.Len(t, co.compiled.sels, 2)
	e := NewEngine()
	raw := e.Fetch(context.Background(), get(srv.URL+"/item/7"), Auth{}, 0, o)
	comp := e.Fetch(context.Background(), get(srv.URL+"/item/7"), Auth{}, 0, co)
	require.True(t, comp.OK(), comp.Error)
	assert.Equal(t, raw.Fields, comp.Fields)
	assert.NotEmpty(t, comp.Fields["title"])

	o.Selectors["bad"] = "xpath://["
	_, err = o.Compile()
	assert.ErrorContains(t, err, `selectors["bad"]: invalid XPath`)
}
