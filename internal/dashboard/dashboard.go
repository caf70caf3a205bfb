// Package dashboard is the people's side of relayroom under /app/ (docs/dashboard.md):
// server-rendered pages (html/template, embedded assets, one small script) over the same
// services and tenancy.Scope as the MCP tools, with live room conversations over
// Server-Sent Events woken by Postgres LISTEN/NOTIFY (Hub).
package dashboard

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/waiters"
	"github.com/relayroom/relayroom/internal/wake"
	"github.com/relayroom/relayroom/internal/web"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Routes. Every page lives under Prefix; Routes lists the patterns the app mounts.
const (
	Prefix      = "/app/"
	RouteAssets = Prefix + "assets/"
	// RouteEvents is a room's live stream: the app exempts it from the per-request
	// limits and deadlines, as it does the pager's long poll (it holds no body, and no
	// database connection while it waits).
	RouteEvents = Prefix + "rooms/:room/events"
)

// Routes are the echo patterns of the dashboard (RouteEvents apart, which is mounted on
// its own so that the app can recognise it).
var Routes = []string{"/app", Prefix, Prefix + "*"}

// StreamLifetime bounds one live stream: the browser reconnects on its own afterwards
// (EventSource, with Last-Event-ID), so a connection never outlives a deploy for long.
const StreamLifetime = 10 * time.Minute

// pingInterval keeps proxies from closing a quiet stream.
const pingInterval = 25 * time.Second

// StreamPushEvery spaces a live stream's reads: after one, the changes of the next second
// are read and sent together. A thread view's read is up to 1 MiB (its page), and a burst
// of replies a quarter of a second apart cost each watching stream a read per reply (and,
// before its event carried only what changed, a send of the page: 16 streams on a 1 MB
// thread took 337 MB for 20 two-byte replies).
const StreamPushEvery = time.Second

// maxFormBytes bounds a posted form: its longest field (a saved reply's body or a
// thread's message, 20,000 characters) URL-encoded at its largest, every byte of a
// four-byte character sent as %XX, and 16 KiB for the other fields. At 128 KiB a body
// at the bound in Chinese (180,000 bytes sent) was refused as a form that could not be
// read, before the field's own bound could say what was wrong.
const maxFormBytes = int64(max(desk.MaxSavedReplyBody, threads.MaxBody)*utf8.UTFMax*len("%XX") + 16<<10)

// liveFetch is how many of the newest messages a wake reads; more between two wakes is
// beyond a conversation's pace, and the page's reload shows them all.
const liveFetch = 50

// Deps are what the pages need: the sign-in site (sessions, CSRF), the resolver that
// turns a person into a Scope, and the services.
type Deps struct {
	Site     *web.Site
	Resolver *tenancy.Resolver
	Rooms    *rooms.Service
	Know     *knowledge.Service
	Threads  *threads.Service // the project pages (projects.go)
	Hub      *Hub
	// Audit reads objects' histories (the "history" template, history.go); Admin and
	// Wake make the company admin pages' changes (admin.go), each audited.
	Audit *audit.Service
	Admin *admin.Service
	Wake  *wake.Service
	Desk  *desk.Service // the desk pages (desk.go)
	// StatementTimeout is the database budget of each page and of each live fetch.
	StatementTimeout time.Duration
	Log              *slog.Logger
}

// Handler serves /app/.
type Handler struct {
	deps   Deps
	pages  map[string]*template.Template
	assets http.Handler

	streams waiters.Slots[uuid.UUID] // live streams open in this process, by person (MaxStreamsPerPerson)
}

var funcs = template.FuncMap{
	"when": func(t any) string { return timeOf(t).Format("2006-01-02 15:04 UTC") },
	"iso":  func(t any) string { return timeOf(t).Format(time.RFC3339) },
	"join": strings.Join,
	"pct":  func(f float64) float64 { return f * 100 },
	// local shows a time in the viewer's timezone (their organisation's), named.
	"local": func(t any, tz string) string { return inZone(timeOf(t), tz).Format("2006-01-02 15:04 MST") },
	// clock is the hour and minute in the viewer's timezone, as the "limited until" badge shows it.
	"clock": func(t any, tz string) string { return inZone(timeOf(t), tz).Format("15:04") },
	"has":   has, // a checkbox's state (admin.go)
	// past reports a time gone by, when the page is made (an invitation's expiry).
	"past": func(t any) bool { return timeOf(t).Before(time.Now()) },
	// maxPost is the composer's bound, the one the rooms service holds.
	"maxPost": func() int { return rooms.MaxPost },
	"inOrg":   inOrg, // a room page's URL with a query, keeping the organisation acted for
}

