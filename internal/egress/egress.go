// Package egress guards the connections the server opens to addresses its tenants name
// (wake webhooks, OAuth client metadata documents): such an address must not reach the
// server's own machine or network (SSRF), so only public addresses are dialled.
package egress

import (
	"fmt"
	"net"
	"net/netip"
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
