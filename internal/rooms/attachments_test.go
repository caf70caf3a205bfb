package rooms_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/testfix"
)

func (e *env) upload(agent, taskID, filename, ctype string, body []byte) (int, map[string]any) {
	e.t.Helper()
	return e.postRoute("/api/rooms/"+e.one.String()+"/tasks/"+taskID+"/attachments?filename="+url.QueryEscape(filename), e.keys[agent], ctype, body)
}

func TestAttachments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.sendTask(t, "Read the files")

	notes := []byte("Failures:\n- expiry path\n- timeout path\n")
	code, up := e.upload("architect", task, "notes.md", "text/markdown", notes)
	sum := sha256.Sum256(notes)
	if code != http.StatusCreated || up["sha256"] != hex.EncodeToString(sum[:]) || up["size_bytes"].(float64) != float64(len(notes)) ||
		up["uploaded_by_org_id"] != e.res.Organisations["acme"].ID.String() {
		t.Fatalf("upload: %d %v", code, up)
	}
	binary := []byte{0x89, 'P', 'N', 'G', 0, 0, 0, 13, 0xff, 0xfe}
	if code, m := e.upload("architect", task, "chart.png", "image/png", binary); code != http.StatusCreated {
		t.Fatalf("binary upload: %d %v", code, m)
	}
	big := bytes.Repeat([]byte("a"), 70<<10) // valid text, but over 64 KB
	if code, m := e.upload("architect", task, "big.txt", "text/plain", big); code != http.StatusCreated {
		t.Fatalf("big upload: %d %v", code, m)
	}
	// Multipart works too.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "form.txt")
	fw.Write([]byte("from a form"))
	mw.Close()
	if code, m := e.upload("architect", task, "", mw.FormDataContentType(), form.Bytes()); code != http.StatusCreated || m["filename"] != "form.txt" {
		t.Fatalf("multipart upload: %d %v", code, m)
	}

	// Only the sending company or the host: Peter (recipient, Initech) may not attach.
	if code, m := e.upload("peter", task, "x.txt", "text/plain", []byte("x")); code != http.StatusForbidden ||
		m["error"] != "Only the company that sent the task, or the room's host, can attach files to it" {
		t.Fatalf("recipient attached: %d %v", code, m)
	}
	// A task Initech sent to Initech: Initech (sender) and Acme (host) may attach, Hooli may not.
	own := str(e.call("peter", e.one, "send_task", map[string]any{"to_agent_slug": "peter", "goal": "self"}).obj(t), "task_id")
	if code, _ := e.upload("peter", own, "a.txt", "text/plain", []byte("a")); code != http.StatusCreated {
		t.Fatalf("sender company refused: %d", code)
	}
	if code, _ := e.upload("architect", own, "b.txt", "text/plain", []byte("b")); code != http.StatusCreated {
		t.Fatalf("host refused: %d", code)
	}
	// Hooli is not party to the task: it is answered as if there were none.
	if code, m := e.upload("gavin", own, "c.txt", "text/plain", []byte("c")); code != http.StatusNotFound || m["error"] != "Task not found: "+own {
		t.Fatalf("third company attached: %d %v", code, m)
	}
	// A Content-Type longer than any media type is refused, not stored and served back.
	if code, m := e.upload("architect", task, "long.txt", "text/plain; x="+strings.Repeat("a", rooms.MaxContentTypeBytes), []byte("l")); code != http.StatusBadRequest ||
		!strings.Contains(str(m, "error"), "Content-Type is longer than 255 bytes") {
		t.Fatalf("long content type: %d %v", code, m)
	}
	if code, _ := e.upload("", task, "c.txt", "text/plain", []byte("c")); code != http.StatusUnauthorized {
		t.Fatalf("no key: %d", code)
	}
	if code, _ := e.upload("architect", "0190c7e0-0000-7000-8000-000000000000", "c.txt", "text/plain", []byte("c")); code != http.StatusNotFound {
		t.Fatalf("unknown task: %d", code)
	}

	inbox := e.call("peter", e.one, "get_inbox", nil).obj(t)
	var atts []any
	for _, x := range inbox["tasks"].([]any) {
		if str(x.(map[string]any), "task_id") == task {
			atts = x.(map[string]any)["attachments"].([]any)
		}
	}
	if len(atts) != 4 {
		t.Fatalf("attachments: %s", fmtJSON(inbox))
	}
	byName := map[string]map[string]any{}
	for _, a := range atts {
		byName[str(a.(map[string]any), "filename")] = a.(map[string]any)
	}
	if byName["notes.md"]["text"] != string(notes) || byName["notes.md"]["download_url"] != nil {
		t.Fatalf("small text not inlined: %v", byName["notes.md"])
	}
	for _, name := range []string{"chart.png", "big.txt"} {
		a := byName[name]
		if a["text"] != nil || !strings.Contains(str(a, "download_url"), "/attachments/") || a["expires_in_seconds"].(float64) != 60 {
			t.Fatalf("%s should be a link: %v", name, a)
		}
	}
	// The link works once, for 60 seconds, and only untampered.
	link := str(byName["chart.png"], "download_url")
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(testfix.Body(t, resp))
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, binary) || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("download: %d %q", resp.StatusCode, body)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for name, tamper := range map[string]func(url.Values){
		"signature": func(v url.Values) {
			s := v.Get("sig")
			c := "0"
			if s[0] == '0' {
				c = "1"
			}
			v.Set("sig", c+s[1:])
		},
		"expiry": func(v url.Values) { v.Set("exp", "99999999999") },
	} {
		v := url.Values{}
		for k, x := range q {
			v[k] = append([]string(nil), x...)
		}
		tamper(v)
		u2 := *u
		u2.RawQuery = v.Encode()
		resp, err := http.Get(u2.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("tampered %s accepted: %d", name, resp.StatusCode)
		}
	}
	// Another attachment's signature does not open this one.
	other, _ := url.Parse(str(byName["big.txt"], "download_url"))
	u3 := *u
	oq := u.Query()
	oq.Set("sig", other.Query().Get("sig"))
	u3.RawQuery = oq.Encode()
	if resp, _ := http.Get(u3.String()); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("swapped signature accepted: %d", resp.StatusCode)
	}
	// An expired link: issued by a service whose clock is two minutes behind.
	e.svc.Now = func() time.Time { return time.Now().Add(-2 * time.Minute) }
	res, err := e.svc.Inbox(context.Background(), e.scope("peter", e.one), 50)
	if err != nil {
		t.Fatal(err)
	}
	var expired string
	for _, tk := range res.Tasks {
		for _, a := range tk.Attachments {
			if a.Filename == "chart.png" {
				expired = a.DownloadURL
			}
		}
	}
	if resp, _ := http.Get(expired); resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("expired link accepted")
	}
}

func TestAttachmentInlineBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.sendTask(t, "Five files")
	chunk := bytes.Repeat([]byte("é"), 30<<10) // 60 KB of valid UTF-8 each
	for _, n := range []string{"1.txt", "2.txt", "3.txt", "4.txt", "5.txt"} {
		if code, m := e.upload("architect", task, n, "text/plain", chunk); code != http.StatusCreated {
			t.Fatalf("upload: %d %v", code, m)
		}
	}
	inbox := e.call("peter", e.one, "get_inbox", nil).obj(t)
	atts := inbox["tasks"].([]any)[0].(map[string]any)["attachments"].([]any)
	inlined := 0
	for _, a := range atts {
		if _, ok := a.(map[string]any)["text"]; ok {
			inlined++
		} else if str(a.(map[string]any), "download_url") == "" {
			t.Fatalf("neither text nor link: %v", a)
		}
	}
	if inlined != 4 { // 4 × 60 KB fit the 256 KB budget, the fifth does not
		t.Fatalf("inlined %d of 5", inlined)
	}
}

func TestAttachmentSizeLimit(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(c *config.Config) { c.AttachmentMaxBytes = 1000 })
	task := e.sendTask(t, "Limit")
	if code, _ := e.upload("architect", task, "ok.txt", "text/plain", bytes.Repeat([]byte("a"), 1000)); code != http.StatusCreated {
		t.Fatalf("at the limit: %d", code)
	}
	code, m := e.upload("architect", task, "big.txt", "text/plain", bytes.Repeat([]byte("a"), 1001))
	if code != http.StatusBadRequest || m["error"] != "Attachment is larger than the limit of 1000 bytes" {
		t.Fatalf("over the limit: %d %v", code, m)
	}
	if n := e.count("SELECT count(*) FROM task_attachment"); n != 1 {
		t.Fatalf("%d attachments stored", n)
	}
	_ = rooms.InlineMax
}

