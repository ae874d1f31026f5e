package demosite

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The recrawl section: pages answer 304 to their validators (ETag first,
// Last-Modified alone for K % 3 == 1), every tenth page changes with the
// revision, the gone pages disappear after revision 1, and the site
// counts its answers.
func TestRecrawlSection(t *testing.T) {
	s := New(Config{Pages: 0, Recrawl: 12})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	get := func(path string, h http.Header) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range h {
			req.Header[k] = v
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	validators := func(res *http.Response) http.Header {
		h := http.Header{}
		if e := res.Header.Get("ETag"); e != "" {
			h.Set("If-None-Match", e)
		}
		h.Set("If-Modified-Since", res.Header.Get("Last-Modified"))
		return h
	}
	first := map[string]http.Header{}
	pages, changed := s.RecrawlPages(1)
	assert.Empty(t, changed)
	assert.Len(t, pages, 1+12+RecrawlGone)
	for _, p := range pages {
		res := get(p, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, p)
		first[p] = validators(res)
	}
	assert.Empty(t, first["/recrawl/p/1.html"].Get("If-None-Match"), "K %% 3 == 1: Last-Modified only")
	assert.NotEmpty(t, first["/recrawl/p/2.html"].Get("If-None-Match"))

	res := get(RecrawlPrefix+"revision", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+RecrawlPrefix+"revision", strings.NewReader(""))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 2, s.Revision())
	s.ResetHits()

	pages2, changed := s.RecrawlPages(2)
	assert.Equal(t, []string{"/recrawl/p/0.html", "/recrawl/p/10.html"}, changed)
	assert.Len(t, pages2, 1+12)
	for _, p := range pages {
		res := get(p, first[p])
		switch {
		case strings.Contains(p, "/gone/"):
			assert.Equal(t, http.StatusNotFound, res.StatusCode, p)
		case p == RecrawlPrefix || p == "/recrawl/p/0.html" || p == "/recrawl/p/10.html":
			assert.Equal(t, http.StatusOK, res.StatusCode, "%s changed", p)
		default:
			assert.Equal(t, http.StatusNotModified, res.StatusCode, p)
		}
	}
	a := s.Answers()
	assert.Equal(t, Answers{NotModified: 1}, a["/recrawl/p/1.html"])
	assert.Equal(t, Answers{Full: 1}, a["/recrawl/p/10.html"])
	// A wrong ETag wins over a matching date: If-None-Match first.
	h := first["/recrawl/p/2.html"].Clone()
	h.Set("If-None-Match", `"other"`)
	assert.Equal(t, http.StatusOK, get("/recrawl/p/2.html", h).StatusCode)
	assert.Equal(t, http.StatusNotFound, get("/recrawl/p/12.html", nil).StatusCode)
	assert.NotEqual(t, RecrawlPrice(0, 1), RecrawlPrice(0, 2))
	assert.Equal(t, RecrawlPrice(1, 1), RecrawlPrice(1, 2))
}
