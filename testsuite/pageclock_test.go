package testsuite_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPageClockCountsDistinctPages pins what BenchmarkPostgresCrawl
// compares: the n-th distinct page served, not the n-th request. Bare
// Colly fetches some pages twice, and robots.txt is no page of the crawl.
func TestPageClockCountsDistinctPages(t *testing.T) {
	clock := &pageClock{h: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}
	srv := httptest.NewServer(clock)
	t.Cleanup(srv.Close)
	get := func(path string) {
		res, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
	}
	clock.Arm()
	for _, p := range []string{"/robots.txt", "/", "/a", "/", "/a", "/a?x=1"} {
		get(p)
	}
	assert.Equal(t, 3, clock.Distinct(), "/, /a and /a?x=1: a page fetched again and robots.txt do not count")
	assert.NotZero(t, clock.FirstDistinct(3))
	assert.Zero(t, clock.FirstDistinct(4), "no fourth distinct page was served")
	assert.LessOrEqual(t, clock.FirstDistinct(2), clock.FirstDistinct(3))
	clock.Arm()
	assert.Zero(t, clock.Distinct(), "Arm starts the count again")
	get("/")
	assert.Equal(t, 1, clock.Distinct(), "a page served before Arm counts again after it")
}
