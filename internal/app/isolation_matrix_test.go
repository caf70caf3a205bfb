package app_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/app"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// isolationFile seeds one guest organisation per agreement state in the host's project,
// and a second project (another tenant) whose ids must answer like absent ones. stark's
// agreement row is deleted before the server starts: a guest member without any agreement.
//
//go:embed testdata/isolation.yaml
var isolationFile string

// marker is in every text the host's project holds: a refused caller's answer must not
// contain it.
const marker = "Zanzibar"

// agreementState is one row of the matrix: a caller of the host's project.
type agreementState struct {
	name, agent, part string
	admitted          bool // may act in the project at all
	granted           bool // holds every grant (no grant refusal expected)
}

var agreementStates = []agreementState{
	{"host", "acme/architect", "architect", true, true},
	{"guest active with every grant", "globex/gina", "gina", true, true},
	{"guest active without grants", "hooli/gavin", "gavin", true, false},
	{"guest pending", "umbrella/ursula", "ursula", false, false},
	{"guest revoked", "wayne/walt", "walt", false, false},
	{"guest without agreement", "stark/tony", "tony", false, false},
}

// world is what the matrix calls with: valid arguments in the host's project, the ids of
// another tenant, and what a refused caller must never see.
type world struct {
	s       *server
	valid   map[string]any // argument name → a valid value in the host's project
	foreign []string       // ids of every kind from the other project
	secrets []string       // the host project's ids and names
}

func seedWorld(t *testing.T, s *server) *world {
	t.Helper()
	w := &world{s: s}
	know, err := knowledge.New(knowledge.Deps{DB: openSeeded(t, s), Q: db.New()})
	if err != nil {
		t.Fatal(err)
	}
	// seed writes one project's threads, knowledge, memory, chat and tasks as its host's
	// main part, and returns their ids by argument name.
	seed := func(project, main, mainKey, peer, text string) map[string]string {
		ids := map[string]string{"room_id": s.res.Projects[project].ID.String()}
		threads := s.threadsURL(project, main)
		room := s.base + "/api/mcp/p/" + ids["room_id"]
		var sent struct{ ThreadID, MessageID string }
		decodeText(t, served(t, threads, mainKey, "send", map[string]any{"to": []string{peer}, "subject": text + " rollout", "body": text + ": cut over at noon."}), &sent)
		var bcast struct{ ThreadID, MessageID string }
		decodeText(t, served(t, threads, mainKey, "send", map[string]any{"to": []string{"*"}, "subject": text + " all-hands", "body": text + " for everyone."}), &bcast)
		var learned struct{ KnowledgeID string }
		decodeText(t, served(t, threads, mainKey, "learn", map[string]any{"title": text + " runbook", "body": text + " steps: drain, switch, verify.", "kind": "procedure"}), &learned)
		if _, err := know.Approve(context.Background(), s.res.Projects[project].ID, uuid.MustParse(learned.KnowledgeID), "ana"); err != nil {
			t.Fatal(err)
		}
		var recalled struct {
			QueryID string
			Entries []struct{ KnowledgeID string }
		}
		decodeText(t, served(t, threads, mainKey, "recall", map[string]any{"query": text + " runbook"}), &recalled)
		if len(recalled.Entries) != 1 {
			t.Fatalf("seed: recall found %d entries", len(recalled.Entries))
		}
		var mem struct {
			MemoryID string `json:"memory_id"`
		}
		decodeText(t, served(t, room, mainKey, "write_memory", map[string]any{"content": text + " memory: the cut-over plan."}), &mem)
		var chat struct {
			MessageID string `json:"message_id"`
		}
		decodeText(t, served(t, room, mainKey, "post_message", map[string]any{"content": text + " chat: starting."}), &chat)
		var task struct {
			TaskID string `json:"task_id"`
		}
		decodeText(t, served(t, room, mainKey, "send_task", map[string]any{"to_agent_slug": peer, "goal": text + " task: verify."}), &task)
		ids["threadId"], ids["messageId"], ids["broadcastThread"], ids["broadcastMessage"] = sent.ThreadID, sent.MessageID, bcast.ThreadID, bcast.MessageID
		ids["knowledgeId"], ids["queryId"], ids["memory"], ids["roomMessage"], ids["task_id"] = learned.KnowledgeID, recalled.QueryID, mem.MemoryID, chat.MessageID, task.TaskID
		for k, v := range ids {
			if v == "" {
				t.Fatalf("seed %s: no %s", project, k)
			}
		}
		return ids
	}
	host := seed("escalations", "architect", s.key("acme/architect"), "backend", marker)
	other := seed("other", "peter", s.key("initech/peter"), "bill", "Foreign")
	w.valid = map[string]any{
		"to": []string{"architect"}, "to_agent_slug": "architect",
		"threadId": host["threadId"], "messageId": host["messageId"], "knowledgeId": host["knowledgeId"],
		"queryId": host["queryId"], "task_id": host["task_id"], "room_id": host["room_id"],
		"memory_refs": []string{host["memory"]},
	}
	for k, id := range other {
		if k != "broadcastThread" && k != "broadcastMessage" { // one id of each kind is enough
			w.foreign = append(w.foreign, id)
		}
	}
	slices.Sort(w.foreign)
	w.secrets = []string{marker, "Escalations", "Acme Corp"}
	for k, id := range host {
		if k != "room_id" { // the room's id is in the caller's own URL
			w.secrets = append(w.secrets, id)
		}
	}
	return w
}

