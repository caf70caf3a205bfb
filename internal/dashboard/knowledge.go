package dashboard

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/web"
)

// knowledgeList bounds each list of the Knowledge tab.
const knowledgeList = 50

// Pages of the Knowledge tab: they share one template (knowledge.html), which picks the
// page by knowledgeView.Page.
const (
	knowledgeMain     = "main"
	knowledgeThread   = "thread"
	knowledgeSettings = "settings"
)

// Notices of the Knowledge tab after a form (?notice=).
var knowledgeNotices = map[string]string{
	"approved": "The entry was approved: recall returns it.",
	"rejected": "The entry was rejected.",
	"demoted":  "The entry was demoted: recall no longer returns it until it is approved again.",
	"expired":  "The expiry was saved.",
	"settings": "The knowledge settings were saved.",
	// "decided" is what earlier pages linked to.
	"decided": "Decision saved.",
}

// knowledgeView is what the Knowledge tab's pages show.
type knowledgeView struct {
	Page       string
	CanDecide  bool
	Candidates []reviewCard
	Demoted    []reviewCard
	Trusted    []knowledge.Review
	Learning   knowledge.Learning
	DayChart   chart
	WeekChart  chart
	// Field is the refusal of one entry's form, shown beside its field; Title keeps what
	// the person typed.
	Field    fieldError
	Citation knowledge.Citation
	Settings settingsForm
}

// reviewCard is an entry of the review queue with what its forms need.
type reviewCard struct {
	knowledge.Review
	Room              uuid.UUID
	OrgQ              string // the room's (roomView.OrgQ)
	IsHost, CanDecide bool
	CSRF              string
	Field             fieldError // this entry's refused field, if any
}

func reviewCards(v view, list []knowledge.Review) []reviewCard {
	out := make([]reviewCard, len(list))
	for i, rv := range list {
		out[i] = reviewCard{Review: rv, Room: v.Room.ID, OrgQ: v.Room.OrgQ, IsHost: v.Room.IsHost, CanDecide: v.Know.CanDecide, CSRF: v.CSRF}
		if v.Know.Field.Entry == rv.ID {
			out[i].Field = v.Know.Field
		}
	}
	return out
}

// OriginalOnPage reports whether the entry this card near-duplicates is one the page
// lists (candidates, demoted and trusted entries), so that the card can link to it.
func (c reviewCard) OriginalOnPage() bool {
	return c.DuplicateOfStatus != nil && slices.Contains([]string{knowledge.StatusCandidate, knowledge.StatusDemoted, knowledge.StatusTrusted}, *c.DuplicateOfStatus)
}

// OriginalStatus is the state of the entry this card near-duplicates ("rejected": the
// same text was turned down before).
func (c reviewCard) OriginalStatus() string {
	if c.DuplicateOfStatus == nil {
		return ""
	}
	return *c.DuplicateOfStatus
}

// fieldError is a refused form's message beside the field it is about.
type fieldError struct {
	Entry   uuid.UUID
	Field   string
	Message string
	Value   string
}

// knowledgeRoutes serves everything under /app/rooms/{id}/knowledge.
func (h *Handler) knowledgeRoutes(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, rest []string) {
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case len(rest) == 0 && get:
		h.knowledgePage(w, r, sess, sc, http.StatusOK, "", fieldError{})
	case len(rest) == 1 && rest[0] == "settings" && get:
		h.settingsPage(w, r, sess, sc, http.StatusOK, nil)
	case len(rest) == 1 && rest[0] == "settings" && post:
		h.saveSettings(w, r, sess, sc)
	case len(rest) == 2 && rest[1] == "thread" && get:
		h.citedThread(w, r, sess, sc, rest[0])
	case len(rest) == 2 && post:
		h.knowledgeAction(w, r, sess, sc, rest[0], rest[1])
	default:
		h.notFound(w, &sess)
	}
}

