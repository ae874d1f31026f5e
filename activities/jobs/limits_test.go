package jobs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/activities/metadata"
)

func limitSpec(mod func(*jobs.Spec)) jobs.Spec {
	s := jobs.Spec{ID: "lim", Group: testGroup, Seeds: []string{"http://example.com/"}, Options: crawl.DefaultOptions()}
	if mod != nil {
		mod(&s)
	}
	return s
}

func requireLimitError(t *testing.T, err error, field string, parts ...string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, jobs.ErrOverLimit)
	require.ErrorIs(t, err, jobs.ErrBadSpec, "a job above a cap cannot run: its batches fail as a bad spec's do")
	var le *jobs.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, field, le.Field)
	for _, p := range parts {
		assert.Contains(t, err.Error(), p)
	}
}

func TestLimitsCheckCaps(t *testing.T) {
	l := jobs.Limits{MaxBodyBytes: 33554432, MaxTimeout: 30 * time.Second, MaxDelay: 5 * time.Second}
	require.NoError(t, l.Check(limitSpec(nil)), "the defaults are within the caps")

	err := l.Check(limitSpec(func(s *jobs.Spec) { s.Options.MaxBodyBytes = 104857600 }))
	requireLimitError(t, err, "options.max_body_bytes")
	assert.Equal(t, "options.max_body_bytes: 104857600 is above this group's cap of 33554432 (--max-job-body-bytes)", err.Error())

	err = l.Check(limitSpec(func(s *jobs.Spec) { s.Options.Timeout = 2 * time.Minute }))
	requireLimitError(t, err, "options.timeout", "2m0s", "cap of 30s", "--max-job-timeout")

	err = l.Check(limitSpec(func(s *jobs.Spec) { s.Options.Delay = 10 * time.Second }))
	requireLimitError(t, err, "options.delay", "10s", "cap of 5s", "--max-job-delay")

	// At the cap is within it.
	require.NoError(t, l.Check(limitSpec(func(s *jobs.Spec) {
		s.Options.MaxBodyBytes, s.Options.Timeout, s.Options.Delay = l.MaxBodyBytes, l.MaxTimeout, l.MaxDelay
	})))
	// No caps: anything goes (today's behaviour).
	require.NoError(t, jobs.Limits{}.Check(limitSpec(func(s *jobs.Spec) {
		s.Options.MaxBodyBytes, s.Options.Timeout, s.Options.Delay = 1<<40, time.Hour, time.Hour
	})))
	// The same from a submitter.
	requireLimitError(t, l.CheckSubmission(limitSpec(func(s *jobs.Spec) { s.Options.Delay = time.Minute })), "options.delay")
}

func TestLimitsApplyLowersTheDefaultsToTheCaps(t *testing.T) {
	l := jobs.Limits{MaxBodyBytes: 1 << 20, MaxTimeout: 5 * time.Second}
	s, err := l.Apply(limitSpec(func(s *jobs.Spec) { s.Options.MaxBodyBytes, s.Options.Timeout = 0, 0 }))
	require.NoError(t, err, "zero is the default, bounded by the cap")
	assert.Equal(t, int64(1<<20), s.Options.MaxBodyBytes)
	assert.Equal(t, 5*time.Second, s.Options.Timeout)

	s, err = jobs.Limits{MaxBodyBytes: 1 << 30}.Apply(limitSpec(func(s *jobs.Spec) { s.Options.MaxBodyBytes = 0 }))
	require.NoError(t, err)
	assert.Zero(t, s.Options.MaxBodyBytes, "a cap above the default leaves the default")
}

func bodiesSpec(p string) jobs.Spec {
	return limitSpec(func(s *jobs.Spec) { s.Bodies, s.BodiesPath = jobs.BodiesDir, p })
}

