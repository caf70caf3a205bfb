// Package web holds the pages people use: sign-in and sign-out now, the dashboard later.
// Server-rendered with html/template and embedded assets; no script is needed anywhere.
// Sessions live in Postgres so every replica knows them (docs/auth.md).
package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/text"
	"github.com/relayroom/relayroom/internal/throttle"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Routes served by the handler.
const (
	RouteLogin   = "/login"
	RouteLogout  = "/logout"
	RouteAccount = "/account"
	RouteAssets  = "/assets/"
)

// SessionPrefix starts a session cookie's value: a credential like the others (checksum,
// public id, hashed at rest), so the logger masks it too.
const SessionPrefix = "qyt_ss_"

// SessionLifetime is how long a sign-in lasts (absolute, not sliding).
const SessionLifetime = 12 * time.Hour

// MsgLoginFailed is the one answer to every failed sign-in: an unknown email, a wrong
// password and a person without a password alike.
const MsgLoginFailed = "Email or password is incorrect."

// MsgFormExpired answers a form posted without its CSRF token (or with another's).
const MsgFormExpired = "This form has expired. Please try again."

const (
	csrfCookie = "rr_csrf" // the sign-in form's double-submit token (no session yet)
	csrfField  = "csrf"
)

// Deps are what the pages need. Throttle counts failed sign-ins per account and per
// client address in the shared Postgres counters (internal/throttle), separate from the
// MCP endpoints' counts by the subjects' names.
type Deps struct {
	DB            *pg.DB
	Q             *db.Queries
	PublicURL     string // https makes cookies Secure
	Throttle      *throttle.Throttle
	ClientAddress func(*http.Request) string
	Log           *slog.Logger
}

// Site serves the pages and tells other surfaces (the authorization server's consent) who
// is signed in.
type Site struct {
	deps   Deps
	pages  map[string]*template.Template
	secure bool
	assets http.Handler
	// dummyHash is verified when the email is unknown, so that a failure takes as long
	// whether or not the person exists. Made on first use: hashing costs every server
	// start ~50 ms of CPU and 64 MiB otherwise.
	dummyOnce sync.Once
	dummyHash string
}

// Person is a signed-in person.
type Person struct {
	ID    uuid.UUID
	Email string
	Name  string
}

// Session is a request's verified session.
type Session struct {
	Person
	ID  string // public id
	raw string // the cookie's value: its hash keys the CSRF tokens of session forms
}

// NewHandler builds the pages.
func NewHandler(d Deps) (*Site, error) {
	if d.Q == nil {
		d.Q = db.New()
	}
	s := &Site{deps: d, secure: strings.HasPrefix(strings.ToLower(d.PublicURL), "https://")}
	var err error
	if s.pages, err = ParsePages(templateFiles, nil, []string{"login", "account", "message", "consent"}, "templates/layout.html"); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if s.assets, err = AssetHandler(assetFiles, RouteAssets); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	return s, nil
}

// ServeHTTP serves the sign-in pages and the assets.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, RouteAssets):
		w.Header().Set("Cache-Control", "public, max-age=3600")
		s.assets.ServeHTTP(w, r)
	case r.URL.Path == RouteLogin && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.loginPage(w, r)
	case r.URL.Path == RouteLogin && r.Method == http.MethodPost:
		s.login(w, r)
	case r.URL.Path == RouteLogin:
		w.Header().Set("Allow", "GET, HEAD, POST")
		s.Message(w, http.StatusMethodNotAllowed, "Not allowed", "This page is opened or posted to, nothing else.")
	case r.URL.Path == RouteLogout && r.Method == http.MethodPost:
		s.logout(w, r)
	case (r.URL.Path == RouteLogout || r.URL.Path == RouteAccount) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.account(w, r)
	case r.URL.Path == RouteLogout:
		w.Header().Set("Allow", "GET, HEAD, POST")
		s.Message(w, http.StatusMethodNotAllowed, "Not allowed", "This page is opened or posted to, nothing else.")
	case r.URL.Path == RouteAccount:
		w.Header().Set("Allow", "GET, HEAD")
		s.Message(w, http.StatusMethodNotAllowed, "Not allowed", "This page is only opened.")
	default:
		s.Message(w, http.StatusNotFound, "Not found", "There is no page here.")
	}
}

