package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"

	"github.com/relayroom/relayroom/internal/admin"
)

// The demo's connected app: the company admin's Connected apps page lists the OAuth
// clients an organisation's people consented to, so a fresh demo connects one the way an
// MCP client does (docs/auth.md): it registers, the host's first person with a password
// signs in and allows it on the consent page. The consent is the row the page shows; no
// code is exchanged (nothing would use the token).

// demoAppName is the client the demo connects, as the Connected apps page names it.
const demoAppName = "Demo MCP client"

// demoAppCallback is where the consent sends the browser back: a loopback address, as
// native clients register; nothing listens there and nothing follows the redirect.
const demoAppCallback = "http://127.0.0.1:53682/callback"

var (
	demoFormCSRF   = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	demoFormChoice = regexp.MustCompile(`name="choice" value="([^"]+)"`)
	demoFormScope  = regexp.MustCompile(`name="scope" value="([^"]+)"`)
)

// seedConnectedApp registers demoAppName and has the host's first person with a password
// allow it to use the rooms endpoint for the first agent the consent page offers.
func seedConnectedApp(ctx context.Context, public string, file admin.File, host string) error {
	var email, password string
	for _, u := range file.Users {
		if u.Org == host && u.Password != "" {
			email, password = u.Email, u.Password
			break
		}
	}
	if email == "" {
		return nil // nobody of the host can sign in: no consent to give
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	// Redirects are followed on the server only: the last one goes to the client's callback.
	c := &http.Client{Jar: jar, Timeout: demoCallTimeout, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), public) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	reg, err := json.Marshal(map[string]any{"client_name": demoAppName, "redirect_uris": []string{demoAppCallback}, "token_endpoint_auth_method": "none"})
	if err != nil {
		return err
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	status, body, _, err := demoHTTP(ctx, c, http.MethodPost, public+"/register", "application/json", string(reg))
	if err != nil || status != http.StatusCreated || json.Unmarshal([]byte(body), &client) != nil || client.ClientID == "" {
		return fmt.Errorf("connected app demo: register: %d %v: %s", status, err, body)
	}
	verifier := make([]byte, 32)
	if _, err := rand.Read(verifier); err != nil {
		return err
	}
	challenge := sha256.Sum256([]byte(base64.RawURLEncoding.EncodeToString(verifier)))
	auth := url.Values{"response_type": {"code"}, "client_id": {client.ClientID}, "redirect_uri": {demoAppCallback}, "state": {"demo"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"},
		"resource": {public + "/api/mcp"}, "scope": {"rooms"}}
	_, body, at, err := demoHTTP(ctx, c, http.MethodGet, public+"/authorize?"+auth.Encode(), "", "")
	if err != nil {
		return err
	}
	if at.Path == "/login" {
		form := url.Values{"email": {email}, "password": {password}, "csrf": {demoField(demoFormCSRF, body)}, "return": {at.Query().Get("return")}}
		if _, body, at, err = demoHTTP(ctx, c, http.MethodPost, public+"/login", "application/x-www-form-urlencoded", form.Encode()); err != nil {
			return err
		}
	}
	choice := demoField(demoFormChoice, body)
	if at.Path != "/consent" || choice == "" {
		return fmt.Errorf("connected app demo: no consent page to allow at %s: %s", at, body)
	}
	form := url.Values{"csrf": {demoField(demoFormCSRF, body)}, "id": {at.Query().Get("id")}, "choice": {choice}, "decision": {"allow"}}
	for _, m := range demoFormScope.FindAllStringSubmatch(body, -1) {
		form.Add("scope", html.UnescapeString(m[1]))
	}
	status, body, _, err = demoHTTP(ctx, c, http.MethodPost, public+"/consent", "application/x-www-form-urlencoded", form.Encode())
	if err != nil || status != http.StatusSeeOther {
		return fmt.Errorf("connected app demo: consent answered %d %v: %s", status, err, body)
	}
	return nil
}

// demoHTTP sends one request as the demo's browser and returns the status, the body and
// the address of the page that answered.
func demoHTTP(ctx context.Context, c *http.Client, method, u, contentType, body string) (int, string, *url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Origin", req.URL.Scheme+"://"+req.URL.Host)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", nil, fmt.Errorf("connected app demo: %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", nil, fmt.Errorf("connected app demo: %s %s: %w", method, u, err)
	}
	return resp.StatusCode, string(raw), resp.Request.URL, nil
}

// demoField is the first match of a form field's value on a page, unescaped ("" when absent).
func demoField(re *regexp.Regexp, page string) string {
	if m := re.FindStringSubmatch(page); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}
