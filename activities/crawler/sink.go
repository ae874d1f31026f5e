package crawler

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// StoredItem is an item as recorded in the job store, as a sink receives
// it. ID is stable — the same for every delivery of the item, from any
// worker — so that a consumer deduplicates on it.
type StoredItem struct {
	ID    string          `json:"id"`
	Job   string          `json:"job"`
	URL   string          `json:"url"`
	Label string          `json:"label,omitempty"`
	Index int             `json:"index"`
	Value json.RawMessage `json:"value"`
}

// ItemID is the stable ID of the index-th item of a page of a job.
func ItemID(job, url string, index int) string {
	h := sha256.New()
	h.Write([]byte(job))
	h.Write([]byte{0})
	h.Write([]byte(url))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(index)))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// DefaultSinkBatch is how many items a sink gets per delivery unless it
// says otherwise; DefaultSinkBatchBytes how many bytes of items (Size).
// DefaultSinkMaxFailures is how many times a batch may be refused before
// it is dead-lettered, unless the sink or the worker
// (--sink-max-failures) says otherwise.
const (
	DefaultSinkBatch       = 100
	DefaultSinkBatchBytes  = 1 << 20
	DefaultSinkMaxFailures = 10
)

// ErrSinkUnavailable marks a failed delivery that says nothing of the
// batch: the receiver could not be reached or asked to wait (a webhook's
// connection error, 429, 502, 503, 504). Such a failure is retried with
// backoff for as long as it lasts and never dead-letters the batch; any
// other error of Deliver is a refusal of the batch. Wrap it: fmt.Errorf("…:
// %w", crawler.ErrSinkUnavailable).
var ErrSinkUnavailable = errors.New("sink unavailable")

// Sink delivers a job's recorded items to the user's systems. One worker
// at a time delivers a job's items to a sink (a lease in the job store,
// renewed while Deliver runs), in the order they were recorded, from a
// durable cursor that advances only after Deliver returns nil: delivery
// is at least once (a worker that dies mid-delivery, or whose lease ran
// out, leaves the batch to be delivered again). A failing Deliver is
// retried with backoff; it never slows the crawl, and its last error is
// shown by `baton status` and counted in metrics. A batch refused
// MaxFailures times in a row is set aside as a dead letter (shown by
// `baton status`, skipped or retried with `baton sink skip|retry`) and
// the items after it are delivered.
//
// A job's items go to the sinks of the crawler of its name that the
// delivering worker carries, whatever version of it crawled the job: a
// sink is known by its Name, and an upgraded crawler keeps delivering
// the jobs of its older versions.
type Sink struct {
	// Name identifies the sink's cursor in the store (ValidName).
	Name string
	// Deliver is called with up to Batch items of job; it must be safe
	// for concurrent use across jobs.
	Deliver func(ctx context.Context, job string, items []StoredItem) error
	// Batch is the most items per Deliver call (DefaultSinkBatch if 0).
	Batch int
	// MaxBytes is the most bytes of items per Deliver call, by Size
	// (DefaultSinkBatchBytes if 0; the worker's --max-sink-batch-bytes
	// caps it); an item larger than it is delivered alone.
	MaxBytes int64
	// MaxFailures is how many times in a row a batch may be refused
	// before it is dead-lettered (0: the worker's --sink-max-failures;
	// negative: never, the sink waits for the batch to be taken).
	MaxFailures int
}

// Size is about the bytes of the item in a delivery's JSON: its value,
// URL, label, job and ID, and the keys around them.
func (it StoredItem) Size() int64 {
	return int64(len(it.Value)+len(it.URL)+len(it.Label)+len(it.Job)+len(it.ID)) + 64
}

// Sink adds a sink for the items of every job of the crawler.
func (c *Crawler) Sink(s Sink) { c.sinks = append(c.sinks, s) }

// Sinks are the crawler's sinks.
func (c *Crawler) Sinks() []Sink { return c.sinks }

// SignatureHeader is the header of a webhook delivery that carries
// "sha256=" and the hex HMAC-SHA256 of the body under the webhook's
// secret (as GitHub's X-Hub-Signature-256).
const SignatureHeader = "X-Baton-Signature-256"

// Webhook is a sink that POSTs each batch as a JSON array to url, signed
// with secret (SignatureHeader); an answer other than 2xx is a failed
// delivery, and so is a redirect (never followed: the body and its
// signature go to url only). No answer, 429, 502, 503 and 504 are
// ErrSinkUnavailable (retried, never dead-lettered); another status is a
// refusal of the batch. client nil means the worker's client
// (Client: under the operator's rules, no proxy from the environment)
// with a 30 s timeout; a client of your own goes round those rules. An
// error names the webhook's scheme and host, never its path or query
// (which may hold a token).
func Webhook(name, url string, secret []byte, client *http.Client) Sink {
	return Sink{Name: name, Deliver: func(ctx context.Context, job string, items []StoredItem) error {
		body, err := json.Marshal(items)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("webhook %s: invalid URL", name)
		}
		where := req.URL.Scheme + "://" + req.URL.Host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Baton-Job", job)
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		req.Header.Set(SignatureHeader, "sha256="+hex.EncodeToString(mac.Sum(nil)))
		c := client
		if c == nil {
			c = Client(ctx)
			if c.Timeout == 0 {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				req = req.WithContext(ctx)
			}
		}
		noRedirect := *c
		noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := noRedirect.Do(req)
		if err != nil {
			var ue *neturl.Error
			if errors.As(err, &ue) {
				err = ue.Err // its text holds the whole URL
			}
			return fmt.Errorf("webhook %s: POST %s: %v: %w", name, where, err, ErrSinkUnavailable)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		switch {
		case resp.StatusCode/100 == 2:
			return nil
		case webhookUnavailable(resp.StatusCode):
			return fmt.Errorf("webhook %s: POST %s: HTTP %d: %w", name, where, resp.StatusCode, ErrSinkUnavailable)
		}
		return fmt.Errorf("webhook %s: POST %s: HTTP %d", name, where, resp.StatusCode)
	}}
}

// webhookUnavailable: the answer says the receiver cannot take anything
// now (it asks to wait, or a proxy in front of it found it down), not
// that it refused the batch.
func webhookUnavailable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// VerifySignature reports whether sig (a SignatureHeader value) signs body
// under secret: what a webhook's receiver checks.
func VerifySignature(secret, body []byte, sig string) bool {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal([]byte(sig), []byte("sha256="+hex.EncodeToString(mac.Sum(nil))))
}

// JSONLFile is a sink that appends each item as a JSON line to
// dir/<job>.jsonl (a file per job; at least once, so a line may repeat
// after a fail-over: deduplicate on id).
func JSONLFile(name, dir string) Sink {
	return Sink{Name: name, Deliver: func(_ context.Context, job string, items []StoredItem) error {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(dir, filepath.Base(job)+".jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, it := range items {
			if err := enc.Encode(it); err != nil {
				f.Close()
				return err
			}
		}
		if _, err := f.Write(buf.Bytes()); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}}
}