// page is what every template gets.
type page struct {
	Title   string
	Error   string
	CSRF    string
	Return  string
	Email   string
	Message string
	Person  Person
	Consent *Consent
}

func (s *Site) render(w http.ResponseWriter, status int, name string, p page) {
	if err := WritePage(w, status, s.pages[name], p, SecurityHeaders); err != nil {
		s.deps.Log.Error("render page", "page", name, "error", err.Error())
	}
}

// ReferrerPolicy keeps page addresses from other sites while letting the browser name
// this site's origin on its own form posts (see SecurityHeaders).
const ReferrerPolicy = "same-origin"

// SecurityHeaders are set on every page: no framing (clickjacking a consent button), no
// script, no caching of personal pages, no referrer carrying codes or ids to another site.
// The referrer policy is same-origin, not no-referrer: under no-referrer Chromium sends
// "Origin: null" with the page's own form posts, which the origin check must refuse, so
// nobody could sign in with it.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", ReferrerPolicy)
	h.Set("Cache-Control", "no-store")
}

// Message renders a page with one paragraph.
func (s *Site) Message(w http.ResponseWriter, status int, title, msg string) {
	s.render(w, status, "message", page{Title: title, Message: msg})
}

func (s *Site) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode}
}

// SecureCookies reports whether the site's cookies are marked Secure: the public URL is
// https. Not the request's own TLS, which a proxy in front ends before the request
// arrives here.
func (s *Site) SecureCookies() bool { return s.secure }

func (s *Site) sessionCookieName() string {
	if s.secure {
		return "__Host-rr_session" // bound to this host, Secure and Path=/ by the browser's rules
	}
	return "rr_session"
}

// safeReturn keeps a return address on this site: a path (and query), never another host.
// Browsers drop tabs and newlines from a URL and read a backslash as a slash, so
// "/\t/evil.example" or "/\\evil.example" would leave the site; any control character or
// backslash is refused outright. What is left must parse as a path with no scheme or host,
// and is rebuilt from its path and query, so nothing the parser passed over survives.
func safeReturn(v string) string {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 0x20 || b == 0x7f || b == '\\' {
			return RouteAccount
		}
	}
	if !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") {
		return RouteAccount
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return RouteAccount
	}
	return u.RequestURI()
}

// LoginURL is the sign-in page that returns to path afterwards.
func LoginURL(returnTo string) string { return RouteLogin + "?return=" + url.QueryEscape(returnTo) }

func (s *Site) loginPage(w http.ResponseWriter, r *http.Request) {
	ret := safeReturn(r.URL.Query().Get("return"))
	if _, ok, err := s.Session(r); err == nil && ok {
		http.Redirect(w, r, ret, http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, ret, "", "")
}

func (s *Site) renderLogin(w http.ResponseWriter, r *http.Request, status int, ret, email, msg string) {
	token := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		token = c.Value
	} else {
		b := make([]byte, 16)
		_, _ = rand.Read(b) // crypto/rand does not fail on Linux
		token = hex.EncodeToString(b)
		http.SetCookie(w, s.cookie(csrfCookie, token, int(SessionLifetime.Seconds())))
	}
	s.render(w, status, "login", page{Title: "Sign in", Error: msg, CSRF: token, Return: ret, Email: email})
}

