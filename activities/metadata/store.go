// Package metadata stores Baton's cluster metadata: a small Store interface
// over a versioned tree of znodes, its ZooKeeper implementation, an
// in-memory implementation for unit tests, the ZooKeeper lock recipe on top
// of any Store, and Cluster, the typed access to the reference's znodes.
package metadata

import (
	"context"
	"errors"
)

// Sentinel errors returned by every Store.
var (
	ErrNotFound   = errors.New("znode does not exist")
	ErrExists     = errors.New("znode already exists")
	ErrBadVersion = errors.New("znode version changed (compare-and-set lost)")
	ErrNotEmpty   = errors.New("znode has children")
	ErrClosed     = errors.New("store closed")
)

// AnyVersion makes Set, Delete and Check ignore the znode's version.
const AnyVersion int32 = -1

// CreateMode says how a znode is created.
type CreateMode int

// Create modes.
const (
	Persistent CreateMode = iota
	Ephemeral
	EphemeralSequential
)

// OpKind is the kind of one step of a Multi.
type OpKind int

// Op kinds.
const (
	OpCheck OpKind = iota
	OpSet
	OpCreate
	OpDelete
)

// Op is one step of a Multi transaction.
type Op struct {
	Kind    OpKind
	Path    string
	Data    []byte
	Version int32 // for Check, Set and Delete; AnyVersion to ignore
}

// CheckOp asserts that path has version v.
func CheckOp(path string, v int32) Op { return Op{Kind: OpCheck, Path: path, Version: v} }

// SetOp writes data to path if it has version v.
func SetOp(path string, data []byte, v int32) Op {
	return Op{Kind: OpSet, Path: path, Data: data, Version: v}
}

// DeleteOp deletes path if it has version v.
func DeleteOp(path string, v int32) Op { return Op{Kind: OpDelete, Path: path, Version: v} }

// CreateOp creates a persistent znode (its parent must exist).
func CreateOp(path string, data []byte) Op { return Op{Kind: OpCreate, Path: path, Data: data} }

// Store is a versioned tree of znodes. Implementations are safe for
// concurrent use.
type Store interface {
	// Get returns the data and version of path.
	Get(ctx context.Context, path string) ([]byte, int32, error)
	// GetW is Get plus a one-shot watch: the channel is closed at the next
	// change or deletion of path, or when the session is lost. If path does
	// not exist it returns ErrNotFound and a channel closed when it is
	// created.
	GetW(ctx context.Context, path string) ([]byte, int32, <-chan struct{}, error)
	// Children returns the names of path's children, unsorted.
	Children(ctx context.Context, path string) ([]string, error)
	// ChildrenW is Children plus a one-shot watch: the channel is closed
	// when a child is created or deleted, when path is deleted, or when
	// the session is lost. If path does not exist it returns ErrNotFound
	// and a channel closed when it is created.
	ChildrenW(ctx context.Context, path string) ([]string, <-chan struct{}, error)
	// Create creates path (and any missing persistent parents) and returns
	// the created path, which differs from path for sequential modes.
	// Ephemeral znodes are re-created by the store after a session expiry.
	Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error)
	// Set writes data if the version matches and returns the new version.
	Set(ctx context.Context, path string, data []byte, version int32) (int32, error)
	// Delete removes path if the version matches.
	Delete(ctx context.Context, path string, version int32) error
	// Multi applies all ops atomically or none; the error is the first
	// failing op's (ErrBadVersion, ErrNotFound, ErrExists).
	Multi(ctx context.Context, ops ...Op) error
	// Session returns a number that changes whenever the store's session
	// was lost and a new one established. A holder that sees it change must
	// re-check what it holds before writing.
	Session() int64
	// Close releases the store.
	Close() error
}

// IsConflict reports whether err is a lost compare-and-set or create race.
func IsConflict(err error) bool {
	return errors.Is(err, ErrBadVersion) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound)
}