// sibling is an id that exists nowhere and differs from id in its last hex digit only.
func sibling(id string) string {
	last := id[len(id)-1]
	next := byte('0')
	if last == '0' {
		next = '1'
	}
	return id[:len(id)-1] + string(next)
}

func decodeText(t *testing.T, text string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(text), v); err != nil {
		t.Fatalf("decode %q: %v", text, err)
	}
}

// endpointURL is where the matrix calls an endpoint as a caller of the host's project.
// An endpoint added later fails here until it is given its address.
func (w *world) endpointURL(t *testing.T, endpoint string, st agreementState) string {
	switch endpoint {
	case "threads":
		return w.s.threadsURL("escalations", st.part)
	case "room":
		return w.s.base + "/api/mcp/p/" + w.s.res.Projects["escalations"].ID.String()
	case "all_rooms":
		return w.s.base + "/api/mcp"
	case "desk":
		return w.s.base + "/desk/mcp"
	}
	t.Fatalf("the isolation matrix does not know endpoint %q: give it its URL in endpointURL", endpoint)
	return ""
}

// schema is the part of a tool's input schema the matrix reads.
type schema struct {
	Type        string             `json:"type"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Items       *schema            `json:"items"`
	Enum        []any              `json:"enum"`
	Pattern     string             `json:"pattern"`
	Format      string             `json:"format"`
	MinLength   int                `json:"minLength"`
	MinItems    int                `json:"minItems"`
	Minimum     *float64           `json:"minimum"`
	Description string             `json:"description"`
}

// sample is a schema-valid value: what the tests know for the argument's name, else the
// smallest value the schema allows.
func (w *world) sample(name string, sc *schema) any {
	if v, ok := w.valid[name]; ok {
		return v
	}
	switch {
	case len(sc.Enum) > 0:
		return sc.Enum[0]
	case sc.Type == "integer" || sc.Type == "number":
		if sc.Minimum != nil {
			return *sc.Minimum
		}
		return 1
	case sc.Type == "boolean":
		return false
	case sc.Type == "array":
		out := []any{}
		for range max(sc.MinItems, 0) {
			out = append(out, w.sample("", sc.Items))
		}
		return out
	case sc.Type == "object":
		obj := map[string]any{}
		for _, r := range sc.Required {
			obj[r] = w.sample(r, sc.Properties[r])
		}
		return obj
	case sc.Format == "date-time":
		return "2099-01-01T00:00:00Z"
	case sc.Pattern != "":
		re := regexp.MustCompile(sc.Pattern)
		for _, c := range []string{"x", uuid.NewString(), "a1", "2099-01-01"} {
			if re.MatchString(c) {
				return c
			}
		}
	}
	return strings.Repeat("x", max(sc.MinLength, 2))
}

var (
	idName        = regexp.MustCompile(`(?:Id|ID|_id|Ids|_ids|_refs)$`)
	idDescription = regexp.MustCompile(`\bids?\b|[a-z]Id\b`)
)

// idArguments are the top-level arguments that carry ids, read from the schema: named like
// one (threadId, task_id, memory_refs) or described as one ("A message id: …"); strings
// or arrays of strings.
func idArguments(sc *schema) []string {
	var out []string
	for name, p := range sc.Properties {
		isString := p.Type == "string" || (p.Type == "array" && p.Items != nil && p.Items.Type == "string")
		if isString && len(p.Enum) == 0 && (idName.MatchString(name) || idDescription.MatchString(p.Description)) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// refused: the agreement refusal, at authentication (HTTP 403) or as a tool error.
func (a answer) refused() bool {
	if a.status == http.StatusForbidden {
		var rpc struct {
			Error struct {
				Code    int
				Message string
			}
		}
		return json.Unmarshal([]byte(a.body), &rpc) == nil && rpc.Error.Code == -32001 && rpc.Error.Message == tenancy.MsgNoAgreement
	}
	return a.status == http.StatusOK && a.isErr && (a.text == "Error: "+tenancy.MsgNoAgreement ||
		a.text == `{"error":{"code":"`+tenancy.ReasonNoAgreement+`","message":"`+tenancy.MsgNoAgreement+`"}}`)
}

// grantRefused: the threads and desk formats' grant_required, or a rooms spec grant text.
func (a answer) grantRefused() bool {
	return a.isErr && (strings.HasPrefix(a.text, `{"error":{"code":"`+tenancy.ReasonGrantRequired+`"`) ||
		strings.HasPrefix(a.text, "Error: Agreement does not permit ") ||
		strings.HasPrefix(a.text, "Error: No active agreement between your organisation and ") && strings.HasSuffix(a.text, " grants task assignment"))
}

func (a answer) internal() bool {
	return a.status >= 500 || strings.Contains(a.body, "-32603") || strings.Contains(a.body, "internal error")
}

// TestIsolationMatrix calls every tool of every endpoint, as declared by the endpoints
// themselves (a tool added later joins the matrix), as a caller in every agreement state,
// and then with every id argument (found from the tool's input schema) set to an absent
// id and to each id of another tenant:
//   - refused callers (pending, revoked, no agreement) get the agreement refusal from
//     every tool bound to the project, and no answer of theirs holds any of the project's
//     ids, texts or part names;
//   - admitted callers are served, or given a grant refusal when they lack the grant;
//   - another tenant's id answers exactly like an absent id, in every state.
func TestIsolationMatrix(t *testing.T) {
	t.Parallel()
	s := startServerFile(t, isolationFile, func(ctx context.Context, d *pg.DB, res admin.Result) {
		err := d.Operator(ctx, func(tx *pg.Tx) error {
			_, err := tx.Exec(ctx, "DELETE FROM agreement WHERE guest_org_id = $1", res.Organisations["stark"].ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	w := seedWorld(t, s)
	a, err := app.New(config.Config{MaxBodyBytes: 1 << 20}, app.NewLogger(io.Discard, "error"), openSeeded(t, s), s.base)
	if err != nil {
		t.Fatal(err)
	}
	endpoints := a.Endpoints()
	names := make([]string, 0, len(endpoints))
	for name := range endpoints {
		names = append(names, name)
	}
	slices.Sort(names)
	tools, idArgs := 0, 0
	for _, endpoint := range names {
		if endpoint == "desk" {
			// Desk callers are people with a workspace's token, not agents in a room under
			// an agreement: TestDeskIsolationMatrix checks its tools' ids.
			continue
		}
		for _, tool := range endpoints[endpoint].Tools {
			tools++
			var sc schema
			if err := json.Unmarshal(tool.InputSchema, &sc); err != nil {
				t.Fatalf("%s %s: input schema: %v", endpoint, tool.Name, err)
			}
			ids := idArguments(&sc)
			idArgs += len(ids)
			// On the all-rooms address a tool without room_id (list_rooms) is not bound to
			// a project: a refused guest is served it, and must still learn nothing.
			_, takesRoom := sc.Properties["room_id"]
			bound := endpoint != "all_rooms" || takesRoom
			for _, st := range agreementStates {
				t.Run(endpoint+"/"+tool.Name+"/"+st.name, func(t *testing.T) {
					url, key := w.endpointURL(t, endpoint, st), s.key(st.agent)
					base := w.sample("", &sc).(map[string]any)
					check := func(what string, got answer) {
						t.Helper()
						if got.internal() {
							t.Fatalf("%s: internal error: %d %s", what, got.status, got.body)
						}
						if !st.admitted {
							for _, secret := range w.secrets {
								if strings.Contains(got.body, secret) {
									t.Fatalf("%s: a refused guest's answer holds %q: %s", what, secret, got.body)
								}
							}
							for _, p := range agreementStates {
								if p.part != st.part && strings.Contains(got.body, `"`+p.part+`"`) {
									t.Fatalf("%s: a refused guest's answer names part %q: %s", what, p.part, got.body)
								}
							}
						}
					}
					got := callTool(t, url, key, tool.Name, base)
					check("call", got)
					switch {
					case !st.admitted && bound:
						if !got.refused() {
							t.Fatalf("a refused guest was not refused: %d %s", got.status, got.body)
						}
					case got.refused():
						t.Fatalf("an admitted caller got the agreement refusal: %s", got.body)
					case got.status != http.StatusOK:
						t.Fatalf("HTTP %d: %s", got.status, got.body)
					case st.granted && got.grantRefused():
						t.Fatalf("a caller holding every grant got a grant refusal: %s", got.text)
					case !st.admitted && got.isErr:
						t.Fatalf("a tool not bound to the project refused: %s", got.text)
					}
					for _, arg := range ids {
						with := func(id string) answer {
							args := map[string]any{}
							for k, v := range base {
								args[k] = v
							}
							if sc.Properties[arg].Type == "array" {
								args[arg] = []string{id}
							} else {
								args[arg] = id
							}
							a := callTool(t, url, key, tool.Name, args)
							check(arg+"="+id, a)
							a.body = strings.ReplaceAll(a.body, id, "<id>")
							return a
						}
						for _, id := range w.foreign {
							got := with(id)
							// The absent id differs from the foreign one in its last digit only, so it
							// sorts the same against every stored id: a cursor argument (paging
							// before an id) must answer alike too.
							if absent := with(sibling(id)); got.body != absent.body || got.status != absent.status {
								t.Errorf("%s: another tenant's id answers unlike an absent id:\n  absent:  %d %s\n  foreign: %d %s", arg, absent.status, absent.body, got.status, got.body)
							}
						}
					}
				})
			}
		}
	}
	// Ids inside an object without declared properties (event's detail) are out of the
	// generator's reach: the two the threads event takes are checked here.
	for _, st := range agreementStates {
		t.Run("threads/event detail ids/"+st.name, func(t *testing.T) {
			url, key := w.endpointURL(t, "threads", st), s.key(st.agent)
			for _, d := range []struct{ typ, field string }{{"composing", "threadId"}, {"error", "contradicts"}} {
				with := func(id string) answer {
					a := callTool(t, url, key, "event", map[string]any{"type": d.typ, "detail": map[string]any{d.field: id}})
					if a.internal() {
						t.Fatalf("internal error: %s", a.body)
					}
					a.body = strings.ReplaceAll(a.body, id, "<id>")
					return a
				}
				for _, id := range w.foreign {
					if got, absent := with(id), with(sibling(id)); got.body != absent.body || got.status != absent.status {
						t.Errorf("detail.%s: another tenant's id answers unlike an absent id:\n  absent:  %s\n  foreign: %s", d.field, absent.body, got.body)
					}
				}
			}
		})
	}
	// The matrix must not pass by finding nothing to check.
	if tools < 20 || idArgs < 10 {
		t.Fatalf("the matrix found only %d tools and %d id arguments", tools, idArgs)
	}
	t.Logf("isolation matrix: %d tools × %d agreement states, %d id arguments × %d foreign ids", tools, len(agreementStates), idArgs, len(w.foreign))
}