func sha256Sum(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// accountKey names an account in the failed sign-in counters: a digest of the email, so
// no address is stored, with a prefix no agent key id has (ids have no dot).
func accountKey(email string) string {
	return "login." + hex.EncodeToString(sha256Sum(email))[:24]
}

func (s *Site) login(w http.ResponseWriter, r *http.Request) {
	if err := ParseForm(w, r, 16<<10); err != nil {
		s.Message(w, http.StatusBadRequest, "Sign in", "The form could not be read.")
		return
	}
	ret := safeReturn(r.PostFormValue("return"))
	email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
	password := r.PostFormValue("password")
	c, err := r.Cookie(csrfCookie)
	if err != nil || !equal(c.Value, r.PostFormValue(csrfField)) {
		s.renderLogin(w, r, http.StatusForbidden, ret, email, MsgFormExpired)
		return
	}
	ctx := r.Context()
	// The sign-in counts are kept apart from the MCP endpoints' by their subjects: the
	// address gets a "login/" prefix, the account a "login." key.
	at := throttle.Attempt{Address: "login/" + s.deps.ClientAddress(r), KeyID: accountKey(email), Credential: "login\x00" + email + "\x00" + password}
	if err := s.deps.Throttle.Admit(ctx, at); err != nil {
		if e, ok := apperr.As(err); ok {
			if secs, ok := e.Details["retry_after_seconds"].(int); ok {
				w.Header().Set("Retry-After", fmt.Sprint(secs))
			}
		}
		s.renderLogin(w, r, http.StatusTooManyRequests, ret, email, "Too many failed sign-ins. Please wait a few minutes and try again.")
		return
	}
	person, err := s.checkPassword(ctx, email, password)
	if errors.Is(err, auth.ErrPasswordMismatch) {
		s.deps.Throttle.Refused(ctx, at)
		s.renderLogin(w, r, http.StatusUnauthorized, ret, email, MsgLoginFailed)
		return
	}
	if err != nil {
		s.deps.Log.ErrorContext(ctx, "sign-in failed", "error", err.Error())
		s.renderLogin(w, r, http.StatusServiceUnavailable, ret, email, "Sign-in is unavailable right now. Please try again.")
		return
	}
	s.deps.Throttle.Verified(ctx, at)
	raw, parsed, err := auth.Generate(SessionPrefix)
	if err == nil {
		err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: parsed.ID}, func(tx *pg.Tx) error {
			return s.deps.Q.WebSessionInsert(ctx, tx, db.WebSessionInsertParams{SessionID: parsed.ID, SecretHash: parsed.Hash(), UserID: person, ExpiresAt: time.Now().Add(SessionLifetime)})
		})
	}
	if err != nil {
		s.deps.Log.ErrorContext(ctx, "create session", "error", err.Error())
		s.renderLogin(w, r, http.StatusServiceUnavailable, ret, email, "Sign-in is unavailable right now. Please try again.")
		return
	}
	http.SetCookie(w, s.cookie(s.sessionCookieName(), raw, int(SessionLifetime.Seconds())))
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

// checkPassword returns the person whose email and password these are, or
// auth.ErrPasswordMismatch for anything else (unknown email, no password set).
func (s *Site) checkPassword(ctx context.Context, email, password string) (uuid.UUID, error) {
	var row db.PersonGetByEmailRow
	found := false
	// An email is named in app.lookup, which splits on commas: one with a comma cannot be
	// a person's (and is refused like any unknown email).
	if email != "" && !strings.Contains(email, ",") {
		err := s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: email}, func(tx *pg.Tx) error {
			var err error
			row, err = s.deps.Q.PersonGetByEmail(ctx, tx, email)
			return err
		})
		switch {
		case err == nil:
			found = row.PasswordHash != nil
		case pg.IsNoRows(err):
		default:
			return uuid.Nil, fmt.Errorf("sign in: %w", err)
		}
	}
	if !found {
		s.dummyOnce.Do(func() {
			var err error
			if s.dummyHash, err = auth.HashPassword("not a password anyone has"); err != nil {
				s.deps.Log.ErrorContext(ctx, "sign in: dummy hash", "error", err.Error())
			}
		})
		_ = auth.VerifyPassword(s.dummyHash, password) // same time as a real check; the answer is no regardless
		return uuid.Nil, auth.ErrPasswordMismatch
	}
	if err := auth.VerifyPassword(*row.PasswordHash, password); err != nil {
		if errors.Is(err, auth.ErrPasswordMismatch) {
			return uuid.Nil, err
		}
		return uuid.Nil, fmt.Errorf("sign in: %w", err)
	}
	return row.ID, nil
}

// Session returns the request's signed-in person, if any. An error is an infrastructure
// failure; an absent, expired or unknown cookie is ok=false.
func (s *Site) Session(r *http.Request) (Session, bool, error) {
	c, err := r.Cookie(s.sessionCookieName())
	if err != nil {
		return Session{}, false, nil
	}
	p, err := auth.Parse(SessionPrefix, c.Value)
	if err != nil {
		return Session{}, false, nil
	}
	ctx := r.Context()
	var rows []db.WebSessionRowsRow
	err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: p.ID, SignIn: true}, func(tx *pg.Tx) error {
		var err error
		rows, err = s.deps.Q.WebSessionRows(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return Session{}, false, fmt.Errorf("read session: %w", err)
	}
	for _, row := range rows {
		if p.Matches(row.SecretHash) {
			return Session{Person: Person{ID: row.UserID, Email: row.Email, Name: audit.PersonName(row.Name, row.Email)}, ID: p.ID, raw: c.Value}, true, nil
		}
	}
	return Session{}, false, nil
}

