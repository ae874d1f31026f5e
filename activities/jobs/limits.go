package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/activities/metadata"
)

// Limits are the operator's limits on the crawl jobs a worker runs (its
// --max-job-body-bytes, --max-job-timeout, --max-job-delay and
// --bodies-root): a job above a cap is refused, by the CLI at submission
// (from the group's limits znode, LimitsPath) and by every Runner before it
// fetches anything (BatchRunner.Limits). A zero field is no cap.
type Limits struct {
	// MaxBodyBytes caps a job's options.max_body_bytes.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// MaxTimeout caps a job's options.timeout (one request attempt).
	MaxTimeout time.Duration `json:"max_timeout,omitempty"`
	// MaxDelay caps a job's options.delay (between requests to a domain).
	MaxDelay time.Duration `json:"max_delay,omitempty"`
	// BodiesRoot is the directory a job's bodies_path (Spec.Bodies ==
	// BodiesDir) must stay under, an absolute path; a relative bodies_path
	// is resolved under it. "": anywhere (a relative path is then the
	// worker's working directory's).
	BodiesRoot string `json:"bodies_root,omitempty"`
	// MaxPageItemBytes caps the encoded items of one page of a user
	// crawler in total (0: crawler.DefaultMaxPageItemBytes): a page past
	// it fails with the reason.
	MaxPageItemBytes int64 `json:"max_page_item_bytes,omitempty"`
	// MaxAbandonedHandlers caps the user crawler handlers that ran past
	// their budget and still run in the worker (crawler.Abandoned; 0:
	// DefaultMaxAbandonedHandlers): at the cap the Runner takes no more
	// pages of user crawlers, its batch failing with the reason, until
	// some return.
	MaxAbandonedHandlers int `json:"max_abandoned_handlers,omitempty"`
	// MaxCommitBytes caps the items and stored bodies of one group commit
	// (0: DefaultMaxCommitBytes): a group past it is committed in several
	// transactions, a page never split.
	MaxCommitBytes int64 `json:"max_commit_bytes,omitempty"`
}

// commitBytes is the cap in force on one commit's items and bodies.
func (l Limits) commitBytes() int64 {
	if l.MaxCommitBytes > 0 {
		return l.MaxCommitBytes
	}
	return DefaultMaxCommitBytes
}

// DefaultMaxAbandonedHandlers is the cap on abandoned handlers of a
// worker that sets none.
const DefaultMaxAbandonedHandlers = 16

