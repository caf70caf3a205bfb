package pg

import (
	"errors"
	"fmt"
	"net/url"
)

// ParseURL parses a database URL. Its error never holds the URL: net/url's quotes the
// whole of it, password included, and a password with an unencoded % or / (or a typo in
// the port) put it on stderr, in the log that collects serve's and migrate's output.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err == nil {
		return u, nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return nil, fmt.Errorf("does not parse: %w (percent-encode any special character of the user name or password)", ue.Err)
	}
	return nil, errors.New("does not parse")
}
