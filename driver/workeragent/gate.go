package workeragent

import (
	"net"
	"slices"
	"sync"
)

// gate bounds the agent's pending connections: those it has greeted and
// whose request it has not yet authenticated. A new connection never
// waits for a place: it takes the place of the oldest pending connection
// of its own source, when that source holds maxPendingPerSource, or else,
// when maxPending are pending, of the source that holds the most. Idle
// connections, from any number of sources, so cannot keep a launcher
// out: its connection is admitted at once and authenticates within one
// round trip, and only a flood of new connections arriving within that
// round trip (from its own source, or from more sources than the pool has
// places for) could displace it.
type gate struct {
	mu       sync.Mutex
	pending  []*pending // oldest first
	bySource map[string]int
}

// pending is a connection in its handshake.
type pending struct {
	conn   net.Conn
	source string
	shed   bool // displaced by a newer connection; conn is closed
}

// admit makes conn pending, closing the connection it displaces, if any.
func (g *gate) admit(conn net.Conn) *pending {
	p := &pending{conn: conn, source: sourceOf(conn.RemoteAddr())}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bySource == nil {
		g.bySource = map[string]int{}
	}
	if v := g.victim(p.source); v != nil {
		g.remove(v)
		v.shed = true
		v.conn.Close()
	}
	g.pending = append(g.pending, p)
	g.bySource[p.source]++
	return p
}

// victim is the pending connection that a new one from source displaces,
// or nil.
func (g *gate) victim(source string) *pending {
	var from func(*pending) bool
	switch {
	case g.bySource[source] >= maxPendingPerSource:
		from = func(p *pending) bool { return p.source == source }
	case len(g.pending) >= maxPending:
		most := 0
		for _, n := range g.bySource {
			most = max(most, n)
		}
		from = func(p *pending) bool { return g.bySource[p.source] == most }
	default:
		return nil
	}
	if i := slices.IndexFunc(g.pending, from); i >= 0 {
		return g.pending[i]
	}
	return nil
}

// leave ends p's handshake; it says false if a newer connection displaced
// p (whose request, even if it opened, must not run).
func (g *gate) leave(p *pending) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.remove(p)
	return !p.shed
}

func (g *gate) remove(p *pending) {
	i := slices.Index(g.pending, p)
	if i < 0 {
		return
	}
	g.pending = slices.Delete(g.pending, i, i+1)
	if g.bySource[p.source]--; g.bySource[p.source] == 0 {
		delete(g.bySource, p.source)
	}
}

// sourceOf is the source a peer's connections count against: its IPv4
// address, or its IPv6 /64 (a host commonly holds a whole /64).
func sourceOf(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	if ip4 := tcp.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return tcp.IP.Mask(net.CIDRMask(64, 128)).String()
}
