package crawl

import "testing"

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"HTTP://Example.COM/a/b":               "http://example.com/a/b",
		"http://example.com:80/a":              "http://example.com/a",
		"https://example.com:443/a":            "https://example.com/a",
		"https://example.com:8443/a":           "https://example.com:8443/a",
		"http://example.com:443/a":             "http://example.com:443/a",
		"http://example.com":                   "http://example.com/",
		"http://example.com/a#frag":            "http://example.com/a",
		"http://example.com/a/./b/../c":        "http://example.com/a/c",
		"http://example.com/a/b/..":            "http://example.com/a/",
		"http://example.com/../../a":           "http://example.com/a",
		"http://example.com/a/.":               "http://example.com/a/",
		"http://example.com/?b=2&a=1&a=0":      "http://example.com/?a=1&a=0&b=2",
		"http://example.com/p?":                "http://example.com/p",
		"http://example.com/p?&&z=1&":          "http://example.com/p?z=1",
		"http://example.com/%7euser/%2fx%3a":   "http://example.com/~user/%2Fx%3A",
		"http://example.com/a%20b":             "http://example.com/a%20b",
		"http://user:pw@Example.com/":          "http://user:pw@example.com/",
		"http://[::1]:80/x":                    "http://[::1]/x",
		"http://[::1]:8080/x":                  "http://[::1]:8080/x",
		"  http://example.com/trim  ":          "http://example.com/trim",
		"http://example.com/a?q=a+b&p=%2F#x":   "http://example.com/a?p=%2F&q=a+b",
		"mailto:someone@example.com":           "",
		"/relative/path":                       "",
		"http://%zz/":                          "",
		"A000://:":                             "",            // found by FuzzNormalizeURL
		"http://:8080/x":                       "",            // no host: would dial this machine
		"A://0?utm_0&0 #000000":                "a://0/?0%20", // found by FuzzNormalizeURL: was "a://0/?0 "
		"http://example.com/?q=a b&r=\"%zz%41": "http://example.com/?q=a%20b&r=%22%25zzA",
	} {
		got, err := NormalizeURL(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
		// Idempotent.
		if again, _ := NormalizeURL(got); again != got {
			t.Errorf("%q: not idempotent: %q then %q", in, got, again)
		}
	}
}

func TestDomainAllowed(t *testing.T) {
	t.Parallel()
	allowed := []string{"example.com", "127.0.0.1:8080", "[::1]"}
	for host, want := range map[string]bool{
		"example.com":          true,
		"shop.example.com":     true,
		"a.b.example.com:8000": true,
		"notexample.com":       false,
		"example.com.evil.net": false,
		"127.0.0.1:8080":       true,
		"127.0.0.1:9090":       false,
		"127.0.0.1":            false,
		"[::1]:3000":           true,
	} {
		if got := domainAllowed("http", host, allowed); got != want {
			t.Errorf("%s: %v, want %v", host, got, want)
		}
	}
	if !domainAllowed("http", "anything.test", nil) {
		t.Error("empty list must allow all")
	}
}
