package sqlstore_test

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/jobs/sqlstore"
	"github.com/batoncrawl/baton/activities/jobs/storetest"
	"github.com/batoncrawl/baton/testsuite"
)

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func openSQLite(t *testing.T, dir string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(testCtx(t, time.Minute), dir)
	require.NoError(t, err, "OpenSQLite %s", dir)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) jobs.Store { return openSQLite(t, t.TempDir()) })
}

// newJob creates a job with n seeds and returns its ID and seed URLs.
func newJob(t *testing.T, s jobs.Store, n int) (string, []string) {
	t.Helper()
	id := storetest.JobID(t, "j")
	seeds := make([]string, n)
	for i := range seeds {
		seeds[i] = storetest.URL(fmt.Sprintf("p%05d", i))
	}
	_, err := s.CreateJob(testCtx(t, time.Minute), storetest.Spec(id, 0, seeds...), storetest.Entries(0, seeds...))
	require.NoError(t, err)
	return id, seeds
}

func record(ctx context.Context, s jobs.Store, job, batch, runner string, epoch int64, url string) (jobs.Recorded, error) {
	return s.Record(ctx, jobs.Record{Job: job, Batch: batch, Runner: runner, Epoch: epoch, URL: url,
		Page: storetest.Page(job, batch, runner, epoch, url, 0, "")})
}

// results counts each URL of a job's results.
func results(t *testing.T, s jobs.Store, job string) map[string]int {
	t.Helper()
	out := map[string]int{}
	require.NoError(t, s.Results(testCtx(t, time.Minute), job, func(p jobs.PageRecord) error {
		out[p.URL]++
		return nil
	}))
	return out
}

func requireOnce(t *testing.T, got map[string]int, want []string) {
	t.Helper()
	for _, u := range want {
		assert.Equal(t, 1, got[u], "%s in the results %d times", u, got[u])
	}
	assert.Len(t, got, len(want), "results beyond the URLs recorded")
}

