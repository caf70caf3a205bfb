package threads_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/knowledge"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/secrets"
	"github.com/relayroom/relayroom/internal/secrets/secretstest"
	"github.com/relayroom/relayroom/internal/threads"
)

// threadChannel drives one stored text field of a threads tool and reads back what the
// tool that shows it returns. A refusal (an error, or a lesson not recorded) returns
// refused=true with its reason code.
type threadChannel func(t *testing.T, e *env, text string) (stored string, refused bool, code string)

var threadChannels = map[string]threadChannel{
	"threads.send.subject": func(t *testing.T, e *env, text string) (string, bool, string) {
		s := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: text, Body: "see subject"})
		stored := e.shown(t, s.ThreadID).Thread.Subject
		secretstest.CheckNamed(t, s.Redacted, text, stored)
		return stored, false, ""
	},
	"threads.send.body": func(t *testing.T, e *env, text string) (string, bool, string) {
		s := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: text})
		stored := e.shown(t, s.ThreadID).Messages[0].Body
		secretstest.CheckNamed(t, s.Redacted, text, stored)
		return stored, false, ""
	},
	"threads.reply.body": func(t *testing.T, e *env, text string) (string, bool, string) {
		s := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: "b"})
		r := must[threads.ReplyResult](t)(e.svc.Reply(context.Background(), e.sc("backend"), threads.ReplyInput{ThreadID: s.ThreadID, Body: text}))
		stored := e.shown(t, s.ThreadID).Messages[1].Body
		secretstest.CheckNamed(t, r.Redacted, text, stored)
		return stored, false, ""
	},
	"threads.learn.title": func(t *testing.T, e *env, text string) (string, bool, string) {
		return e.learn(t, text, "a body that says enough")
	},
	"threads.learn.body": func(t *testing.T, e *env, text string) (string, bool, string) {
		return e.learn(t, "a title", text)
	},
	"threads.close.lesson.title": func(t *testing.T, e *env, text string) (string, bool, string) {
		return e.lessonOnClose(t, text, "a body that says enough")
	},
	"threads.close.lesson.body": func(t *testing.T, e *env, text string) (string, bool, string) {
		return e.lessonOnClose(t, "a title", text)
	},
	"threads.recall.query": func(t *testing.T, e *env, text string) (string, bool, string) {
		// The query is kept and shown to the host's people (the Learning panel).
		r := must[knowledge.RecallResult](t)(e.svc.Knowledge.Recall(context.Background(), e.sc("architect"), knowledge.RecallInput{Query: text}))
		var stored string
		if err := e.d.Operator(context.Background(), func(tx *pg.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT query FROM recall_query WHERE id = $1`, r.QueryID).Scan(&stored)
		}); err != nil {
			t.Fatal(err)
		}
		return stored, false, ""
	},
	"threads.event.detail": func(t *testing.T, e *env, text string) (string, bool, string) {
		d, err := json.Marshal(map[string]string{"message": text})
		if err != nil {
			t.Fatal(err)
		}
		r := must[threads.EventResult](t)(e.svc.Event(context.Background(), e.sc("architect"), threads.EventInput{Type: "error", Detail: d}))
		var stored []byte
		if err := e.d.Operator(context.Background(), func(tx *pg.Tx) error {
			return tx.QueryRow(context.Background(), `SELECT detail FROM activity_event WHERE id = $1`, r.EventID).Scan(&stored)
		}); err != nil {
			t.Fatal(err)
		}
		var got struct{ Message string }
		if err := json.Unmarshal(stored, &got); err != nil {
			t.Fatal(err)
		}
		secretstest.CheckNamed(t, r.Redacted, text, got.Message)
		return got.Message, false, ""
	},
}

func (e *env) shown(t *testing.T, thread string) threads.ShowResult {
	t.Helper()
	return must[threads.ShowResult](t)(e.svc.Show(context.Background(), e.sc("backend"), thread))
}

// knowledgeText is the stored title or body (whichever was varied) of an entry.
func (e *env) knowledgeText(t *testing.T, id, title, body string) string {
	t.Helper()
	var gotTitle, gotBody string
	err := e.d.Operator(context.Background(), func(tx *pg.Tx) error {
		return tx.QueryRow(context.Background(), "SELECT title, body FROM knowledge WHERE id = $1", id).Scan(&gotTitle, &gotBody)
	})
	if err != nil {
		t.Fatal(err)
	}
	if title == "a title" {
		return gotBody
	}
	return gotTitle
}

func (e *env) learn(t *testing.T, title, body string) (string, bool, string) {
	r, err := e.svc.Knowledge.Learn(context.Background(), e.sc("architect"), knowledge.LearnInput{Title: title, Body: body, Kind: "pitfall"})
	if err != nil {
		ae, ok := apperr.As(err)
		if !ok {
			t.Fatal(err)
		}
		return "", true, ae.Reason
	}
	return e.knowledgeText(t, r.KnowledgeID, title, body), false, ""
}

func (e *env) lessonOnClose(t *testing.T, title, body string) (string, bool, string) {
	s := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "s", Body: "b"})
	r := must[threads.CloseResult](t)(e.svc.Close(context.Background(), e.sc("architect"), threads.CloseInput{ThreadID: s.ThreadID,
		Lesson: &knowledge.LessonInput{Title: title, Body: body, Kind: "pitfall"}}))
	if r.Lesson == nil || !r.Lesson.Recorded {
		if r.Lesson == nil {
			t.Fatalf("close answered no lesson outcome: %+v", r)
		}
		return "", true, r.Lesson.Code
	}
	return e.knowledgeText(t, r.Lesson.KnowledgeID, title, body), false, ""
}

// TestSecretCorpusPerChannel pushes every secret of the corpus and every benign
// look-alike through every threads channel of channels.txt (messages and knowledge),
// with the real services and database, and reads back what show (or the knowledge base)
// holds: every secret redacted to its marker, every benign text unchanged.
func TestSecretCorpusPerChannel(t *testing.T) {
	t.Parallel()
	secretstest.RunChannels(t, "threads.", threadChannels, func(t *testing.T, ch secretstest.Channel, drive threadChannel, c secretstest.Corpus) {
		e := setup(t)
		// One lesson per close: lift the per-agent hourly limit for the corpus' hundreds.
		e.exec(t, `UPDATE project SET knowledge_config = knowledge_config || '{"lessonsPerHour": 100000}'::jsonb`)
		knowledgeField := strings.Contains(ch.Name, "learn") || strings.Contains(ch.Name, "lesson")
		title := strings.HasSuffix(ch.Name, ".title") || strings.HasSuffix(ch.Name, ".subject")
		limit := threads.MaxBody
		switch {
		case ch.Name == "threads.send.subject":
			limit = threads.MaxSubject
		case ch.Name == "threads.event.detail":
			limit = threads.MaxDetailBytes / 8 // JSON escapes can make one character six bytes
		case ch.Name == "threads.recall.query":
			limit = knowledge.MaxRecallQuery
		case knowledgeField && title:
			limit = knowledge.MaxTitle
		case knowledgeField:
			limit = knowledge.MaxBody
		}
		caught := 0
		for _, s := range c.Samples {
			if utf8.RuneCountInString(s.Text) > limit {
				continue // the field cannot hold it (the schema refuses it before any scan)
			}
			stored, refused, code := drive(t, e, s.Text)
			redacted := s.Text[:s.Start] + secrets.Marker(s.Kind) + s.Text[s.End:]
			want := redacted
			if knowledgeField {
				want = strings.TrimSpace(want)
				if title && secrets.IsEmptyAfterRedaction(want) {
					want = knowledge.RedactedTitle // the contract: an emptied title becomes (redacted)
				}
			}
			switch {
			case knowledgeField && !title && secrets.IsEmptyAfterRedaction(redacted):
				// The contract: a body that redaction empties refuses the lesson.
				if !refused || code != knowledge.OutcomeEmptyAfterRedaction {
					t.Errorf("%s: want %s, got refused=%v %s stored %q", s, knowledge.OutcomeEmptyAfterRedaction, refused, code, stored)
					continue
				}
			case refused:
				t.Errorf("%s: refused (%s), want it stored redacted", s, code)
				continue
			case stored != want:
				t.Errorf("%s:\n stored %q\n   want %q", s, stored, want)
				continue
			}
			caught++
		}
		tried := 0
		for _, s := range c.Samples {
			if utf8.RuneCountInString(s.Text) <= limit {
				tried++
			}
		}
		if caught != tried {
			t.Errorf("%d of %d secrets redacted", caught, tried)
		}
		secretstest.CheckBenign(t, c.Benign, limit, func(text string) (string, bool, string) { return drive(t, e, text) },
			func(text string) string {
				if knowledgeField {
					return strings.TrimSpace(text)
				}
				return text
			})
	})
}

// TestMaskedMessageEverywhereItShows: a secret sent in a subject and a body is absent
// from every tool that shows messages (inbox preview, threads, search, show), and send's
// answer keeps its shape.
func TestMaskedMessageEverywhereItShows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	s := secretstest.Samples(t)[0]
	sent := e.send(t, "architect", threads.SendInput{To: []string{"backend"}, Subject: "deploy " + s.Secret(), Body: s.Text})
	if sent.ThreadID == "" || sent.MessageID == "" || len(sent.To) != 1 {
		t.Fatalf("send answer changed: %+v", sent)
	}
	inbox := must[[]threads.InboxItem](t)(e.svc.Inbox(ctx, e.sc("backend"), threads.InboxInput{}))
	list := must[[]threads.ThreadSummary](t)(e.svc.Threads(ctx, e.sc("backend"), threads.ThreadsInput{}))
	hits := must[[]threads.SearchHit](t)(e.svc.Search(ctx, e.sc("frontend"), threads.SearchInput{Query: "deploy"}))
	shown := e.shown(t, sent.ThreadID)
	for name, v := range map[string]any{"inbox": inbox, "threads": list, "search": hits, "show": shown} {
		got := fmtAny(v)
		if strings.Contains(got, s.Secret()) || !strings.Contains(got, secrets.MarkerPrefix) {
			t.Errorf("%s shows %s", name, got)
		}
	}
}

func fmtAny(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
