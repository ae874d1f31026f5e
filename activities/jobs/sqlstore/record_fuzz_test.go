package sqlstore

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batoncrawl/baton/activities/jobs/storetest"
)

// FuzzDecodeRecord is FuzzStoredRows's decoding alone, without the
// database, so that it runs fast: a stored record decodes to a page of its
// own row that survives encode→decode, or fails with ErrBadRecord.
func FuzzDecodeRecord(f *testing.F) {
	const job, url = "j", "https://example.com/a"
	good, err := json.Marshal(storetest.Page(job, "b1", "r1", 1, url, 0, "", "https://example.com/b"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, s := range []string{"", "null", " {}", "[]", `"x"`, "{", "\xff", `{"url":1}`, `{"url":"https://example.com/a","job":"j","fields":{"a":null}}`,
		`{"url":"https://example.com/a","job":"j","status_code":1e99}`, `{"url":"https://example.com/a","job":"other"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodeRecord(job, url, data)
		if err != nil {
			require.True(t, errors.Is(err, ErrBadRecord), "%v", err)
			require.Greater(t, len(err.Error()), len(ErrBadRecord.Error())+2, "the error says what is wrong")
			return
		}
		require.Equal(t, url, p.URL)
		require.Equal(t, job, p.Job)
		enc, err := json.Marshal(p)
		require.NoError(t, err)
		again, err := decodeRecord(job, url, enc)
		require.NoError(t, err)
		require.Equal(t, p, again)
	})
}
