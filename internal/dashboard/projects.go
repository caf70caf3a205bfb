package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/threads"
	"github.com/relayroom/relayroom/internal/web"
)

// A project's thread pages, under /app/projects/{id}/ (docs/dashboard.md): the threads
// list and thread view, the roster, the activity feed and usage. A project is a room: the
// person is resolved in it exactly as on the room's pages (Handler.room), and every read
// goes through the threads or rooms service under that Scope.

// RouteProjectEvents is a project's live stream (the activity feed, or a thread's view
// with ?thread=): like RouteEvents, the app exempts it from the per-request limits.
const RouteProjectEvents = Prefix + "projects/:project/events"

// projectPages are the templates of these pages (with templates/layout.html).
var projectPages = []string{"threads", "thread", "roster", "activity", "usage", "wake"}

// projectView is what the project pages add to view.
type projectView struct {
	Filter   threadFilterView
	Statuses []string // the status filter's choices
	Parts    []string
	EndedBy  string // who ended the thread shown
	Threads  []threads.PersonThread
	Thread   *threads.PersonThreadView
	Live     string // the page's live stream, if any
	Roster   []rosterRow
	Activity []activityRow
	Usage    *usageView
	Wake     *wakeView
}

type threadFilterView struct {
	Status, Part string
	Flagged      bool
}

// threadStatuses are the list's status filter's choices.
var threadStatuses = []string{threads.StatusOpen, threads.StatusClosed, threads.StatusCanceled}

// projects routes /app/projects/{id}/… once the person is resolved in the project.
func (h *Handler) projects(w http.ResponseWriter, r *http.Request, sess web.Session, idText string, rest []string) {
	sc, ok := h.room(w, r, sess, idText)
	if !ok {
		return
	}
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case len(rest) == 0 && get:
		http.Redirect(w, r, projectURL(sc.ProjectID, "threads")+orgQuery(r, sc.OrgID), http.StatusSeeOther)
	case len(rest) == 1 && rest[0] == "threads" && get:
		h.threadsPage(w, r, sess, sc)
	case len(rest) == 2 && rest[0] == "threads" && get:
		h.threadPage(w, r, sess, sc, rest[1], http.StatusOK, "")
	case len(rest) == 3 && rest[0] == "threads" && rest[2] == "cancel" && post:
		h.cancelThread(w, r, sess, sc, rest[1])
	case len(rest) == 1 && rest[0] == "roster" && get:
		h.rosterPage(w, r, sess, sc)
	case len(rest) == 1 && rest[0] == "activity" && get:
		h.activityPage(w, r, sess, sc)
	case len(rest) == 1 && rest[0] == "events" && get:
		h.projectEvents(w, r, sess, sc)
	case len(rest) == 1 && rest[0] == "usage" && get:
		h.usagePage(w, r, sess, sc)
	case len(rest) == 1 && rest[0] == "usage.csv" && get:
		h.usageCSV(w, r, sess, sc)
	case len(rest) == 2 && rest[0] == "wakes" && get:
		h.wakePage(w, r, sess, sc, rest[1], http.StatusOK, "")
	case len(rest) == 3 && rest[0] == "wakes" && rest[2] == "retry" && post:
		h.retryWake(w, r, sess, sc, rest[1])
	default:
		h.notFound(w, &sess)
	}
}

func projectURL(id uuid.UUID, page string) string {
	return Prefix + "projects/" + id.String() + "/" + page
}

// projectPage starts a project page's view.
func (h *Handler) projectPage(r *http.Request, sess web.Session, sc tenancy.Scope, tab, title string) view {
	return view{Title: sc.ProjectName + " · " + title, Person: sess.Person, CSRF: sess.CSRF(), Room: h.roomView(r, sc, tab), Project: &projectView{}}
}

// serviceError shows a service's refusal on the page (status by its code), a missing id
// as the 404 page, and anything else as unavailable.
func (h *Handler) serviceError(w http.ResponseWriter, r *http.Request, sess web.Session, what string, err error, page string, v view) {
	e, ok := apperr.As(err)
	switch {
	case ok && e.Code == apperr.NotFound:
		h.notFound(w, &sess)
	case ok && e.Code != apperr.Unavailable:
		v.Error = e.Message
		h.render(w, refusalStatus(e.Code), page, v)
	default:
		h.unavailable(w, r, &sess, what, err)
	}
}

