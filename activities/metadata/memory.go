package metadata

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
)

// Memory is an in-memory Store with ZooKeeper's semantics (versions,
// one-shot watches, sequential and ephemeral znodes, atomic Multi), for unit
// tests. ExpireSession simulates a session expiry.
type Memory struct {
	mu      sync.Mutex
	nodes   map[string]*memNode
	seq     map[string]int
	session int64
	closed  bool
}

type memNode struct {
	data      []byte
	version   int32
	ephemeral bool
	watchers  []chan struct{}
	kids      []chan struct{} // ChildrenW's watches
}

// NewMemory returns an empty in-memory store holding only "/".
func NewMemory() *Memory {
	return &Memory{nodes: map[string]*memNode{"/": {}}, seq: map[string]int{}, session: 1}
}

func (m *Memory) fire(p string) {
	if n, ok := m.nodes[p]; ok {
		for _, w := range n.watchers {
			close(w)
		}
		n.watchers = nil
	}
}

// fireChildren fires the ChildrenW watches of p's parent (a child was
// created or deleted) and, when p itself goes, p's own.
func (m *Memory) fireChildren(p string, gone bool) {
	for _, q := range []string{path.Dir(p), p} {
		if n, ok := m.nodes[q]; ok && (q != p || gone) {
			for _, w := range n.kids {
				close(w)
			}
			n.kids = nil
		}
	}
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, p string) ([]byte, int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, 0, ErrClosed
	}
	n, ok := m.nodes[p]
	if !ok || n.version < 0 {
		return nil, 0, fmt.Errorf("get %s: %w", p, ErrNotFound)
	}
	return append([]byte(nil), n.data...), n.version, nil
}

// GetW implements Store. A watch on a missing znode is kept on a
// placeholder that Create fills.
func (m *Memory) GetW(_ context.Context, p string) ([]byte, int32, <-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, 0, nil, ErrClosed
	}
	ch := make(chan struct{})
	n, ok := m.nodes[p]
	if !ok {
		m.nodes[p] = &memNode{version: -1, watchers: []chan struct{}{ch}}
		return nil, 0, ch, fmt.Errorf("get %s: %w", p, ErrNotFound)
	}
	n.watchers = append(n.watchers, ch)
	if n.version < 0 {
		return nil, 0, ch, fmt.Errorf("get %s: %w", p, ErrNotFound)
	}
	return append([]byte(nil), n.data...), n.version, ch, nil
}

func (m *Memory) exists(p string) bool {
	n, ok := m.nodes[p]
	return ok && n.version >= 0
}

// Children implements Store.
func (m *Memory) Children(_ context.Context, p string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.exists(p) {
		return nil, fmt.Errorf("children %s: %w", p, ErrNotFound)
	}
	return m.children(p), nil
}

// ChildrenW implements Store. A watch on a missing znode fires when it is
// created.
func (m *Memory) ChildrenW(_ context.Context, p string) ([]string, <-chan struct{}, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, ErrClosed
	}
	ch := make(chan struct{})
	n, ok := m.nodes[p]
	if !ok {
		m.nodes[p] = &memNode{version: -1, watchers: []chan struct{}{ch}}
		return nil, ch, fmt.Errorf("children %s: %w", p, ErrNotFound)
	}
	if n.version < 0 {
		n.watchers = append(n.watchers, ch)
		return nil, ch, fmt.Errorf("children %s: %w", p, ErrNotFound)
	}
	n.kids = append(n.kids, ch)
	return m.children(p), ch, nil
}

func (m *Memory) children(p string) []string {
	prefix := strings.TrimSuffix(p, "/") + "/"
	var out []string
	for k, n := range m.nodes {
		if n.version >= 0 && k != p && strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], "/") {
			out = append(out, k[len(prefix):])
		}
	}
	return out
}

func (m *Memory) create(p string, data []byte, mode CreateMode, parents bool) (string, error) {
	if p == "/" || !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("create %s: invalid path", p)
	}
	parent := path.Dir(p)
	if !m.exists(parent) {
		if !parents {
			return "", fmt.Errorf("create %s: parent: %w", p, ErrNotFound)
		}
		if _, err := m.create(parent, nil, Persistent, true); err != nil {
			return "", err
		}
	}
	if m.nodes[parent].ephemeral { // as ZooKeeper: NoChildrenForEphemerals
		return "", fmt.Errorf("create %s: parent %s is ephemeral and cannot have children", p, parent)
	}
	if mode == EphemeralSequential {
		m.seq[parent]++
		p = fmt.Sprintf("%s%010d", p, m.seq[parent])
	}
	if m.exists(p) {
		return "", fmt.Errorf("create %s: %w", p, ErrExists)
	}
	n, ok := m.nodes[p]
	if !ok {
		n = &memNode{}
		m.nodes[p] = n
	}
	n.data, n.version, n.ephemeral = append([]byte{}, data...), 0, mode != Persistent
	m.fire(p)
	m.fireChildren(p, false)
	return p, nil
}

