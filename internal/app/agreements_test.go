package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// answer is one tools/call answer over raw HTTP.
type answer struct {
	status int
	body   string
	text   string // the tool result's text block, when there is a result
	isErr  bool
}

// callTool sends one tools/call over raw HTTP.
func callTool(t testing.TB, url, key, name string, args map[string]any) answer {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := post(t, url, key, string(req))
	a := answer{status: status, body: body}
	var rpc struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
	}
	if status == http.StatusOK && json.Unmarshal([]byte(body), &rpc) == nil && len(rpc.Result.Content) == 1 {
		a.text, a.isErr = rpc.Result.Content[0].Text, rpc.Result.IsError
	}
	return a
}

// served calls a tool and returns the text block of its answer; it fails the test unless
// the call was served.
func served(t testing.TB, url, key, name string, args map[string]any) string {
	t.Helper()
	a := callTool(t, url, key, name, args)
	if a.status != http.StatusOK || a.isErr || a.text == "" {
		t.Fatalf("%s: want a served call, got %d %s", name, a.status, a.body)
	}
	return a.text
}

// toolError is the {"error":{"code","message"}} of a threads tool error; it fails the
// test on any other answer.
func toolError(t testing.TB, url, key, name string, args map[string]any) (code, message string) {
	t.Helper()
	a := callTool(t, url, key, name, args)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if a.status != http.StatusOK || !a.isErr || json.Unmarshal([]byte(a.text), &e) != nil {
		t.Fatalf("%s: want a tool error, got %d %s", name, a.status, a.body)
	}
	return e.Error.Code, e.Error.Message
}

// TestRevokedGuestIsRefusedOnTheThreadsEndpointFromItsNextCall revokes a guest's
// agreement with the admin service (what `relayroom admin agreement revoke` runs) while
// the server runs: the guest's very next threads call is refused, on every tool, and the
// refusal carries nothing of the host's project.
func TestRevokedGuestIsRefusedOnTheThreadsEndpointFromItsNextCall(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	arch, qa := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "qa-lead")
	archKey, qaKey := s.key("acme/architect"), s.key("globex/qa-lead")
	const subject = "Quarterly pricing for Umbrella"
	var sent struct{ ThreadID, MessageID string }
	if err := json.Unmarshal([]byte(served(t, arch, archKey, "send", map[string]any{
		"to": []string{"qa-lead"}, "subject": subject, "body": "Confidential: the renewal price is 40k."})), &sent); err != nil {
		t.Fatal(err)
	}
	// While the agreement is active the guest is served.
	if text := served(t, qa, qaKey, "show", map[string]any{"threadId": sent.ThreadID}); !strings.Contains(text, "40k") {
		t.Fatalf("show before revocation: %s", text)
	}

	svc := admin.New(openSeeded(t, s), "http://unused")
	if _, err := svc.SetAgreementStatus(context.Background(), "acme/escalations", "globex", tenancy.AgreementRevoked); err != nil {
		t.Fatal(err)
	}
	calls := map[string]map[string]any{
		"inbox": nil, "threads": nil, "roster": nil, "whoami": nil,
		"show":   {"threadId": sent.ThreadID},
		"search": {"query": "pricing"},
		"recall": {"query": "renewal price"},
		"ack":    {"messageId": sent.MessageID},
		"reply":  {"threadId": sent.ThreadID, "body": "still here"},
		"send":   {"to": []string{"architect"}, "subject": "hello", "body": "still here"},
		"learn":  {"title": "Renewal", "body": "The renewal price is 40k.", "kind": "fact"},
	}
	for tool, args := range calls {
		t.Run(tool, func(t *testing.T) {
			a := callTool(t, qa, qaKey, tool, args)
			if a.status != http.StatusForbidden || !strings.Contains(a.body, `"code":-32001`) || !strings.Contains(a.body, tenancy.MsgNoAgreement) {
				t.Fatalf("revoked guest's %s: %d %s", tool, a.status, a.body)
			}
			for _, leak := range []string{subject, sent.ThreadID, sent.MessageID, "architect", "40k", "Escalations", "Acme"} {
				if strings.Contains(a.body, leak) {
					t.Fatalf("the refusal of %s reveals %q: %s", tool, leak, a.body)
				}
			}
		})
	}
}

