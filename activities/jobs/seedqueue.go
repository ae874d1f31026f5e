package jobs

import (
	"context"
	"fmt"

	"github.com/batoncrawl/baton/activities/crawl"
)

// seedChunk is how many seeds of a file Queue writes per transaction.
const seedChunk = 20000

// queueFile adds the seeds of the plan's file to its stored job in
// chunks of seedChunk, and returns how many were new. The file is read
// and its URLs normalised in a goroutine while the store writes the
// chunk before (one chunk ahead: memory stays flat), so that the two
// share the machine's cores.
func (p Plan) queueFile(ctx context.Context, st SeedWriter) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunks := make(chan []Entry, 1)
	read := make(chan error, 1)
	go func() {
		defer close(chunks)
		read <- p.readChunks(ctx, chunks)
	}()
	added := 0
	for batch := range chunks {
		n, err := st.AddSeeds(ctx, p.Spec.ID, batch)
		if err != nil {
			cancel()
			for range chunks { // let the reader stop
			}
			return 0, fmt.Errorf("store the seeds of job %s: %w", p.Spec.ID, err)
		}
		added += n
	}
	if err := <-read; err != nil {
		return 0, err
	}
	return added, nil
}

// readChunks reads the plan's file, normalises each URL with the job's
// options (its secrets redacted) and sends the entries in chunks of
// seedChunk; it stops when ctx is done.
func (p Plan) readChunks(ctx context.Context, out chan<- []Entry) error {
	spec := p.Spec.compiled()
	urlSecrets := crawl.NewURLSecrets(p.Secrets.URLs)
	batch := make([]Entry, 0, seedChunk)
	send := func() error {
		select {
		case out <- batch:
			batch = make([]Entry, 0, seedChunk)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := p.File.Each(func(u string) error {
		n, err := p.Spec.Options.NormalizeURL(urlSecrets.Redact(u))
		if err != nil {
			return fmt.Errorf("%w: seed %q: %w", ErrBadSubmission, u, err)
		}
		if batch = append(batch, Entry{URL: n, Label: spec.seedLabel(n)}); len(batch) == seedChunk {
			return send()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = send()
	}
	return err
}
