package roles

import (
	"fmt"
	"maps"
	"net/http"
	"slices"

	"golang.org/x/net/http/httpguts"
)

// CheckAuth checks the cookie and authorization entries of a Task or a job
// as net/http will send them (it drops or rewrites an invalid cookie
// silently, and fails every request with an invalid header). It returns
// the first bad entry as a field name, e.g. `cookie["a;b"]`, and what is
// wrong with it, or "" when all are valid.
func CheckAuth(cookie, authorization map[string]string) (field, msg string) {
	for _, k := range slices.Sorted(maps.Keys(cookie)) {
		if err := (&http.Cookie{Name: k, Value: cookie[k]}).Valid(); err != nil {
			return fmt.Sprintf("cookie[%q]", k), err.Error()
		}
	}
	for _, k := range slices.Sorted(maps.Keys(authorization)) {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Sprintf("authorization[%q]", k), "is not a valid header name (want e.g. Authorization, bearer, basic or X-Api-Key)"
		}
		if !httpguts.ValidHeaderFieldValue(authorization[k]) {
			return fmt.Sprintf("authorization[%q]", k), "the value contains a control character"
		}
	}
	return "", ""
}
