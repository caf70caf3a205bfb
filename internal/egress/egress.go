// Package egress guards the connections the server opens to addresses its tenants name
// (wake webhooks, OAuth client metadata documents): such an address must not reach the
// server's own machine or network (SSRF), so only public addresses are dialled.
package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"syscall"
)

// Blocked reports whether ip is one a tenant-named connection must never reach:
// loopback, private, link-local (the cloud metadata service among them), unspecified and
// multicast addresses, the other special-purpose ranges that are not the public internet
// (shared address space, where some clouds keep their metadata service, benchmarking,
// documentation, reserved), and IPv6 addresses that carry an IPv4 one (NAT64, 6to4),
// which a gateway would turn into any of those.
func Blocked(ip net.IP) bool {
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return true
	}
	addr = addr.Unmap()
	for _, p := range nonPublic() {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// nonPublic are the special-purpose ranges (IANA's registries) that the net.IP methods
// above leave out.
func nonPublic() []netip.Prefix {
	return []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier NAT; Alibaba Cloud's metadata service)
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
		netip.MustParsePrefix("64:ff9b::/96"),    // NAT64, well-known prefix
		netip.MustParsePrefix("64:ff9b:1::/48"),  // NAT64, local use
		netip.MustParsePrefix("2002::/16"),       // 6to4
		netip.MustParsePrefix("2001:db8::/32"),   // documentation
		netip.MustParsePrefix("100::/64"),        // discard
		netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
		netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated, still routed inside some networks)
	}
}

// PublicOnly makes d refuse every address Blocked refuses. It is checked on the address
// actually dialled, after name resolution, so a name that resolves to a private address
// (or is rebound to one between a check and the connection) is refused too. what names
// the connection in the refusal ("webhook").
func PublicOnly(d *net.Dialer, what string) {
	d.Control = func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		if ip := net.ParseIP(host); ip == nil || Blocked(ip) {
			return fmt.Errorf("%s: address %s is not a public address", what, host)
		}
		return nil
	}
}

// Transport is an http.Transport for connections to addresses tenants name. A direct
// connection dials public addresses only (PublicOnly). Through a proxy (proxy answers a
// URL: the operator's egress proxy, from the environment), the connection is the
// proxy's, an address of the operator's own: it is dialled as it is, and the target is
// checked before the request is handed to the proxy instead, every address its name
// resolves to (the proxy resolves it again: a name rebound in between is the one case
// this cannot see). proxy may be nil (no proxy).
func Transport(d *net.Dialer, proxy func(*http.Request) (*url.URL, error), what string) *http.Transport {
	direct := *d
	PublicOnly(&direct, what)
	var proxies sync.Map // host:port of the proxies handed out: dialled as they are
	t := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if _, ok := proxies.Load(addr); ok {
				return d.DialContext(ctx, network, addr)
			}
			return direct.DialContext(ctx, network, addr)
		},
	}
	if proxy != nil {
		t.Proxy = func(req *http.Request) (*url.URL, error) {
			u, err := proxy(req)
			if err != nil || u == nil {
				return u, err
			}
			if err := checkHost(req.Context(), req.URL.Hostname(), what); err != nil {
				return nil, err
			}
			proxies.Store(hostPort(u), true)
			return u, nil
		}
	}
	return t
}

// checkHost refuses a host that is, or whose name resolves to, an address Blocked refuses.
func checkHost(ctx context.Context, host, what string) error {
	if ip := net.ParseIP(host); ip != nil {
		if Blocked(ip) {
			return fmt.Errorf("%s: address %s is not a public address", what, host)
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return fmt.Errorf("%s: resolve %s: %w", what, host, err)
	}
	for _, a := range addrs {
		if Blocked(a.IP) {
			return fmt.Errorf("%s: address %s of %s is not a public address", what, a.IP, host)
		}
	}
	return nil
}

// hostPort is a proxy URL's address as the transport dials it.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}
