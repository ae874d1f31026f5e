package testsuite_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/testsuite"
)

// End to end with a real worker process under --deny-private: a job
// whose --proxy is an internal host:port (a "proxy" at 127.0.0.1 that
// answers absolute-form requests itself) is refused, the page recorded
// with the reason naming the proxy, and the internal server never asked.
func TestWorkerDenyPrivateRefusesJobProxy(t *testing.T) {
	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerArgs("--deny-private"))
	internal := newHostileServer(t, "127.0.0.1:0", func(_ *hostileServer, w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<title>internal admin</title>")
	})
	c.StartAll()
	c.WaitElected(electTimeout)

	out, code := baton(c, "crawl", "--id", "via-proxy", "--proxy", internal.URL, "http://x.invalid/secret", "--wait")
	require.Equal(t, 0, code, out)
	recs := readResults(t, c.OpenStore(), "via-proxy")
	require.Len(t, recs, 1, out)
	assert.Equal(t, "refused proxy "+internal.URL+": private address 127.0.0.1 (deny_private)", recs[0].Error, "%+v", recs[0])
	assert.Empty(t, internal.paths(), "the internal server was reached through the job's proxy")
}
