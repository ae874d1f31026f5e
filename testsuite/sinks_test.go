package testsuite_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/crawler"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/testsuite"
)

// refusingHook is a webhook receiver that answers 500 to every batch
// holding an item with the marker, and keeps the others' values.
type refusingHook struct {
	secret   []byte
	marker   string
	mu       sync.Mutex
	values   []string
	refusals []time.Time
}

func (h *refusingHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !crawler.VerifySignature(h.secret, body, r.Header.Get(crawler.SignatureHeader)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var items []crawler.StoredItem
	if err := json.Unmarshal(body, &items); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var vals []string
	for _, it := range items {
		var v string
		_ = json.Unmarshal(it.Value, &v)
		if strings.Contains(v, h.marker) {
			h.refusals = append(h.refusals, time.Now())
			http.Error(w, "cannot take this batch", http.StatusInternalServerError)
			return
		}
		vals = append(vals, v)
	}
	h.values = append(h.values, vals...)
}

func (h *refusingHook) snapshot() ([]string, []time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.values...), append([]time.Time(nil), h.refusals...)
}

// A webhook that refuses one batch of a job's items (500 for an item with
// a marker): the batch is retried with backoff, then dead-lettered after
// --sink-max-failures refusals and shown by baton status (text and JSON,
// without the webhook's path and query); the items after it are
// delivered; baton sink skip drops it.
func TestSinkRefusedBatchIsDeadLetteredAndSkipped(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `["a0","a1","a2","a3","POISON","a5","a6","a7","a8"]`)
	}))
	t.Cleanup(site.Close)
	hook := &refusingHook{secret: []byte("hook-secret"), marker: "POISON"}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)

	c := testsuite.NewCluster(t, 1, 0, testsuite.FastTimers, testsuite.WithWorkerBinary("./testsuite/testdata/sinkcrawler"))
	c.Start(1, "SINKY_HOOK_URL="+hookSrv.URL+"/in/T0/s3cr3t?token=abc", "SINKY_HOOK_SECRET=hook-secret", "SINKY_BATCH=2",
		"BATON_SINK_MAX_FAILURES=3")
	c.WaitElected(electTimeout)

	p := startCrawl(c, "sinky1", "--crawler", "sinky", site.URL+"/items.json", "--timers", "fast")
	require.NoError(t, p.Wait(2*time.Minute), p.Logs())
	require.Equal(t, 0, p.ExitCode(), p.Logs())

	// The batches after the refused one are delivered while it is retried
	// and once it is set aside.
	testsuite.Eventually(t, time.Minute, "the items around the refused batch delivered", func() (bool, error) {
		vals, _ := hook.snapshot()
		return len(vals) == 7, nil
	})
	vals, refusals := hook.snapshot()
	assert.ElementsMatch(t, []string{"a0", "a1", "a2", "a3", "a6", "a7", "a8"}, vals, "every item but the refused batch's (POISON, a5)")
	var status struct {
		Sinks []jobs.SinkState `json:"sinks"`
	}
	testsuite.Eventually(t, time.Minute, "a dead letter in baton status --output json", func() (bool, error) {
		out, code := baton(c, "status", "sinky1", "--output", "json")
		if code != 0 {
			return false, nil
		}
		status.Sinks = nil
		// The first value: stderr's Web UI line follows it.
		if err := json.NewDecoder(strings.NewReader(out)).Decode(&status); err != nil {
			return false, err
		}
		return len(status.Sinks) == 1 && len(status.Sinks[0].DeadLetters) == 1, nil
	})
	_, refusals = hook.snapshot()
	require.Len(t, refusals, 3, "refused --sink-max-failures times, then set aside")
	assert.GreaterOrEqual(t, refusals[1].Sub(refusals[0]), time.Second, "a backoff after the first refusal")
	assert.GreaterOrEqual(t, refusals[2].Sub(refusals[1]), 2*time.Second, "the backoff doubles")
	dl := status.Sinks[0].DeadLetters[0]
	assert.Equal(t, 2, dl.Items)
	assert.Equal(t, 3, dl.Failures)
	assert.Contains(t, dl.LastError, "HTTP 500")
	assert.Contains(t, dl.LastError, hookSrv.URL)
	assert.NotContains(t, dl.LastError, "s3cr3t")
	assert.NotContains(t, dl.LastError, "token")

	out, code := baton(c, "status", "sinky1")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "1 DEAD LETTERS (baton sink skip|retry sinky1 hook)")
	assert.Contains(t, out, "DEAD LETTER hook")
	assert.NotContains(t, out, "s3cr3t")

	out, code = baton(c, "sink", "skip", "sinky1", "nope")
	assert.Equal(t, 2, code, out)
	assert.Contains(t, out, "its sinks: [hook]")
	out, code = baton(c, "sink", "skip", "sinky1", "hook")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "skipped 1 dead letters (2 items)")
	out, code = baton(c, "status", "sinky1")
	require.Equal(t, 0, code, out)
	assert.NotContains(t, out, "DEAD LETTER")
	assert.Contains(t, out, "delivered 7 (cursor")
	assert.Contains(t, out, "2 skipped")
	vals, _ = hook.snapshot()
	assert.Len(t, vals, 7, "a skipped batch is not delivered")
}