// TestSQLiteTwoStores: two Store values on one directory, as two worker
// processes on one host, record the same URLs concurrently.
func TestSQLiteTwoStores(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	dir := t.TempDir()
	s1, s2 := openSQLite(t, dir), openSQLite(t, dir)
	assert.Equal(t, s1.Identity(), s2.Identity(), "two opens of one directory: one identity")

	const batches, size = 4, 100
	job, _ := newJob(t, s1, batches*size)
	type work struct{ batch, url string }
	var todo []work
	var all []string
	for i := range batches {
		id := fmt.Sprintf("b%d", i)
		b, err := s1.TakeBatch(ctx, job, id, size)
		require.NoError(t, err)
		require.Equal(t, size, b.Size)
		_, err = s2.Claim(ctx, job, id, "runner", 1)
		require.NoError(t, err)
		es, err := s2.Entries(ctx, job, id)
		require.NoError(t, err)
		for _, e := range es {
			todo = append(todo, work{id, e.URL})
			all = append(all, e.URL)
		}
	}

	// Each URL goes to both stores; 8 goroutines per store.
	var mu sync.Mutex
	wrote := map[string]int{}
	var errs []error
	var wg sync.WaitGroup
	for si, s := range []*sqlstore.Store{s1, s2} {
		ch := make(chan work)
		go func() {
			defer close(ch)
			for i := range todo {
				ch <- todo[(i+si*len(todo)/2)%len(todo)]
			}
		}()
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for w := range ch {
					r, err := record(ctx, s, job, w.batch, "runner", 1, w.url)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else if r.Wrote {
						wrote[w.url]++
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	require.Empty(t, errs)
	requireOnce(t, wrote, all)
	requireOnce(t, results(t, s1, job), all)
	st, err := s2.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: len(all), Recorded: len(all)}, st)
	for i := range batches {
		_, err := s2.FinishBatch(ctx, job, fmt.Sprintf("b%d", i), 1)
		require.NoError(t, err)
	}

	// The identity survives reopening.
	id := s1.Identity()
	require.NoError(t, s1.Close())
	require.NoError(t, s2.Close())
	s3 := openSQLite(t, dir)
	assert.Equal(t, id, s3.Identity(), "identity after reopening")
	s4, err := sqlstore.OpenSQLiteExisting(ctx, dir)
	require.NoError(t, err)
	defer s4.Close()
	assert.Equal(t, id.ID, s4.Identity().ID, "identity through OpenSQLiteExisting")
	assert.NotEqual(t, id.ID, openSQLite(t, t.TempDir()).Identity().ID, "another directory, another identity")
	requireOnce(t, results(t, s4, job), all)
}

func TestSQLiteExistingCreatesNothing(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	dir := t.TempDir()
	_, err := sqlstore.OpenSQLiteExisting(ctx, dir)
	require.Error(t, err, "OpenSQLiteExisting on an empty directory")
	assert.Contains(t, err.Error(), dir)
	ents, rerr := os.ReadDir(dir)
	require.NoError(t, rerr)
	assert.Empty(t, ents, "OpenSQLiteExisting created files")

	missing := filepath.Join(dir, "no", "such")
	_, err = sqlstore.OpenSQLiteExisting(ctx, missing)
	require.Error(t, err, "OpenSQLiteExisting on a missing directory")
	_, serr := os.Stat(filepath.Join(dir, "no"))
	assert.True(t, os.IsNotExist(serr), "OpenSQLiteExisting created a directory")

	cfg := sqlstore.Config{DataDir: dir, Existing: true}
	_, err = sqlstore.Open(ctx, cfg)
	require.Error(t, err, "Open with Existing on an empty directory")
	ents, _ = os.ReadDir(dir)
	assert.Empty(t, ents)
}

// The crash-safety child process: records the batch's URLs and prints
// each one after Record returns, until the parent kills it.
const (
	envCrashDir   = "BATON_SQLSTORE_CRASH_DIR"
	envCrashJob   = "BATON_SQLSTORE_CRASH_JOB"
	crashBatch    = "b1"
	crashRecorded = "RECORDED "
)

func crashChild() {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	s, err := sqlstore.OpenSQLite(ctx, os.Getenv(envCrashDir))
	if err != nil {
		fail(err)
	}
	job := os.Getenv(envCrashJob)
	es, err := s.Entries(ctx, job, crashBatch)
	if err != nil {
		fail(err)
	}
	ch := make(chan string)
	go func() {
		for _, e := range es {
			ch <- e.URL
		}
		close(ch)
	}()
	var wg sync.WaitGroup
	var out sync.Mutex
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range ch {
				if _, err := record(ctx, s, job, crashBatch, "child", 1, u); err != nil {
					fail(err)
				}
				out.Lock()
				_, err := os.Stdout.WriteString(crashRecorded + u + "\n")
				out.Unlock()
				if err != nil {
					fail(err)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println("DONE")
	os.Exit(0)
}

// TestSQLiteCrashSafety: a process killed (SIGKILL) while recording loses
// no page whose Record had returned, and leaves a store that works.
func TestSQLiteCrashSafety(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		crashChild()
		return
	}
	ctx := testCtx(t, 3*time.Minute)
	dir := t.TempDir()
	s := openSQLite(t, dir)
	const n = 3000
	job, _ := newJob(t, s, n)
	b, err := s.TakeBatch(ctx, job, crashBatch, n)
	require.NoError(t, err)
	require.Equal(t, n, b.Size)
	_, err = s.Claim(ctx, job, crashBatch, "child", 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	const killAfter = 150
	cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteCrashSafety$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashJob+"="+job)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var printed []string
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if u, ok := strings.CutPrefix(line, crashRecorded); ok {
			printed = append(printed, u)
		}
		if len(printed) == killAfter && !killed {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			killed = true
		}
	}
	werr := cmd.Wait()
	require.True(t, killed, "the child ended before it was killed: %v\n%s", werr, stderr.String())
	require.Error(t, werr)
	t.Logf("child killed after %d URLs printed (wait: %v)", len(printed), werr)
	require.Less(t, len(printed), n, "the child finished before the kill")

	// Reopen: every printed URL is there, once; the store is intact.
	s = openSQLite(t, dir)
	var check string
	require.NoError(t, s.DB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check))
	assert.Equal(t, "ok", check)
	got := results(t, s, job)
	for _, u := range printed {
		assert.Equal(t, 1, got[u], "%s was printed after Record returned but is in the results %d times", u, got[u])
	}
	t.Logf("%d pages in the results after the kill (%d printed)", len(got), len(printed))

	// A new holder finishes the batch.
	_, err = s.Claim(ctx, job, crashBatch, "parent", 2)
	require.NoError(t, err)
	es, err := s.Entries(ctx, job, crashBatch)
	require.NoError(t, err)
	var all []string
	for _, e := range es {
		all = append(all, e.URL)
		if !e.Done {
			_, err := record(ctx, s, job, crashBatch, "parent", 2, e.URL)
			require.NoError(t, err)
		}
	}
	_, err = s.FinishBatch(ctx, job, crashBatch, 2)
	require.NoError(t, err)
	requireOnce(t, results(t, s, job), all)
	st, err := s.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: n, Recorded: n}, st)
}

func openPostgres(t testing.TB, pg *testsuite.Postgres) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenPostgres(testCtx(t, time.Minute), pg.DSN(), "")
	require.NoError(t, err, "OpenPostgres")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestPostgresConformance runs the suite on one server: every subtest
// opens its own Store on the same database (its jobs have their own IDs).
func TestPostgresConformance(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	first := openPostgres(t, pg)
	storetest.Run(t, func(t *testing.T) jobs.Store {
		s := openPostgres(t, pg)
		require.Equal(t, first.Identity(), s.Identity(), "two opens of one database: one identity")
		return s
	})
	assert.Equal(t, "postgres", first.Identity().Engine)
	assert.Equal(t, pg.Address()+"/"+pg.Database(), first.Identity().Location)
	assert.NotContains(t, first.Identity().String(), pg.Password(), "the identity shows the password")
}

