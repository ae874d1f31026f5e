package jobs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
)

// A seed file of many blocks of lines is read in its order: its URLs come
// back in the file's order, its hosts and origins in the order they first
// appear, and its bad lines are named by their own line numbers, in order.
func TestScanSeedFileOrderAcrossBlocks(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	var want []string
	for i := 1; i <= 20000; i++ {
		switch {
		case i%1000 == 0:
			b.WriteString("# comment\n")
		case i%777 == 0:
			b.WriteString("\n")
		default:
			u := fmt.Sprintf("http://h%d.test:80%02d/p/%d", i/4000, i/4000, i)
			want = append(want, u)
			b.WriteString("  " + u + "\n")
		}
	}
	good := filepath.Join(dir, "good.txt")
	require.NoError(t, os.WriteFile(good, []byte(b.String()), 0o600))
	sf, err := jobs.ScanSeedFile(good, nil)
	require.NoError(t, err)
	defer sf.Close()
	assert.Equal(t, len(want), sf.Count())
	assert.Equal(t, []string{"h0.test", "h1.test", "h2.test", "h3.test", "h4.test"}, sf.Hosts())
	assert.Equal(t, []string{"http://h0.test:8000", "http://h1.test:8001", "http://h2.test:8002", "http://h3.test:8003",
		"http://h4.test:8004"}, sf.Origins())
	var got []string
	require.NoError(t, sf.Each(func(u string) error { got = append(got, u); return nil }))
	assert.Equal(t, want, got)

	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, n := range []int{9000, 4097, 15001, 3} {
		lines[n-1] = fmt.Sprintf("ftp://bad.test/%d", n)
	}
	bad := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o600))
	_, err = jobs.ScanSeedFile(bad, nil)
	require.ErrorIs(t, err, jobs.ErrBadSubmission)
	msg := err.Error()
	assert.Contains(t, msg, "4 bad lines (nothing submitted)")
	at := -1
	for _, n := range []int{3, 4097, 9000, 15001} {
		i := strings.Index(msg, fmt.Sprintf("bad.txt:%d: ", n))
		require.Greater(t, i, at, "line %d named, after the ones before it: %s", n, msg)
		at = i
	}
}

// A seed file none of whose URLs holds an @ or a ? has no secret to seal:
// building its submission does not read the file again (a million lines),
// and a file whose URLs do is read for them.
func TestBuildReadsTheSeedFileOnlyForSecrets(t *testing.T) {
	dir := t.TempDir()
	build := func(name, lines string, params ...string) error {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(lines), 0o600))
		sf, err := jobs.ScanSeedFile(path, nil)
		require.NoError(t, err)
		defer sf.Close()
		require.NoError(t, os.Remove(path)) // a read of it from here fails
		_, err = jobs.Submission{ID: "j", Group: "g", Options: crawl.DefaultOptions(), File: sf, SecretParams: params}.Build()
		return err
	}
	assert.NoError(t, build("plain.txt", "http://a.test/1\nhttp://a.test/2?x=1\n"))
	assert.Error(t, build("user.txt", "http://a.test/1\nhttp://u:p@a.test/2\n"), "a user:password to seal")
	assert.Error(t, build("params.txt", "http://a.test/1\nhttp://a.test/2?sig=1\n", "sig"), "a secret parameter to seal")
}
