// Package egress guards the connections the server opens to addresses its tenants name
// (wake webhooks, OAuth client metadata documents): such an address must not reach the
// server's own machine or network (SSRF), so only public addresses are dialled.
package egress

import (
	"fmt"
	"net"
	"syscall"
)

// Blocked reports whether ip is one a tenant-named connection must never reach:
// loopback, private, link-local (the cloud metadata service among them), unspecified and
// multicast addresses.
func Blocked(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast()
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
