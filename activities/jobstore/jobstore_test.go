package jobstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func entries(urls ...string) []Entry {
	out := make([]Entry, len(urls))
	for i, u := range urls {
		out[i] = Entry{URL: u, Depth: 1}
	}
	return out
}

func TestCreateIsIdempotentAndQueuesSeeds(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	st, err := s.Create("j1", map[string]string{"k": "v"}, entries("http://a/1", "http://a/2", "http://a/1"), 0)
	require.NoError(t, err)
	assert.Equal(t, Stats{Seen: 2, Queued: 2}, st)
	st, err = s.Create("j1", nil, entries("http://a/3"), 0)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Seen, "a second Create changes nothing")
	var meta map[string]string
	require.NoError(t, s.Meta("j1", &meta))
	assert.Equal(t, "v", meta["k"])
	ids, err := s.Jobs()
	require.NoError(t, err)
	assert.Equal(t, []string{"j1"}, ids)
}

func TestUnknownAndInvalidJobs(t *testing.T) {
	s, err := Open(t.TempDir())
	require.NoError(t, err)
	_, err = s.Stats("nope")
	assert.ErrorIs(t, err, ErrNoJob)
	_, err = s.Create("../escape", nil, nil, 0)
	assert.ErrorContains(t, err, "job id")
}

func TestEnqueueDeduplicatesAndHonoursMaxPages(t *testing.T) {
	s, _ := Open(t.TempDir())
	_, err := s.Create("j", nil, entries("http://a/0"), 3)
	require.NoError(t, err)
	n, err := s.Enqueue("j", entries("http://a/0", "http://a/1", "http://a/1", "http://a/2", "http://a/3"), 3)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "a/0 seen, a/1 once, a/3 over the limit of 3")
	st, _ := s.Stats("j")
	assert.Equal(t, 3, st.Seen)
	assert.Equal(t, 3, st.Queued)
}

func TestTakeBatchIsRepeatableAndDrainsFrontier(t *testing.T) {
	s, _ := Open(t.TempDir())
	_, err := s.Create("j", nil, entries("http://a/1", "http://a/2", "http://a/3"), 0)
	require.NoError(t, err)
	b1, err := s.TakeBatch("j", "b1", 2)
	require.NoError(t, err)
	assert.Equal(t, entries("http://a/1", "http://a/2"), b1)
	again, err := s.TakeBatch("j", "b1", 2)
	require.NoError(t, err)
	assert.Equal(t, b1, again, "a retried TakeBatch returns the same batch")
	b2, _ := s.TakeBatch("j", "b2", 2)
	assert.Equal(t, entries("http://a/3"), b2)
	b3, _ := s.TakeBatch("j", "b3", 2)
	assert.Empty(t, b3)
	st, _ := s.Stats("j")
	assert.Equal(t, 0, st.Queued)
	n, err := s.Requeue("j", entries("http://a/2"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	b4, _ := s.TakeBatch("j", "b4", 5)
	assert.Equal(t, entries("http://a/2"), b4, "requeued entries come back although seen")
}

func TestRecordOncePerURLAcrossStores(t *testing.T) {
	dir := t.TempDir()
	s1, _ := Open(dir)
	s2, _ := Open(dir) // a second process
	_, err := s1.Create("j", nil, nil, 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wrote := make([]int, 2)
	for i, s := range []*Store{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				ok, err := s.Record("j", fmt.Sprintf("http://a/%d", k), map[string]any{"url": fmt.Sprintf("http://a/%d", k), "error": map[bool]string{true: "HTTP 404"}[k%10 == 0]})
				if err == nil && ok {
					wrote[i]++
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 50, wrote[0]+wrote[1], "each URL written by exactly one store")
	st, _ := s1.Stats("j")
	assert.Equal(t, 50, st.Recorded)
	assert.Equal(t, 5, st.Failed)
	ok, err := s2.Recorded("j", "http://a/7")
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestTornLastLineIsCutOff(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	_, err := s.Create("j", nil, nil, 0)
	require.NoError(t, err)
	_, err = s.Record("j", "http://a/1", map[string]string{"url": "http://a/1"})
	require.NoError(t, err)
	// A crash in the middle of a write leaves half a line.
	f, err := os.OpenFile(filepath.Join(dir, "j", "results.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, _ = f.WriteString(`{"url":"http://a/2","tit`)
	f.Close()
	s2, _ := Open(dir)
	ok, err := s2.Record("j", "http://a/2", map[string]string{"url": "http://a/2"})
	require.NoError(t, err)
	assert.True(t, ok, "the torn page was not recorded, so it is written now")
	b, _ := os.ReadFile(filepath.Join(dir, "j", "results.jsonl"))
	assert.Equal(t, "{\"url\":\"http://a/1\"}\n{\"url\":\"http://a/2\"}\n", string(b))
}