func (h *Handler) knowledgeBase(r *http.Request, sess web.Session, sc tenancy.Scope, title, page string) view {
	return view{Title: sc.ProjectName + " · " + title, Person: sess.Person, CSRF: sess.CSRF(), Room: h.roomView(r, sc, "knowledge"),
		Know: &knowledgeView{Page: page, CanDecide: sc.IsHost() && sc.IsOrgAdmin()}}
}

// knowledgePage is the Learning panel (recall hit rate per day and week, as charts with
// their tables, and the queries that returned nothing), the review queue (candidates to
// approve, with their title editable, or reject; demoted entries to approve again) and
// the trusted entries (demote, expire).
func (h *Handler) knowledgePage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, status int, errMsg string, fe fieldError) {
	v := h.knowledgeBase(r, sess, sc, "Knowledge", knowledgeMain)
	v.Error, v.Know.Field = errMsg, fe
	v.Notice = knowledgeNotices[r.URL.Query().Get("notice")]
	k, ctx := v.Know, r.Context()
	var (
		err                 error
		candidates, demoted []knowledge.Review
	)
	if k.Learning, err = h.deps.Know.Learning(ctx, sc, time.Now()); err == nil {
		if candidates, err = h.deps.Know.ReviewQueue(ctx, sc, knowledge.StatusCandidate, knowledgeList); err == nil {
			if demoted, err = h.deps.Know.ReviewQueue(ctx, sc, knowledge.StatusDemoted, knowledgeList); err == nil {
				k.Trusted, err = h.deps.Know.ReviewQueue(ctx, sc, knowledge.StatusTrusted, knowledgeList)
			}
		}
	}
	k.Candidates, k.Demoted = reviewCards(v, candidates), reviewCards(v, demoted)
	if h.knowledgeRefused(w, r, sess, v, "knowledge", err) {
		return
	}
	if v.History, err = h.tabHistory(r, sc, audit.KindKnowledge, "k-", "this project's knowledge"); err != nil {
		h.unavailable(w, r, &sess, "knowledge", err)
		return
	}
	k.DayChart = hitRateChart("rate-day", "Recall hit rate per day", "Day",
		fmt.Sprintf("Recall hit rate per day, last %d days", len(k.Learning.Days)), k.Learning.Days)
	k.WeekChart = hitRateChart("rate-week", "Recall hit rate per week", "Week of",
		fmt.Sprintf("Recall hit rate per week (from Monday), last %d weeks", len(k.Learning.Weeks)), k.Learning.Weeks)
	h.render(w, status, "knowledge", v)
}

// knowledgeRefused answers a Knowledge tab page whose read failed, reporting whether it
// did: the service's refusal (not a reviewer) is the tab with its message, anything else
// the page's unavailable answer naming what.
func (h *Handler) knowledgeRefused(w http.ResponseWriter, r *http.Request, sess web.Session, v view, what string, err error) bool {
	if e, ok := apperr.As(err); ok && e.Code == apperr.Forbidden {
		v.Message = e.Message
		h.render(w, http.StatusForbidden, "knowledge", v)
		return true
	}
	if err != nil {
		h.unavailable(w, r, &sess, what, err)
		return true
	}
	return false
}

// knowledgeActions names each knowledge form's change in the audit trail.
var knowledgeActions = map[string]string{"approve": "approved", "reject": "rejected", "demote": "demoted", "expire": "expired"}

