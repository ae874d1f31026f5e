package sqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

// TestPostgresExportUnderShortStatementTimeout: the operator's role has a
// statement_timeout of 300 ms and a job has 20 MB of page records; a
// reader of its results (`baton results` into a pipe) stalls for a
// second on its first page. The export completes anyway, every page once,
// in the order recorded: no statement of it stays open while its reader
// works, and none reads the whole job.
func TestPostgresExportUnderShortStatementTimeout(t *testing.T) {
	const pages = 10000
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, 2*time.Minute)
	job := storetest.JobID(t, "export")
	seed := storetest.URL("seed")
	_, err := openPostgres(t, pg).CreateJob(ctx, storetest.Spec(job, 0, seed), storetest.Entries(0, seed))
	require.NoError(t, err)
	pg.Admin(t,
		fmt.Sprintf(`INSERT INTO baton_results (job, url, batch, failed, record)
			SELECT '%[1]s', u, 'b', 0, json_build_object('url', u, 'job', '%[1]s', 'content_type', repeat('x', 2000))::text
			FROM (SELECT i, 'http://export.test/p' || lpad(i::text, 6, '0') AS u FROM generate_series(1, %[2]d) AS i ORDER BY i) AS g`, job, pages),
		`ALTER ROLE `+pg.User()+` SET statement_timeout = '300ms'`)

	s := openPostgres(t, pg) // its sessions under the role's timeout
	var got []string
	start := time.Now()
	err = s.Results(ctx, job, func(p jobs.PageRecord) error {
		if len(got) == 0 {
			time.Sleep(time.Second) // the reader's pipe is full for a while
		}
		got = append(got, p.URL)
		return nil
	})
	require.NoError(t, err, "the export under a 300 ms statement timeout")
	t.Logf("exported %d pages in %v", len(got), time.Since(start).Round(time.Millisecond))
	require.Len(t, got, pages, "every page")
	for i, u := range got {
		if !assert.Equal(t, fmt.Sprintf("http://export.test/p%06d", i+1), u, "page %d in the order recorded", i) {
			break
		}
	}
}