// refusalStatus is the HTTP status of a page showing a service's refusal.
func refusalStatus(code apperr.Code) int {
	switch code {
	case apperr.Forbidden:
		return http.StatusForbidden
	case apperr.Conflict:
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// threadsPage is the thread list with its filters (status, part, flagged needsHuman).
func (h *Handler) threadsPage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	q := r.URL.Query()
	f := threadFilterView{Status: q.Get("status"), Part: strings.TrimSpace(q.Get("part")), Flagged: q.Get("flagged") != ""}
	v := h.projectPage(r, sess, sc, "threads", "Threads")
	v.Project.Filter, v.Project.Statuses = f, threadStatuses
	roster, err := h.deps.Rooms.RosterForPeople(r.Context(), sc)
	if err != nil {
		h.unavailable(w, r, &sess, "roster", err)
		return
	}
	for _, p := range roster {
		v.Project.Parts = append(v.Project.Parts, p.Part)
	}
	if f.Status != "" && !slices.Contains(threadStatuses, f.Status) {
		v.Error = "Choose a status from the list."
		h.render(w, http.StatusBadRequest, "threads", v)
		return
	}
	list, err := h.deps.Threads.ThreadsForPeople(r.Context(), sc, threads.ThreadFilter{Status: f.Status, Part: f.Part, Flagged: f.Flagged})
	if err != nil {
		h.serviceError(w, r, sess, "threads", err, "threads", v)
		return
	}
	v.Project.Threads = list
	h.render(w, http.StatusOK, "threads", v)
}

// threadNotices are the thread view's notices after a form (?notice=).
var threadNotices = map[string]string{
	threads.StatusCanceled: "The thread was canceled: it left every inbox, and agents are told it was canceled.",
}

// threadPage is a thread with its messages, who read each, and who is composing (live).
func (h *Handler) threadPage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, threadID string, status int, errMsg string) {
	v := h.projectPage(r, sess, sc, "threads", "Thread")
	v.Error, v.Notice = errMsg, threadNotices[r.URL.Query().Get("notice")]
	t, err := h.deps.Threads.ThreadForPeople(r.Context(), sc, threadID)
	if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid {
		h.notFound(w, &sess) // a malformed id is no thread
		return
	}
	if err != nil {
		h.serviceError(w, r, sess, "thread", err, "thread", v)
		return
	}
	v.Title = sc.ProjectName + " · " + t.Subject
	v.Project.Thread = &t
	if t.ClosedBy != nil {
		v.Project.EndedBy = endedBy[*t.ClosedBy]
	}
	v.Project.Live = inOrg(projectURL(sc.ProjectID, "events")+"?thread="+url.QueryEscape(t.ID.String()), v.Room.OrgQ)
	v.History, err = h.history(r, sc.Tenant(), audit.Object{OrgID: sc.HostOrgID, Kind: audit.KindThread, ID: t.ID.String()}, "this thread", sc.Person.Timezone)
	if err != nil {
		h.unavailable(w, r, &sess, "thread", err)
		return
	}
	h.render(w, status, "thread", v)
}

// endedBy says who ended a thread (thread.closed_by).
var endedBy = map[string]string{"agent": "an agent (close)", "idle": "the idle auto-close", "person": "a person (cancel)"}

// cancelThread cancels a thread on the person's behalf (threads.Service.CancelByPerson).
func (h *Handler) cancelThread(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, threadID string) {
	ctx := intendInRoom(r.Context(), sc, audit.KindThread, threadID, threads.StatusCanceled, nil)
	_, err := h.deps.Threads.CancelByPerson(ctx, sc, threadID)
	if e, ok := apperr.As(err); ok && e.Code == apperr.Invalid { // not a thread id: no such thread
		h.notFound(w, &sess)
		return
	}
	if !h.formDone(w, r, sess, "cancel thread", err, func(status int, msg string) { h.threadPage(w, r, sess, sc, threadID, status, msg) }) {
		return
	}
	http.Redirect(w, r, pageURL(projectURL(sc.ProjectID, "threads/"+url.PathEscape(threadID)), orgQuery(r, sc.OrgID), threads.StatusCanceled), http.StatusSeeOther)
}

// rosterRow is a part with its online state (a call in the last threads.OnlineWindow).
type rosterRow struct {
	rooms.RosterEntry
	Online bool
}

func rosterRows(list []rooms.RosterEntry, now time.Time) []rosterRow {
	out := make([]rosterRow, len(list))
	for i, e := range list {
		out[i] = rosterRow{RosterEntry: e, Online: e.LastSeenAt != nil && now.Sub(*e.LastSeenAt) < threads.OnlineWindow}
	}
	return out
}

// rosterPage is the project's parts: online, last seen, and the amber "limited until"
// badge while a part is parked, in the viewer's timezone (the room's roster, the same read).
func (h *Handler) rosterPage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	v := h.projectPage(r, sess, sc, "roster", "Roster")
	list, err := h.deps.Rooms.RosterForPeople(r.Context(), sc)
	if err != nil {
		h.unavailable(w, r, &sess, "roster", err)
		return
	}
	v.Project.Roster = rosterRows(list, time.Now())
	h.render(w, http.StatusOK, "roster", v)
}

// activityPage is the activity feed: the project's events, newest first, live.
func (h *Handler) activityPage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	v := h.projectPage(r, sess, sc, "activity", "Activity")
	list, err := h.deps.Threads.ActivityForPeople(r.Context(), sc, uuid.Nil, nil)
	if err != nil {
		h.serviceError(w, r, sess, "activity", err, "activity", v)
		return
	}
	v.Project.Activity = activityRows(list)
	after := ""
	if len(list) > 0 {
		after = list[0].ID.String()
	}
	v.Project.Live = inOrg(projectURL(sc.ProjectID, "events")+"?after="+after, v.Room.OrgQ)
	h.render(w, http.StatusOK, "activity", v)
}
