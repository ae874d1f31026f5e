package testsuite_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/testsuite"
)

// A clean SIGTERM logs no error: an idle runner, a backup and a runner
// that crawled a job each stop with exit code 0 and no level=ERROR line.
func TestSIGTERMLogsNoError(t *testing.T) {
	c := testsuite.NewCluster(t, 2, 1, testsuite.FastTimers)
	site := testsuite.NewSite(t, time.Millisecond)
	c.StartAll()
	c.WaitElected(electTimeout)
	r := runCLI(t, c.Starter, nil, append(c.StarterArgs(), "crawl", "--id", "before-term", "--wait", site.URL+"/t/1", site.URL+"/t/2")...)
	require.Equal(t, 0, r.code, r.stderr)
	for _, i := range []int{3, 2, 1} {
		p := c.Process(i)
		require.NoError(t, p.Signal(syscall.SIGTERM))
		require.NoError(t, p.Wait(30*time.Second), p.Logs())
		assert.Equal(t, 0, p.ExitCode(), p.Logs())
		var errs []string
		for _, line := range strings.Split(p.Logs(), "\n") {
			if strings.Contains(line, "level=ERROR") {
				errs = append(errs, line)
			}
		}
		assert.Empty(t, errs, "worker %d logged errors on a clean SIGTERM", i)
	}
}
