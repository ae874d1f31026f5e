package roles

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		in   string
		want Name
	}{
		{"sc-crawler_1", Name{Base: "sc-crawler", Sep: "_", Index: 1}},
		{"sc-crawler-2", Name{Base: "sc-crawler", Sep: "-", Index: 2}},
		{"sc_crawler-3", Name{Base: "sc_crawler", Sep: "-", Index: 3}},
		{"sc_crawler_10", Name{Base: "sc_crawler", Sep: "_", Index: 10}},
		{"a_0", Name{Base: "a", Sep: "_", Index: 0}},
		{"node-123456", Name{Base: "node", Sep: "-", Index: 123456}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseName(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.in, got.String(), "String() must give back the name as written")
			assert.Equal(t, tt.want.Index, IndexOf(tt.in))
		})
	}
}

func TestParseNameRejectsBadNames(t *testing.T) {
	for _, in := range []string{
		"",              // empty
		"sc",            // no separator
		"sccrawler1",    // no separator
		"sc-crawler_",   // no index
		"sc-crawler-",   // no index
		"_1",            // no base
		"-1",            // no base
		"sc-crawler_x",  // index not a number
		"sc-crawler_1x", // index not a number
		"sc-crawler_1.5",
		"sc-crawler_ 1",
		"sc crawler 1", // spaces are not separators
	} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseName(in)
			require.Error(t, err)
			assert.True(t, errors.Is(err, errBadName), "error %v must wrap errBadName", err)
			assert.Contains(t, err.Error(), "\""+in+"\"", "error must quote the bad name")
			assert.Equal(t, -1, IndexOf(in))
		})
	}
}
