package revisit

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestConditionSendsBothValidatorsETagFirst(t *testing.T) {
	h := http.Header{}
	set := Condition(h, Baseline{ETag: `W/"abc-1"`, LastModified: "Sun, 16 Jun 2013 22:28:51 GMT"})
	if want := []string{"If-None-Match", "If-Modified-Since"}; !slices.Equal(set, want) {
		t.Fatalf("set %v, want %v", set, want)
	}
	if got := h.Get("If-None-Match"); got != `W/"abc-1"` {
		t.Errorf("If-None-Match %q", got)
	}
	if got := h.Get("If-Modified-Since"); got != "Sun, 16 Jun 2013 22:28:51 GMT" {
		t.Errorf("If-Modified-Since %q", got)
	}
}

func TestConditionRewritesOldDateFormats(t *testing.T) {
	h := http.Header{}
	Condition(h, Baseline{LastModified: "Sunday, 06-Nov-94 08:49:37 GMT"}) // RFC 850
	if got := h.Get("If-Modified-Since"); got != "Sun, 06 Nov 1994 08:49:37 GMT" {
		t.Errorf("If-Modified-Since %q, want the IMF-fixdate form", got)
	}
	if h.Get("If-None-Match") != "" {
		t.Errorf("If-None-Match set without an ETag")
	}
}

func TestConditionLeavesOutMalformedValidators(t *testing.T) {
	for _, b := range []Baseline{
		{ETag: "abc"},                      // not quoted
		{ETag: `"a"b"`},                    // quote inside
		{ETag: "\"a\r\nX-Evil: 1\""},       // header injection
		{ETag: `""`[:1]},                   // lone quote
		{LastModified: "yesterday"},        // not a date
		{LastModified: "Mon, 16 Jun 2013"}, // no time
		{ETag: `"` + string(make([]byte, 2000)) + `"`},
	} {
		h := http.Header{}
		if set := Condition(h, b); len(set) != 0 || len(h) != 0 {
			t.Errorf("%+v: set %v (header %v), want nothing", b, set, h)
		}
		if b.HasValidator() {
			t.Errorf("%+v: HasValidator true", b)
		}
	}
}

func TestClassify(t *testing.T) {
	hash := Hash("Title", "price 10")
	withETag := Baseline{ETag: `"v1"`, ContentHash: hash}
	withDate := Baseline{LastModified: "Sun, 16 Jun 2013 22:28:51 GMT", ContentHash: hash}
	cases := []struct {
		name   string
		status int
		hash   string
		b      Baseline
		want   Verdict
	}{
		{"304 to If-None-Match", 304, "", withETag, Unchanged},
		{"304 to If-Modified-Since", 304, "", withDate, Unchanged},
		{"304 to an unconditional request", 304, "", Baseline{ContentHash: hash}, Changed},
		{"200 same extracted content", 200, Hash("Title", "price  10\n"), withETag, Unchanged},
		{"200 other content", 200, Hash("Title", "price 11"), withETag, Changed},
		{"200 without a baseline hash", 200, hash, Baseline{ETag: `"v1"`}, Changed},
		{"200 with no hash of its own", 200, "", Baseline{}, Changed},
		{"404", 404, hash, withETag, Changed},
		{"500 with the same hash", 500, hash, withETag, Changed},
	}
	for _, c := range cases {
		if got := Classify(c.status, c.hash, c.b); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHashIgnoresWhiteSpaceNotContent(t *testing.T) {
	same := [][]string{
		{"Shop", "Price: 10 EUR"},
		{"  Shop\n", "Price:\t10\u00a0 EUR  "},
		{"Shop", "Price:\r\n   10 \u200b EUR"},
	}
	for _, p := range same[1:] {
		if Hash(p...) != Hash(same[0]...) {
			t.Errorf("Hash(%q) != Hash(%q)", p, same[0])
		}
	}
	differ := [][]string{
		{"Shop", "Price: 11 EUR"},
		{"Shop", "price: 10 EUR"},
		{"ShopPrice: 10 EUR"},
		{"Shop Price:", "10 EUR"},
		{"Shop", "Price: 10", "EUR"},
	}
	for _, p := range differ {
		if Hash(p...) == Hash(same[0]...) {
			t.Errorf("Hash(%q) == Hash(%q)", p, same[0])
		}
	}
	if got := Hash("x"); len(got) != len("sha256:")+64 || got[:7] != "sha256:" {
		t.Errorf("Hash form %q", got)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		" \t\n ":          "",
		"a":               "a",
		"  a  b\n\nc  ":   "a b c",
		"é\u2003ü":        "é ü",
		"\ufeffBOM first": "BOM first",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNextInterval(t *testing.T) {
	const h, d = time.Hour, 24 * time.Hour
	floor, capd := h, 14*d
	cases := []struct {
		name    string
		prev    time.Duration
		changed bool
		want    time.Duration
	}{
		{"changed moves halfway to the floor", 9 * h, true, 5 * h},
		{"unchanged grows by half", 4 * h, false, 6 * h},
		{"changed at the floor stays", h, true, h},
		{"unchanged near the cap stops at it", 10 * d, false, capd},
		{"unchanged at the cap stays", capd, false, capd},
		{"prev below the floor starts at it", time.Minute, false, 90 * time.Minute},
		{"prev above the cap starts at it", 100 * d, true, (capd + h) / 2},
		{"zero prev", 0, true, h},
		{"huge prev does not overflow", time.Duration(1<<62 + 1<<61), false, capd},
	}
	for _, c := range cases {
		if got := NextInterval(c.prev, c.changed, floor, capd); got != c.want {
			t.Errorf("%s: NextInterval(%v, %v) = %v, want %v", c.name, c.prev, c.changed, got, c.want)
		}
	}
}

func TestNextIntervalStaysWithinBounds(t *testing.T) {
	floor, capd := 10*time.Minute, 48*time.Hour
	i := floor
	for step := range 200 {
		i = NextInterval(i, step%7 == 0, floor, capd)
		if i < floor || i > capd {
			t.Fatalf("step %d: %v outside [%v, %v]", step, i, floor, capd)
		}
	}
	if got := NextInterval(time.Hour, false, 2*time.Hour, time.Hour); got != 2*time.Hour {
		t.Errorf("cap below floor: %v, want the floor", got)
	}
	if got := NextInterval(time.Hour, true, -time.Hour, 3*time.Hour); got != 30*time.Minute {
		t.Errorf("negative floor: %v, want 30m", got)
	}
}

func TestVerdictString(t *testing.T) {
	if Unchanged.String() != "unchanged" || Changed.String() != "changed" {
		t.Errorf("%s %s", Unchanged, Changed)
	}
}