// Create implements Store.
func (m *Memory) Create(_ context.Context, p string, data []byte, mode CreateMode) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", ErrClosed
	}
	return m.create(p, data, mode, true)
}

func (m *Memory) set(p string, data []byte, v int32) (int32, error) {
	n, ok := m.nodes[p]
	if !ok || n.version < 0 {
		return 0, fmt.Errorf("set %s: %w", p, ErrNotFound)
	}
	if v != AnyVersion && v != n.version {
		return 0, fmt.Errorf("set %s at version %d (now %d): %w", p, v, n.version, ErrBadVersion)
	}
	n.data = append([]byte{}, data...)
	n.version++
	m.fire(p)
	return n.version, nil
}

// Set implements Store.
func (m *Memory) Set(_ context.Context, p string, data []byte, v int32) (int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	return m.set(p, data, v)
}

func (m *Memory) del(p string, v int32) error {
	n, ok := m.nodes[p]
	if !ok || n.version < 0 {
		return fmt.Errorf("delete %s: %w", p, ErrNotFound)
	}
	if v != AnyVersion && v != n.version {
		return fmt.Errorf("delete %s: %w", p, ErrBadVersion)
	}
	if len(m.children(p)) > 0 {
		return fmt.Errorf("delete %s: %w", p, ErrNotEmpty)
	}
	m.fire(p)
	m.fireChildren(p, true)
	delete(m.nodes, p)
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, p string, v int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return m.del(p, v)
}

// Multi implements Store: it validates every op against a snapshot first,
// then applies them.
func (m *Memory) Multi(_ context.Context, ops ...Op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	// Dry run on version numbers only.
	vers := map[string]int32{}
	ver := func(p string) (int32, bool) {
		if v, ok := vers[p]; ok {
			return v, v >= 0
		}
		if m.exists(p) {
			return m.nodes[p].version, true
		}
		return -1, false
	}
	for _, op := range ops {
		v, ok := ver(op.Path)
		switch op.Kind {
		case OpCreate:
			if ok {
				return fmt.Errorf("multi create %s: %w", op.Path, ErrExists)
			}
			if _, pok := ver(path.Dir(op.Path)); !pok && path.Dir(op.Path) != "/" {
				return fmt.Errorf("multi create %s: parent: %w", op.Path, ErrNotFound)
			}
			vers[op.Path] = 0
		case OpCheck, OpSet, OpDelete:
			if !ok {
				return fmt.Errorf("multi %s: %w", op.Path, ErrNotFound)
			}
			if op.Version != AnyVersion && op.Version != v {
				return fmt.Errorf("multi %s at version %d (now %d): %w", op.Path, op.Version, v, ErrBadVersion)
			}
			if op.Kind == OpSet {
				vers[op.Path] = v + 1
			}
			if op.Kind == OpDelete {
				// Children as they stand after the earlier ops of this Multi.
				for _, k := range m.children(op.Path) {
					if _, ok := ver(op.Path + "/" + k); ok {
						return fmt.Errorf("multi delete %s: %w", op.Path, ErrNotEmpty)
					}
				}
				for p2, v2 := range vers {
					if v2 >= 0 && path.Dir(p2) == op.Path {
						return fmt.Errorf("multi delete %s: %w", op.Path, ErrNotEmpty)
					}
				}
				vers[op.Path] = -1
			}
		}
	}
	for _, op := range ops {
		var err error
		switch op.Kind {
		case OpCreate:
			_, err = m.create(op.Path, op.Data, Persistent, false)
		case OpSet:
			_, err = m.set(op.Path, op.Data, AnyVersion)
		case OpDelete:
			err = m.del(op.Path, AnyVersion)
		}
		if err != nil {
			return fmt.Errorf("multi (after dry run): %w", err)
		}
	}
	return nil
}

// Session implements Store.
func (m *Memory) Session() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.session
}

// ExpireSession simulates a session expiry: every watch fires, ephemeral
// znodes are deleted, and the session number changes. Unlike the ZooKeeper
// store it does not re-create ephemerals, so tests can see them go.
func (m *Memory) ExpireSession() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, n := range m.nodes {
		for _, w := range append(n.watchers, n.kids...) {
			close(w)
		}
		n.watchers, n.kids = nil, nil
		if n.ephemeral {
			delete(m.nodes, p)
		}
	}
	m.session++
}

// Close implements Store.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