// knowledgeAction approves (with the title as edited), rejects, demotes or expires an
// entry. Only the host's owners and admins may (the service decides); a refusal of a
// field is shown beside it, nothing changed.
func (h *Handler) knowledgeAction(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, idText, action string) {
	id, ok := h.pathID(w, &sess, idText)
	if !ok {
		return
	}
	var err error
	fe := fieldError{Entry: id}
	ctx := r.Context()
	if past, ok := knowledgeActions[action]; ok {
		// No title in the detail: the service redacts it, the audit would not.
		ctx = intendInRoom(ctx, sc, audit.KindKnowledge, id.String(), past, nil)
	}
	switch action {
	case "approve":
		fe.Value = r.PostFormValue("title")
		_, err = h.deps.Know.ApproveAs(ctx, sc, id, fe.Value)
		action = "approved"
	case "reject":
		_, err = h.deps.Know.Decide(ctx, sc, id, false)
		action = "rejected"
	case "demote":
		_, err = h.deps.Know.Demote(ctx, sc, id)
		action = "demoted"
	case "expire":
		fe.Value = strings.TrimSpace(r.PostFormValue("expires_at"))
		var at time.Time
		if at, err = parseLocal(fe.Value, sc.Person.Timezone); err == nil {
			_, err = h.deps.Know.Expire(ctx, sc, id, at)
		}
		action = "expired"
	default:
		h.notFound(w, &sess)
		return
	}
	if !h.formDone(w, r, sess, "knowledge "+action, err, func(status int, msg string) {
		if fe.Field = knowledge.ErrorField(err); fe.Field != "" {
			fe.Message = msg
			h.knowledgePage(w, r, sess, sc, status, "", fe)
			return
		}
		h.knowledgePage(w, r, sess, sc, status, msg, fieldError{})
	}) {
		return
	}
	http.Redirect(w, r, pageURL(roomURL(sc.ProjectID, "knowledge"), orgQuery(r, sc.OrgID), action)+"#k-"+id.String(), http.StatusSeeOther)
}

// localInput is the format of a datetime-local field.
const localInput = "2006-01-02T15:04"

// parseLocal reads a datetime-local field in the viewer's timezone; blank is the zero
// time (now, for an expiry).
func parseLocal(v, tz string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	loc, err := tenancy.LoadTimezone(tz)
	if err != nil {
		loc = time.UTC
	}
	t, err := time.ParseInLocation(localInput, v, loc)
	if err != nil {
		return time.Time{}, knowledge.FieldError(knowledge.FieldExpiresAt, "the expiry must be a date and time such as 2026-12-31T17:00 (got %q)", v)
	}
	return t, nil
}

// citedThread shows the thread a lesson cites, for its reviewers.
func (h *Handler) citedThread(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, idText string) {
	id, ok := h.pathID(w, &sess, idText)
	if !ok {
		return
	}
	c, err := h.deps.Know.Cited(r.Context(), sc, id)
	if e, ok := apperr.As(err); ok && e.Code == apperr.NotFound {
		h.notFound(w, &sess)
		return
	}
	if err != nil {
		h.unavailable(w, r, &sess, "cited thread", err)
		return
	}
	v := h.knowledgeBase(r, sess, sc, "Thread cited by “"+c.Title+"”", knowledgeThread)
	v.Know.Citation = c
	h.render(w, http.StatusOK, "knowledge", v)
}

// hitRateChart charts the hit rate of each bucket (0–100 %). A bucket without recalls has
// no bar and "–" for its rate, so "no data" never reads as 0 %.
func hitRateChart(id, title, rowHead, caption string, buckets []knowledge.Bucket) chart {
	percent := func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }
	in := chartInput{ID: id, Title: title, RowHead: rowHead, Series: []string{"Hit rate"}, Top: 1, Format: percent, Axis: percent,
		Columns: []string{"Returned", "Used", "Hit rate"}}
	for _, bk := range buckets {
		b := chartBucket{Key: bk.Start.Format(time.DateOnly), Label: bk.Start.Format("01-02"),
			Cells: []string{strconv.FormatInt(bk.Returned, 10), strconv.FormatInt(bk.Used, 10), "–"}}
		if bk.Returned > 0 {
			b.Values = []float64{bk.Rate}
			b.Note = fmt.Sprintf("%s: %d of %d used (%s)", b.Key, bk.Used, bk.Returned, percent(bk.Rate))
			b.Cells[2] = percent(bk.Rate)
		}
		in.Buckets = append(in.Buckets, b)
	}
	c := layoutChart(in)
	c.Caption = caption
	return c
}
