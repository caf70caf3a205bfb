package testfix

import (
	"io"
	"net"
	"net/http"
	"testing"
)

// Do sends req with c and returns the answer's status, headers and whole body, failing
// the test when the request or the read fails.
func Do(t testing.TB, c *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, Body(t, resp)
}

// Get is Do of a GET of url, without the headers.
func Get(t testing.TB, c *http.Client, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := Do(t, c, req)
	return status, body
}

// Body reads and closes resp's body.
func Body(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FreeLoopback asks the kernel for a free port on 127.0.0.1 and returns its address, for a
// server a test starts by address (a replica, a pager's target).
func FreeLoopback(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