// abandonedCap is the cap in force on abandoned handlers.
func (l Limits) abandonedCap() int64 {
	if l.MaxAbandonedHandlers > 0 {
		return int64(l.MaxAbandonedHandlers)
	}
	return DefaultMaxAbandonedHandlers
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// String lists the limits set, as the worker's flags name them.
func (l Limits) String() string {
	var out []string
	if l.MaxBodyBytes > 0 {
		out = append(out, "max-job-body-bytes="+strconv.FormatInt(l.MaxBodyBytes, 10))
	}
	if l.MaxTimeout > 0 {
		out = append(out, "max-job-timeout="+l.MaxTimeout.String())
	}
	if l.MaxDelay > 0 {
		out = append(out, "max-job-delay="+l.MaxDelay.String())
	}
	if l.BodiesRoot != "" {
		out = append(out, "bodies-root="+l.BodiesRoot)
	}
	if l.MaxPageItemBytes > 0 {
		out = append(out, "max-page-item-bytes="+strconv.FormatInt(l.MaxPageItemBytes, 10))
	}
	if l.MaxAbandonedHandlers > 0 {
		out = append(out, "max-abandoned-handlers="+strconv.Itoa(l.MaxAbandonedHandlers))
	}
	if l.MaxCommitBytes > 0 {
		out = append(out, "max-commit-bytes="+strconv.FormatInt(l.MaxCommitBytes, 10))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// ErrOverLimit marks a job refused by the operator's limits (a
// LimitError). It is ErrBadSpec too: the job cannot run as submitted.
var ErrOverLimit = errors.New("refused by the operator's limits")

// LimitError is a job field above an operator limit.
type LimitError struct {
	// Field is the spec's field: options.max_body_bytes, options.timeout,
	// options.delay or bodies_path.
	Field string
	// Msg says what is wrong with its value and names the limit, e.g.
	// "104857600 is above this group's cap of 33554432".
	Msg string
	// Flag is the worker flag that sets the limit (--max-job-body-bytes).
	Flag string
}

func (e *LimitError) Error() string   { return e.Field + ": " + e.Msg + " (" + e.Flag + ")" }
func (e *LimitError) Unwrap() []error { return []error{ErrOverLimit, ErrBadSpec} }

// Check refuses a spec above the limits, naming the job's field, its value
// and the cap; a bodies_path is checked on this machine, symbolic links
// resolved (see Apply).
func (l Limits) Check(s Spec) error {
	_, err := l.Apply(s)
	return err
}

// CheckSubmission is Check as a submitter makes it away from the Runners'
// machines: the caps, and the bodies_path lexically (cleaned, it must
// stay under the bodies root; only a Runner can resolve its symbolic
// links).
func (l Limits) CheckSubmission(s Spec) error {
	if err := l.checkCaps(s.Options); err != nil {
		return err
	}
	if s.Bodies == BodiesDir {
		if _, _, err := l.bodiesDir(s.BodiesPath, false); err != nil {
			return err
		}
	}
	if s.WARCPath != "" {
		_, err := l.warcDir(s.WARCPath, false)
		return err
	}
	return nil
}

// Apply checks s against the limits on this machine and returns it as a
// Runner runs it: its bodies_path absolute under the bodies root, with
// its symbolic links resolved (one that leads outside is refused), and a
// zero (default) max_body_bytes or timeout lowered to the cap when the
// default is above it.
func (l Limits) Apply(s Spec) (Spec, error) {
	s, _, err := l.apply(s)
	return s, err
}

// apply is Apply, returning also the bodies root with its symbolic links
// resolved when the job keeps its bodies in a directory under one.
func (l Limits) apply(s Spec) (Spec, string, error) {
	if err := l.checkCaps(s.Options); err != nil {
		return s, "", err
	}
	if s.Options.MaxBodyBytes == 0 && l.MaxBodyBytes > 0 && l.MaxBodyBytes < crawl.DefaultMaxBodyBytes {
		s.Options.MaxBodyBytes = l.MaxBodyBytes
	}
	if s.Options.Timeout == 0 && l.MaxTimeout > 0 && l.MaxTimeout < crawl.DefaultTimeout {
		s.Options.Timeout = l.MaxTimeout
	}
	root := ""
	if s.Bodies == BodiesDir {
		dir, realRoot, err := l.bodiesDir(s.BodiesPath, true)
		if err != nil {
			return s, "", err
		}
		s.BodiesPath, root = dir, realRoot
	}
	if s.WARCPath != "" {
		dir, err := l.warcDir(s.WARCPath, true)
		if err != nil {
			return s, "", err
		}
		s.WARCPath = dir
	}
	return s, root, nil
}

// checkCaps compares the options with the caps (a zero option is the
// default, bounded by the cap when it runs: see Apply).
func (l Limits) checkCaps(o crawl.Options) error {
	above := func(field, val, limit, flag string) error {
		return &LimitError{Field: field, Msg: val + " is above this group's cap of " + limit, Flag: flag}
	}
	if l.MaxBodyBytes > 0 && o.MaxBodyBytes > l.MaxBodyBytes {
		return above("options.max_body_bytes", strconv.FormatInt(o.MaxBodyBytes, 10), strconv.FormatInt(l.MaxBodyBytes, 10), "--max-job-body-bytes")
	}
	if l.MaxTimeout > 0 && o.Timeout > l.MaxTimeout {
		return above("options.timeout", o.Timeout.String(), l.MaxTimeout.String(), "--max-job-timeout")
	}
	if l.MaxDelay > 0 && o.Delay > l.MaxDelay {
		return above("options.delay", o.Delay.String(), l.MaxDelay.String(), "--max-job-delay")
	}
	return nil
}

// bodiesDir returns the directory a job's bodies go to: p cleaned, made
// absolute under the bodies root when relative, and refused when it is
// not under the root — lexically, and with onDisk also once the symbolic
// links of the part of it that exists are resolved (the result is then the
// resolved path, and the root's resolved path too).
func (l Limits) bodiesDir(p string, onDisk bool) (dir, realRoot string, err error) {
	if l.BodiesRoot == "" {
		return p, "", nil
	}
	refuse := func(format string, args ...any) error {
		return &LimitError{Field: "bodies_path", Msg: fmt.Sprintf(format, args...), Flag: "--bodies-root"}
	}
	root, aerr := filepath.Abs(l.BodiesRoot)
	if aerr != nil {
		return "", "", refuse("%q: the bodies root %s: %v", p, l.BodiesRoot, aerr)
	}
	target := filepath.Join(root, p)
	if filepath.IsAbs(p) {
		target = filepath.Clean(p)
	}
	if !within(target, root) {
		if filepath.IsAbs(p) {
			return "", "", refuse("%q is not under this group's bodies root %s", p, root)
		}
		return "", "", refuse("%q leaves this group's bodies root %s", p, root)
	}
	if !onDisk {
		return target, "", nil
	}
	realRoot, err = resolveExisting(root)
	if err != nil {
		return "", "", refuse("%q: the bodies root %s: %v", p, root, err)
	}
	real, err := resolveExisting(target)
	if err != nil {
		return "", "", refuse("%q: %v", p, err)
	}
	if !within(real, realRoot) {
		return "", "", refuse("%q leads to %s through a symbolic link, outside this group's bodies root %s", p, real, root)
	}
	return real, realRoot, nil
}

// within reports whether the clean absolute path p is root or under it.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// resolveExisting resolves the symbolic links of the longest part of the
// clean absolute path p that exists, and appends the rest (which does
// not exist, so holds no link). A dangling link is refused: what it
// points to would be created through it.
func resolveExisting(p string) (string, error) {
	p = filepath.Clean(p)
	tail := ""
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, tail), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if _, lerr := os.Lstat(p); lerr == nil {
			return "", fmt.Errorf("%s is a symbolic link to nothing", p)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, tail), nil
		}
		tail = filepath.Join(filepath.Base(p), tail)
		p = parent
	}
}

