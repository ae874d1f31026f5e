package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/batoncrawl/baton/roles"
)

// DefaultRoot is the reference's root znode.
const DefaultRoot = "/smoothcrawler"

// Cluster is typed access to one group's metadata in the reference's znode
// layout:
//
//	<root>/group/<group>/state      GroupState
//	<root>/group/<group>/lock       lock recipe
//	<root>/group/<group>/members/<name> MemberState of an elected member (Baton's)
//	<root>/group/<group>/dead/<name> death report of a runner (Baton's)
//	<root>/node/<name>/state        NodeState
//	<root>/node/<name>/task         Task
//	<root>/node/<name>/heartbeat    Heartbeat
//	<root>/node/<name>/alive        ephemeral, present while the instance's session lives
//
// Every read decodes and validates; a corrupted znode yields an error that
// names the znode and the field and wraps roles.ErrInvalid. Cluster is safe
// for concurrent use.
type Cluster struct {
	Store Store
	Root  string
	Group string
}

// NewCluster returns typed access to group under root ("" means DefaultRoot).
func NewCluster(s Store, root, group string) *Cluster {
	if root == "" {
		root = DefaultRoot
	}
	return &Cluster{Store: s, Root: root, Group: group}
}

// GroupPath is the GroupState znode.
func (c *Cluster) GroupPath() string { return path.Join(c.Root, "group", c.Group, "state") }

// MembersPath is the group's membership directory: a child per elected
// member (roles.MemberState), kept by UpdateGroupWith in the same
// transaction as GroupState. A Baton znode, not the reference's.
func (c *Cluster) MembersPath() string { return path.Join(c.Root, "group", c.Group, "members") }

// MemberPath is name's entry in the membership directory.
func (c *Cluster) MemberPath(name string) string { return path.Join(c.MembersPath(), name) }

// GetMember reads name's entry in the membership directory.
func (c *Cluster) GetMember(ctx context.Context, name string) (roles.MemberState, int32, error) {
	return get(ctx, c.Store, c.MemberPath(name), roles.DecodeMemberState)
}

// ReportsPath is the directory of the group's death reports: a child per
// runner that a watcher declared dead but cannot take over itself, for the
// standby (or, in All-are-Runner mode, a runner with room) to take over.
// A Baton znode, not the reference's.
func (c *Cluster) ReportsPath() string { return path.Join(c.Root, "group", c.Group, "dead") }

// ReportPath is the death report of name.
func (c *Cluster) ReportPath(name string) string { return path.Join(c.ReportsPath(), name) }

// RegisteredPath is an empty znode created once every configured member
// has registered (roles.GroupState.Registered): the members waiting to
// elect watch it, so each is woken once as the group forms rather than at
// every registration. It may outlive its group's formation; GroupState
// decides. A Baton znode, not the reference's.
func (c *Cluster) RegisteredPath() string { return path.Join(c.Root, "group", c.Group, "registered") }

// LockPath is the directory of the group's lock.
func (c *Cluster) LockPath() string { return path.Join(c.Root, "group", c.Group, "lock") }

// NodePath is name's NodeState znode.
func (c *Cluster) NodePath(name string) string { return path.Join(c.Root, "node", name, "state") }

// TaskPath is name's Task znode.
func (c *Cluster) TaskPath(name string) string { return path.Join(c.Root, "node", name, "task") }

// HeartbeatPath is name's Heartbeat znode.
func (c *Cluster) HeartbeatPath(name string) string {
	return path.Join(c.Root, "node", name, "heartbeat")
}

// AlivePath is name's ephemeral liveness znode.
func (c *Cluster) AlivePath(name string) string { return path.Join(c.Root, "node", name, "alive") }

// CorruptError is a znode whose content cannot be used.
type CorruptError struct {
	Path string
	Err  error // a *roles.FieldError
}

func (e *CorruptError) Error() string { return fmt.Sprintf("corrupted znode %s: %v", e.Path, e.Err) }

// Unwrap returns the field error (which wraps roles.ErrInvalid).
func (e *CorruptError) Unwrap() error { return e.Err }

func get[T any](ctx context.Context, s Store, p string, dec func([]byte) (T, error)) (T, int32, error) {
	var zero T
	data, v, err := s.Get(ctx, p)
	if err != nil {
		return zero, 0, err
	}
	t, err := dec(data)
	if err != nil {
		return t, v, &CorruptError{Path: p, Err: err}
	}
	return t, v, nil
}

// Encode marshals a metadata object.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("metadata: encode %T: %v", v, err)) // only plain structs are encoded
	}
	return b
}

// GetGroup reads GroupState.
func (c *Cluster) GetGroup(ctx context.Context) (roles.GroupState, int32, error) {
	return get(ctx, c.Store, c.GroupPath(), roles.DecodeGroupState)
}