func TestLimitsBodiesRoot(t *testing.T) {
	root := t.TempDir()
	l := jobs.Limits{BodiesRoot: root}

	t.Run("absolute under the root", func(t *testing.T) {
		s, err := l.Apply(bodiesSpec(filepath.Join(root, "shop", "a")))
		require.NoError(t, err)
		real, _ := filepath.EvalSymlinks(root)
		assert.Equal(t, filepath.Join(real, "shop", "a"), s.BodiesPath, "not created yet: the path as given")
		require.NoError(t, l.Check(bodiesSpec(root)), "the root itself")
	})
	t.Run("absolute elsewhere", func(t *testing.T) {
		err := l.Check(bodiesSpec("/etc/x"))
		requireLimitError(t, err, "bodies_path", `"/etc/x" is not under this group's bodies root `+root, "(--bodies-root)")
		requireLimitError(t, l.CheckSubmission(bodiesSpec("/etc/x")), "bodies_path")
		requireLimitError(t, l.Check(bodiesSpec(root+"-other")), "bodies_path", "not under")
	})
	t.Run("dot-dot escapes", func(t *testing.T) {
		for _, p := range []string{filepath.Join(root, "..", "x"), root + "/a/../../x", "../x", "a/../../x", ".."} {
			requireLimitError(t, l.Check(bodiesSpec(p)), "bodies_path")
			requireLimitError(t, l.CheckSubmission(bodiesSpec(p)), "bodies_path")
		}
		s, err := l.Apply(bodiesSpec(root + "/a/../b"))
		require.NoError(t, err, "a .. that stays within")
		assert.True(t, filepath.IsAbs(s.BodiesPath))
		assert.Equal(t, "b", filepath.Base(s.BodiesPath))
	})
	t.Run("relative resolved under the root", func(t *testing.T) {
		s, err := l.Apply(bodiesSpec("shop/bodies"))
		require.NoError(t, err)
		real, _ := filepath.EvalSymlinks(root)
		assert.Equal(t, filepath.Join(real, "shop", "bodies"), s.BodiesPath)
		require.NoError(t, l.CheckSubmission(bodiesSpec("shop/bodies")))
	})
	t.Run("no root: anywhere, as given", func(t *testing.T) {
		s, err := jobs.Limits{}.Apply(bodiesSpec("rel/dir"))
		require.NoError(t, err)
		assert.Equal(t, "rel/dir", s.BodiesPath)
		require.NoError(t, jobs.Limits{}.Check(bodiesSpec("/etc/x")))
	})
	t.Run("symbolic link escapes", func(t *testing.T) {
		outside := t.TempDir()
		require.NoError(t, os.Symlink(outside, filepath.Join(root, "out")))
		require.NoError(t, os.Symlink("/", filepath.Join(root, "slash")))
		for _, p := range []string{filepath.Join(root, "out"), filepath.Join(root, "out", "deeper", "x"), "out", "slash/etc"} {
			err := l.Check(bodiesSpec(p))
			requireLimitError(t, err, "bodies_path", "through a symbolic link", "outside this group's bodies root")
			// Lexically it is under the root: only the Runner's machine knows.
			require.NoError(t, l.CheckSubmission(bodiesSpec(p)), p)
		}
		// A dangling link would be followed when the directory is made.
		require.NoError(t, os.Symlink(filepath.Join(outside, "missing"), filepath.Join(root, "dangling")))
		requireLimitError(t, l.Check(bodiesSpec("dangling/x")), "bodies_path", "symbolic link to nothing")
		// A link that stays within the root is followed.
		require.NoError(t, os.MkdirAll(filepath.Join(root, "real"), 0o755))
		require.NoError(t, os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "alias")))
		s, err := l.Apply(bodiesSpec("alias/x"))
		require.NoError(t, err)
		real, _ := filepath.EvalSymlinks(root)
		assert.Equal(t, filepath.Join(real, "real", "x"), s.BodiesPath)
	})
	t.Run("a root reached through a link", func(t *testing.T) {
		target := t.TempDir()
		link := filepath.Join(t.TempDir(), "bodies")
		require.NoError(t, os.Symlink(target, link))
		ll := jobs.Limits{BodiesRoot: link}
		s, err := ll.Apply(bodiesSpec(filepath.Join(link, "job")))
		require.NoError(t, err)
		real, _ := filepath.EvalSymlinks(target)
		assert.Equal(t, filepath.Join(real, "job"), s.BodiesPath)
	})
	t.Run("bodies not in a directory: no path checked", func(t *testing.T) {
		require.NoError(t, l.Check(limitSpec(func(s *jobs.Spec) { s.Bodies = jobs.BodiesStore; s.BodiesPath = "/etc" })))
	})
}

func TestPublishAndReadLimits(t *testing.T) {
	ctx := context.Background()
	m := metadata.NewMemory()
	_, err := jobs.ReadLimits(ctx, m, "/r", "g")
	require.ErrorIs(t, err, jobs.ErrNoLimits, "an old group records none")

	a := jobs.Limits{MaxBodyBytes: 1 << 20, BodiesRoot: "/srv/bodies"}
	_, differ, err := jobs.PublishLimits(ctx, m, "/r", "g", "sc-crawler_1", a)
	require.NoError(t, err)
	assert.False(t, differ, "the first worker records its limits")
	got, err := jobs.ReadLimits(ctx, m, "/r", "g")
	require.NoError(t, err)
	assert.Equal(t, a, got.Limits)
	assert.Equal(t, "sc-crawler_1", got.Worker)
	data, _, err := m.Get(ctx, "/r/group/g/limits")
	require.NoError(t, err)
	assert.JSONEq(t, `{"max_body_bytes":1048576,"bodies_root":"/srv/bodies","worker":"sc-crawler_1"}`, string(data))

	_, differ, err = jobs.PublishLimits(ctx, m, "/r", "g", "sc-crawler_2", a)
	require.NoError(t, err)
	assert.False(t, differ, "the same limits")

	b := jobs.Limits{MaxTimeout: time.Minute}
	prev, differ, err := jobs.PublishLimits(ctx, m, "/r", "g", "sc-crawler_3", b)
	require.NoError(t, err)
	assert.True(t, differ, "other limits: the caller warns")
	assert.Equal(t, a, prev.Limits)
	assert.Equal(t, "sc-crawler_2", prev.Worker)
	got, err = jobs.ReadLimits(ctx, m, "/r", "g")
	require.NoError(t, err)
	assert.Equal(t, b, got.Limits, "the last worker started wins")

	// A corrupted znode is overwritten; reading it says so.
	_, err = m.Set(ctx, "/r/group/g/limits", []byte("{"), metadata.AnyVersion)
	require.NoError(t, err)
	_, err = jobs.ReadLimits(ctx, m, "/r", "g")
	require.ErrorContains(t, err, "corrupted")
	_, differ, err = jobs.PublishLimits(ctx, m, "/r", "g", "sc-crawler_1", a)
	require.NoError(t, err)
	assert.False(t, differ)
	got, err = jobs.ReadLimits(ctx, m, "/r", "g")
	require.NoError(t, err)
	assert.Equal(t, a, got.Limits)
}

func TestLimitsString(t *testing.T) {
	assert.Equal(t, "none", jobs.Limits{}.String())
	assert.Equal(t, "max-job-body-bytes=1048576 max-job-timeout=30s max-job-delay=1s bodies-root=/b",
		jobs.Limits{MaxBodyBytes: 1 << 20, MaxTimeout: 30 * time.Second, MaxDelay: time.Second, BodiesRoot: "/b"}.String())
}
