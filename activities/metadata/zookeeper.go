package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperConfig configures a ZooKeeper store.
type ZooKeeperConfig struct {
	// Hosts are "host:port" addresses of the ensemble.
	Hosts []string
	// SessionTimeout is ZooKeeper's session timeout.
	SessionTimeout time.Duration
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
	// Auth is "user:password" for ZooKeeper's digest scheme, or "" for no
	// authentication. When set, the store authenticates its session with
	// it and creates every znode with a digest ACL granting all
	// permissions to that user only (zk.DigestACL); clients without these
	// credentials get zk.ErrNoAuth on reads and writes. It is a secret:
	// it is never logged.
	Auth string
}

// digestUser splits a digest "user:password" at its first colon (as
// ZooKeeper's DigestAuthenticationProvider does).
func digestUser(auth string) (user, password string, ok bool) {
	user, password, ok = strings.Cut(auth, ":")
	return user, password, ok && user != "" && password != ""
}

// DefaultZooKeeperConfig returns a config for a local standalone server.
func DefaultZooKeeperConfig() ZooKeeperConfig {
	return ZooKeeperConfig{Hosts: []string{"127.0.0.1:2181"}, SessionTimeout: 10 * time.Second}
}

// Validate names the first bad field.
func (c ZooKeeperConfig) Validate() error {
	if len(c.Hosts) == 0 {
		return errors.New("zookeeper config: hosts: empty")
	}
	for i, h := range c.Hosts {
		if !strings.Contains(h, ":") {
			return fmt.Errorf("zookeeper config: hosts[%d]: %q is not host:port", i, h)
		}
	}
	if c.SessionTimeout < time.Second {
		return fmt.Errorf("zookeeper config: session_timeout: %v is under 1s", c.SessionTimeout)
	}
	if _, _, ok := digestUser(c.Auth); c.Auth != "" && !ok {
		// The value is a secret: say what is wrong, never what it is.
		return errors.New("zookeeper config: auth: want user:password with a non-empty user and password")
	}
	return nil
}

// ZooKeeper is a Store on a ZooKeeper ensemble. It keeps one session; when
// the session expires the client establishes a new one, the store bumps
// Session() and re-creates the ephemeral znodes it created.
type ZooKeeper struct {
	conn    *zk.Conn
	log     *slog.Logger
	session atomic.Int64
	mu      sync.Mutex
	ephem   map[string][]byte // non-sequential ephemerals to re-create
	wmu     sync.Mutex
	watches map[string]chan struct{} // GetW's live watch per path (closed when fired); guarded by wmu
	done    chan struct{}
	acl     []zk.ACL
	user    string // the digest user, "" without authentication
}

// DialZooKeeper connects to the ensemble and waits (bounded by ctx) until a
// session is established.
func DialZooKeeper(ctx context.Context, cfg ZooKeeperConfig) (*ZooKeeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	conn, events, err := zk.Connect(cfg.Hosts, cfg.SessionTimeout, zk.WithLogger(zkLogger{log}))
	if err != nil {
		return nil, fmt.Errorf("connect zookeeper %v: %w", cfg.Hosts, err)
	}
	acl := zk.WorldACL(zk.PermAll)
	user, password, _ := digestUser(cfg.Auth)
	if cfg.Auth != "" {
		acl = zk.DigestACL(zk.PermAll, user, password)
	}
	z := &ZooKeeper{conn: conn, log: log, ephem: map[string][]byte{}, done: make(chan struct{}), acl: acl}
	if cfg.Auth != "" {
		z.user = user
	}
	z.session.Store(1)
	connected := make(chan struct{})
	go z.loop(events, connected)
	select {
	case <-connected:
	case <-ctx.Done():
		z.Close()
		return nil, fmt.Errorf("connect zookeeper %v: %w", cfg.Hosts, ctx.Err())
	}
	if cfg.Auth != "" {
		// The client remembers the credentials and re-sends them on every
		// reconnect, also into a new session after an expiry, before any
		// queued request (go-zookeeper's resendZkAuth): one AddAuth is
		// enough, and the ephemerals re-created in a new session get the
		// same ACL (TestZooKeeperACLSessionExpiry).
		if err := conn.AddAuth("digest", []byte(cfg.Auth)); err != nil {
			z.Close()
			return nil, fmt.Errorf("connect zookeeper %v: digest authentication as %q: %w", cfg.Hosts, user, err)
		}
		log.Info("zookeeper digest authentication on; Baton's znodes get a digest ACL", "user", user)
	}
	return z, nil
}

func (z *ZooKeeper) loop(events <-chan zk.Event, connected chan struct{}) {
	var once sync.Once
	lost := false
	for {
		select {
		case <-z.done:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Type != zk.EventSession {
				continue
			}
			switch ev.State {
			case zk.StateExpired:
				lost = true
				z.log.Warn("zookeeper session expired")
			case zk.StateHasSession:
				once.Do(func() { close(connected) })
				if lost {
					lost = false
					z.session.Add(1)
					z.log.Info("zookeeper session re-established; re-creating ephemeral znodes")
					go z.recreateEphemerals()
				}
			}
		}
	}
}