// TestARoomsAttachmentsAreBounded: one agent could store 100 files of 25 MB a task,
// tasks without end, in the Postgres every tenant shares. A room's attachments hold at
// most what the server allows together, whichever task they belong to.
func TestARoomsAttachmentsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(c *config.Config) { c.RoomAttachmentBytes = 1500 })
	task := e.sendTask(t, "Quota")
	other := e.sendTask(t, "Quota too")
	if code, m := e.upload("architect", task, "a.txt", "text/plain", bytes.Repeat([]byte("a"), 1000)); code != http.StatusCreated {
		t.Fatalf("within the bound: %d %v", code, m)
	}
	code, m := e.upload("architect", other, "b.txt", "text/plain", bytes.Repeat([]byte("b"), 501))
	if code != http.StatusBadRequest || !strings.Contains(str(m, "error"), "this file does not fit") {
		t.Fatalf("past the room's bound, on another task: %d %v", code, m)
	}
	if code, m := e.upload("architect", other, "c.txt", "text/plain", bytes.Repeat([]byte("c"), 500)); code != http.StatusCreated {
		t.Fatalf("what still fits: %d %v", code, m)
	}
}

// TestUploadsAtOnceKeepTheRoomsBound: uploads to two tasks of one room both passed the
// room's count before either was stored, and both were stored past the bound. Each now
// counts again in the room's turn once its bytes are written: the second sees the first.
func TestUploadsAtOnceKeepTheRoomsBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.svc.MaxRoomAttachmentBytes = 1500
	tasks := []string{
		e.sendTask(t, "Quota"),
		e.sendTask(t, "Quota too"),
	}
	ctx := context.Background()
	turn := e.b.Holder(t)
	if _, err := turn.Exec(ctx, "SELECT pg_advisory_xact_lock(7280, hashtext($1::uuid::text))", e.one); err != nil {
		t.Fatal(err)
	}
	done, sc := make(chan error, len(tasks)), e.scope("architect", e.one)
	for i, task := range tasks {
		go func() {
			_, err := e.svc.Upload(ctx, sc, task, fmt.Sprintf("%d.txt", i), "text/plain", bytes.Repeat([]byte("a"), 1000))
			done <- err
		}()
	}
	e.b.AwaitLockWaiters(t, len(tasks), done) // both counted 0 bytes held, and stored theirs
	if err := turn.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var refused []error
	for range tasks {
		if err := <-done; err != nil {
			refused = append(refused, err)
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0].Error(), "this file does not fit") {
		t.Fatalf("want one upload stored and one refused as not fitting: %v", refused)
	}
	if held := e.count("SELECT coalesce(sum(size_bytes), 0) FROM task_attachment WHERE project_id = $1", e.one); held != 1000 {
		t.Fatalf("the room holds %d bytes, past its bound of 1500", held)
	}
}

// TestAttachmentRetryStoresOnce: an upload retried after its answer was lost (the route is
// plain HTTP, outside the tools' idempotency keys) answers the attachment already stored;
// another file, or the same bytes under another name, is a new attachment.
func TestAttachmentRetryStoresOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.sendTask(t, "Read the log")
	log := []byte("2026-12-03 07:40 retry storm\n")
	_, first := e.upload("architect", task, "run.log", "text/plain", log)
	code, again := e.upload("architect", task, "run.log", "text/plain", log)
	if code != http.StatusCreated || again["id"] != first["id"] {
		t.Fatalf("the retry stored another attachment: %d %v, first %v", code, again, first["id"])
	}
	// A retry labelled otherwise still describes the file that is stored.
	if _, relabelled := e.upload("architect", task, "run.log", "application/octet-stream", log); relabelled["id"] != first["id"] || relabelled["content_type"] != "text/plain" {
		t.Fatalf("a retry with another Content-Type answered %v, want the stored %v (text/plain)", relabelled, first["id"])
	}
	if _, other := e.upload("architect", task, "copy.log", "text/plain", log); other["id"] == first["id"] {
		t.Fatal("the same bytes under another name answered the first file")
	}
	if n := testfix.Scalar[int](t, e.db, "SELECT count(*) FROM task_attachment WHERE task_id = $1", task); n != 2 {
		t.Fatalf("%d attachments stored, want 2", n)
	}
}

