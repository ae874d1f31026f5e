package crawl

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// A quadratic XPath over a large hostile page fails the page past the
// selectors' budget, quickly, with what was extracted before; the cheap
// selectors of the same page work.
func TestSelectorBudget(t *testing.T) {
	t.Parallel()
	page := "<html><title>t</title><body>" + strings.Repeat("<p>x</p>", 8000) + "</body></html>"
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})
	o := testOptions()
	o.IgnoreRobots, o.Retries = true, 3
	o.Selectors = map[string]string{"a_first": "title", "quadratic": "xpath://p[count(preceding::p) >= 0]"}
	start := time.Now()
	p := NewEngine().Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	took := time.Since(start)
	assert.Contains(t, p.Error, "selectors ran past their budget")
	assert.Equal(t, 1, p.Attempts, "not retried: the next fetch would cost the same")
	assert.Equal(t, []string{"t"}, p.Fields["a_first"], "the fields extracted before are kept")
	assert.Less(t, took, MaxSelectorTime+5*time.Second)
	t.Logf("quadratic XPath over 8,000 nodes stopped after %v", took)

	o.Selectors = map[string]string{"cheap": "xpath://p[1]"}
	p = NewEngine().Fetch(context.Background(), get(srv.URL+"/"), Auth{}, 0, o)
	require.True(t, p.OK(), p.Error)
	assert.Equal(t, []string{"x"}, p.Fields["cheap"])
}

// CSS matching counts too: a small budget stops a match over a page
// larger than it.
func TestSelectorBudgetCSS(t *testing.T) {
	old := selectorSteps
	selectorSteps = 500
	t.Cleanup(func() { selectorSteps = old })
	root, err := html.Parse(strings.NewReader(strings.Repeat("<div><p>x</p></div>", 1000)))
	require.NoError(t, err)
	sel, err := ParseSelector("div:has(p) > p")
	require.NoError(t, err)
	fields, err := extractHTML(root, map[string]Selector{"p": sel}, nil)
	assert.ErrorIs(t, err, ErrSelectorBudget)
	assert.NotNil(t, fields["p"])

	selectorSteps = old
	fields, err = extractHTML(root, map[string]Selector{"p": sel}, nil)
	require.NoError(t, err)
	assert.Len(t, fields["p"], 1000)
}
