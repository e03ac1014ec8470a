package api

import (
	"net"
	"strings"
)

// hostCheck decides which Host headers the API answers: DNS-rebinding
// protection. A browser that a hostile page sends to "evil.example",
// which its DNS points at the planner's address, sends "Host:
// evil.example"; the planner answers only names it knows to be its own.
// IP addresses are always answered: a request to an address names no one
// else's domain, so it cannot be rebound.
type hostCheck struct {
	any   bool
	names map[string]bool
}

func newHostCheck(allowed []string) hostCheck {
	h := hostCheck{names: map[string]bool{}}
	for _, a := range allowed {
		if a == "*" {
			h.any = true
			continue
		}
		if n := normalizeHost(hostOnly(a)); n != "" {
			h.names[n] = true
		}
	}
	return h
}

// allows reports whether the API answers a request with Host header host.
// An empty Host (an HTTP/1.0 client) comes from no browser and is allowed.
func (h hostCheck) allows(host string) bool {
	name := normalizeHost(hostOnly(host))
	switch {
	case name == "", h.any:
		return true
	case net.ParseIP(name) != nil:
		return true
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		// RFC 6761: these resolve to loopback, never through DNS.
		return true
	}
	return h.names[name]
}

// hostOnly is a Host header's or an address's host, without the port and
// an IPv6 address's brackets.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

func normalizeHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