// TestThreadsKnowledgeFollowsTheGuestsGrants: on the threads endpoint messaging needs only
// an active agreement; reading the project's knowledge needs read_memory and writing it
// (learn, a lesson on close, a contradiction) needs write_memory. A change of grants
// applies from the next call.
func TestThreadsKnowledgeFollowsTheGuestsGrants(t *testing.T) {
	t.Parallel()
	s := startServer(t) // globex is active with read_memory only
	arch, qa := s.threadsURL("escalations", "architect"), s.threadsURL("escalations", "qa-lead")
	archKey, qaKey := s.key("acme/architect"), s.key("globex/qa-lead")
	var sent struct{ ThreadID string }
	if err := json.Unmarshal([]byte(served(t, arch, archKey, "send", map[string]any{
		"to": []string{"qa-lead"}, "subject": "Flaky login test", "body": "Can you look?"})), &sent); err != nil {
		t.Fatal(err)
	}
	var learned struct{ KnowledgeID string }
	if err := json.Unmarshal([]byte(served(t, arch, archKey, "learn", map[string]any{
		"title": "Login test needs a fresh cache", "body": "Clear the session cache before the login test.", "kind": "procedure"})), &learned); err != nil {
		t.Fatal(err)
	}

	t.Run("messaging needs only the active agreement", func(t *testing.T) {
		served(t, qa, qaKey, "reply", map[string]any{"threadId": sent.ThreadID, "body": "Looking."})
		served(t, qa, qaKey, "show", map[string]any{"threadId": sent.ThreadID})
	})
	t.Run("read_memory lets recall run", func(t *testing.T) {
		served(t, qa, qaKey, "recall", map[string]any{"query": "login test cache"})
	})
	t.Run("without write_memory learn is refused", func(t *testing.T) {
		code, msg := toolError(t, qa, qaKey, "learn", map[string]any{"title": "x", "body": "y", "kind": "fact"})
		if code != tenancy.ReasonGrantRequired || !strings.Contains(msg, tenancy.GrantWriteMemory) {
			t.Fatalf("learn: %s %s", code, msg)
		}
	})
	t.Run("without write_memory a contradiction is refused", func(t *testing.T) {
		code, _ := toolError(t, qa, qaKey, "event", map[string]any{"type": "error", "detail": map[string]any{"contradicts": learned.KnowledgeID}})
		if code != tenancy.ReasonGrantRequired {
			t.Fatalf("contradiction: %s", code)
		}
	})
	t.Run("without write_memory the lesson is not recorded but the close happens", func(t *testing.T) {
		var closed struct {
			OK     bool
			Status string
			Lesson struct {
				Recorded     bool
				Code, Reason string
			}
		}
		if err := json.Unmarshal([]byte(served(t, qa, qaKey, "close", map[string]any{"threadId": sent.ThreadID,
			"lesson": map[string]any{"title": "Clear caches", "body": "Clear the cache first.", "kind": "procedure"}})), &closed); err != nil {
			t.Fatal(err)
		}
		if !closed.OK || closed.Status != "closed" || closed.Lesson.Recorded || closed.Lesson.Code != "unauthorized" ||
			!strings.Contains(closed.Lesson.Reason, tenancy.GrantWriteMemory) {
			t.Fatalf("close: %+v", closed)
		}
	})
	t.Run("narrowed grants apply from the next call", func(t *testing.T) {
		svc := admin.New(openSeeded(t, s), "http://unused")
		f := admin.File{Projects: []admin.ProjectSpec{{Slug: "escalations", Name: "Escalations", Host: "acme",
			Guests: []admin.GuestSpec{{Org: "globex", Status: tenancy.AgreementActive, Grants: []string{}}}}}}
		if _, err := svc.Apply(context.Background(), f, admin.Options{}); err != nil {
			t.Fatal(err)
		}
		for tool, args := range map[string]map[string]any{
			"recall":      {"query": "login test cache"},
			"recall_used": {"queryId": learned.KnowledgeID, "knowledgeId": learned.KnowledgeID},
		} {
			if code, msg := toolError(t, qa, qaKey, tool, args); code != tenancy.ReasonGrantRequired || !strings.Contains(msg, tenancy.GrantReadMemory) {
				t.Fatalf("%s: %s %s", tool, code, msg)
			}
		}
		served(t, qa, qaKey, "inbox", nil) // messaging still works
	})
}

// TestRefusedGuestsGetNoWakes: the pager is an endpoint too. Work addressed to a guest's
// part while its agreement is not active (a broadcast, or its part by name) raises no wake
// its pager or webhook could receive: a wake names the project, its threads and its last
// message.
func TestRefusedGuestsGetNoWakes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	svc := admin.New(openSeeded(t, s), "http://unused")
	if _, err := svc.SetAgreementStatus(context.Background(), "acme/escalations", "globex", tenancy.AgreementRevoked); err != nil {
		t.Fatal(err)
	}
	arch, archKey := s.threadsURL("escalations", "architect"), s.key("acme/architect")
	served(t, arch, archKey, "send", map[string]any{"to": []string{"*"}, "subject": "Pricing all-hands", "body": "Everyone: pricing."})
	served(t, arch, archKey, "send", map[string]any{"to": []string{"qa-lead"}, "subject": "Pricing for you", "body": "Still there?"})
	if status, body := s.nextWake(t, http.DefaultClient, s.key("globex/qa-lead")); status != http.StatusNoContent {
		t.Fatalf("a revoked guest's pager got %d %s", status, body)
	}
	// The host's own parts are woken as before (backend never called: it is offline).
	if status, body := s.awaitWake(t, s.key("acme/backend")); status != http.StatusOK || !strings.Contains(body, "Escalations") {
		t.Fatalf("the host's part got no wake: %d %s", status, body)
	}
}
