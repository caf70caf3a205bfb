package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/testfix"
)

// deskFile: acme and globex on Scale, soylent on Growth, initech on the starter plan.
// globex has more conversations and inboxes than acme, so its higher numbers exist only
// there.
const deskFile = deskCompanies + `  - {slug: soylent, name: Soylent, plan: growth}
  - {slug: initech, name: Initech, plan: starter}
users:
  - {email: ana@acme.test, name: Ana, org: acme, role: owner}
  - {email: bo@acme.test, name: Bo, org: acme, role: member}
  - {email: gus@globex.test, name: Gus, org: globex, role: owner}
  - {email: sal@soylent.test, name: Sal, org: soylent, role: owner}
  - {email: ida@initech.test, name: Ida, org: initech, role: owner}
desk:
  - workspace: acme
    inboxes:
      - {slug: support, name: Support}
    saved_replies:
      - {slug: csv-import, title: CSV import requirements, body: "Use a UTF-8 CSV with customer_email, subject, body, created_at, and status. Maximum 10 MB and 5,000 rows per file."}
  - workspace: globex
    inboxes:
      - {slug: support, name: Support}
      - {slug: sales, name: Sales}
  - workspace: soylent
    inboxes:
      - {slug: support, name: Support}
  - workspace: initech
    inboxes:
      - {slug: support, name: Support}
`

// deskServer is a server seeded with deskFile, one conversation in acme (conv_1), two in
// globex and one in soylent, and a token per person.
type deskServer struct {
	*server
	url    string
	tokens map[string]string // by email; "ana-inboxes" holds only inboxes:read, "ana-ingest" only ingest:write
	d      *pg.DB
	res    admin.Result
}

