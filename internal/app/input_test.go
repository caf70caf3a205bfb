package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/relayroom/relayroom/internal/text"
)

// badText is one way a string can fail to be storable text, written as a JSON literal
// (raw bytes included: encoding/json would turn them into U+FFFD, so the test must not
// marshal them).
type badText struct {
	name, literal string
	want          error
}

var badTexts = []badText{
	{"NUL", `"x\u0000"`, text.ErrNUL},
	{"invalid UTF-8", "\"x\xff\xfe\"", text.ErrInvalid},
	{"overlong encoding", "\"x\xe0\x80\x80\"", text.ErrInvalid},
	{"lone surrogate", `"x\ud800"`, text.ErrInvalid},
}

// placeholder marks where the bad literal goes in marshalled arguments.
const placeholder = "@@bad-text@@"

// toolEndpoint is one MCP address of the running server and a key that may call it.
type toolEndpoint struct{ name, url, key string }

func toolEndpoints(s *server) []toolEndpoint {
	return []toolEndpoint{
		{"threads", s.threadsURL("escalations", "architect"), s.key("acme/architect")},
		{"room", fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID), s.key("acme/architect")},
		{"all_rooms", s.base + "/api/mcp", s.key("acme/architect")},
	}
}

// TestBadTextInEveryStringArgumentIsAValidationError is generated from tools/list: for
// every tool of every endpoint, every string its schema reaches (nested objects, array
// items and free-form objects included) is sent once per kind of bad text. Each call
// must be the endpoint's validation error naming the argument, and nothing may be logged
// at ERROR: before the fix these reached PostgreSQL and came back as internal errors. A
// new tool or argument is covered without touching the test.
func TestBadTextInEveryStringArgumentIsAValidationError(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	noErrorLogged(t, s)
	for _, ep := range toolEndpoints(s) {
		t.Run(ep.name, func(t *testing.T) {
			tools := listTools(t, ep)
			if len(tools) == 0 {
				t.Fatal("no tools listed")
			}
			for _, tool := range tools {
				cases := stringArgs(tool.InputSchema, "")
				for _, c := range cases {
					args, err := json.Marshal(c.value)
					if err != nil {
						t.Fatal(err)
					}
					for _, bad := range badTexts {
						t.Run(tool.Name+"/"+c.path+"/"+bad.name, func(t *testing.T) {
							raw := bytes.Replace(args, []byte(`"`+placeholder+`"`), []byte(bad.literal), 1)
							body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool.Name + `","arguments":` + string(raw) + `}}`
							status, _, resp := post(t, ep.url, ep.key, body)
							if status != http.StatusOK {
								t.Fatalf("HTTP %d: %s", status, resp)
							}
							msg := toolErrorMessage(t, ep.name, resp)
							want := fmt.Sprintf("argument %q %v", c.path, bad.want)
							if msg != want {
								t.Fatalf("got %q, want %q", msg, want)
							}
						})
					}
				}
			}
		})
	}
}

// TestBadPartIsA400 covers ?part=: bad text there is the endpoint's 400 (JSON-RPC
// -32001, the code of every refusal before a method runs), not an internal error.
func TestBadPartIsA400(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	noErrorLogged(t, s)
	code := s.res.Projects["escalations"].ConnectCode
	for _, c := range []struct{ name, query string }{
		{"NUL", "architect%00"},
		{"overlong", "%E0%80%80"},
		{"invalid UTF-8", "%ff%fe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			status, _, body := post(t, s.base+"/mcp/"+code+"?part="+c.query, s.key("acme/architect"),
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`)
			var resp struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &resp); err != nil {
				t.Fatal(err)
			}
			if status != http.StatusBadRequest || resp.Error.Code != -32001 || !strings.HasPrefix(resp.Error.Message, "?part= must") {
				t.Fatalf("HTTP %d: %s", status, body)
			}
		})
	}
	t.Run("a well-formed unknown part is still the resolver's 403", func(t *testing.T) {
		t.Parallel()
		status, _, body := post(t, s.threadsURL("escalations", "nobody"), s.key("acme/architect"),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami"}}`)
		if status != http.StatusForbidden {
			t.Fatalf("HTTP %d: %s", status, body)
		}
	})
}

