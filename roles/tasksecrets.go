package roles

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
)

// credentialName matches header and parameter names that carry a
// credential: Authorization, Proxy-Authorization, Cookie, X-Api-Key,
// X-Auth-Token, access_token, password, session, sig, key, ...
var credentialName = regexp.MustCompile(`(?i)(authori[sz]ation|authenticat|(^|[-_])auth($|[-_])|cookie|token|secret|passw|` +
	`api[-_]?key|session|credential|signature|(^|[-_])(key|sig)$)`)

// SecretFields names the fields of a Task that hold credentials for the
// sites it requests, never their values: every cookie and authorization
// entry, each request's headers and parameters whose names carry a
// credential (Authorization, Cookie, X-Api-Key, access_token, ...), and a
// URL's user:password or query parameters of that kind. A plain Task keeps
// the reference's layout, so all of these are in clear in its Task znode,
// where every ZooKeeper client the znode's ACL lets in reads them; a
// crawl job's secrets are sealed in the job store instead.
func (t Task) SecretFields() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(t.Cookie)) {
		out = append(out, fmt.Sprintf("Task.cookie[%q]", k))
	}
	for _, k := range slices.Sorted(maps.Keys(t.Authorization)) {
		out = append(out, fmt.Sprintf("Task.authorization[%q]", k))
	}
	named := func(prefix string, m map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if credentialName.MatchString(k) {
				out = append(out, fmt.Sprintf("%s[%q]", prefix, k))
			}
		}
	}
	for i, r := range t.RunningContent {
		at := fmt.Sprintf("Task.running_content[%d]", i)
		named(at+".header", r.Header)
		named(at+".parameters", r.Parameters)
		u, err := url.Parse(r.URL)
		if err != nil {
			continue
		}
		if u.User != nil {
			out = append(out, at+".url (user:password)")
		}
		query := map[string]string{}
		for k := range u.Query() {
			query[k] = ""
		}
		named(at+".url query", query)
	}
	return out
}