// LimitsPath is the znode where a group records its workers' operator
// limits (a Baton addition, JSON): <root>/group/<group>/limits. Every
// worker writes its own at start (the last one started wins); the CLI
// reads it to refuse a job above a cap before submitting it.
func LimitsPath(root, group string) string {
	if root == "" {
		root = metadata.DefaultRoot
	}
	return path.Join(root, "group", group, "limits")
}

// GroupLimits is the limits znode's content: the limits and the worker
// that wrote them.
type GroupLimits struct {
	Limits
	Worker string `json:"worker,omitempty"`
}

// ErrNoLimits: the group has no limits znode (no worker of this version
// has started in it).
var ErrNoLimits = errors.New("the group records no operator limits")

// ReadLimits reads the group's limits (ErrNoLimits when there are none).
func ReadLimits(ctx context.Context, meta metadata.Store, root, group string) (GroupLimits, error) {
	p := LimitsPath(root, group)
	data, _, err := meta.Get(ctx, p)
	if errors.Is(err, metadata.ErrNotFound) {
		return GroupLimits{}, fmt.Errorf("%w (%s)", ErrNoLimits, p)
	}
	if err != nil {
		return GroupLimits{}, fmt.Errorf("read the operator limits of group %s from %s: %w", group, p, err)
	}
	var g GroupLimits
	if err := json.Unmarshal(data, &g); err != nil {
		return GroupLimits{}, fmt.Errorf("znode %s (the operator limits of group %s) is corrupted: %q", p, group, data)
	}
	return g, nil
}

// PublishLimits writes a worker's limits as the group's and returns what
// the znode held before when it differed (ok false when it held none, the
// same limits, or unreadable data, overwritten): the caller warns. Limits
// are each worker's own policy, enforced by its Runner, and a difference
// corrupts nothing, so the last worker started wins: an operator changing
// them restarts the workers one by one, the znode following.
func PublishLimits(ctx context.Context, meta metadata.Store, root, group, worker string, l Limits) (prev GroupLimits, ok bool, err error) {
	p := LimitsPath(root, group)
	data, err := json.Marshal(GroupLimits{Limits: l, Worker: worker})
	if err != nil {
		return prev, false, err
	}
	cur, _, err := meta.Get(ctx, p)
	switch {
	case errors.Is(err, metadata.ErrNotFound):
		if _, err := meta.Create(ctx, p, data, metadata.Persistent); err == nil {
			return prev, false, nil
		} else if !errors.Is(err, metadata.ErrExists) {
			return prev, false, fmt.Errorf("record the operator limits of group %s in %s: %w", group, p, err)
		}
		// Created meanwhile by another worker: compared below.
		if cur, _, err = meta.Get(ctx, p); err != nil {
			return prev, false, fmt.Errorf("read the operator limits of group %s from %s: %w", group, p, err)
		}
	case err != nil:
		return prev, false, fmt.Errorf("read the operator limits of group %s from %s: %w", group, p, err)
	}
	if json.Unmarshal(cur, &prev) == nil {
		ok = prev.Limits != l
	}
	if string(cur) == string(data) {
		return prev, false, nil
	}
	if _, err := meta.Set(ctx, p, data, metadata.AnyVersion); err != nil {
		return prev, false, fmt.Errorf("record the operator limits of group %s in %s: %w", group, p, err)
	}
	return prev, ok, nil
}
