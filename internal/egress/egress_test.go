package egress_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
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
			"64:ff9b::a9fe:a9fe": true, "64:ff9b::a00:7": true, "2002:a9fe:a9fe::1": true, "::ffff:10.0.0.1": true, "::a00:1": true, "fec0::1": true,
			"8.8.8.8": false, "2606:4700::1111": false, "100.128.0.1": false} {
			if got := egress.Blocked(net.ParseIP(addr)); got != blocked {
				t.Errorf("%s: blocked %v, want %v", addr, got, blocked)
			}
		}
	})
}

// TestTransportThroughAProxy: through the operator's proxy (an address of its own, often
// private) the proxy is reached, and the target is checked by its name's addresses before
// the request is handed over; without one, the target is checked as it is dialled.
func TestTransportThroughAProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string // the targets the proxy was asked for
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.String())
		mu.Unlock()
		_, _ = io.WriteString(w, "via the proxy")
	}))
	t.Cleanup(proxy.Close)
	proxyURL, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	get := func(tr *http.Transport, target string) (string, error) {
		res, err := (&http.Client{Transport: tr}).Get(target)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	viaProxy := egress.Transport(&net.Dialer{}, http.ProxyURL(proxyURL), "webhook")
	t.Run("a public target goes to the proxy, itself on loopback", func(t *testing.T) {
		body, err := get(viaProxy, "http://8.8.8.8/hook")
		if err != nil || body != "via the proxy" {
			t.Fatalf("%q, %v", body, err)
		}
	})
	t.Run("a target whose name is loopback never reaches the proxy", func(t *testing.T) {
		mu.Lock()
		before := len(asked)
		mu.Unlock()
		for _, target := range []string{"http://localhost/hook", "http://127.0.0.1/hook", "http://[::1]/hook"} {
			if _, err := get(viaProxy, target); err == nil || !strings.Contains(err.Error(), "not a public address") {
				t.Errorf("%s: %v", target, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) != before {
			t.Fatalf("the proxy was asked for %v", asked[before:])
		}
	})
	t.Run("without a proxy the address dialled is checked", func(t *testing.T) {
		if _, err := get(egress.Transport(&net.Dialer{}, nil, "webhook"), proxy.URL); err == nil || !strings.Contains(err.Error(), "not a public address") {
			t.Fatalf("a loopback target: %v", err)
		}
	})
}