// inZone is t in the IANA zone tz; an unknown zone shows UTC rather than fail a page.
func inZone(t time.Time, tz string) time.Time {
	loc, err := tenancy.LoadTimezone(tz)
	if err != nil {
		return t.UTC()
	}
	return t.In(loc)
}

// timeOf reads a time or a non-nil time pointer (templates show optional times only
// inside an if), in UTC.
func timeOf(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t.UTC()
	case *time.Time:
		if t != nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// NewHandler builds the pages.
func NewHandler(d Deps) (*Handler, error) {
	h := &Handler{deps: d}
	var err error
	h.pages, err = web.ParsePages(templateFiles, funcs, append([]string{"home", "room", "memory", "knowledge", "tasks", "message", "admin", "invite", "desk", "deskpages"}, projectPages...),
		"templates/layout.html", "templates/history.html", "templates/chart.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	if h.assets, err = web.AssetHandler(assetFiles, RouteAssets); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return h, nil
}

// SecurityHeaders are the sign-in pages' (no framing, no caching, no referrer) with a
// policy that allows this site's own script and its live stream, nothing else.
func SecurityHeaders(hd http.Header) {
	web.SecurityHeaders(hd)
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
}

// view is what every template gets.
type view struct {
	Title   string
	Error   string
	Notice  string
	CSRF    string
	Person  web.Person
	OrgName string
	Message string

	Rooms []rooms.PersonRoom
	Needs []need
	// OrgQ is "?org=…" on the home page when ?org= chose the organisation it acts for:
	// kept on its room links, as roomView.OrgQ is on the room's pages.
	OrgQ string
	// Orgs lists a person's organisations when they have more than one, the one the
	// page acts for first: the home page offers the others (?org=).
	Orgs []tenancy.OrgName
	Room *roomView
	// Project holds what a project's thread pages show (projects.go).
	Project *projectView

	Messages []rooms.Message
	LastID   string

	Memory    []rooms.MemoryItem
	Found     []rooms.MemoryEntry
	Searched  bool
	Filter    memoryFilterView
	Companies []company

	Tasks     []taskRow
	MaxUpload int64
	Roster    []rooms.RosterEntry

	Know *knowledgeView

	History *History    // an object's audit trail (history.go)
	Admin   *adminView  // the company admin pages (admin.go)
	Invite  *inviteView // an invitation link's page (invite.go)
	Desk    *deskView   // the desk pages (desk.go)
	// DeskPage holds the desk's inboxes, saved replies and import (desk_pages.go).
	DeskPage *deskPageView
}

// HeaderOrgQ is the "?org=…" the header's Company admin and Desk links keep: the
// organisation the page acts for when ?org= chose it, so that a person of several
// organisations who picked one is not taken back to their first by the header.
func (v view) HeaderOrgQ() string {
	var room, admin, deskPage string
	if v.Room != nil {
		room = v.Room.OrgQ
	}
	if v.Admin != nil {
		admin = v.Admin.OrgQ
	}
	if v.DeskPage != nil {
		deskPage = v.DeskPage.OrgQ
	}
	return cmp.Or(v.OrgQ, room, admin, deskPage)
}

type roomView struct {
	ID        uuid.UUID
	Name      string
	HostName  string
	OrgName   string
	Role      string
	IsHost    bool
	Tab       string
	CanWrite  bool
	CanMemory bool
	Timezone  string // the viewer's (their organisation's), for times shown
	// OrgQ is "?org=…" when ?org= chose the organisation the page acts for: kept on every
	// link, form and stream of the room's pages, which would otherwise act for the
	// person's first organisation in the room (orgQuery).
	OrgQ string
}

type company struct {
	ID   uuid.UUID
	Name string
}

// roomCompanies is the Memory tab's company filter: every company that can write in the
// room, whatever their number: the host, the viewer's own, then each company with a part
// in the room (the roster, one statement, the room's own page's read), by name. A
// company whose name the viewer may not read (another guest) is listed as the entries
// show it.
// unknownOrg is how the rooms service names a company the reader may not read.
const unknownOrg = "Unknown org"

func roomCompanies(sc tenancy.Scope, roster []rooms.RosterEntry) []company {
	out := []company{{sc.HostOrgID, sc.HostName}}
	seen := map[uuid.UUID]bool{sc.HostOrgID: true}
	if !seen[sc.OrgID] {
		out, seen[sc.OrgID] = append(out, company{sc.OrgID, sc.OrgName}), true
	}
	var parts []company
	for _, p := range roster {
		if !seen[p.OrgID] {
			parts, seen[p.OrgID] = append(parts, company{p.OrgID, cmp.Or(p.OrgName, unknownOrg)}), true
		}
	}
	slices.SortFunc(parts, func(a, b company) int { return cmp.Compare(a.Name, b.Name) })
	return append(out, parts...)
}

type memoryFilterView struct {
	Query, Org, Category, Tag string
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, v view) {
	if err := web.WritePage(w, status, h.pages[name], v, SecurityHeaders); err != nil {
		h.deps.Log.Error("render dashboard page", "page", name, "error", err.Error())
	}
}

func (h *Handler) message(w http.ResponseWriter, status int, sess *web.Session, title, msg string) {
	v := view{Title: title, Message: msg}
	if sess != nil {
		v.Person, v.CSRF = sess.Person, sess.CSRF()
	}
	h.render(w, status, "message", v)
}

func (h *Handler) notFound(w http.ResponseWriter, sess *web.Session) {
	h.message(w, http.StatusNotFound, sess, "Not found", "There is no page here.")
}

// pathID is the id a page's path names. Text that is no id is answered Not Found, as an id
// that names nothing is: ok is false and the answer is written.
func (h *Handler) pathID(w http.ResponseWriter, sess *web.Session, idText string) (uuid.UUID, bool) {
	id, err := uuid.Parse(idText)
	if err != nil {
		h.notFound(w, sess)
		return uuid.Nil, false
	}
	return id, true
}

// unavailable answers a page that could not be served. A spent rate limit (the desk's,
// which the workspace's assistants share) is the person's to wait out, not an outage:
// 429 with its message and Retry-After, and nothing logged as an error.
func (h *Handler) unavailable(w http.ResponseWriter, r *http.Request, sess *web.Session, what string, err error) {
	if e, ok := apperr.As(err); ok && e.Code == apperr.RateLimited {
		msg := e.Message
		if secs, ok := e.Details[httpapi.RetryAfterDetail].(int); ok {
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			msg += fmt.Sprintf(" Please try again in %d s.", secs)
		}
		h.message(w, http.StatusTooManyRequests, sess, "Too many requests", msg)
		return
	}
	h.deps.Log.ErrorContext(r.Context(), "dashboard", "what", what, "error", err.Error())
	h.message(w, http.StatusServiceUnavailable, sess, "Unavailable", "This page is unavailable right now. Please try again.")
}

// ServeHTTP routes /app/… . A person who is not signed in is sent to the sign-in page,
// which returns here.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead && !strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/events") {
		// HEAD is GET without the body (RFC 9110 9.3.2), and net/http writes no body for
		// it whatever the page writes: every page answered HEAD "There is no page here"
		// (404) while its GET answered. Not a live stream, which would be held open.
		r = r.Clone(r.Context())
		r.Method = http.MethodGet
	}
	if strings.HasPrefix(r.URL.Path, RouteAssets) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.assets.ServeHTTP(w, r)
		return
	}
	if link, ok := strings.CutPrefix(r.URL.Path, admin.RouteInvite); ok {
		h.invitePage(w, r, link) // opened by people who may have no account yet
		return
	}
	sess, ok, err := h.deps.Site.Session(r)
	if err != nil {
		h.unavailable(w, r, nil, "session", err)
		return
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/app"), "/"), "/")
	if !ok {
		if len(parts) >= 3 && parts[2] == "events" {
			http.Error(w, "sign in first", http.StatusUnauthorized) // a stream cannot follow a redirect to a form
			return
		}
		if r.Method != http.MethodGet {
			h.message(w, http.StatusUnauthorized, nil, "Signed out", "Your session has ended. Please sign in again.")
			return
		}
		http.Redirect(w, r, web.LoginURL(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	// A file upload is a multipart body of up to the attachment limit: it is read as a
	// stream, with its own CSRF check, not as a form.
	if r.Method == http.MethodPost && isUpload(parts) {
		h.upload(w, r, sess, parts)
		return
	}
	if r.Method == http.MethodPost && isDeskImport(parts) {
		h.deskImport(w, r, sess, parts[2])
		return
	}
	// Every page's query (a search, a filter) and every posted form is read here, so a
	// NUL or invalid UTF-8 is a 400 before any service sees it.
	if err := web.ParseForm(w, r, maxFormBytes); err != nil {
		h.message(w, http.StatusBadRequest, &sess, "Bad request", "The form could not be read.")
		return
	}
	if r.Method == http.MethodPost {
		if !sess.CheckCSRF(r) {
			h.message(w, http.StatusForbidden, &sess, "Form expired", web.MsgFormExpired)
			return
		}
	}
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case len(parts) == 1 && parts[0] == "" && get:
		h.home(w, r, sess)
	case len(parts) >= 2 && parts[0] == "projects":
		h.projects(w, r, sess, parts[1], parts[2:])
	case parts[0] == "admin":
		h.serveAdmin(w, r, sess, parts[1:])
	case parts[0] == "desk" && (len(parts) < 2 || parts[1] != "reports"):
		h.serveDeskPages(w, r, sess, parts[1:])
	case parts[0] == "desk":
		h.serveDesk(w, r, sess, parts[1:])
	case len(parts) >= 2 && parts[0] == "rooms":
		sc, ok := h.room(w, r, sess, parts[1])
		if !ok {
			return
		}
		rest := parts[2:]
		switch {
		case len(rest) == 0 && get:
			h.roomPage(w, r, sess, sc, http.StatusOK, "")
		case len(rest) == 1 && rest[0] == "messages" && post:
			h.post(w, r, sess, sc)
		case len(rest) == 1 && rest[0] == "events" && get:
			h.events(w, r, sess, sc)
		case len(rest) == 1 && rest[0] == "memory" && get:
			h.memory(w, r, sess, sc, http.StatusOK, "", "")
		case len(rest) == 3 && rest[0] == "memory" && rest[2] == "deprecate" && post:
			h.deprecate(w, r, sess, sc, rest[1])
		case len(rest) == 1 && rest[0] == "tasks" && get:
			h.tasksPage(w, r, sess, sc, http.StatusOK, "")
		case len(rest) == 3 && rest[0] == "tasks" && (rest[2] == "review" || rest[2] == "cancel") && post:
			h.taskAction(w, r, sess, sc, rest[1], rest[2])
		case len(rest) >= 1 && rest[0] == "knowledge":
			h.knowledgeRoutes(w, r, sess, sc, rest[1:])
		default:
			h.notFound(w, &sess)
		}
	default:
		h.notFound(w, &sess)
	}
}

// orgQuery is "?org=…" when the request's ?org= names org, the organisation the page acts
// for, else "". A person in more than one organisation of a room (its host's member and a
// guest's) acts for the first unless ?org= says otherwise, so a page that acts for the
// one ?org= chose keeps it on its links, forms, streams and redirects: a form without it
// acted for the other organisation (a message posted from the host's page was the
// guest's).
func orgQuery(r *http.Request, org uuid.UUID) string {
	if want, err := uuid.Parse(r.URL.Query().Get("org")); err == nil && want == org {
		return "?org=" + org.String()
	}
	return ""
}

// inOrg adds orgQ (orgQuery) to u, which may have a query of its own (no fragment).
func inOrg(u, orgQ string) string {
	if orgQ != "" && strings.Contains(u, "?") {
		return u + "&" + orgQ[1:]
	}
	return u + orgQ
}

// orgs returns the person's organisations and the one the page acts for: ?org= when it is
// one of theirs, else their first. An organisation that deactivated the person is not
// theirs here: they act for it in nothing (deactivated says there was one).
func (h *Handler) orgs(r *http.Request, sess web.Session) (out []uuid.UUID, deactivated bool, err error) {
	rows, err := h.deps.Resolver.PersonOrgs(r.Context(), sess.ID)
	if err != nil {
		return nil, false, err
	}
	out = make([]uuid.UUID, 0, len(rows))
	want, _ := uuid.Parse(r.URL.Query().Get("org"))
	for _, o := range rows {
		if o.Deactivated {
			deactivated = true
			continue
		}
		if o.OrgID == want {
			out = append([]uuid.UUID{o.OrgID}, out...)
		} else {
			out = append(out, o.OrgID)
		}
	}
	return out, deactivated, nil
}

// room resolves the person in a room (its id as the path spells it) for the first of
// their organisations that hosts it or has an agreement there. A room none of their organisations has anything to do with
// answers 404, exactly like one that does not exist; a guest organisation whose agreement
// is not active gets the agreement refusal.
func (h *Handler) room(w http.ResponseWriter, r *http.Request, sess web.Session, idText string) (tenancy.Scope, bool) {
	id, ok := h.pathID(w, &sess, idText)
	if !ok {
		return tenancy.Scope{}, false
	}
	orgs, _, err := h.orgs(r, sess)
	if err != nil {
		h.unavailable(w, r, &sess, "organisations", err)
		return tenancy.Scope{}, false
	}
	for _, org := range orgs {
		sc, found, err := h.deps.Resolver.PersonRoom(r.Context(), sess.ID, sess.Person.ID, org, id)
		if err != nil {
			h.unavailable(w, r, &sess, "room", err)
			return tenancy.Scope{}, false
		}
		if !found {
			continue
		}
		if err := sc.Admitted(); err != nil {
			h.message(w, http.StatusForbidden, &sess, sc.ProjectName, tenancy.MsgNoAgreement)
			return tenancy.Scope{}, false
		}
		return sc, true
	}
	h.notFound(w, &sess)
	return tenancy.Scope{}, false
}

func (h *Handler) home(w http.ResponseWriter, r *http.Request, sess web.Session) {
	orgs, deactivated, err := h.orgs(r, sess)
	if err != nil {
		h.unavailable(w, r, &sess, "organisations", err)
		return
	}
	v := view{Title: "Home", Person: sess.Person, CSRF: sess.CSRF()}
	if len(orgs) == 0 {
		v.Message = "You do not belong to any organisation yet."
		if deactivated {
			v.Message = MsgDeactivated
		}
		h.render(w, http.StatusOK, "home", v)
		return
	}
	list, err := h.deps.Rooms.PersonRooms(r.Context(), tenancy.Scope{OrgID: orgs[0]})
	if err != nil {
		h.unavailable(w, r, &sess, "rooms", err)
		return
	}
	v.Rooms, v.OrgQ = list, orgQuery(r, orgs[0])
	if v.Needs, err = h.needs(r, sess, orgs[0], list); err != nil {
		h.unavailable(w, r, &sess, "needs you", err)
		return
	}
	if len(orgs) > 1 {
		if v.Orgs, err = h.deps.Resolver.PersonOrgNames(r.Context(), sess.ID, orgs); err != nil {
			h.unavailable(w, r, &sess, "organisations", err)
			return
		}
	}
	h.render(w, http.StatusOK, "home", v)
}

// need is one line of the home page's "needs you" panel, with the page that deals with it.
type need struct {
	rooms.Need
	Room     string
	RoomName string
	URL      string
	What     string
}

// orgAdmin reports whether the person is an active owner or admin of org.
func (h *Handler) orgAdmin(r *http.Request, sess web.Session, org uuid.UUID) (bool, error) {
	rows, err := h.deps.Resolver.PersonOrgs(r.Context(), sess.ID)
	if err != nil {
		return false, err
	}
	for _, o := range rows {
		if o.OrgID == org && !o.Deactivated && (o.Role == tenancy.RoleOwner || o.Role == tenancy.RoleAdmin) {
			return true, nil
		}
	}
	return false, nil
}

// needs gathers what waits for the person across their organisation's rooms: per room the
// person is resolved as on the room's own pages (one statement) and the room's needs are
// read in one more (rooms.Service.NeedsYou); a guest's pending agreement comes from the
// room list itself.
func (h *Handler) needs(r *http.Request, sess web.Session, org uuid.UUID, list []rooms.PersonRoom) ([]need, error) {
	// An agreement is accepted or chased on the company admin pages: only an owner or
	// admin of the organisation the page acts for is sent there, with that organisation.
	admin, err := h.orgAdmin(r, sess, org)
	if err != nil {
		return nil, err
	}
	inOrg, orgQ := "?org="+org.String(), orgQuery(r, org)
	var out []need
	for _, pr := range list {
		if !pr.IsHost && pr.AgreementStatus == tenancy.AgreementPending {
			if admin {
				out = append(out, need{Need: rooms.Need{Kind: rooms.NeedAgreement, ID: org, Title: pr.HostName}, Room: pr.ID.String(),
					RoomName: pr.Name, URL: agreementURL(pr.ID, org) + inOrg, What: "Agreement waiting for your company's acceptance"})
			}
			continue
		}
		if !pr.IsHost && pr.AgreementStatus != tenancy.AgreementActive {
			continue
		}
		sc, found, err := h.deps.Resolver.PersonRoom(r.Context(), sess.ID, sess.Person.ID, org, pr.ID)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		items, err := h.deps.Rooms.NeedsYou(r.Context(), sc)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			n := need{Need: it, Room: pr.ID.String(), RoomName: pr.Name, URL: roomURL(pr.ID, "") + orgQ}
			switch it.Kind {
			case rooms.NeedThread:
				n.What, n.URL = "Thread flagged for people", projectURL(pr.ID, "threads/"+it.ID.String())+orgQ
			case rooms.NeedTask:
				n.What, n.URL = "Result to accept or reject", roomURL(pr.ID, "tasks")+orgQ+"#task-"+it.ID.String()
			case rooms.NeedKnowledge:
				n.What, n.URL = "Knowledge to review", roomURL(pr.ID, "knowledge")+orgQ+"#k-"+it.ID.String()
			case rooms.NeedAgreement:
				if !admin {
					continue
				}
				// The directory shows the host only the organisations that have parts in the
				// room, so an invited company without any is unnamed.
				n.URL, n.What = agreementURL(pr.ID, it.ID)+inOrg, "Agreement not yet accepted by an invited company"
				if it.Title != "" {
					n.What = "Agreement not yet accepted by " + it.Title
				}
			case rooms.NeedWake:
				n.What, n.URL = "Wake that could not be delivered to "+it.Title, projectURL(pr.ID, "wakes/"+it.ID.String())+orgQ
			}
			out = append(out, n)
		}
	}
	return out, nil
}

func (h *Handler) roomView(r *http.Request, sc tenancy.Scope, tab string) *roomView {
	role := "guest"
	if sc.IsHost() {
		role = "host"
	}
	return &roomView{ID: sc.ProjectID, Name: sc.ProjectName, HostName: sc.HostName, OrgName: sc.OrgName, Role: role,
		IsHost: sc.IsHost(), Tab: tab, OrgQ: orgQuery(r, sc.OrgID), CanWrite: sc.Granted(tenancy.GrantWriteMemory), CanMemory: sc.Granted(tenancy.GrantReadMemory),
		Timezone: sc.Person.Timezone}
}

func (h *Handler) roomPage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, status int, errMsg string) {
	res, err := h.deps.Rooms.GetMessages(r.Context(), sc, liveFetch, "")
	if err != nil {
		h.unavailable(w, r, &sess, "messages", err)
		return
	}
	roster, err := h.deps.Rooms.RosterForPeople(r.Context(), sc)
	if err != nil {
		h.unavailable(w, r, &sess, "roster", err)
		return
	}
	v := view{Title: sc.ProjectName, Person: sess.Person, CSRF: sess.CSRF(), Error: errMsg, Room: h.roomView(r, sc, "conversation"),
		Messages: res.Messages, Roster: roster}
	if n := len(res.Messages); n > 0 {
		v.LastID = res.Messages[n-1].ID
	}
	h.render(w, status, "room", v)
}