func startDeskServer(t *testing.T) *deskServer {
	t.Helper()
	ds := &deskServer{tokens: map[string]string{}}
	s := startServerFile(t, deskFile, func(ctx context.Context, d *pg.DB, res admin.Result) {
		q := db.New()
		svc, err := desk.New(desk.Deps{DB: d, Q: q, CursorKey: make([]byte, 32), Secrets: testfix.Detector(t)})
		if err != nil {
			t.Fatal(err)
		}
		csv := func(org string) desk.NewConversation {
			return desk.NewConversation{InboxID: 1, Subject: "CSV import fails", Status: desk.StatusOpen, CustomerEmail: "kim@customer.test",
				CreatedAt: time.Now().Add(-2 * time.Hour), Messages: []desk.NewMessage{
					{Type: desk.TypeCustomer, Body: "My CSV upload fails. Which columns are required?", CreatedAt: time.Now().Add(-2 * time.Hour)},
					{Type: desk.TypeNote, Body: "Zanzibar: legacy importer.", CreatedAt: time.Now().Add(-time.Hour)},
				}}
		}
		err = d.Operator(ctx, func(tx *pg.Tx) error {
			for _, org := range []string{"acme", "globex", "globex", "soylent"} {
				if _, _, err := desk.AddConversation(ctx, tx, q, res.Organisations[org].ID, csv(org)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for email, org := range map[string]string{"ana@acme.test": "acme", "bo@acme.test": "acme", "gus@globex.test": "globex",
			"sal@soylent.test": "soylent", "ida@initech.test": "initech"} {
			tok, err := svc.CreateToken(ctx, res.Organisations[org].ID, email, desk.Scopes, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			ds.tokens[email] = tok.Token
		}
		tok, err := svc.CreateToken(ctx, res.Organisations["acme"].ID, "ana@acme.test", []string{desk.ScopeInboxesRead}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ds.tokens["ana-inboxes"] = tok.Token
		if tok, err = svc.CreateToken(ctx, res.Organisations["acme"].ID, "ana@acme.test", []string{desk.ScopeIngestWrite}, time.Hour); err != nil {
			t.Fatal(err)
		}
		ds.tokens["ana-ingest"] = tok.Token
		ds.res = res
	})
	ds.server, ds.url = s, s.base+"/desk/mcp"
	ds.d = openSeeded(t, s)
	return ds
}

// deskError reads a desk tool error: isError, no structuredContent, one text block
// holding {"error":{…}}.
func deskError(t *testing.T, ds *deskServer, token, tool string, args map[string]any) map[string]any {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	status, _, body := post(t, ds.url, token, string(req))
	var rpc struct {
		Result struct {
			Content []struct {
				Type, Text string
			}
			IsError           bool
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &rpc) != nil || !rpc.Result.IsError || rpc.Result.StructuredContent != nil ||
		len(rpc.Result.Content) != 1 || rpc.Result.Content[0].Type != "text" {
		t.Fatalf("%s: want a tool error, got %d %s", tool, status, body)
	}
	var e struct{ Error map[string]any }
	if err := json.Unmarshal([]byte(rpc.Result.Content[0].Text), &e); err != nil || e.Error == nil {
		t.Fatalf("%s: error text %q", tool, rpc.Result.Content[0].Text)
	}
	return e.Error
}

func TestDeskEndpoint(t *testing.T) {
	t.Parallel()
	ds := startDeskServer(t)
	ana := ds.tokens["ana@acme.test"]

	t.Run("the contract's example with the go-sdk client: investigate without sending a reply", func(t *testing.T) {
		for _, version := range []string{"", "2025-06-18"} {
			cs, err := connectSDK(t, ds.url, ana, version)
			if err != nil {
				t.Fatalf("connect %q: %v", version, err)
			}
			names := toolNames(t, cs)
			want := []string{desk.ToolSearchConversations, desk.ToolGetConversation, desk.ToolListInboxes, desk.ToolFindSavedReplies, desk.ToolGetReport, desk.ToolAddPrivateNote}
			if !slices.Equal(names, want) {
				t.Fatalf("tools %v", names)
			}
			found, text := callJSON(t, cs, desk.ToolSearchConversations, map[string]any{"query": "CSV import", "status": "open", "limit": 2})
			var again map[string]any
			if err := json.Unmarshal([]byte(text), &again); err != nil || !jsonEqual(again, found) {
				t.Fatalf("the text block must hold the structuredContent's JSON: %s", text)
			}
			convs := found["conversations"].([]any)
			if len(convs) != 1 || convs[0].(map[string]any)["id"] != "conv_1" || found["next_cursor"] != nil {
				t.Fatalf("search: %s", text)
			}
			conv, text := callJSON(t, cs, desk.ToolGetConversation, map[string]any{"conversation_id": "conv_1", "include_private_notes": false})
			if msgs := conv["messages"].([]any); len(msgs) != 1 || strings.Contains(text, "Zanzibar") {
				t.Fatalf("get_conversation: %s", text)
			}
			replies, text := callJSON(t, cs, desk.ToolFindSavedReplies, map[string]any{"query": "CSV import"})
			if r := replies["saved_replies"].([]any); len(r) != 1 || r[0].(map[string]any)["title"] != "CSV import requirements" {
				t.Fatalf("find_saved_replies: %s", text)
			}
			args := map[string]any{"conversation_id": "conv_1", "body": "Confirmed import format with the customer. Waiting for a corrected CSV.",
				"idempotency_key": "note-demo-1042-v1"}
			note, text := callJSON(t, cs, desk.ToolAddPrivateNote, args)
			wantReplayed := version != "" // the second connection repeats the first one's note
			if note["replayed"] != wantReplayed || note["note"].(map[string]any)["visibility"] != "internal" {
				t.Fatalf("add_private_note: %s", text)
			}
		}
		conv, text := callJSON(t, mustConnect(t, ds.url, ana), desk.ToolGetConversation, map[string]any{"conversation_id": "conv_1", "include_private_notes": true})
		types := []string{}
		for _, m := range conv["messages"].([]any) {
			types = append(types, m.(map[string]any)["type"].(string))
		}
		if !slices.Equal(types, []string{"customer", "note", "note"}) || conv["conversation"].(map[string]any)["status"] != "open" {
			t.Fatalf("nothing but one note may have been added: %s", text)
		}
	})
	t.Run("a failure is isError with the contract's error object and no structuredContent", func(t *testing.T) {
		e := deskError(t, ds, ana, desk.ToolGetConversation, map[string]any{"conversation_id": "conv_999"})
		if e["code"] != "NOT_FOUND" || e["message"] != desk.MsgConversationNotFound || len(e) != 2 {
			t.Fatalf("%v", e)
		}
	})
	t.Run("schema violations are INVALID_ARGUMENT tool errors", func(t *testing.T) {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{desk.ToolSearchConversations, map[string]any{"query": "csv", "workspace_id": "acme"}},
			{desk.ToolSearchConversations, map[string]any{"query": "csv", "limit": 51}},
			{desk.ToolSearchConversations, map[string]any{"query": "c"}},
			{desk.ToolSearchConversations, map[string]any{"query": "csv", "status": "closed"}},
			{desk.ToolGetReport, map[string]any{"metric": "conversation_volume", "start_date": "2026-13-01", "end_date": "2026-11-02"}},
			{desk.ToolAddPrivateNote, map[string]any{"conversation_id": "conv_1", "body": "x", "idempotency_key": "short"}},
			{desk.ToolListInboxes, map[string]any{"cursor": "forged"}},
		} {
			if e := deskError(t, ds, ana, c.tool, c.args); e["code"] != "INVALID_ARGUMENT" {
				t.Fatalf("%s %v: %v", c.tool, c.args, e)
			}
		}
	})
	t.Run("PLAN_REQUIRED, FORBIDDEN and IDEMPOTENCY_CONFLICT in the desk format", func(t *testing.T) {
		if e := deskError(t, ds, ds.tokens["ida@initech.test"], desk.ToolListInboxes, nil); e["code"] != "PLAN_REQUIRED" {
			t.Fatalf("starter: %v", e)
		}
		note := map[string]any{"conversation_id": "conv_1", "body": "A note.", "idempotency_key": "growth-key-1"}
		if e := deskError(t, ds, ds.tokens["sal@soylent.test"], desk.ToolAddPrivateNote, note); e["code"] != "PLAN_REQUIRED" || e["message"] != desk.MsgNoteScale {
			t.Fatalf("growth note: %v", e)
		}
		e := deskError(t, ds, ds.tokens["ana-inboxes"], desk.ToolSearchConversations, map[string]any{"query": "csv"})
		if e["code"] != "FORBIDDEN" || !strings.Contains(e["message"].(string), "conversations:read") || e["required_scope"] != "conversations:read" {
			t.Fatalf("scope: %v", e)
		}
		note["idempotency_key"] = "conflict-key-1"
		served(t, ds.url, ana, desk.ToolAddPrivateNote, note)
		note["body"] = "Another note."
		if e := deskError(t, ds, ana, desk.ToolAddPrivateNote, note); e["code"] != "IDEMPOTENCY_CONFLICT" {
			t.Fatalf("conflict: %v", e)
		}
	})
	t.Run("RATE_LIMITED with an integer retry_after_seconds of at least 1", func(t *testing.T) {
		// Growth allows 120 reads per member per minute: within 250 calls one window
		// overflows, wherever the minute's boundary falls.
		sal := ds.tokens["sal@soylent.test"]
		for range 250 {
			a := callTool(t, ds.url, sal, desk.ToolListInboxes, nil)
			if !a.isErr {
				continue
			}
			var e struct{ Error map[string]any }
			if err := json.Unmarshal([]byte(a.text), &e); err != nil || e.Error["code"] != "RATE_LIMITED" || e.Error["message"] != "Member read-call limit exceeded." {
				t.Fatalf("%s", a.text)
			}
			if n, ok := e.Error["retry_after_seconds"].(float64); !ok || n < 1 || n != float64(int(n)) {
				t.Fatalf("retry_after_seconds: %s", a.text)
			}
			return
		}
		t.Fatal("250 reads were never limited")
	})
	t.Run("AUTH_REQUIRED when the holder is no longer a member", func(t *testing.T) {
		bo := ds.tokens["bo@acme.test"]
		served(t, ds.url, bo, desk.ToolListInboxes, nil)
		err := ds.d.Operator(context.Background(), func(tx *pg.Tx) error {
			_, err := tx.Exec(context.Background(), "DELETE FROM org_member WHERE org_id = $1 AND user_id = $2",
				ds.res.Organisations["acme"].ID, ds.res.Users["bo@acme.test"].ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if e := deskError(t, ds, bo, desk.ToolListInboxes, nil); e["code"] != "AUTH_REQUIRED" {
			t.Fatalf("%v", e)
		}
	})
	t.Run("a missing, malformed, unknown or agent credential is a 401 with the desk challenge, invalid_token when one was sent", func(t *testing.T) {
		for _, cred := range []string{"", "qyt_pt_notatoken", desk.TokenPrefix + strings.Repeat("A", 46), "sk-qyt-an-agent-key"} {
			req, _ := http.NewRequest(http.MethodPost, ds.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			if cred != "" {
				req.Header.Set("Authorization", "Bearer "+cred)
			}
			status, h, body := testfix.Do(t, http.DefaultClient, req)
			m := resourceMetadata.FindStringSubmatch(h.Get("WWW-Authenticate"))
			if status != http.StatusUnauthorized || m == nil || m[2] != strings.Join(desk.Scopes, " ") || !strings.HasSuffix(m[1], "/.well-known/oauth-protected-resource/desk/mcp") {
				t.Fatalf("%q: %d %v %s", cred, status, h, body)
			}
			// A refused bearer credential says so (RFC 6750 3.1); none sent, no error.
			if (m[3] != "") != (cred != "") {
				t.Fatalf("%q: WWW-Authenticate %q", cred, h.Get("WWW-Authenticate"))
			}
		}
	})
}

func mustConnect(t *testing.T, url, token string) *sdk.ClientSession {
	t.Helper()
	cs, err := connectSDK(t, url, token, "")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// TestDeskIsolationMatrix calls every desk tool, as declared by the endpoint (a tool added
// later joins it), with each of its id arguments (found from the input schema) set to an
// id that exists only in another workspace and to one that exists nowhere: both must be
// answered byte for byte alike, as NOT_FOUND.
func TestDeskIsolationMatrix(t *testing.T) {
	t.Parallel()
	ds := startDeskServer(t)
	a, err := app.New(config.Config{MaxBodyBytes: 1 << 20}, app.NewLogger(io.Discard, "error"), ds.d, ds.base)
	if err != nil {
		t.Fatal(err)
	}
	ana := ds.tokens["ana@acme.test"]
	yesterday := time.Now().In(mustLoad(t, "America/Los_Angeles")).AddDate(0, 0, -1).Format("2006-01-02")
	// Valid arguments in acme; globex alone has conv_2 and inbox_2.
	valid := map[string]any{"conversation_id": "conv_1", "inbox_id": "inbox_1", "start_date": yesterday, "end_date": yesterday,
		"metric": desk.MetricConversationVolume, "query": "CSV import", "body": "Checked.", "idempotency_key": "matrix-key-1"}
	foreign := map[string]string{"conversation_id": "conv_2", "inbox_id": "inbox_2"}
	absent := map[string]string{"conversation_id": "conv_424242", "inbox_id": "inbox_424242"}
	checked := 0
	for _, tool := range a.Endpoints()["desk"].Tools {
		var sc schema
		if err := json.Unmarshal(tool.InputSchema, &sc); err != nil {
			t.Fatal(err)
		}
		base := map[string]any{}
		for name := range sc.Properties {
			if v, ok := valid[name]; ok {
				base[name] = v
			}
		}
		if a := callTool(t, ds.url, ana, tool.Name, base); a.status != http.StatusOK || a.isErr {
			t.Fatalf("%s %v: not served: %s", tool.Name, base, a.body)
		}
		for _, arg := range idArguments(&sc) {
			t.Run(tool.Name+"/"+arg, func(t *testing.T) {
				with := func(id string) answer {
					args := map[string]any{}
					for k, v := range base {
						args[k] = v
					}
					args[arg] = id
					if _, keyed := args["idempotency_key"]; keyed {
						// A key of its own: a live key answers before the arguments.
						args["idempotency_key"] = "isolation-" + arg + "-" + id
					}
					got := callTool(t, ds.url, ana, tool.Name, args)
					got.body = strings.ReplaceAll(got.body, id, "<id>")
					return got
				}
				f, n := with(foreign[arg]), with(absent[arg])
				if f.body != n.body || f.status != n.status || !f.isErr || !strings.Contains(f.text, `"code":"NOT_FOUND"`) {
					t.Fatalf("another workspace's id answers unlike an absent id:\n  absent:  %d %s\n  foreign: %d %s", n.status, n.body, f.status, f.body)
				}
			})
			checked++
		}
	}
	if checked < 4 {
		t.Fatalf("the matrix found only %d id arguments", checked)
	}
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestDeskIngestAPI(t *testing.T) {
	t.Parallel()
	ds := startDeskServer(t)
	ingest, convs := ds.tokens["ana-ingest"], ds.base+desk.RouteIngestConversations
	errorCode := func(t *testing.T, body string) string {
		t.Helper()
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("error body %q", body)
		}
		return e.Error.Code
	}
	conv := `{"external_id": "mail-7781", "inbox_id": "inbox_1", "subject": "Export to PDF", "customer_email": "jo@customer.test",
		"messages": [{"external_id": "mail-7781-1", "type": "customer", "body": "How do I export a zeppelin report to PDF?"}]}`

	t.Run("a body cut short is refused without the server's read error", func(t *testing.T) {
		skipThroughBalancer(t, "HAProxy closes a client that half-closes before its body is whole without an answer, so the service never sees the short body")
		head := "POST " + desk.RouteIngestConversations + " HTTP/1.1\r\nHost: relay.test\r\nContent-Type: application/json\r\n" +
			"Authorization: Bearer " + ingest + "\r\nContent-Length: 100\r\n\r\n"
		conn := rawRequest(t, ds.base, head, `{"external_id": "m`)
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if err := conn.SetReadDeadline(time.Now().Add(generous)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body := testfix.Body(t, resp)
		if resp.StatusCode != http.StatusBadRequest || errorCode(t, body) != "invalid" || strings.Contains(body, "EOF") || strings.Contains(body, "127.0.0.1") {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("another workspace's conversation is a 404 like a missing one", func(t *testing.T) {
		var bodies []string
		for _, id := range []string{"conv_2", "conv_999"} { // globex has conv_2, acme does not (yet)
			status, _, body := post(t, ds.base+strings.Replace(desk.RouteIngestMessages, "{conversation_id}", id, 1), ingest,
				`{"external_id": "m-`+id+`", "type": "customer", "body": "hello"}`)
			if status != http.StatusNotFound {
				t.Fatalf("%s: %d %s", id, status, body)
			}
			bodies = append(bodies, body)
		}
		if bodies[0] != bodies[1] {
			t.Fatalf("%q != %q", bodies[0], bodies[1])
		}
	})
	t.Run("a conversation is created once: 201, then 200 with the same id", func(t *testing.T) {
		status, _, body := post(t, convs, ingest, conv)
		var first desk.IngestResult
		if status != http.StatusCreated || json.Unmarshal([]byte(body), &first) != nil || !first.Created {
			t.Fatalf("%d %s", status, body)
		}
		status, _, body = post(t, convs, ingest, conv)
		var again desk.IngestResult
		if status != http.StatusOK || json.Unmarshal([]byte(body), &again) != nil || again.Created || again.ConversationID != first.ConversationID {
			t.Fatalf("%d %s", status, body)
		}
		msgs := ds.base + strings.Replace(desk.RouteIngestMessages, "{conversation_id}", first.ConversationID, 1)
		status, _, body = post(t, msgs, ingest, `{"external_id": "mail-7781-2", "type": "reply", "author_email": "bo@acme.test", "body": "Use File, then Export."}`)
		if status != http.StatusCreated || !strings.Contains(body, `"message_id":"msg_`) {
			t.Fatalf("%d %s", status, body)
		}
		// The desk tools see what was ingested.
		found, text := callJSON(t, mustConnect(t, ds.url, ds.tokens["ana@acme.test"]), desk.ToolSearchConversations, map[string]any{"query": "zeppelin export"})
		if c := found["conversations"].([]any); len(c) != 1 || c[0].(map[string]any)["id"] != first.ConversationID {
			t.Fatalf("%s", text)
		}
	})
	t.Run("a time with a lower-case t and z is RFC 3339 too", func(t *testing.T) {
		// The format check refused it, and so did Go's time decoding behind it.
		status, _, body := post(t, convs, ingest, `{"external_id": "mail-lc", "inbox_id": "inbox_1", "subject": "Lower-case times",
			"customer_email": "jo@customer.test", "created_at": "2026-11-10t10:00:00z",
			"messages": [{"external_id": "mail-lc-1", "type": "customer", "body": "Sent at ten.", "created_at": "2026-11-10t10:00:00+00:00"}]}`)
		if status != http.StatusCreated {
			t.Fatalf("%d %s", status, body)
		}
	})
	t.Run("a missing or bad token is a 401 with the ingest challenge", func(t *testing.T) {
		for _, tok := range []string{"", desk.TokenPrefix + "nope"} {
			status, h, body := post(t, convs, tok, conv)
			if status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), desk.ScopeIngestWrite) {
				t.Fatalf("%d %v %s", status, h, body)
			}
			errorCode(t, body)
		}
	})
	t.Run("a token without ingest:write is a 403, a member's too", func(t *testing.T) {
		for _, tok := range []string{ds.tokens["ana@acme.test"], ds.tokens["bo@acme.test"]} {
			status, _, body := post(t, convs, tok, conv)
			if status != http.StatusForbidden || errorCode(t, body) != "forbidden" {
				t.Fatalf("%d %s", status, body)
			}
		}
	})
	t.Run("unknown fields, trailing data, oversized bodies and unstorable text are a 400", func(t *testing.T) {
		for name, body := range map[string]string{
			"unknown":  `{"external_id": "x", "workspace_id": "globex"}`,
			"trailing": conv + `{}`,
			"oversize": `{"external_id": "` + strings.Repeat("x", desk.MaxIngestBytes) + `"}`,
			// Postgres stores neither: refused at the edge, never an internal error.
			"NUL":           strings.NewReplacer("mail-7781", "mail-nul", "Export to PDF", `Export\u0000to PDF`).Replace(conv),
			"invalid UTF-8": strings.NewReplacer("mail-7781", "mail-utf8", "Export to PDF", "Export \xff to PDF").Replace(conv),
		} {
			status, _, got := post(t, convs, ingest, body)
			if status != http.StatusBadRequest || errorCode(t, got) != "invalid" {
				t.Fatalf("%s: %d %s", name, status, got)
			}
		}
	})
	t.Run("a body of the wrong shape is told in the API's words, not Go's", func(t *testing.T) {
		// The decoder's own text reached integrators: "Go struct field
		// IngestConversation.messages of type []desk.IngestMessage".
		for body, want := range map[string]string{
			`{"external_id": "p9", "messages": "x"}`: `"messages" must be an array, not a string`,
			`{"external_id": 5}`:                     `"external_id" must be a string, not a number`,
			`[]`:                                     `the body must be a JSON object, not an array`,
			`{"external_id": "p9", "created_at": "yesterday"}`: `not an RFC 3339 timestamp`,
			`{"external_id": "p9", "created_at": 5}`:           `"created_at" must be an RFC 3339 timestamp, not a number`,
			`{"external_id": `:                                 `the body is not valid JSON`,
		} {
			status, _, got := post(t, convs, ingest, body)
			var e struct{ Error struct{ Message string } }
			if err := json.Unmarshal([]byte(got), &e); err != nil || status != http.StatusBadRequest ||
				!strings.Contains(e.Error.Message, want) || strings.Contains(got, "Go ") || strings.Contains(got, "desk.") {
				t.Fatalf("%s: %d %s", body, status, got)
			}
		}
	})
}
