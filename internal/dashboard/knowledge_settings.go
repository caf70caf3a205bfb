package dashboard

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/web"
)

// blankRuleRows is how many empty rule rows the settings form offers for new rules.
const blankRuleRows = 3

// settingsForm is the knowledge settings page: distillOnClose as stored, the redaction
// rules as rows (plus blank ones to add), and a refusal beside its field.
type settingsForm struct {
	DistillOnClose bool
	Rules          []secrets.Rule
	RulesErr       string // the stored value is not a list of rules
	Field          string
	Message        string
}

// settingsPage shows the project's knowledge settings to its reviewers (the host's owners
// and admins); anyone else gets the reviewers' refusal.
func (h *Handler) settingsPage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, status int, posted *settingsForm) {
	v := h.knowledgeBase(r, sess, sc, "Knowledge settings", knowledgeSettings)
	v.Notice = knowledgeNotices[r.URL.Query().Get("notice")]
	st, err := h.deps.Know.Settings(r.Context(), sc)
	if h.knowledgeRefused(w, r, sess, v, "knowledge settings", err) {
		return
	}
	f := settingsForm{DistillOnClose: st.DistillOnClose, Rules: st.Rules, RulesErr: st.RulesErr}
	if posted != nil {
		// A refused save shows what the person typed, beside the refusal.
		f.Rules, f.Field, f.Message = posted.Rules, posted.Field, posted.Message
		f.DistillOnClose = posted.DistillOnClose
	}
	for range blankRuleRows {
		f.Rules = append(f.Rules, secrets.Rule{})
	}
	v.Know.Settings = f
	v.History, err = h.history(r, sc.Tenant(), audit.Object{OrgID: sc.HostOrgID, Kind: audit.KindKnowledgeSettings, ID: sc.ProjectID.String()},
		"the knowledge settings", sc.Person.Timezone)
	if err != nil {
		h.unavailable(w, r, &sess, "knowledge settings", err)
		return
	}
	h.render(w, status, "knowledge", v)
}

// saveSettings merges the page into the project's settings (knowledge.Service.SaveSettings):
// distillOnClose is written only when the person changed it from what the page showed
// (distill_was), so a value set by SQL meanwhile survives a save of the rules.
func (h *Handler) saveSettings(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope) {
	distill := r.PostFormValue("distill_on_close") == "on"
	was := r.PostFormValue("distill_was") == "true"
	change := knowledge.SettingsChange{Rules: postedRules(r)}
	if distill != was {
		change.DistillOnClose = &distill
	}
	detail := map[string]string{"redactionRules": strconv.Itoa(len(change.Rules))}
	if change.DistillOnClose != nil {
		detail["distillOnClose"] = strconv.FormatBool(distill)
	}
	ctx := intendInRoom(r.Context(), sc, audit.KindKnowledgeSettings, sc.ProjectID.String(), "saved", detail)
	err := h.deps.Know.SaveSettings(ctx, sc, change)
	if !h.formDone(w, r, sess, "save knowledge settings", err, func(status int, msg string) {
		if status == http.StatusForbidden {
			h.settingsPage(w, r, sess, sc, status, nil) // the page says who may change them
			return
		}
		h.settingsPage(w, r, sess, sc, http.StatusBadRequest, &settingsForm{DistillOnClose: distill, Rules: change.Rules,
			Field: knowledge.ErrorField(err), Message: msg})
	}) {
		return
	}
	http.Redirect(w, r, pageURL(roomURL(sc.ProjectID, "knowledge/settings"), orgQuery(r, sc.OrgID), "settings"), http.StatusSeeOther)
}

// postedRules reads the rule rows (name_N, pattern_N, replacement_N for N below
// rule_rows); a row left entirely blank is no rule. At most MaxRedactionRules+blank rows
// are read, so a crafted count costs nothing.
func postedRules(r *http.Request) []secrets.Rule {
	n, _ := strconv.Atoi(r.PostFormValue("rule_rows")) // not a number: no rows
	n = min(max(n, 0), knowledge.MaxRedactionRules+blankRuleRows+1)
	var out []secrets.Rule
	for i := range n {
		s := strconv.Itoa(i)
		rule := secrets.Rule{Name: strings.TrimSpace(r.PostFormValue("name_" + s)), Pattern: r.PostFormValue("pattern_" + s),
			Replacement: r.PostFormValue("replacement_" + s)}
		if rule.Name == "" && rule.Pattern == "" && rule.Replacement == "" {
			continue
		}
		out = append(out, rule)
	}
	return out
}
