package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

// validateAccess checks the settings that say who may read the API and
// what jobs may make the planner touch: tokens, allowed hosts, checkpoint
// and delivery directories, webhook hosts.
func (c *Config) validateAccess(errAt func(key, summary, detail string)) {
	if c.ReadToken != "" && c.ReadToken == c.Token {
		errAt("read_token", "Invalid read_token", "read_token is the same as token: give it a value of its own (the token reads too).")
	}
	for _, l := range []struct {
		key, example string
		dirs         []string
	}{{"checkpoint_dirs", "/shared/checkpoints", c.CheckpointDirs}, {"nomad_alloc_dirs", "/var/lib/nomad/alloc", c.NomadAllocDirs},
		{"delivery_roots", "/models", c.DeliveryRoots}} {
		for _, d := range l.dirs {
			if !filepath.IsAbs(d) {
				errAt(l.key, "Invalid "+l.key, fmt.Sprintf("%q: give absolute directories, e.g. %q.", d, l.example))
				break
			}
		}
	}
	for _, h := range c.WebhookHosts {
		if !validHostPattern(h, true) {
			errAt("webhook_hosts", "Invalid webhook_hosts", fmt.Sprintf("%q: give host names or addresses, optionally with a port or a leading \"*.\", e.g. \"hooks.example\", \"*.hooks.example:8443\".", h))
			break
		}
	}
	for _, h := range c.AllowedHosts {
		if h != "*" && !validHostPattern(h, false) {
			errAt("allowed_hosts", "Invalid allowed_hosts", fmt.Sprintf("%q: give host names the API is reached by, e.g. \"planner.example\", or \"*\" for any.", h))
			break
		}
	}
}

// validHostPattern reports whether s is a host, "host:port", or (with
// wildcard) "*.domain" with an optional port.
func validHostPattern(s string, wildcard bool) bool {
	host := s
	if h, port, err := net.SplitHostPort(s); err == nil {
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return false
		}
		host = h
	}
	if wildcard {
		host = strings.TrimPrefix(host, "*.")
	}
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" || len(host) > 253 || strings.ContainsAny(host, "*/@?#[] ") {
		return false
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// APIHosts are the host names the API answers to: allowed_hosts, and the
// hosts of bind_addr and advertise_addr; with a wildcard bind_addr and no
// advertise_addr, also the machine's hostname (the address the training
// tasks are given). localhost and IP addresses need no entry.
func (c *Config) APIHosts(hostname func() (string, error)) []string {
	out := append([]string(nil), c.AllowedHosts...)
	bind, _, _ := net.SplitHostPort(c.BindAddr)
	if ip := net.ParseIP(bind); bind == "" || ip != nil && ip.IsUnspecified() {
		if c.AdvertiseAddr == "" {
			if h, err := hostname(); err == nil {
				out = append(out, h)
			}
		}
	} else {
		out = append(out, bind)
	}
	if c.AdvertiseAddr != "" {
		if n, err := NormalizeAddr(c.AdvertiseAddr); err == nil {
			if u, err := url.Parse(n); err == nil {
				out = append(out, u.Hostname())
			}
		}
	}
	return out
}