// TestBadTextOnTheRoomsHTTPRoutesIsA400: an attachment's filename and content type, and
// the comment of an accept or reject, answer 400 {"error"} instead of 500.
func TestBadTextOnTheRoomsHTTPRoutesIsA400(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	noErrorLogged(t, s)
	room := fmt.Sprintf("%s/api/mcp/p/%s", s.base, s.res.Projects["escalations"].ID)
	call := func(key, tool string, args map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
		_, _, resp := post(t, room, key, string(b))
		var m struct {
			Result struct {
				Content []struct{ Text string } `json:"content"`
				IsError bool                    `json:"isError"`
			} `json:"result"`
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(resp), &m); err != nil || m.Result.IsError || len(m.Result.Content) != 1 ||
			json.Unmarshal([]byte(m.Result.Content[0].Text), &out) != nil {
			t.Fatalf("%s: %s", tool, resp)
		}
		return out
	}
	architect, backend := s.key("acme/architect"), s.key("acme/backend")
	task, _ := call(architect, "send_task", map[string]any{"to_agent_slug": "backend", "goal": "Check the files"})["task_id"].(string)
	call(backend, "get_inbox", map[string]any{})
	call(backend, "respond_to_task", map[string]any{"task_id": task, "result": "Checked.", "status": "done"})
	base := fmt.Sprintf("%s/api/rooms/%s/tasks/%s", s.base, s.res.Projects["escalations"].ID, task)

	send := func(url, ctype, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Agent-Key", architect)
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m["error"]
	}
	for _, c := range []struct{ name, url, ctype, body, want string }{
		{"filename with invalid UTF-8", base + "/attachments?filename=%ff%fe.txt", "text/plain", "hello", "filename " + text.ErrInvalid.Error()},
		{"filename with a NUL", base + "/attachments?filename=a%00.txt", "text/plain", "hello", "filename " + text.ErrNUL.Error()},
		{"filename with an overlong encoding", base + "/attachments?filename=%E0%80%80.txt", "text/plain", "hello", "filename " + text.ErrInvalid.Error()},
		{"content type with invalid UTF-8", base + "/attachments?filename=a.txt", "text/plain; x=\xff", "hello", "the upload's Content-Type " + text.ErrInvalid.Error()},
		{"accept comment with a NUL", base + "/accept", "application/json", `{"comment":"fine\u0000"}`, "comment " + text.ErrNUL.Error()},
		{"accept comment with invalid UTF-8", base + "/accept", "application/json", "{\"comment\":\"fine\xff\"}", "comment " + text.ErrInvalid.Error()},
		{"reject comment with a lone surrogate", base + "/reject", "application/json", `{"comment":"\ud800"}`, "comment " + text.ErrInvalid.Error()},
		// A misspelt or extra field was dropped without a word, and of two comments the
		// last was kept.
		{"a field the route does not take", base + "/accept", "application/json", `{"coment":"thanks"}`, `body must be JSON: {"comment": "…"} (optional), and nothing else`},
		{"a comment given twice", base + "/reject", "application/json", `{"comment":"no","comment":"yes"}`, "comment " + text.ErrDuplicate.Error()},
		// Cut at the limit, a valid comment was answered "body must be JSON".
		{"a body over 64 KiB", base + "/reject", "application/json", `{"comment":"` + strings.Repeat("x", 70000) + `"}`, "the body is larger than 65536 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if status, msg := send(c.url, c.ctype, c.body); status != http.StatusBadRequest || msg != c.want {
				t.Fatalf("got %d %q, want 400 %q", status, msg, c.want)
			}
		})
	}
	t.Run("multipart filename with invalid UTF-8", func(t *testing.T) {
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		fw, err := mw.CreateFormFile("file", "\xff\xfe.txt")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		want := "filename " + text.ErrInvalid.Error()
		if status, msg := send(base+"/attachments", mw.FormDataContentType(), form.String()); status != http.StatusBadRequest || msg != want {
			t.Fatalf("got %d %q, want 400 %q", status, msg, want)
		}
	})
	t.Run("the task can still be accepted with a clean comment", func(t *testing.T) {
		if status, msg := send(base+"/accept", "application/json", `{"comment":"thanks"}`); status != http.StatusOK {
			t.Fatalf("got %d %q", status, msg)
		}
	})
}

