package egress_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/egress"
)

// TestPublicOnlyChecksTheAddressDialled: a name is refused when it resolves to a private
// address, however public it looks, since the check runs on the address dialled.
func TestPublicOnlyChecksTheAddressDialled(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	_, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a name resolving to loopback is refused", func(t *testing.T) {
		d := &net.Dialer{}
		egress.PublicOnly(d, "webhook")
		_, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
		if err == nil || !strings.Contains(err.Error(), "webhook: address") || !strings.Contains(err.Error(), "not a public address") {
			t.Fatalf("dial: %v", err)
		}
	})
	t.Run("without the guard the same address is reached", func(t *testing.T) {
		c, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	})
	t.Run("what is refused", func(t *testing.T) {
		for addr, blocked := range map[string]bool{"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.0.1": true,
			"169.254.169.254": true, "::1": true, "fd00::1": true, "fe80::1": true, "0.0.0.0": true, "224.0.0.1": true,
			"100.100.100.200": true, "100.64.0.1": true, "198.18.0.1": true, "240.0.0.1": true, "255.255.255.255": true,
			"64:ff9b::a9fe:a9fe": true, "64:ff9b::a00:7": true, "2002:a9fe:a9fe::1": true, "::ffff:10.0.0.1": true, "::a00:1": true,
			"8.8.8.8": false, "2606:4700::1111": false, "100.128.0.1": false} {
			if got := egress.Blocked(net.ParseIP(addr)); got != blocked {
				t.Errorf("%s: blocked %v, want %v", addr, got, blocked)
			}
		}
	})
}