// TestPostgresRestart: the server is killed (SIGKILL) and restarted while
// goroutines keep recording; the store retries, and every URL ends up
// recorded exactly once.
func TestPostgresRestart(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, 3*time.Minute)
	s := openPostgres(t, pg)
	const n = 400
	job, _ := newJob(t, s, n)
	_, err := s.TakeBatch(ctx, job, "b1", n)
	require.NoError(t, err)
	_, err = s.Claim(ctx, job, "b1", "runner", 1)
	require.NoError(t, err)
	es, err := s.Entries(ctx, job, "b1")
	require.NoError(t, err)
	require.Len(t, es, n)

	ch := make(chan string)
	go func() {
		defer close(ch)
		for _, e := range es {
			ch <- e.URL
		}
	}()
	var done atomic.Int64
	var mu sync.Mutex
	var errs []error
	var slowest time.Duration
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range ch {
				start := time.Now()
				_, err := record(ctx, s, job, "b1", "runner", 1, u)
				took := time.Since(start)
				mu.Lock()
				slowest = max(slowest, took)
				if err != nil {
					errs = append(errs, fmt.Errorf("record %s after %v: %w", u, took, err))
				}
				mu.Unlock()
				done.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	require.Eventually(t, func() bool { return done.Load() >= 60 }, time.Minute, 5*time.Millisecond)
	killedAt := done.Load()
	pg.Kill()
	time.Sleep(2 * time.Second) // the writers retry meanwhile
	outage := done.Load() - killedAt
	pg.Restart()
	wg.Wait()
	t.Logf("killed after %d records, %d returned during the outage, slowest Record %v", killedAt, outage, slowest)
	require.Empty(t, errs, "Record failed across the restart")
	assert.Less(t, killedAt, int64(n), "the server was killed after all records were done")

	all := make([]string, len(es))
	for i, e := range es {
		all[i] = e.URL
	}
	requireOnce(t, results(t, s, job), all)
	st, err := s.Stats(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, jobs.Stats{Seen: n, Recorded: n}, st)
	b, err := s.FinishBatch(ctx, job, "b1", 1)
	require.NoError(t, err)
	assert.Equal(t, n, b.Success)
}

// TestPostgresWrongPassword: a wrong password is a clear error that does
// not show the password.
func TestPostgresWrongPassword(t *testing.T) {
	pg := testsuite.StartPostgres(t)
	ctx := testCtx(t, time.Minute)
	const secret = "Wr0ng-S3cret-pw"

	_, err := sqlstore.OpenPostgres(ctx, pg.DSN(), secret)
	require.Error(t, err, "OpenPostgres with a wrong password")
	msg := err.Error()
	t.Logf("wrong password: %v", err)
	assert.NotContains(t, msg, secret, "the error shows the password")
	assert.NotContains(t, msg, pg.Password(), "the error shows the DSN's password")
	assert.Contains(t, msg, "password authentication failed", "the error does not say the password is wrong")
	assert.Contains(t, msg, pg.User())
	assert.Contains(t, msg, pg.Address())

	// The same wrong password written in the DSN.
	u, perr := url.Parse(pg.DSN())
	require.NoError(t, perr)
	u.User = url.UserPassword(pg.User(), secret)
	_, err = sqlstore.OpenPostgres(ctx, u.String(), "")
	require.Error(t, err, "OpenPostgres with a wrong password in the DSN")
	assert.NotContains(t, err.Error(), secret, "the error shows the DSN's password")
	assert.Contains(t, err.Error(), "password authentication failed")

	// The right password replaces a wrong one in the DSN.
	s, err := sqlstore.OpenPostgres(ctx, u.String(), pg.Password())
	require.NoError(t, err, "the password argument replaces the DSN's")
	require.NoError(t, s.Close())
}

// Workers started together open one SQLite file at the same moment (each
// connection sets WAL mode under the file's lock): every process opens it
// and sees the same identity.
func TestSQLiteOpenedByManyProcessesAtOnce(t *testing.T) {
	if dir := os.Getenv("BATON_TEST_SQLITE_OPEN"); dir != "" {
		s, err := sqlstore.OpenSQLite(context.Background(), dir)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		if _, err := s.Jobs(context.Background()); err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("ID", s.Identity().ID)
		os.Exit(0)
	}
	dir := t.TempDir()
	const n = 8
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteOpenedByManyProcessesAtOnce$")
			cmd.Env = append(os.Environ(), "BATON_TEST_SQLITE_OPEN="+dir)
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	ids := map[string]bool{}
	for i := range n {
		require.NoError(t, errs[i], "process %d: %s", i, outs[i])
		for _, line := range strings.Split(outs[i], "\n") {
			if id, ok := strings.CutPrefix(line, "ID "); ok {
				ids[id] = true
			}
		}
	}
	require.Len(t, ids, 1, "one identity for every process")
}

// TestSQLiteFilesPrivate: a new data directory is 0700, its database 0600.
func TestSQLiteFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := openSQLite(t, dir)
	_ = s
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, f := range []string{sqlstore.SQLiteFile, sqlstore.SQLiteFile + "-wal"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
}
