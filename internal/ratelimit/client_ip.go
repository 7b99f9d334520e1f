package ratelimit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP returns the function that names a request's client. By default
// (no trusted proxies) it is the TCP peer's address: a header is the
// client's own word and cannot be believed. When the peer is one of
// trustedProxies, X-Forwarded-For is read from the right, skipping trusted
// proxies, and the first address not in trustedProxies is the client: only
// the entries our own proxies appended are trusted, so a client that sends
// its own X-Forwarded-For cannot choose its address. A malformed entry ends
// the walk at the last trusted hop.
func ClientIP(trustedProxies []netip.Prefix) func(*http.Request) string {
	trusted := make([]netip.Prefix, 0, len(trustedProxies))
	for _, p := range trustedProxies {
		if p.IsValid() {
			trusted = append(trusted, p.Masked())
		}
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		peer, ok := parseHost(r.RemoteAddr)
		if !ok {
			return r.RemoteAddr
		}
		if !isTrusted(peer) {
			return peer.String()
		}
		client := peer
		values := r.Header.Values("X-Forwarded-For")
		for i := len(values) - 1; i >= 0; i-- {
			hops := strings.Split(values[i], ",")
			for j := len(hops) - 1; j >= 0; j-- {
				hop, ok := parseHost(strings.TrimSpace(hops[j]))
				if !ok {
					return client.String()
				}
				if !isTrusted(hop) {
					return hop.String()
				}
				client = hop
			}
		}
		return client.String()
	}
}

// parseHost reads an address with or without a port ("192.0.2.1",
// "192.0.2.1:443", "2001:db8::1", "[2001:db8::1]:443"), unmapping
// IPv4-mapped IPv6 and dropping any zone.
func parseHost(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}
