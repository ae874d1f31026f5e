package jobs_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http/httpguts"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/jobs"
	"github.com/batoncrawl/baton/roles"
)

// A DecodeSpec error says what was wrong: the field (as Validate names
// it), or where the JSON is malformed or mistyped.
var specErrorNames = regexp.MustCompile(`^invalid job spec: (id|group|seeds(\[\d+\])?|max_pages|batch_size|options|timers|cookie\[".*"\]|authorization\[".*"\]): |` +
	`^invalid job spec: malformed JSON at byte \d+: |^invalid job spec: json: cannot unmarshal .* (into Go (struct field|value)|of type)`)

func TestDecodeSpecNamesTheField(t *testing.T) {
	good := func() map[string]any {
		b, err := json.Marshal(fuzzSpec())
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	for _, tt := range []struct {
		name, want string
		edit       func(m map[string]any)
	}{
		{"a zero timer", "timers: Timers.update_time: is 0s, must be > 0", func(m map[string]any) {
			m["timers"].(map[string]any)["update_time"] = 0
		}},
		{"no seeds", "seeds: at least one URL", func(m map[string]any) { m["seeds"] = []string{} }},
		{"bad seed", "seeds[1]: Request.url", func(m map[string]any) { m["seeds"] = []string{"http://a.test/", "ftp://x/"} }},
		{"bad selector", `options: selectors["t"]: invalid CSS selector`, func(m map[string]any) {
			m["options"].(map[string]any)["selectors"] = map[string]string{"t": "a["}
		}},
		{"mistyped", "Spec.batch_size of type int", func(m map[string]any) { m["batch_size"] = "ten" }},
		{"cookie name", `cookie["a;b"]: http: invalid Cookie.Name`, func(m map[string]any) { m["cookie"] = map[string]string{"a;b": "1"} }},
		{"cookie value", `cookie["s"]: http: invalid byte '"' in Cookie.Value`, func(m map[string]any) { m["cookie"] = map[string]string{"s": `x"y`} }},
		{"header name", `authorization["X Key"]: is not a valid header name`, func(m map[string]any) {
			m["authorization"] = map[string]string{"X Key": "1"}
		}},
		{"header value", `authorization["bearer"]: the value contains a control character`, func(m map[string]any) {
			m["authorization"] = map[string]string{"bearer": "t\r\nHost: evil.test"}
		}},
	} {
		m := good()
		tt.edit(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		_, err = jobs.DecodeSpec(b)
		require.ErrorIs(t, err, jobs.ErrBadSpec, tt.name)
		require.Contains(t, err.Error(), tt.want, tt.name)
	}
	_, err := jobs.DecodeSpec([]byte(`{"id": "j",`))
	require.EqualError(t, err, "invalid job spec: malformed JSON at byte 11: unexpected end of JSON input")
	_, err = jobs.DecodeSpec([]byte(`{"id": "j", x}`))
	require.ErrorContains(t, err, "malformed JSON at byte 13")
}

func fuzzSpec() jobs.Spec {
	o := crawl.DefaultOptions()
	o.Follow, o.MaxDepth, o.Selectors = true, 2, map[string]string{"title": "h1", "price": ".price"}
	o.AllowedDomains = []string{"127.0.0.1:8000", "example.test"}
	return jobs.Spec{ID: "job-1", Group: "g", Seeds: []string{"http://127.0.0.1:8000/", "https://example.test/a?b=1"},
		Options: o, MaxPages: 100, BatchSize: 10, Cookie: map[string]string{"s": "1"},
		Authorization: map[string]string{"example.test": "Bearer t"}, Timers: roles.FastTimers()}
}

// FuzzDecodeSpec: a stored job spec decodes to a spec that validates, whose
// seeds normalise (JobStart would fail on them otherwise) and which
// survives encode→decode unchanged, or fails with ErrBadSpec and a message
// that names the field or the place in the JSON.
func FuzzDecodeSpec(f *testing.F) {
	good, err := json.Marshal(fuzzSpec())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, s := range []string{
		"", "null", "{}", "[]", `{"id":"j"}`, `{"id":"../x","group":"g"}`,
		`{"id":"j","group":"g","seeds":["http://a.test/"],"batch_size":1,"timers":{"update_time":1,"update_timeout":2,"heart_rhythm_timeout":1,"reset_timeout":1,"check_task":1,"check_crawler_state":1,"check_standby_id":1}}`,
		`{"id":"j","group":"g","seeds":["http://a.test/"],"batch_size":1,"options":{"delay":-1}}`,
		`{"id":"j","group":"g","seeds":["http://a.test/"],"batch_size":1,"options":{"allowed_domains":["a b"]}}`,
		`{"id":"j","group":"g","seeds":["http://[::1]:80/%7e"],"batch_size":1e400}`,
		`{"id":"j","group":"g","seeds":["http://a.test/"],"batch_size":1,"cookie":{"a;b":"1","c":"x\"y"},"timers":{"update_time":1,"update_timeout":2,"heart_rhythm_timeout":1,"reset_timeout":1,"check_task":1,"check_crawler_state":1,"check_standby_id":1}}`,
		`{"id":"j","group":"g","seeds":["http://a.test/"],"batch_size":1,"authorization":{"X-Key":"a\r\nHost: evil"},"timers":{"update_time":1,"update_timeout":2,"heart_rhythm_timeout":1,"reset_timeout":1,"check_task":1,"check_crawler_state":1,"check_standby_id":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := jobs.DecodeSpec(data)
		if err != nil {
			require.ErrorIs(t, err, jobs.ErrBadSpec)
			require.Regexp(t, specErrorNames, err.Error())
			require.Greater(t, len(err.Error()), len("invalid job spec: "), "the error says what is wrong")
			return
		}
		require.NoError(t, s.Validate())
		for i, seed := range s.Seeds {
			_, err := s.Options.NormalizeURL(seed)
			require.NoError(t, err, "seeds[%d] %q validates but does not normalise", i, seed)
		}
		// Every seed makes a request that can be sent, with the spec's
		// cookies and authorization exactly as given (net/http would drop
		// or mangle invalid ones, or fail every page).
		for _, seed := range s.Seeds {
			req, err := crawl.NewHTTPRequest(context.Background(), roles.Request{URL: seed}, crawl.Auth{Cookie: s.Cookie, Authorization: s.Authorization})
			require.NoError(t, err)
			for name, value := range s.Cookie {
				c, err := req.Cookie(name)
				require.NoError(t, err, "cookie %q", name)
				require.Equal(t, value, c.Value, "cookie %q", name)
			}
			for k, vs := range req.Header {
				require.True(t, httpguts.ValidHeaderFieldName(k), "header %q", k)
				for _, v := range vs {
					require.True(t, httpguts.ValidHeaderFieldValue(v), "header %q: %q", k, v)
				}
			}
		}
		enc, err := json.Marshal(s)
		require.NoError(t, err)
		again, err := jobs.DecodeSpec(enc)
		require.NoError(t, err, "%s", enc)
		require.Equal(t, s, again, "decode→encode→decode keeps the spec")
	})
}
