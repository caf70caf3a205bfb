package dashboard

import (
	"net/http"
	"net/url"

	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/web"
)

// Notices of the Tasks tab after a form (?notice=).
var taskNotices = map[string]string{
	"accepted": "The result was accepted.",
	"rejected": "The result was rejected.",
	"canceled": "The task was canceled.",
	"uploaded": "The file was attached to the task.",
}

// uploadRefusal is a refused upload, shown beside the task's file field.
type uploadRefusal struct {
	Task    string
	Message string
}

// tasksPage is the Tasks tab: every task the person's company may see, with its state,
// assignee, deadline, files, the full result, and the forms to accept, reject or cancel.
func (h *Handler) tasksPage(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, status int, errMsg string) {
	h.tasksPageWith(w, r, sess, sc, status, errMsg, uploadRefusal{})
}

// tasksPageWith is the Tasks tab with a refused upload beside its task's file field.
func (h *Handler) tasksPageWith(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, status int, errMsg string, up uploadRefusal) {
	v := view{Title: sc.ProjectName + " · Tasks", Person: sess.Person, CSRF: sess.CSRF(), Error: errMsg,
		Notice: taskNotices[r.URL.Query().Get("notice")], Room: h.roomView(r, sc, "tasks")}
	list, err := h.deps.Rooms.TasksForPeople(r.Context(), sc)
	if err != nil {
		h.unavailable(w, r, &sess, "tasks", err)
		return
	}
	v.Tasks = taskRows(sc, list)
	if v.History, err = h.tabHistory(r, sc, audit.KindTask, "task-", "this room's tasks"); err != nil {
		h.unavailable(w, r, &sess, "tasks", err)
		return
	}
	for i := range v.Tasks {
		if up.Message != "" && v.Tasks[i].ID.String() == up.Task && v.Tasks[i].CanUpload {
			v.Tasks[i].UploadError, up.Message = up.Message, ""
		}
	}
	if up.Message != "" { // a task without the person's file field: said at the top
		v.Error = up.Message
	}
	v.MaxUpload = h.deps.Rooms.MaxAttachment()
	h.render(w, status, "tasks", v)
}

// taskAction accepts or rejects a done result (the sending company's people) or cancels a
// task (the sending company's or the host's people). A task the person may not see answers
// 404, as a missing one does; a refusal is shown on the tab, nothing changed.
func (h *Handler) taskAction(w http.ResponseWriter, r *http.Request, sess web.Session, sc tenancy.Scope, taskID, action string) {
	var err error
	notice := action
	switch action {
	case "review":
		notice = r.PostFormValue("verdict")
		ctx := intendInRoom(r.Context(), sc, audit.KindTask, taskID, notice, nil)
		_, err = h.deps.Rooms.ReviewTask(ctx, sc, taskID, notice, r.PostFormValue("comment"))
	case "cancel":
		notice = "canceled"
		err = h.deps.Rooms.CancelTask(intendInRoom(r.Context(), sc, audit.KindTask, taskID, notice, nil), sc, taskID)
	}
	if !h.formDone(w, r, sess, "task "+action, err, func(status int, msg string) { h.tasksPage(w, r, sess, sc, status, msg) }) {
		return
	}
	http.Redirect(w, r, pageURL(roomURL(sc.ProjectID, "tasks"), orgQuery(r, sc.OrgID), notice)+"#task-"+url.PathEscape(taskID), http.StatusSeeOther)
}

// taskRow is a task with what the person may do with it (the service decides again).
type taskRow struct {
	rooms.PersonTask
	CanReview, CanCancel bool
	// CanUpload: the sending company's and the host's people attach files (as the
	// contract's upload rule says); UploadError is a refused upload's message.
	CanUpload   bool
	UploadError string
}

func taskRows(sc tenancy.Scope, list []rooms.PersonTask) []taskRow {
	out := make([]taskRow, len(list))
	for i, t := range list {
		sent := t.FromOrgID == sc.OrgID
		out[i] = taskRow{PersonTask: t, CanReview: sent && t.Status == "done" && t.Review == nil,
			CanCancel: (sent || sc.IsHost()) && !t.Final(), CanUpload: sent || sc.IsHost()}
	}
	return out
}
