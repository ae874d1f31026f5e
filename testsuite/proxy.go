package testsuite

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one server, for cutting a
// single process off from it (a network partition) while others still
// reach it directly: give the process Addr instead of the server's.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    bool
	frozen chan struct{} // closed while traffic flows; nil: never frozen
	conns  []net.Conn
	delay  time.Duration // one way, for the connections accepted from now
	sends  atomic.Int64  // reads from the clients' side: their messages, as sent
	// dropAfter, if set, is a client message (matched without regard to
	// case) whose reply is dropped: DropReplyTo.
	dropAfter []byte
	dropped   atomic.Int64
}

// link is the state of one proxied connection.
type link struct {
	dropping atomic.Bool // the server's replies are dropped, and the connection closed
	tail     []byte      // the end of the replies dropped so far (the server→client pipe's)
}

// answered reports whether the replies dropped so far on l, with b, hold
// the completion of a COMMIT (PostgreSQL's CommandComplete "COMMIT"): the
// server has committed.
func (l *link) answered(b []byte) bool {
	l.tail = append(l.tail, b...)
	done := bytes.Contains(l.tail, []byte("COMMIT\x00"))
	l.tail = l.tail[max(0, len(l.tail)-16):]
	return done
}

// StartProxy listens on a free loopback port and forwards every
// connection to target until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsuite: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
	})
	return p
}

// Addr returns the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		if d := p.Latency(); d > 0 {
			go p.delayed(u, c, d, true)
			go p.delayed(c, u, d, false)
			continue
		}
		l := &link{}
		go p.pipe(u, c, true, l)
		go p.pipe(c, u, false, l)
	}
}

func (p *Proxy) pipe(dst, src net.Conn, fromClient bool, l *link) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
	}()
	p.pump(src, fromClient, func(b []byte) error {
		p.mu.Lock()
		thawed := p.frozen
		if fromClient && p.dropAfter != nil && bytes.Contains(bytes.ToUpper(b), p.dropAfter) {
			p.dropAfter = nil
			l.dropping.Store(true)
		}
		p.mu.Unlock()
		if !fromClient && l.dropping.Load() {
			// The reply lost; the connection gone once the server has
			// committed (closed earlier, the server would roll back).
			if l.answered(b) {
				p.dropped.Add(1)
				return net.ErrClosed
			}
			return nil
		}
		if thawed != nil {
			<-thawed // frozen: hold the bytes, send nothing, close nothing
		}
		_, err := dst.Write(b)
		return err
	})
}

// pump reads src until it ends or each fails, counting what a client
// sends (fromClient), and hands each read's bytes to each (its buffer is
// read into again after each returns).
func (p *Proxy) pump(src net.Conn, fromClient bool, each func([]byte) error) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient {
				p.sends.Add(1)
			}
			if each(buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// DropReplyTo arms the proxy once: the next client message containing
// message (e.g. "COMMIT", matched without regard to case) reaches the
// server, but the server's reply does not reach the client: the
// connection is closed once the server has answered a COMMIT, as when a
// network fails between a commit and its acknowledgement.
func (p *Proxy) DropReplyTo(message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAfter = bytes.ToUpper([]byte(message))
}

// Dropped counts the replies dropped (DropReplyTo).
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

// Freeze stops forwarding bytes in both directions without closing any
// connection: to both ends the other has vanished without a word, as when
// a machine loses its network or its power (no FIN, no RST), until Thaw.
// New connections are accepted and frozen too.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = make(chan struct{})
	}
}

// Thaw forwards the held bytes and all that follow.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
}

// Cut closes every proxied connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Restore accepts and forwards connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Sends counts the reads of the proxy from its clients' side: what the
// clients sent, in the pieces they sent it (a client that waits for an
// answer before its next message sends one piece per round trip).
func (p *Proxy) Sends() int64 { return p.sends.Load() }

// SetLatency delays every byte by oneWay in each direction (a round trip
// of twice that, as between two machines of a LAN) on the connections
// accepted from now on; 0 forwards them at once. A connection's bytes
// keep their order. Not with Freeze.
func (p *Proxy) SetLatency(oneWay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = oneWay
}

// Latency is what SetLatency set.
func (p *Proxy) Latency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// delayed is pipe with every read's bytes written d after they were read.
func (p *Proxy) delayed(dst, src net.Conn, d time.Duration, fromClient bool) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	out := make(chan chunk, 1024)
	go func() {
		defer func() {
			_ = dst.Close()
			_ = src.Close()
		}()
		for c := range out {
			// Emulated wire time, not synchronisation: the bytes are
			// due then.
			time.Sleep(time.Until(c.due))
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	defer close(out)
	p.pump(src, fromClient, func(b []byte) error {
		out <- chunk{b: append([]byte(nil), b...), due: time.Now().Add(d)}
		return nil
	})
}