// TestUploadsDoNotHoldUpTheTask: storing a file (up to 25 MB, hundreds of milliseconds)
// locked its task FOR UPDATE until the commit, so the recipient's get_inbox (which starts
// the task) and respond_to_task waited behind it and failed at the 1 s lock timeout on a
// loaded machine. An upload now takes only a key-share lock on the task.
func TestUploadsDoNotHoldUpTheTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	task := e.sendTask(t, "Read the dump")
	taskID := uuidOf(t, task)

	t.Run("the recipient starts and answers the task while a file is being stored", func(t *testing.T) {
		// An upload's statements, in a transaction held open as a large insert would be.
		locked, release, done := make(chan error, 1), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- e.db.Operator(ctx, func(tx *pg.Tx) error {
				_, err := e.svc.Q.TaskGetForAttach(ctx, tx, db.TaskGetForAttachParams{ProjectID: e.one, ID: taskID})
				if err == nil {
					err = e.svc.Q.AttachmentInsert(ctx, tx, db.AttachmentInsertParams{ProjectID: e.one, ID: uuid.Must(uuid.NewV7()), TaskID: taskID,
						UploadedByOrgID: e.res.Organisations["acme"].ID, Filename: "dump.bin", ContentType: "application/octet-stream",
						SizeBytes: 4, Sha256: "00", Content: []byte("dump")})
				}
				locked <- err
				<-release
				return err
			})
		}()
		if err := <-locked; err != nil {
			t.Fatal(err)
		}
		inbox := e.call("peter", e.one, "get_inbox", nil)
		respond := e.call("peter", e.one, "respond_to_task", map[string]any{"task_id": task, "result": "Read it.", "status": "done"})
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if inbox.IsError || !strings.Contains(inbox.Text, task) {
			t.Fatalf("get_inbox during an upload: %s", inbox.Text)
		}
		if respond.IsError {
			t.Fatalf("respond_to_task during an upload: %s", respond.Text)
		}
	})
	t.Run("an upload waits its turn past lock_timeout while another stores its bytes", func(t *testing.T) {
		// Another upload to the task holding the task's turn for 1.5 s (a large file being
		// stored), longer than the request pool's 1 s lock_timeout and within the 5 s
		// budget: the second waited 1 s, then failed as "database unavailable".
		locked, done := make(chan struct{}), make(chan error, 1)
		go func() {
			done <- e.db.Operator(ctx, func(tx *pg.Tx) error {
				if err := e.svc.Q.AttachmentLockTask(ctx, tx, taskID); err != nil {
					return err
				}
				close(locked)
				time.Sleep(1500 * time.Millisecond)
				return nil
			})
		}()
		<-locked
		// The service as it runs: its request pool's statements wait 1 s for a lock.
		d, err := pg.Open(ctx, e.url, pg.Options{MaxConns: 2, OpsMaxConns: 2, StatementTimeout: 5 * time.Second, LockTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		svc := rooms.New(rooms.Deps{DB: d, Resolver: e.b.Resolver, Secrets: sharedDetector(t)})
		_, err = svc.Upload(pg.WithBudget(ctx, 5*time.Second), e.scope("architect", e.one), task, "second.txt", "text/plain", []byte("second"))
		if derr := <-done; derr != nil {
			t.Fatal(derr)
		}
		if err != nil {
			t.Fatalf("the upload that waited its turn: %v", err)
		}
	})
	t.Run("a large file gets database time for its size beyond the request's budget", func(t *testing.T) {
		// A request's database budget is the statement timeout, sized for calls of a few
		// rows: the largest file allowed, stored while the database was busy, ran past it
		// and was answered "the database is unavailable". Here the database is slow by
		// another upload holding the task's turn for longer than the budget (300 ms),
		// and well within what 8 MiB adds to it.
		const budget = 300 * time.Millisecond
		locked, done := make(chan struct{}), make(chan error, 1)
		go func() {
			done <- e.db.Operator(ctx, func(tx *pg.Tx) error {
				if err := e.svc.Q.AttachmentLockTask(ctx, tx, taskID); err != nil {
					return err
				}
				close(locked)
				time.Sleep(3 * budget)
				return nil
			})
		}()
		<-locked
		d, err := pg.Open(ctx, e.url, pg.Options{MaxConns: 2, OpsMaxConns: 2, StatementTimeout: budget})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		svc := rooms.New(rooms.Deps{DB: d, Resolver: e.b.Resolver, Secrets: sharedDetector(t), MaxAttachmentBytes: 25 << 20})
		_, err = svc.Upload(pg.WithBudget(ctx, budget), e.scope("architect", e.one), task, "large.bin", "application/octet-stream", make([]byte, 8<<20))
		if derr := <-done; derr != nil {
			t.Fatal(derr)
		}
		if err != nil {
			t.Fatalf("an 8 MiB upload that waited 900 ms on a 300 ms budget: %v", err)
		}
	})
	t.Run("the same file sent by racing retries is stored once", func(t *testing.T) {
		sc := e.scope("architect", e.one)
		ids := make([]string, 8)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				res, err := e.svc.Upload(ctx, sc, task, "race.log", "text/plain", []byte("the same bytes\n"))
				if err == nil {
					ids[i] = res.ID
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id == "" || id != ids[0] {
				t.Fatalf("answers %v, want one id for all", ids)
			}
		}
		if n := testfix.Scalar[int](t, e.db, "SELECT count(*) FROM task_attachment WHERE task_id = $1 AND filename = 'race.log'", task); n != 1 {
			t.Fatalf("%d copies stored, want 1", n)
		}
	})
}

// TestAttachmentsPerTask: a task holds at most MaxAttachmentsPerTask files, and get_inbox
// reads the bytes only of files it may inline, past binary ones that leave its budget
// unspent, up to a bound: it read every small file's bytes before, megabytes a call from
// a task with many files, to inline four of them.
func TestAttachmentsPerTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	sc := e.scope("architect", e.one)
	inlined := func(t *testing.T, task string) []string {
		t.Helper()
		var names []string
		for _, it := range e.call("peter", e.one, "get_inbox", nil).obj(t)["tasks"].([]any) {
			tk := it.(map[string]any)
			if tk["task_id"] != task {
				continue
			}
			for _, a := range tk["attachments"].([]any) {
				if _, ok := a.(map[string]any)["text"]; ok {
					names = append(names, str(a.(map[string]any), "filename"))
				}
			}
		}
		return names
	}
	binary := append([]byte{0}, bytes.Repeat([]byte("b"), 60<<10)...) // 60 KB, never inlined
	t.Run("a text file after binary ones is still inlined", func(t *testing.T) {
		task := e.sendTask(t, "Six dumps and a note")
		for i := range 6 {
			if _, err := e.svc.Upload(ctx, sc, task, fmt.Sprintf("dump-%d.bin", i), "application/octet-stream", binary); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.svc.Upload(ctx, sc, task, "note.txt", "text/plain", []byte("Read the dumps in order.")); err != nil {
			t.Fatal(err)
		}
		if got := inlined(t, task); len(got) != 1 || got[0] != "note.txt" {
			t.Fatalf("inlined %v, want [note.txt]", got)
		}
	})
	t.Run("a text file after more binary bytes than get_inbox reads is a link", func(t *testing.T) {
		task := e.sendTask(t, "Twelve dumps and a note")
		for i := range 12 {
			if _, err := e.svc.Upload(ctx, sc, task, fmt.Sprintf("dump-%d.bin", i), "application/octet-stream", binary); err != nil {
				t.Fatal(err)
			}
		}
		// 40 KB: it never fits beside four dumps in one read of a budget's worth, nor
		// beside eight within the 512 KiB get_inbox reads at most.
		if _, err := e.svc.Upload(ctx, sc, task, "note.txt", "text/plain", bytes.Repeat([]byte("note "), 8<<10)); err != nil {
			t.Fatal(err)
		}
		if got := inlined(t, task); len(got) != 0 {
			t.Fatalf("inlined %v after 720 KB of binary files, want none (its link is there)", got)
		}
	})
	t.Run("a task takes at most MaxAttachmentsPerTask files", func(t *testing.T) {
		task := e.sendTask(t, "Many files")
		for i := range rooms.MaxAttachmentsPerTask {
			if _, err := e.svc.Upload(ctx, sc, task, fmt.Sprintf("part-%03d.txt", i), "text/plain", []byte{'a'}); err != nil {
				t.Fatalf("file %d: %v", i, err)
			}
		}
		code, m := e.upload("architect", task, "one-more.txt", "text/plain", []byte{'a'})
		if code != http.StatusBadRequest || !strings.Contains(str(m, "error"), fmt.Sprintf("at most %d attachments", rooms.MaxAttachmentsPerTask)) {
			t.Fatalf("file %d: %d %v", rooms.MaxAttachmentsPerTask+1, code, m)
		}
		// A retry of a stored file still answers it.
		if code, m := e.upload("architect", task, "part-000.txt", "text/plain", []byte{'a'}); code != http.StatusCreated {
			t.Fatalf("a retry at the bound: %d %v", code, m)
		}
	})
}

// TestUploadsAreWhatTheyShow: a file is stored as sent and named as it shows. A multipart
// upload whose Content-Type was not in lower case was stored whole, envelope and all;
// names with control or formatting characters (the right-to-left override shows
// "invoice\u202Etxt.exe" as "invoiceexe.txt"), "." and "..", and empty files were taken.
func TestUploadsAreWhatTheyShow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.sendTask(t, "Files")
	t.Run("a multipart upload is read whatever the case of its media type", func(t *testing.T) {
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		fw, _ := mw.CreateFormFile("file", "cased.txt")
		fw.Write([]byte("just the file"))
		mw.Close()
		ctype := strings.Replace(mw.FormDataContentType(), "multipart/form-data", "Multipart/Form-Data", 1)
		code, m := e.upload("architect", task, "", ctype, form.Bytes())
		if code != http.StatusCreated || m["filename"] != "cased.txt" || m["size_bytes"] != float64(len("just the file")) {
			t.Fatalf("%d %v", code, m)
		}
	})
	for name, filename := range map[string]string{
		"a right-to-left override": "invoice\u202Etxt.exe",
		"a control character":      "bell\a.txt",
		"a zero-width space":       "report\u200b.pdf",
		"a dot":                    ".",
		"two dots":                 "..",
	} {
		t.Run("a name with "+name+" is refused", func(t *testing.T) {
			if code, m := e.upload("architect", task, filename, "text/plain", []byte("x")); code != http.StatusBadRequest || !strings.HasPrefix(str(m, "error"), "filename") {
				t.Fatalf("%q: %d %v", filename, code, m)
			}
		})
	}
	t.Run("an empty file is refused", func(t *testing.T) {
		if code, m := e.upload("architect", task, "empty.txt", "text/plain", nil); code != http.StatusBadRequest || m["error"] != "the file is empty" {
			t.Fatalf("%d %v", code, m)
		}
	})
}

