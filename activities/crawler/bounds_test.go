package crawler_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
)

func nested(n int) []byte {
	return []byte("<html><body>" + strings.Repeat("<div>x", n) + strings.Repeat("</div>", n) + "</body></html>")
}

// A handler's XPath has a step budget, as the built-in selectors do: an
// expression that would walk a deep page for ever selects nothing and
// the page fails with ErrSelectorBudget, even when the handler ignores
// the error and returns nil.
func TestHandlerSelectorBudget(t *testing.T) {
	t.Parallel()
	c := crawler.New("deep", "1")
	var xerr error
	var found int
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		ns, err := p.XPath("//div[count(ancestor::div) > count(following::div//div)]")
		xerr = err
		found = p.Find("div").Length() // spent: selects nothing
		_ = ns
		return nil
	})
	p := crawler.NewPage(context.Background(), crawler.Request{URL: "http://x.test/"},
		crawler.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: nested(400)}, nil)
	start := time.Now()
	_, err := c.Run(context.Background(), p, nil)
	require.ErrorIs(t, err, crawler.ErrSelectorBudget)
	require.ErrorIs(t, xerr, crawler.ErrSelectorBudget)
	require.Zero(t, found)
	require.Less(t, time.Since(start), 4*crawler.MaxSelectorTime)

	// A cheap query on a fresh page works.
	p = crawler.NewPage(context.Background(), crawler.Request{URL: "http://x.test/"},
		crawler.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, Body: nested(5)}, nil)
	ns, err := p.XPath("//div/@class | //div")
	require.NoError(t, err)
	require.Len(t, ns, 5)
	require.Equal(t, 5, p.Find("body div").Length())
}

// A handler that ignores its context past its budget is abandoned and
// counted (Abandoned) until it returns.
func TestAbandonedHandlersCounted(t *testing.T) {
	release := make(chan struct{})
	c := crawler.New("stuck", "1")
	c.Budget = 20 * time.Millisecond
	c.HandleFunc("", func(context.Context, *crawler.Page) error {
		<-release
		return nil
	})
	before, total := crawler.Abandoned(), crawler.AbandonedTotal()
	p := crawler.NewPage(context.Background(), crawler.Request{URL: "http://x.test/"}, crawler.Response{StatusCode: 200}, nil)
	_, err := c.Run(context.Background(), p, nil)
	require.True(t, errors.Is(err, crawler.ErrBudget), "%v", err)
	require.Equal(t, before+1, crawler.Abandoned())
	require.Equal(t, total+1, crawler.AbandonedTotal())
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for crawler.Abandoned() != before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
	require.Equal(t, before, crawler.Abandoned(), "a returned handler is no longer counted")
}
