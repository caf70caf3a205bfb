package throttle

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ipv6Bits is how much of an IPv6 address names one client: a /64 is what one subscriber
// or one host is routed, so counting per full address would let anyone rotate freely.
const ipv6Bits = 64

// ClientAddress is the address a request's limits and log lines are kept under: the TCP
// peer (RemoteAddr), or, when that peer is one of the trusted proxies, the nearest address
// in X-Forwarded-For that is not itself a trusted proxy (read from the right: the entries
// to its left were written by the client and prove nothing). IPv6 addresses are reduced to
// their /64. "" when RemoteAddr cannot be read.
func ClientAddress(r *http.Request, trusted []netip.Prefix) string {
	addr, ok := ClientIP(r, trusted)
	if !ok {
		return ""
	}
	if addr.Is6() {
		p, err := addr.Prefix(ipv6Bits)
		if err == nil {
			return p.String()
		}
	}
	return addr.String()
}

// ClientIP is ClientAddress's address before an IPv6 one is reduced to its /64; ok is
// false when RemoteAddr cannot be read.
func ClientIP(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	addr = addr.Unmap().WithZone("")
	if isTrusted(addr, trusted) {
		entries := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(entries) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(entries[i]))
			if err != nil {
				break // a malformed hop: keep the last address a trusted proxy vouched for
			}
			addr = hop.Unmap().WithZone("")
			if !isTrusted(addr, trusted) {
				break
			}
		}
	}
	return addr, true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseProxies reads a comma-separated list of addresses and CIDR prefixes
// (RELAYROOM_TRUSTED_PROXIES); a bare address is a prefix of its full length.
func ParseProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, err
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