// fetched reports a script's post (fetch), answered with a status rather than a page.
func fetched(r *http.Request) bool { return r.Header.Get("X-Requested-With") == "fetch" }

// post stores a person's message through the rooms service: agents read it with
// get_messages as "Name [Organisation] (human)".
func (h *Handler) post(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	// A form sends the textarea's line breaks as CRLF (HTML's form encoding), where its
	// maxlength counted one character each: stored as typed, and counted as the composer
	// counted them.
	content := strings.ReplaceAll(r.PostFormValue("content"), "\r\n", "\n")
	_, err := h.deps.Rooms.PostMessage(r.Context(), sc, content)
	if e, ok := apperr.As(err); ok && e.Code != apperr.Unavailable {
		if fetched(r) {
			http.Error(w, e.Message, http.StatusBadRequest)
			return
		}
		h.roomPage(w, r, sess, sc, http.StatusBadRequest, e.Message)
		return
	}
	if err != nil {
		h.unavailable(w, r, &sess, "post message", err)
		return
	}
	if fetched(r) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, roomURL(sc.ProjectID, "")+orgQuery(r, sc.OrgID), http.StatusSeeOther)
}

func roomURL(id uuid.UUID, tab string) string {
	u := Prefix + "rooms/" + id.String()
	if tab != "" {
		u += "/" + tab
	}
	return u
}

