package rooms_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/secrets/secretstest"
	"github.com/relayroom/relayroom/internal/testfix"
)

// maxLabel is write_memory's schema bound on a tag and on the category.
const maxLabel = 100

// roomChannel drives one stored text field of a rooms tool with the real tool over MCP
// and reads back what was stored (and shown). A refused call returns refused=true.
type roomChannel func(e *env, text string) (stored string, refused bool, errText string)

// roomChannels are the drivers of every "rooms." line of channels.txt.
var roomChannels = map[string]roomChannel{
	"rooms.write_memory.content": func(e *env, text string) (string, bool, string) {
		return e.memoryWrite(map[string]any{"content": text}, "content")
	},
	"rooms.write_memory.tags": func(e *env, text string) (string, bool, string) {
		return e.memoryWrite(map[string]any{"content": "labelled entry", "tags": []string{text}}, "array_to_string(tags, '')")
	},
	"rooms.write_memory.category": func(e *env, text string) (string, bool, string) {
		return e.memoryWrite(map[string]any{"content": "categorised entry", "category": text}, "category")
	},
	"rooms.post_message.content": func(e *env, text string) (string, bool, string) {
		r := e.call("architect", e.one, "post_message", map[string]any{"content": text})
		if r.IsError {
			return "", true, r.Text
		}
		res := r.obj(e.t)
		id := str(res, "message_id")
		// What every member reads: get_messages, the channel's own reader.
		for _, m := range e.call("qa-lead", e.one, "get_messages", map[string]any{"limit": 1}).obj(e.t)["messages"].([]any) {
			if msg := m.(map[string]any); msg["id"] == id {
				secretstest.CheckNamed(e.t, redactedOf(res), text, msg["content"].(string))
				return msg["content"].(string), false, ""
			}
		}
		e.t.Fatalf("message %s is not the newest in get_messages", id)
		return "", false, ""
	},
	"rooms.send_task.goal": func(e *env, text string) (string, bool, string) {
		r := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": text})
		if r.IsError {
			return "", true, r.Text
		}
		res := r.obj(e.t)
		stored := e.text("SELECT goal FROM room_task WHERE id = $1", uuidOf(e.t, str(res, "task_id")))
		if shown := str(res, "goal"); shown != stored {
			e.t.Errorf("send_task answers goal %q but stored %q", shown, stored)
		}
		secretstest.CheckNamed(e.t, redactedOf(res), text, stored)
		return stored, false, ""
	},
	"rooms.send_task.acceptance_criteria": func(e *env, text string) (string, bool, string) {
		return e.taskField("acceptance_criteria", text)
	},
	"rooms.send_task.verification_method": func(e *env, text string) (string, bool, string) {
		return e.taskField("verification_method", text)
	},
	"rooms.respond_to_task.result": func(e *env, text string) (string, bool, string) {
		id := e.insertTask("architect", "qa-lead", "report back")
		r := e.call("qa-lead", e.one, "respond_to_task", map[string]any{"task_id": id.String(), "result": text, "status": "done"})
		if r.IsError {
			return "", true, r.Text
		}
		res := r.obj(e.t)
		if res["result_recorded"] != true || res["success"] != true {
			e.t.Errorf("respond_to_task answer changed shape: %v", res)
		}
		stored := e.text("SELECT result FROM room_task WHERE id = $1", id)
		secretstest.CheckNamed(e.t, redactedOf(res), text, stored)
		return stored, false, ""
	},
}

func (e *env) memoryWrite(args map[string]any, column string) (string, bool, string) {
	r := e.call("architect", e.one, "write_memory", args)
	if r.IsError {
		return "", true, r.Text
	}
	return e.text("SELECT "+column+" FROM memory_entry WHERE id = $1", uuidOf(e.t, str(r.obj(e.t), "memory_id"))), false, ""
}

func (e *env) taskField(field, text string) (string, bool, string) {
	r := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": "check this", field: text})
	if r.IsError {
		return "", true, r.Text
	}
	res := r.obj(e.t)
	stored := e.text("SELECT coalesce("+field+", '') FROM room_task WHERE id = $1", uuidOf(e.t, str(res, "task_id")))
	secretstest.CheckNamed(e.t, redactedOf(res), text, stored)
	return stored, false, ""
}