func (z *ZooKeeper) recreateEphemerals() {
	z.mu.Lock()
	todo := make(map[string][]byte, len(z.ephem))
	for p, d := range z.ephem {
		todo[p] = d
	}
	z.mu.Unlock()
	for p, d := range todo {
		if _, err := z.conn.Create(p, d, zk.FlagEphemeral, z.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			z.log.Error("re-create ephemeral znode", "path", p, "err", err)
		}
	}
}

type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug(fmt.Sprintf(format, args...), "component", "zookeeper")
}

func mapErr(op, p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%s %s: %w", op, p, ErrNotFound)
	case errors.Is(err, zk.ErrNodeExists):
		return fmt.Errorf("%s %s: %w", op, p, ErrExists)
	case errors.Is(err, zk.ErrBadVersion):
		return fmt.Errorf("%s %s: %w", op, p, ErrBadVersion)
	case errors.Is(err, zk.ErrNotEmpty):
		return fmt.Errorf("%s %s: %w", op, p, ErrNotEmpty)
	case errors.Is(err, zk.ErrClosing):
		return fmt.Errorf("%s %s: %w", op, p, ErrClosed)
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrAuthFailed):
		return fmt.Errorf("zookeeper %s %s: %w (the znode's ACL refuses this client: check the ZooKeeper digest credentials)", op, p, err)
	case isAuthRequired(err):
		return fmt.Errorf("zookeeper %s %s: %w", op, p, ErrAuthRequired)
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrSessionExpired):
		// Transient: the client reconnects; callers retry.
		return fmt.Errorf("zookeeper %s %s: connection lost, retry: %w", op, p, err)
	}
	return fmt.Errorf("zookeeper %s %s: %w", op, p, err)
}

// mapErr is mapErr for an operation of z: once z is closed, a failed
// operation reports ErrClosed, not a transient connection loss to retry.
func (z *ZooKeeper) mapErr(op, p string, err error) error {
	if err != nil && z.isClosed() {
		return fmt.Errorf("%s %s: %w", op, p, ErrClosed)
	}
	return mapErr(op, p, err)
}

func (z *ZooKeeper) isClosed() bool {
	select {
	case <-z.done:
		return true
	default:
		return false
	}
}

// Get implements Store.
func (z *ZooKeeper) Get(_ context.Context, p string) ([]byte, int32, error) {
	data, st, err := z.conn.Get(p)
	if err != nil {
		return nil, 0, z.mapErr("get", p, err)
	}
	return data, st.Version, nil
}

// GetW implements Store. One watch per path is kept: while a watch armed
// by an earlier GetW has not fired, the node is read without arming
// another and that watch's channel is returned (it fires at the next
// change all the same). A loop that re-reads a quiet znode on a timer so
// piles up no watches, which would each hold a goroutine and a watcher in
// the client until the node next changes. A failed read is not cached.
func (z *ZooKeeper) GetW(_ context.Context, p string) ([]byte, int32, <-chan struct{}, error) {
	if ch := z.liveWatch(p); ch != nil {
		data, st, err := z.conn.Get(p)
		switch {
		case err == nil:
			return data, st.Version, ch, nil
		case errors.Is(err, zk.ErrNoNode):
			return nil, 0, ch, z.mapErr("get", p, err)
		default:
			return nil, 0, nil, z.mapErr("get", p, err)
		}
	}
	data, st, ev, err := z.conn.GetW(p)
	if errors.Is(err, zk.ErrNoNode) {
		ok, _, ev2, err2 := z.conn.ExistsW(p)
		if err2 != nil {
			return nil, 0, nil, z.mapErr("exists", p, err2)
		}
		if ok { // created in between: read again
			return z.GetW(context.Background(), p)
		}
		return nil, 0, z.shareWatch(p, ev2), z.mapErr("get", p, err)
	}
	if err != nil {
		return nil, 0, nil, z.mapErr("get", p, err)
	}
	return data, st.Version, z.shareWatch(p, ev), nil
}

// liveWatch returns the channel of p's watch if it has not fired yet.
func (z *ZooKeeper) liveWatch(p string) <-chan struct{} {
	z.wmu.Lock()
	defer z.wmu.Unlock()
	ch := z.watches[p]
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	default:
		return ch
	}
}

// shareWatch turns ev into a channel closed when it fires, kept as p's
// watch until then.
func (z *ZooKeeper) shareWatch(p string, ev <-chan zk.Event) <-chan struct{} {
	ch := make(chan struct{})
	z.wmu.Lock()
	if z.watches == nil {
		z.watches = map[string]chan struct{}{}
	}
	z.watches[p] = ch
	z.wmu.Unlock()
	go func() {
		<-ev
		close(ch)
		z.wmu.Lock()
		if z.watches[p] == ch {
			delete(z.watches, p)
		}
		z.wmu.Unlock()
	}()
	return ch
}