// TestDownloadsHaveAByteBudget: a download read its content whole and held it while it
// was sent: 30 parallel downloads of one 25 MB file took the server from 160 MB to 875
// MB, and a few clients that never read held the whole budget for a minute. A download
// now holds one chunk of the budget, whatever its file's size, and reads the content a
// chunk at a time; past the budget a download is told to retry.
func TestDownloadsHaveAByteBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	task := e.sendTask(t, "Budget")
	big := make([]byte, 2*rooms.DownloadChunk+12345) // three chunks, bytes that differ by offset
	for i := range big {
		big[i] = byte(i % 251)
	}
	if code, _ := e.upload("architect", task, "big.bin", "application/octet-stream", big); code != http.StatusCreated {
		t.Fatalf("upload: %d", code)
	}
	var link string
	for _, x := range e.call("peter", e.one, "get_inbox", nil).obj(t)["tasks"].([]any) {
		if str(x.(map[string]any), "task_id") == task {
			link = str(x.(map[string]any)["attachments"].([]any)[0].(map[string]any), "download_url")
		}
	}
	u, err := url.Parse(link)
	if err != nil || link == "" {
		t.Fatalf("link %q: %v", link, err)
	}
	parts := strings.Split(u.Path, "/") // …/projects/{project}/attachments/{id}
	download := func() (*rooms.File, error) {
		return e.svc.Download(context.Background(), parts[len(parts)-3], parts[len(parts)-1], u.Query().Get("exp"), u.Query().Get("sig"))
	}
	e.svc.SetDownloadBudget(2*rooms.DownloadChunk + 10) // two downloads' chunks, less than one file

	t.Run("a download holds one chunk however large its file", func(t *testing.T) {
		first, err := download()
		if err != nil {
			t.Fatalf("first download: %v", err)
		}
		defer first.Close()
		second, err := download()
		if err != nil {
			t.Fatalf("a second download of a file larger than the budget left: %v", err)
		}
		if _, err := download(); err == nil || !strings.Contains(err.Error(), rooms.MsgDownloadsBusy) {
			t.Fatalf("a download past the budget: %v", err)
		}
		got, err := io.ReadAll(second)
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("the content read by chunks: %d bytes, %v", len(got), err)
		}
		second.Close()
		third, err := download()
		if err != nil {
			t.Fatalf("once the second was sent: %v", err)
		}
		third.Close()
	})
	t.Run("its file is stored with lz4, whose slices are cheaper to read", func(t *testing.T) {
		if n := e.count("SELECT count(*) FROM task_attachment WHERE filename = 'big.bin' AND pg_column_compression(content) = 'lz4'"); n != 1 {
			t.Fatalf("%d attachments stored with lz4", n)
		}
	})
	t.Run("a range across a chunk's end is served", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, link, nil)
		if err != nil {
			t.Fatal(err)
		}
		from, to := rooms.DownloadChunk-10, rooms.DownloadChunk+9
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", from, to))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := testfix.Body(t, resp)
		if resp.StatusCode != http.StatusPartialContent || got != string(big[from:to+1]) {
			t.Fatalf("%d, %d bytes", resp.StatusCode, len(got))
		}
	})
	t.Run("a range past the file's end is refused in JSON, not as the file", func(t *testing.T) {
		for _, rng := range []string{fmt.Sprintf("bytes=%d-", len(big)), "bytes=x-y"} {
			req, err := http.NewRequest(http.MethodGet, link, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Range", rng)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got := testfix.Body(t, resp)
			var answer struct{ Error string }
			if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || json.Unmarshal([]byte(got), &answer) != nil ||
				answer.Error != fmt.Sprintf(rooms.MsgRangeNotSatisfiable, len(big)) {
				t.Fatalf("Range %s: %d %q, want 416 saying %q", rng, resp.StatusCode, got, fmt.Sprintf(rooms.MsgRangeNotSatisfiable, len(big)))
			}
			if cd, ct := resp.Header.Get("Content-Disposition"), resp.Header.Get("Content-Type"); cd != "" || !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Range %s: Content-Disposition %q, Content-Type %q: the refusal must not read as the file", rng, cd, ct)
			}
			if cr, cc := resp.Header.Get("Content-Range"), resp.Header.Get("Cache-Control"); rng != "bytes=x-y" && cr != fmt.Sprintf("bytes */%d", len(big)) || cc != "no-store" {
				t.Fatalf("Range %s: Content-Range %q, Cache-Control %q", rng, cr, cc)
			}
		}
	})
	t.Run("a whole download says its length", func(t *testing.T) {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		got := testfix.Body(t, resp)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(big)) || got != string(big) {
			t.Fatalf("%d, length %d, %d bytes", resp.StatusCode, resp.ContentLength, len(got))
		}
	})
}
