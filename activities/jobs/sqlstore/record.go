package sqlstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batoncrawl/baton/activities/jobs"
)

// ErrBadRecord marks a stored page record (baton_results.record) that
// cannot be read: not a JSON object, or one that belongs to another row.
var ErrBadRecord = errors.New("unreadable page record")

// decodeRecord reads the stored record of job's url and says what is
// wrong with it.
func decodeRecord(job, url string, data []byte) (jobs.PageRecord, error) {
	var p jobs.PageRecord
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return p, fmt.Errorf("%w: want a JSON object, got %.20q", ErrBadRecord, data)
	}
	if err := json.Unmarshal(data, &p); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return p, fmt.Errorf("%w: malformed JSON at byte %d: %v", ErrBadRecord, se.Offset, err)
		}
		return p, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	switch {
	case p.URL != url:
		return p, fmt.Errorf("%w: its url is %q, not the row's", ErrBadRecord, p.URL)
	case p.Job != job:
		return p, fmt.Errorf("%w: its job is %q, not the row's", ErrBadRecord, p.Job)
	}
	return p, nil
}
