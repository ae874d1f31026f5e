package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/batoncrawl/baton/roles"
)

// DefaultRoot is the reference's root znode.
const DefaultRoot = "/smoothcrawler"

// Cluster is typed access to one group's metadata in the reference's znode
// layout:
//
//	<root>/group/<group>/state      GroupState
//	<root>/group/<group>/lock       lock recipe
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

// GetTask reads name's Task.
func (c *Cluster) GetTask(ctx context.Context, name string) (roles.Task, int32, error) {
	return get(ctx, c.Store, c.TaskPath(name), roles.DecodeTask)
}

// GetHeartbeat reads name's Heartbeat.
func (c *Cluster) GetHeartbeat(ctx context.Context, name string) (roles.Heartbeat, int32, error) {
	return get(ctx, c.Store, c.HeartbeatPath(name), roles.DecodeHeartbeat)
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
		if err := fn(&next); errors.Is(err, ErrNoChange) {
			return g, nil
		} else if err != nil {
			return g, err
		}
		if err := next.Validate(); err != nil {
			return g, fmt.Errorf("update %s: %w", c.GroupPath(), err)
		}
		if missing {
			_, err = c.Store.Create(ctx, c.GroupPath(), Encode(next), Persistent)
		} else {
			_, err = c.Store.Set(ctx, c.GroupPath(), Encode(next), v)
		}
		if IsConflict(err) {
			continue
		}
		return next, err
	}
}

// ErrNoChange tells UpdateGroup that nothing needs writing.
var ErrNoChange = errors.New("no change")