// redactedOf is an answer's redacted list (nil when the answer has none).
func redactedOf(res map[string]any) []string {
	var out []string
	if list, ok := res["redacted"].([]any); ok {
		for _, k := range list {
			s, _ := k.(string)
			out = append(out, s)
		}
	}
	return out
}

func (e *env) text(sql string, args ...any) string {
	e.t.Helper()
	return testfix.Value[string](e.t, e.b, sql, args...)
}

// TestSecretCorpusPerChannel pushes every secret of the corpus (testdata/positives.txt:
// every kind and every bypass variant) and every benign look-alike (prose.txt,
// benign.txt) through every rooms channel of channels.txt, with the real tools and
// database: 100 % of the secrets refused or redacted as the channel's rule says, and
// every benign text stored unchanged.
func TestSecretCorpusPerChannel(t *testing.T) {
	t.Parallel()
	secretstest.RunChannels(t, "rooms.", roomChannels, func(t *testing.T, ch secretstest.Channel, drive roomChannel, c secretstest.Corpus) {
		e := newEnv(t)
		// write_memory's tags and category hold at most 100 characters; longer texts
		// are refused by the schema before any scan and cannot be stored there at all.
		label := strings.HasSuffix(ch.Name, ".tags") || strings.HasSuffix(ch.Name, ".category")
		caught := 0
		for _, s := range c.Samples {
			stored, refused, errText := drive(e, s.Text)
			switch {
			case label && utf8.RuneCountInString(s.Text) > maxLabel:
				if !refused {
					t.Errorf("%s: a %d-character label was stored", s, utf8.RuneCountInString(s.Text))
					continue
				}
			case ch.Outcome == secretstest.OutcomeRefuse:
				if !refused || errText != "Error: "+rooms.MsgSecret {
					t.Errorf("%s: want %q, got refused=%v %q (stored %q)", s, rooms.MsgSecret, refused, errText, stored)
					continue
				}
			default:
				want := strings.TrimSpace(s.Text[:s.Start] + secrets.Marker(s.Kind) + s.Text[s.End:])
				if refused {
					t.Errorf("%s: a redacting channel refused: %s", s, errText)
					continue
				}
				if strings.TrimSpace(stored) != want {
					t.Errorf("%s:\n stored %q\n   want %q", s, stored, want)
					continue
				}
			}
			caught++
		}
		if caught != len(c.Samples) {
			t.Errorf("%d of %d secrets handled as %s", caught, len(c.Samples), ch.Outcome)
		}
		labelBound := 0
		if label {
			labelBound = maxLabel
		}
		secretstest.CheckBenign(t, c.Benign, labelBound, func(text string) (string, bool, string) { return drive(e, text) },
			func(text string) string {
				if label || strings.Contains(ch.Name, "send_task") {
					return strings.TrimSpace(text) // these fields are trimmed before storing
				}
				return text
			})
	})
}

// TestMaskedTaskCardAndAnswer: a secret in a goal is masked in send_task's answer (same
// fields), in the task's card in room chat and in the recipient's inbox.
func TestMaskedTaskCardAndAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := secretstest.Samples(t)[0]
	r := e.call("architect", e.one, "send_task", map[string]any{"to_agent_slug": "qa-lead", "goal": s.Text}).obj(t)
	if str(r, "status") != "pending" || str(r, "state") != "SUBMITTED" || !strings.Contains(str(r, "goal"), secrets.Marker(s.Kind)) {
		t.Errorf("send_task answer: %v", r)
	}
	msgs := fmtJSON(e.call("qa-lead", e.one, "get_messages", nil).obj(t))
	if strings.Contains(msgs, s.Secret()) || !strings.Contains(msgs, secrets.Marker(s.Kind)) {
		t.Errorf("the task card shows the secret: %s", msgs)
	}
	inbox := fmtJSON(e.call("qa-lead", e.one, "get_inbox", nil).obj(t))
	if strings.Contains(inbox, s.Secret()) || !strings.Contains(inbox, secrets.Marker(s.Kind)) {
		t.Errorf("get_inbox shows the secret: %s", inbox)
	}
}