func (h *Handler) memory(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, status int, errMsg, notice string) {
	q := r.URL.Query()
	f := memoryFilterView{Query: strings.TrimSpace(q.Get("q")), Org: q.Get("org_id"), Category: strings.TrimSpace(q.Get("category")), Tag: strings.TrimSpace(q.Get("tag"))}
	if notice == "" && q.Get("notice") == "deprecated" {
		notice = "The entry was marked deprecated: read_memory no longer returns it."
	}
	v := view{Title: sc.ProjectName + " · Memory", Person: sess.Person, CSRF: sess.CSRF(), Error: errMsg, Notice: notice,
		Room: h.roomView(r, sc, "memory"), Filter: f}
	if !sc.Granted(tenancy.GrantReadMemory) {
		v.Message = rooms.MsgNoReadMemory
		h.render(w, http.StatusForbidden, "memory", v)
		return
	}
	roster, err := h.deps.Rooms.RosterForPeople(r.Context(), sc)
	if err != nil {
		h.unavailable(w, r, &sess, "roster", err)
		return
	}
	v.Companies = roomCompanies(sc, roster)
	if f.Query != "" {
		v.Found, err = h.searchMemory(r, sc, f)
		v.Searched = true
	} else {
		mf := rooms.MemoryFilter{Category: f.Category, Tag: f.Tag}
		if id, perr := uuid.Parse(f.Org); perr == nil {
			mf.OrgID = &id
		}
		v.Memory, err = h.deps.Rooms.ListMemory(r.Context(), sc, mf)
	}
	if err == nil {
		v.History, err = h.tabHistory(r, sc, audit.KindMemoryEntry, "m-", "this room's memory entries")
	}
	if err != nil {
		if e, ok := apperr.As(err); ok && e.Code != apperr.Unavailable {
			v.Error = e.Message
			h.render(w, http.StatusBadRequest, "memory", v)
			return
		}
		h.unavailable(w, r, &sess, "memory", err)
		return
	}
	h.render(w, status, "memory", v)
}