// ParseForm reads a posted form of at most maxBytes and refuses one whose fields (or
// query parameters) are not storable text: a NUL or invalid UTF-8 would otherwise fail
// inside the database as an internal error. Every page that takes a form reads it here.
func ParseForm(w http.ResponseWriter, r *http.Request, maxBytes int64) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBytes)
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("web: read form: %w", err)
	}
	for name, values := range r.Form {
		if err := text.Check(name); err != nil {
			return fmt.Errorf("web: a field name %w", err)
		}
		for _, v := range values {
			if err := text.Check(v); err != nil {
				return fmt.Errorf("web: field %q %w", name, err)
			}
		}
	}
	return nil
}

// CSRF is the token of the session's forms: derived from the session's secret, so it
// cannot be known without the cookie and needs no storage.
func (sess Session) CSRF() string {
	return hex.EncodeToString(sha256Sum("csrf\x00" + sess.raw))[:32]
}

// CheckCSRF reports whether a posted form carries the session's token.
func (sess Session) CheckCSRF(r *http.Request) bool {
	return equal(sess.CSRF(), r.PostFormValue(csrfField))
}

// Tenant is the lookup tenant that shows a session's person and their memberships.
func (sess Session) Tenant() pg.Tenant { return pg.Tenant{Lookup: sess.ID, SignIn: true} }

func (s *Site) account(w http.ResponseWriter, r *http.Request) {
	sess, ok, err := s.Session(r)
	if err != nil {
		s.deps.Log.ErrorContext(r.Context(), "account page", "error", err.Error())
		s.Message(w, http.StatusServiceUnavailable, "Account", "This page is unavailable right now. Please try again.")
		return
	}
	if !ok {
		http.Redirect(w, r, LoginURL(RouteAccount), http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "account", page{Title: "Account", CSRF: sess.CSRF(), Person: sess.Person})
}

func (s *Site) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	sess, ok, err := s.Session(r)
	if err != nil {
		s.deps.Log.ErrorContext(r.Context(), "sign out", "error", err.Error())
		s.Message(w, http.StatusServiceUnavailable, "Sign out", "Signing out is unavailable right now. Please try again.")
		return
	}
	if ok {
		if !sess.CheckCSRF(r) {
			s.render(w, http.StatusForbidden, "account", page{Title: "Account", Error: MsgFormExpired, CSRF: sess.CSRF(), Person: sess.Person})
			return
		}
		ctx := r.Context()
		if err := s.deps.DB.InTenant(ctx, sess.Tenant(), func(tx *pg.Tx) error {
			return s.deps.Q.WebSessionDelete(ctx, tx, sess.ID)
		}); err != nil {
			s.deps.Log.ErrorContext(ctx, "sign out", "error", err.Error())
			s.Message(w, http.StatusServiceUnavailable, "Sign out", "Signing out is unavailable right now. Please try again.")
			return
		}
	}
	http.SetCookie(w, s.cookie(s.sessionCookieName(), "", -1))
	// The consent page's "Not you?" signs out and back in to the same authorization:
	// without the way back the person landed on their account, and the client waited
	// until its request expired.
	if ret := r.PostFormValue("return"); ret != "" {
		http.Redirect(w, r, LoginURL(safeReturn(ret)), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, RouteLogin, http.StatusSeeOther)
}

// Consent is what the consent page shows (filled by the authorization server).
type Consent struct {
	RequestID  string
	ClientName string
	// NamedBy is the host whose metadata document names the client (its client_id is that
	// document's URL), "" for a client that registered: either way the name is the app's
	// own word, and the page says whose.
	NamedBy      string
	RedirectHost string
	Resource     string // the endpoint in words
	Question     string
	Choices      []Choice
	Scopes       []string
	Empty        string // shown when there is nothing to choose
}

// Choice is one option of a consent: who the token acts as.
type Choice struct {
	Value string
	Label string
}

// RenderConsent shows a consent page to a signed-in person.
func (s *Site) RenderConsent(w http.ResponseWriter, status int, sess Session, c Consent, errMsg string) {
	s.render(w, status, "consent", page{Title: "Allow access?", Error: errMsg, CSRF: sess.CSRF(), Person: sess.Person, Consent: &c})
}
