package crawl

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Redacted stands for a sealed secret in a URL: the value of a secret
// query parameter (?token=REDACTED) or a URL's user:password
// (https://REDACTED@host/).
const Redacted = "REDACTED"

// URLSecret is a secret part of the URLs of one origin: the value of the
// query parameter Param, or the URL's user:password when Param is "".
type URLSecret struct {
	// Origin is scheme://host[:port], normalised (no default port).
	Origin string `json:"origin"`
	Param  string `json:"param,omitempty"`
	Value  string `json:"value"`
}

// URLSecrets are a job's URL secrets, in a Runner's memory only: the
// URLs the job records carry Redacted in their place, and a request puts
// them back for their own origin alone (Restore). A nil *URLSecrets has
// none.
type URLSecrets struct{ list []URLSecret }

// NewURLSecrets makes the URLSecrets of list; nil when list is empty.
func NewURLSecrets(list []URLSecret) *URLSecrets {
	if len(list) == 0 {
		return nil
	}
	return &URLSecrets{list: slices.Clone(list)}
}

// urlOrigin is u's scheme://host[:port] as URLSecret.Origin has it.
func urlOrigin(u *url.URL) string { return strings.ToLower(u.Scheme) + "://" + hostKey(u) }

// SplitURLSecrets takes the secrets out of raw: its user:password and the
// values of the query parameters named in params. It returns raw with
// Redacted in their place and the secrets, added to have; a parameter
// given another value for the same origin in have is an error naming the
// parameter and the origin, never the value.
func SplitURLSecrets(raw string, params []string, have []URLSecret) (string, []URLSecret, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return raw, have, nil // Validate says what is wrong with it
	}
	origin := urlOrigin(u)
	add := func(param, value string) error {
		for _, s := range have {
			if s.Origin == origin && s.Param == param {
				if s.Value != value {
					what := "the user:password"
					if param != "" {
						what = "the parameter " + param
					}
					return fmt.Errorf("%s of URLs of %s is given two different values: one value per origin", what, origin)
				}
				return nil
			}
		}
		have = append(have, URLSecret{Origin: origin, Param: param, Value: value})
		return nil
	}
	if u.User != nil && u.User.String() != Redacted {
		if err := add("", u.User.String()); err != nil {
			return raw, have, err
		}
		u.User = url.User(Redacted)
	}
	if len(params) > 0 && u.RawQuery != "" {
		var errOut error
		u.RawQuery = mapQuery(u.RawQuery, func(name, value string) bool {
			if !slices.Contains(params, name) || value == Redacted {
				return false
			}
			if err := add(name, value); err != nil && errOut == nil {
				errOut = err
			}
			return true
		})
		if errOut != nil {
			return raw, have, errOut
		}
	}
	return u.String(), have, nil
}

// mapQuery replaces with Redacted the value of each name=value pair of
// rawQuery for which redact says so, keeping the other pairs' bytes and
// order as they are.
func mapQuery(rawQuery string, redact func(name, value string) bool) string {
	pairs := strings.Split(rawQuery, "&")
	for i, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		name, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			continue
		}
		if redact(name, value) {
			pairs[i] = k + "=" + Redacted
		}
	}
	return strings.Join(pairs, "&")
}

// Redact returns raw with every sealed value in its place replaced by
// Redacted: a secret parameter's value equal to a sealed value of that
// parameter (of any origin, so that a discovered link carrying the job's
// token is not recorded with it), and a user:password equal to a sealed
// one. Other values, such as a token a site puts in its own links, stay
// as they are.
func (s *URLSecrets) Redact(raw string) string {
	if s == nil || raw == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return s.Scrub(raw)
	}
	changed := false
	if u.User != nil && s.has("", u.User.String()) {
		u.User, changed = url.User(Redacted), true
	}
	if u.RawQuery != "" {
		q := mapQuery(u.RawQuery, func(name, value string) bool { return s.has(name, value) })
		if q != u.RawQuery {
			u.RawQuery, changed = q, true
		}
	}
	if !changed {
		return raw
	}
	return u.String()
}

func (s *URLSecrets) has(param, value string) bool {
	for _, x := range s.list {
		if x.Param == param && x.Value == value {
			return true
		}
	}
	return false
}

// Restore puts the sealed values of u's own origin back in place of
// Redacted (a copy of u; u when there is nothing to put back). A URL of
// another origin keeps Redacted: a secret goes to its origin only.
func (s *URLSecrets) Restore(u *url.URL) *url.URL {
	if s == nil || u == nil {
		return u
	}
	origin := urlOrigin(u)
	value := func(param string) (string, bool) {
		for _, x := range s.list {
			if x.Origin == origin && x.Param == param {
				return x.Value, true
			}
		}
		return "", false
	}
	out := *u
	changed := false
	if u.User != nil && u.User.String() == Redacted {
		if v, ok := value(""); ok {
			if user, err := url.ParseRequestURI("http://" + v + "@x/"); err == nil {
				out.User, changed = user.User, true
			}
		}
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		for i, p := range pairs {
			k, v, ok := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if !ok || v != Redacted || err != nil {
				continue
			}
			if val, ok := value(name); ok {
				pairs[i], changed = k+"="+url.QueryEscape(val), true
			}
		}
		out.RawQuery = strings.Join(pairs, "&")
	}
	if !changed {
		return u
	}
	return &out
}

// Scrub replaces every sealed value in text (an error message, which may
// quote a URL as it was sent) by Redacted, as it is and escaped.
func (s *URLSecrets) Scrub(text string) string {
	if s == nil || text == "" {
		return text
	}
	for _, x := range s.list {
		if x.Value == "" {
			continue
		}
		for _, v := range []string{x.Value, url.QueryEscape(x.Value), url.PathEscape(x.Value)} {
			text = strings.ReplaceAll(text, v, Redacted)
		}
	}
	return text
}

// redactPage takes the sealed values out of what a page records.
func (s *URLSecrets) redactPage(p *Page) {
	if s == nil {
		return
	}
	p.FinalURL = s.Redact(p.FinalURL)
	p.Canonical = s.Redact(p.Canonical)
	p.Error = s.Scrub(p.Error)
	for i := range p.Links {
		p.Links[i] = s.Redact(p.Links[i])
	}
	for i := range p.Sitemaps {
		p.Sitemaps[i] = s.Redact(p.Sitemaps[i])
	}
}