// formDone answers a form whose change failed and says whether it succeeded: an object
// that is not there (or not the person's to see) is the 404 page; a refusal is the form's
// page again (again) with the message and its status; anything else is unavailable.
func (h *Handler) formDone(w http.ResponseWriter, r *http.Request, sess web.Session, what string, err error, again func(status int, msg string)) bool {
	e, ok := apperr.As(err)
	switch {
	case err == nil:
		return true
	case ok && e.Code == apperr.NotFound:
		h.notFound(w, &sess)
	case ok && e.Code != apperr.Unavailable:
		again(refusalStatus(e.Code), e.Message)
	default:
		h.unavailable(w, r, &sess, what, err)
	}
	return false
}

func (h *Handler) deprecate(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, idText string) {
	id, ok := h.pathID(w, &sess, idText)
	if !ok {
		return
	}
	ctx := intendInRoom(r.Context(), sc, audit.KindMemoryEntry, id.String(), "deprecated", nil)
	_, err := h.deps.Rooms.DeprecateMemory(ctx, sc, id)
	if !h.formDone(w, r, sess, "deprecate memory", err, func(status int, msg string) { h.memory(w, r, sess, sc, status, msg, "") }) {
		return
	}
	http.Redirect(w, r, pageURL(roomURL(sc.ProjectID, "memory"), orgQuery(r, sc.OrgID), "deprecated"), http.StatusSeeOther)
}

// errStreamGone ends a stream whose person may no longer see the room.
var errStreamGone = errors.New("dashboard: the room is no longer visible")

// budget gives one database budget to a piece of a long request.
func (h *Handler) budget(r *http.Request) *http.Request {
	return r.WithContext(pg.WithBudget(r.Context(), h.deps.StatementTimeout))
}
