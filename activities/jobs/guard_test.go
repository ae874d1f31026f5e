package jobs_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
)

// policyPages fetches with fakePages and gives crawler code the client
// of a real engine under a worker's policy.
type policyPages struct {
	*fakePages
	engine *crawl.Engine
}

func (p policyPages) Client(denyPrivate bool) *http.Client { return p.engine.Client(denyPrivate) }

// loginServer is an internal service (a metadata endpoint) that counts
// the requests it gets.
func loginServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s"})
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// A Start hook's requests go through crawler.Client, under the worker's
// --deny-private: a log-in aimed at a private address is refused and the
// batch fails saying why; on a worker with no such policy it works. A
// handler's Page.Client is under the same rule.
func TestStartHookUnderWorkerPolicy(t *testing.T) {
	const base = "http://127.0.0.1:1"
	srv, hits := loginServer(t)
	for _, deny := range []bool{true, false} {
		e := newBatchEnv(t, 1, []string{base + "/p"}, func(s *jobs.Spec) {
			s.Crawler, s.BatchSize = "login", 0
			s.Options = crawl.DefaultOptions()
		})
		e.pages.pages[base+"/p"] = htmlPage(base+"/p", `<h1>p</h1>`)
		engine := crawl.NewEngine()
		engine.Policy.DenyPrivate = deny
		e.br.Pages = policyPages{fakePages: e.pages, engine: engine}
		var handlerErr atomic.Value
		c := crawler.New("login", "1")
		c.Start = func(ctx context.Context, job crawler.JobInfo) ([]*http.Cookie, error) {
			resp, err := crawler.Client(ctx).Get(srv.URL + "/login?token=t0k")
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			return resp.Cookies(), nil
		}
		c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
			resp, err := p.Client().Get(srv.URL + "/api")
			if err == nil {
				resp.Body.Close()
			}
			handlerErr.Store(err == nil)
			return nil
		})
		e.br.Crawlers = map[string]*crawler.Crawler{"login": c}
		_, err := e.run()
		if deny {
			require.ErrorContains(t, err, "refused private address 127.0.0.1 (deny_private)")
			require.Zero(t, hits.Load(), "the Start hook reached a private address")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, int32(2), hits.Load(), "the log-in and the handler's request")
		require.Equal(t, true, handlerErr.Load())
	}

	// The job's own --deny-private guards its crawler code too.
	e := newBatchEnv(t, 1, []string{base + "/q"}, func(s *jobs.Spec) {
		s.Crawler, s.BatchSize = "login", 0
		s.Options = crawl.DefaultOptions()
		s.Options.DenyPrivate = true
	})
	e.br.Pages = policyPages{fakePages: e.pages, engine: crawl.NewEngine()}
	c := crawler.New("login", "1")
	c.Start = func(ctx context.Context, job crawler.JobInfo) ([]*http.Cookie, error) {
		_, err := crawler.Client(ctx).Get(srv.URL + "/login")
		return nil, err
	}
	c.HandleFunc("", func(context.Context, *crawler.Page) error { return nil })
	e.br.Crawlers = map[string]*crawler.Crawler{"login": c}
	_, err := e.run()
	require.ErrorContains(t, err, "refused private address 127.0.0.1 (deny_private)")
	require.Equal(t, int32(2), hits.Load())
}
