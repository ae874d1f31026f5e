package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/batoncrawl/baton/roles"
)

// Auth is what a Task adds to each of its requests.
type Auth struct {
	Cookie        map[string]string `json:"cookie,omitempty"`
	Authorization map[string]string `json:"authorization,omitempty"`
	// URLSecrets are put back into the request's URL for its own origin
	// (a job's sealed seed tokens and user:password); in memory only.
	URLSecrets *URLSecrets `json:"-"`
}

// AuthOf returns the Auth of a Task.
func AuthOf(t roles.Task) Auth { return Auth{Cookie: t.Cookie, Authorization: t.Authorization} }

// built is a request ready to be sent, attempt after attempt.
type built struct {
	method string
	url    *url.URL
	body   []byte // nil: no body
	header http.Header
}

// buildRequest is the conventions of a Task request: parameters are set in the query;
// a body that is a JSON string is sent as is, any other JSON as JSON, with
// Content-Type application/json unless the header sets one; cookies are
// added as a Cookie header; an authorization entry "Authorization" is the
// header's value, "basic"/"bearer" (any case) make "<scheme> <value>", any
// other key is a header of its own.
func buildRequest(r roles.Request, auth Auth) (*built, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(r.URL)
	u = auth.URLSecrets.Restore(u)
	if len(r.Parameters) > 0 {
		q := u.Query()
		for k, v := range r.Parameters {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	b := &built{method: strings.ToUpper(r.Method), url: u, header: http.Header{}}
	if b.method == "" {
		b.method = http.MethodGet
	}
	if len(r.Body) > 0 && string(r.Body) != "null" {
		var s string
		if json.Unmarshal(r.Body, &s) == nil {
			b.body = []byte(s)
		} else {
			b.body = []byte(r.Body)
		}
	}
	for k, v := range r.Header {
		b.header.Set(k, v)
	}
	hr := http.Request{Header: b.header}
	for _, k := range slices.Sorted(maps.Keys(auth.Cookie)) {
		hr.AddCookie(&http.Cookie{Name: k, Value: auth.Cookie[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(auth.Authorization)) {
		v := auth.Authorization[k]
		switch {
		case strings.EqualFold(k, "Authorization"):
			b.header.Set("Authorization", v)
		case strings.EqualFold(k, "basic"), strings.EqualFold(k, "bearer"):
			b.header.Set("Authorization", k+" "+v)
		default:
			b.header.Set(k, v)
		}
	}
	if b.body != nil && b.header.Get("Content-Type") == "" {
		b.header.Set("Content-Type", "application/json")
	}
	return b, nil
}

// NewHTTPRequest builds the *http.Request of a Task request with the
// Task's cookies and authorization: the one place where Baton turns a
// request of running_content into HTTP.
func NewHTTPRequest(ctx context.Context, r roles.Request, auth Auth) (*http.Request, error) {
	b, err := buildRequest(r, auth)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if b.body != nil {
		body = bytes.NewReader(b.body)
	}
	req, err := http.NewRequestWithContext(ctx, b.method, b.url.String(), body)
	if err != nil {
		return nil, fmt.Errorf("build request %s: %w", r.URL, err)
	}
	req.Header = b.header
	return req, nil
}