// noErrorLogged fails the test, once all its subtests (parallel ones included) are done
// and before the server stops, when anything was logged at ERROR: refusing bad input is
// not a failure of the service. The job queue's own lines (component "jobs") are not the
// requests': its leader election logs ERROR when a stalled machine makes it miss its
// re-election deadline, which a CI run at a high load average met.
func noErrorLogged(t *testing.T, s *server) {
	t.Cleanup(func() {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) && !strings.Contains(line, `"component":"jobs"`) {
				t.Errorf("bad input was logged as an error:\n%s", s.logs.String())
				return
			}
		}
	})
}

type listedTool struct {
	Name        string         `json:"name"`
	InputSchema map[string]any `json:"inputSchema"`
}

func listTools(t *testing.T, ep toolEndpoint) []listedTool {
	t.Helper()
	status, _, body := post(t, ep.url, ep.key, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var resp struct {
		Result struct {
			Tools []listedTool `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || status != http.StatusOK {
		t.Fatalf("tools/list on %s: HTTP %d: %s", ep.name, status, body)
	}
	return resp.Result.Tools
}

// toolError returns the message of a tool's validation error in the endpoint's format.
func toolErrorMessage(t *testing.T, endpoint, body string) string {
	t.Helper()
	var resp struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || !resp.Result.IsError || len(resp.Result.Content) != 1 {
		t.Fatalf("want a tool error, got %s", body)
	}
	txt := resp.Result.Content[0].Text
	if endpoint != "threads" {
		msg, ok := strings.CutPrefix(txt, "Error: ")
		if !ok {
			t.Fatalf("not a rooms error: %q", txt)
		}
		return msg
	}
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(txt), &e); err != nil || e.Error.Code != "invalid_argument" {
		t.Fatalf("not a threads validation error: %q", txt)
	}
	return e.Error.Message
}

// argCase is a tool's arguments with the placeholder at path.
type argCase struct {
	path  string
	value any
}

// stringArgs walks a schema and returns, for every string it reaches, arguments holding
// the placeholder there and minimal valid values in every required sibling. A free-form
// object (no properties) gets a member of its own.
func stringArgs(schema map[string]any, path string) []argCase {
	switch schema["type"] {
	case "string":
		return []argCase{{path, placeholder}}
	case "array":
		items, _ := schema["items"].(map[string]any)
		var out []argCase
		for _, c := range stringArgs(items, path+"[0]") {
			out = append(out, argCase{c.path, []any{c.value}})
		}
		return out
	case "object":
		props, _ := schema["properties"].(map[string]any)
		if props == nil {
			return []argCase{{text.Join(path, "note"), map[string]any{"note": placeholder}}}
		}
		var out []argCase
		for _, name := range slices.Sorted(maps.Keys(props)) {
			sub, _ := props[name].(map[string]any)
			for _, c := range stringArgs(sub, text.Join(path, name)) {
				obj := minimal(schema).(map[string]any)
				obj[name] = c.value
				out = append(out, argCase{c.path, obj})
			}
		}
		return out
	}
	return nil
}

// minimal is a small value the schema accepts.
func minimal(schema map[string]any) any {
	switch schema["type"] {
	case "object":
		obj := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		req, _ := schema["required"].([]any)
		for _, r := range req {
			sub, _ := props[r.(string)].(map[string]any)
			obj[r.(string)] = minimal(sub)
		}
		return obj
	case "array":
		items, _ := schema["items"].(map[string]any)
		if n, _ := schema["minItems"].(float64); n > 0 {
			return []any{minimal(items)}
		}
		return []any{}
	case "integer", "number":
		if n, ok := schema["minimum"].(float64); ok {
			return n
		}
		return 1
	case "boolean":
		return false
	case "string":
		if enum, _ := schema["enum"].([]any); len(enum) > 0 {
			return enum[0]
		}
		if p, _ := schema["pattern"].(string); strings.Contains(p, "0-9a-fA-F") {
			return "0190c7e0-0000-7000-8000-000000000000"
		}
		if schema["format"] == "date-time" {
			return "2026-09-12T10:00:00Z"
		}
		n, _ := schema["minLength"].(float64)
		return strings.Repeat("a", max(1, int(n)))
	}
	return nil
}
