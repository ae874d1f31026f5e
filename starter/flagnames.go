package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// specFlags maps the fields of a job spec (jobs.Spec, its crawl.Options
// under "options."), as their validation errors name them, to the flags
// of `baton crawl` that set them. A field missing here keeps its JSON
// name in the error.
var specFlags = map[string]string{
	"id":                      "--id",
	"group":                   "--group",
	"max_pages":               "--max-pages",
	"batch_size":              "--batch-size",
	"options.selectors":       "--select",
	"options.allowed_domains": "--allow-domain",
	"options.max_depth":       "--depth",
	"options.delay":           "--delay",
	"options.parallelism":     "--parallelism",
	"options.retries":         "--retries",
	"options.max_body_bytes":  "--max-body-bytes",
	"options.timeout":         "--timeout",
	"options.user_agent":      "--user-agent",
	"options.follow_allow":    "--follow-allow",
	"options.follow_deny":     "--follow-deny",
	"options.labels":          "--label",
	"options.label_selectors": "--select",
	"options.field_order":     "--select",
	"options.links_json":      "--links",
	"adaptive":                "--adaptive-floor and --adaptive-cap",
}

// specFlagError rewrites a job spec's validation error so that it names
// the flag or argument the user typed instead of the spec's field:
// "options: max_depth: is -1, must be >= 0" becomes "--depth: is -1, must
// be >= 0", "seeds[0]: ..." becomes "SEED_URL 1: ...", `options:
// selectors["p"]: ...` becomes "--select p: ...".
func specFlagError(err error) error {
	msg := err.Error()
	path := ""
	if rest, ok := strings.CutPrefix(msg, "options: "); ok {
		path, msg = "options.", rest
	}
	end := strings.IndexAny(msg, "[:")
	if end < 0 {
		return err
	}
	field, rest := msg[:end], msg[end:]
	index := ""
	if strings.HasPrefix(rest, "[") {
		close := strings.Index(rest, "]")
		if close < 0 {
			return err
		}
		index, rest = rest[1:close], rest[close+1:]
	}
	if !strings.HasPrefix(rest, ": ") {
		return err
	}
	if path == "" && field == "seeds" {
		if i, aerr := strconv.Atoi(index); aerr == nil {
			return errors.New(fmt.Sprintf("SEED_URL %d", i+1) + rest)
		}
	}
	flag, ok := specFlags[path+field]
	if !ok {
		return err
	}
	if name, qerr := strconv.Unquote(index); qerr == nil {
		flag += " " + name // a map key: --select's field name
	}
	return errors.New(flag + rest)
}