// ChildrenW implements Store, keeping one watch per path as GetW does (the
// two kinds of watch are kept apart).
func (z *ZooKeeper) ChildrenW(_ context.Context, p string) ([]string, <-chan struct{}, error) {
	key := "children\x00" + p
	if ch := z.liveWatch(key); ch != nil {
		c, _, err := z.conn.Children(p)
		switch {
		case err == nil:
			return c, ch, nil
		case errors.Is(err, zk.ErrNoNode):
			return nil, ch, z.mapErr("children", p, err)
		default:
			return nil, nil, z.mapErr("children", p, err)
		}
	}
	c, _, ev, err := z.conn.ChildrenW(p)
	if errors.Is(err, zk.ErrNoNode) {
		ok, _, ev2, err2 := z.conn.ExistsW(p)
		if err2 != nil {
			return nil, nil, z.mapErr("exists", p, err2)
		}
		if ok { // created in between: read again
			return z.ChildrenW(context.Background(), p)
		}
		return nil, z.shareWatch(key, ev2), z.mapErr("children", p, err)
	}
	if err != nil {
		return nil, nil, z.mapErr("children", p, err)
	}
	return c, z.shareWatch(key, ev), nil
}

// Children implements Store.
func (z *ZooKeeper) Children(_ context.Context, p string) ([]string, error) {
	c, _, err := z.conn.Children(p)
	return c, z.mapErr("children", p, err)
}

// Create implements Store.
func (z *ZooKeeper) Create(ctx context.Context, p string, data []byte, mode CreateMode) (string, error) {
	flags := int32(0)
	switch mode {
	case Ephemeral:
		flags = zk.FlagEphemeral
	case EphemeralSequential:
		flags = zk.FlagEphemeral | zk.FlagSequence
	}
	created, err := z.conn.Create(p, data, flags, z.acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err := z.ensure(path.Dir(p)); err != nil {
			return "", err
		}
		created, err = z.conn.Create(p, data, flags, z.acl)
	}
	if err != nil {
		return "", z.mapErr("create", p, err)
	}
	if mode == Ephemeral {
		z.mu.Lock()
		z.ephem[p] = data
		z.mu.Unlock()
	}
	return created, nil
}

// ensure creates p and its parents as empty persistent znodes.
func (z *ZooKeeper) ensure(p string) error {
	if p == "/" || p == "." {
		return nil
	}
	if ok, _, err := z.conn.Exists(p); err != nil {
		return z.mapErr("exists", p, err)
	} else if ok {
		return nil
	}
	if err := z.ensure(path.Dir(p)); err != nil {
		return err
	}
	if _, err := z.conn.Create(p, nil, 0, z.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return z.mapErr("create", p, err)
	}
	return nil
}

// Set implements Store.
func (z *ZooKeeper) Set(_ context.Context, p string, data []byte, v int32) (int32, error) {
	st, err := z.conn.Set(p, data, v)
	if err != nil {
		return 0, z.mapErr("set", p, err)
	}
	z.mu.Lock()
	if _, ok := z.ephem[p]; ok {
		z.ephem[p] = data
	}
	z.mu.Unlock()
	return st.Version, nil
}

// Delete implements Store.
func (z *ZooKeeper) Delete(_ context.Context, p string, v int32) error {
	err := z.conn.Delete(p, v)
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		// Forget it only once it is gone: a refused delete leaves it ours.
		z.mu.Lock()
		delete(z.ephem, p)
		z.mu.Unlock()
	}
	return z.mapErr("delete", p, err)
}

// Multi implements Store.
func (z *ZooKeeper) Multi(_ context.Context, ops ...Op) error {
	req := make([]any, 0, len(ops))
	for _, op := range ops {
		switch op.Kind {
		case OpCheck:
			req = append(req, &zk.CheckVersionRequest{Path: op.Path, Version: op.Version})
		case OpSet:
			req = append(req, &zk.SetDataRequest{Path: op.Path, Data: op.Data, Version: op.Version})
		case OpCreate:
			req = append(req, &zk.CreateRequest{Path: op.Path, Data: op.Data, Acl: z.acl})
		case OpDelete:
			req = append(req, &zk.DeleteRequest{Path: op.Path, Version: op.Version})
		}
	}
	res, err := z.conn.Multi(req...)
	if err == nil {
		return nil
	}
	for i, r := range res {
		if i < len(ops) && (errors.Is(r.Error, zk.ErrNoNode) || errors.Is(r.Error, zk.ErrNodeExists) ||
			errors.Is(r.Error, zk.ErrBadVersion) || errors.Is(r.Error, zk.ErrNotEmpty)) {
			return z.mapErr("multi", ops[i].Path, r.Error)
		}
	}
	return z.mapErr("multi", "", err)
}

// Session implements Store.
func (z *ZooKeeper) Session() int64 { return z.session.Load() }

// Conn exposes the underlying connection (for tests that expire sessions).
func (z *ZooKeeper) Conn() *zk.Conn { return z.conn }

// Close implements Store.
func (z *ZooKeeper) Close() error {
	select {
	case <-z.done:
	default:
		close(z.done)
		z.conn.Close()
	}
	return nil
}