// GetNode reads name's NodeState.
func (c *Cluster) GetNode(ctx context.Context, name string) (roles.NodeState, int32, error) {
	return get(ctx, c.Store, c.NodePath(name), roles.DecodeNodeState)
}

// CrawlersPath is name's Crawlers znode: the crawlers its binary carries.
func (c *Cluster) CrawlersPath(name string) string {
	return path.Join(c.Root, "node", name, "crawlers")
}

// GetCrawlers reads the crawlers name advertises; an instance that
// advertises none carries the built-in crawler only (ErrNotFound is not
// an error here).
func (c *Cluster) GetCrawlers(ctx context.Context, name string) (roles.Crawlers, error) {
	cr, _, err := get(ctx, c.Store, c.CrawlersPath(name), roles.DecodeCrawlers)
	if errors.Is(err, ErrNotFound) {
		return roles.Crawlers{}, nil
	}
	return cr, err
}

// SetCrawlers writes the crawlers name advertises (creating the znode).
func (c *Cluster) SetCrawlers(ctx context.Context, name string, cr roles.Crawlers) error {
	_, err := c.Put(ctx, c.CrawlersPath(name), cr, AnyVersion)
	return err
}

// GetTask reads name's Task.
func (c *Cluster) GetTask(ctx context.Context, name string) (roles.Task, int32, error) {
	return get(ctx, c.Store, c.TaskPath(name), roles.DecodeTask)
}

// GetHeartbeat reads name's Heartbeat.
func (c *Cluster) GetHeartbeat(ctx context.Context, name string) (roles.Heartbeat, int32, error) {
	return get(ctx, c.Store, c.HeartbeatPath(name), roles.DecodeHeartbeat)
}

// SetNode writes name's NodeState at version, as Put does (AnyVersion
// ignores the version and creates a missing znode). Like every Store write,
// it is safe for concurrent use; a writer that passes the version it read
// gets ErrBadVersion when another writer got there first.
func (c *Cluster) SetNode(ctx context.Context, name string, n roles.NodeState, version int32) (int32, error) {
	return c.Put(ctx, c.NodePath(name), n, version)
}

// SetTask writes name's Task at version, as Put does (AnyVersion ignores
// the version and creates a missing znode). It writes the Task as given:
// a write that must fence a holder goes through FenceTask. Like every Store
// write, it is safe for concurrent use; a writer that passes the version it
// read gets ErrBadVersion when another writer got there first.
func (c *Cluster) SetTask(ctx context.Context, name string, t roles.Task, version int32) (int32, error) {
	return c.Put(ctx, c.TaskPath(name), t, version)
}

// SetHeartbeat writes name's Heartbeat at version, as Put does (AnyVersion
// ignores the version and creates a missing znode). Like every Store
// write, it is safe for concurrent use; a writer that passes the version it
// read gets ErrBadVersion when another writer got there first.
func (c *Cluster) SetHeartbeat(ctx context.Context, name string, hb roles.Heartbeat, version int32) (int32, error) {
	return c.Put(ctx, c.HeartbeatPath(name), hb, version)
}

// FenceTask is the fencing rule for owner's Task znode: it returns t with
// its holder and epoch set, and the Op that writes it with one
// compare-and-set at version, the version of owner's Task read before t was
// made. It writes nothing: the caller applies the Op, with Store.Multi
// (alone, or with other Ops in one transaction, such as a second fenced
// Task or a CheckOp) or with Store.Set(ctx, op.Path, op.Data, op.Version).
//
// Concurrency: the write succeeds only if nobody wrote owner's Task since
// it was read, so of several instances fencing the same Task from the same
// read exactly one wins and the others get ErrBadVersion (ErrNotFound if it
// was deleted); they must read again before they decide anything. The
// caller chooses epoch: higher than the Task's to take it away from its
// former holder, whose later writes (made at the old epoch or the old
// version) are then refused; equal to keep holding it. FenceTask itself
// only builds values and is safe for concurrent use; t is taken by value
// and the caller's copy is not changed.
func (c *Cluster) FenceTask(owner string, version int32, t roles.Task, holder string, epoch int64) (roles.Task, Op) {
	t.Holder, t.Epoch = holder, epoch
	return t, SetOp(c.TaskPath(owner), Encode(t), version)
}

// Put writes v to p at version (AnyVersion to ignore it), creating p when it
// does not exist and version is AnyVersion.
func (c *Cluster) Put(ctx context.Context, p string, v any, version int32) (int32, error) {
	data := Encode(v)
	nv, err := c.Store.Set(ctx, p, data, version)
	if errors.Is(err, ErrNotFound) && version == AnyVersion {
		if _, err := c.Store.Create(ctx, p, data, Persistent); err != nil {
			if errors.Is(err, ErrExists) {
				return c.Store.Set(ctx, p, data, AnyVersion)
			}
			return 0, err
		}
		return 0, nil
	}
	return nv, err
}

