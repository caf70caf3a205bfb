package testfix

// Mistype changes a credential's last character to a different one, for a test of a
// refused credential: a plain "+x" is the same credential one time in 62.
func Mistype(s string) string {
	if s[len(s)-1] == 'x' {
		return s[:len(s)-1] + "y"
	}
	return s[:len(s)-1] + "x"
}
