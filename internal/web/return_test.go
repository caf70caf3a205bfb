package web

import "testing"

// TestSafeReturn: the sign-in page's return address stays on this site, whatever a link
// puts in it; browsers strip tabs and newlines and read a backslash as a slash, so those
// must not open a way to another host.
func TestSafeReturn(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"a path with its query is kept", "/authorize?client_id=rrc_1&state=a%2Fb", "/authorize?client_id=rrc_1&state=a%2Fb"},
		{"a room page is kept", "/app/rooms/launch", "/app/rooms/launch"},
		{"another host is refused", "https://evil.example/x", RouteAccount},
		{"a scheme-relative address is refused", "//evil.example/x", RouteAccount},
		{"a tab between the slashes is refused", "/\t/evil.example/x", RouteAccount},
		{"a newline between the slashes is refused", "/\n/evil.example/x", RouteAccount},
		{"a backslash is refused", "/\\evil.example/x", RouteAccount},
		{"a DEL byte is refused", "/\x7f/evil.example", RouteAccount},
		{"a relative path is refused", "app/rooms", RouteAccount},
		{"nothing gives the account page", "", RouteAccount},
		{"an escaped second slash is refused too", "/%2F/evil.example", RouteAccount},
		{"a fragment is dropped", "/app/rooms#x", "/app/rooms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := safeReturn(c.in); got != c.want {
				t.Fatalf("safeReturn(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