// UpdateGroup applies fn to GroupState under the group lock and writes it
// with compare-and-set, retrying when another writer got there first. A
// missing GroupState starts from roles.GroupState{} with empty lists. fn
// may return ErrNoChange to skip the write.
func (c *Cluster) UpdateGroup(ctx context.Context, fn func(*roles.GroupState) error) (roles.GroupState, error) {
	return c.UpdateGroupWith(ctx, func(g *roles.GroupState) ([]Op, error) { return nil, fn(g) })
}

// UpdateGroupWith is UpdateGroup whose write also applies the ops fn
// returns, in one transaction: a version check or a write of another znode
// (e.g. a Task, so that whoever read it before cannot write it after the
// group changed). When those ops fail (ErrBadVersion, ErrNotFound) nothing
// is written and the error is returned; fn runs again only when the group
// itself changed meanwhile.
func (c *Cluster) UpdateGroupWith(ctx context.Context, fn func(*roles.GroupState) ([]Op, error)) (roles.GroupState, error) {
	lock := NewLock(c.Store, c.LockPath())
	if err := lock.Acquire(ctx); err != nil {
		return roles.GroupState{}, err
	}
	defer lock.Release()
	for {
		g, v, err := c.GetGroup(ctx)
		missing := errors.Is(err, ErrNotFound)
		if missing {
			g, err = roles.NewGroupState(0, 0), nil
		}
		if err != nil {
			return g, err
		}
		next := g.Clone()
		ops, err := fn(&next)
		if errors.Is(err, ErrNoChange) {
			return g, nil
		} else if err != nil {
			return g, err
		}
		next.TrimFailHistory()
		if err := next.Validate(); err != nil {
			return g, fmt.Errorf("update %s: %w", c.GroupPath(), err)
		}
		sync, err := c.memberOps(ctx, g, next)
		if err != nil {
			return g, err
		}
		if missing && len(sync) > 0 {
			// A new group's first write: GroupState, then its members.
			if _, err := c.Store.Create(ctx, c.GroupPath(), Encode(next), Persistent); err != nil && !IsConflict(err) {
				return g, err
			}
			continue
		}
		ops = append(ops, sync...)
		switch {
		case len(ops) > 0 && !missing:
			err = c.Store.Multi(ctx, append([]Op{SetOp(c.GroupPath(), Encode(next), v)}, ops...)...)
			if IsConflict(err) {
				// Ours or theirs? Only a changed group is worth another try.
				if _, nv, gerr := c.GetGroup(ctx); gerr == nil && nv == v {
					return g, err
				}
				continue
			}
		case missing:
			if len(ops) > 0 {
				return g, fmt.Errorf("update %s: it does not exist: %w", c.GroupPath(), ErrNotFound)
			}
			_, err = c.Store.Create(ctx, c.GroupPath(), Encode(next), Persistent)
		default:
			_, err = c.Store.Set(ctx, c.GroupPath(), Encode(next), v)
		}
		if IsConflict(err) {
			continue
		}
		return next, err
	}
}

// memberOps returns the writes that make the membership directory what g
// implies (roles.GroupState.Members), given old, the GroupState it was
// written with: entries created (any member the listing lacks, so that a
// group formed before the directory existed gets it at its next change),
// changed, or deleted. It creates the empty directory itself when it is
// missing. Called under the group lock.
func (c *Cluster) memberOps(ctx context.Context, old, g roles.GroupState) ([]Op, error) {
	kids, err := c.Store.Children(ctx, c.MembersPath())
	if errors.Is(err, ErrNotFound) {
		if _, err := c.Store.Create(ctx, c.MembersPath(), nil, Persistent); err != nil && !errors.Is(err, ErrExists) {
			return nil, fmt.Errorf("create %s: %w", c.MembersPath(), err)
		}
		kids, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.MembersPath(), err)
	}
	names, want := g.Members()
	_, had := old.Members()
	var ops []Op
	for _, n := range names {
		switch {
		case !slices.Contains(kids, n):
			ops = append(ops, CreateOp(c.MemberPath(n), Encode(want[n])))
		case had[n] != want[n]:
			ops = append(ops, SetOp(c.MemberPath(n), Encode(want[n]), AnyVersion))
		}
	}
	for _, k := range kids {
		if _, ok := want[k]; !ok {
			ops = append(ops, DeleteOp(c.MemberPath(k), AnyVersion))
		}
	}
	return ops, nil
}

// ErrNoChange tells UpdateGroup that nothing needs writing.
var ErrNoChange = errors.New("no change")
