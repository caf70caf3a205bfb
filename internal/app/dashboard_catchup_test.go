package app_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/dashboard"
	"github.com/relayroom/relayroom/internal/rooms"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestLiveStreamsCatchUpAfterAReconnect: a browser that reconnects with Last-Event-ID after
// more happened than one read of a live stream returns (100 events, 50 messages) is sent
// everything it missed; after far more (ten reads' worth), the newest and a `gap` event
// that lets the page say some are not shown. Before, it was sent the newest read's worth
// only, and the rest were silently never shown.
func TestLiveStreamsCatchUpAfterAReconnect(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	ana := s.signIn(t, "ana")[0]
	room := s.room
	qa, globex := s.res.Agents["globex/qa-lead"].ID, s.res.Organisations["globex"].ID

	// write stores n items marked "<marker>-<i>" after a fresh cursor and returns it.
	write := func(t *testing.T, marker string, n int, events bool) uuid.UUID {
		t.Helper()
		cursor := uuid.Must(uuid.NewV7())
		ids, marks := make([]uuid.UUID, n), make([]string, n)
		for i := range n {
			ids[i], marks[i] = uuid.Must(uuid.NewV7()), fmt.Sprintf("%s-%d.", marker, i)
		}
		sql := `INSERT INTO room_message (project_id, id, author_agent_id, author_org_id, content)
			SELECT $1, id, $4, $5, m FROM unnest($2::uuid[], $3::text[]) AS t(id, m)`
		args := []any{room, ids, marks, qa, globex}
		if events {
			sql = `INSERT INTO activity_event (project_id, id, type, detail)
				SELECT $1, id, 'catch.up', jsonb_build_object('mark', m) FROM unnest($2::uuid[], $3::text[]) AS t(id, m)`
			args = args[:3]
		}
		testfix.Exec(t, s.d, sql, args...)
		return cursor
	}
	// reconnect opens path as a browser's EventSource reconnects after cursor, and reads
	// until it has seen want of the marked items (and the gap event, if wantGap) or the
	// stream has been quiet for 3 s; it returns the marks seen, whether a gap came, and
	// the stream's lines from then on (the stream stays open until the test ends).
	reconnect := func(t *testing.T, path string, cursor uuid.UUID, marker string, want int, wantGap bool) (map[string]bool, bool, <-chan string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
		req.Header.Set("Last-Event-ID", cursor.String())
		res, err := ana.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = res.Body.Close() }) // a read body: closing it cannot fail in a way that matters
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream: %d", res.StatusCode)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			r := bufio.NewReader(res.Body)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				lines <- line
			}
		}()
		seen, gap := map[string]bool{}, false
		for len(seen) < want || gap != wantGap {
			select {
			case line, ok := <-lines:
				if !ok {
					return seen, gap, lines
				}
				gap = gap || line == "event: gap\n"
				for _, f := range strings.Split(line, marker+"-")[1:] {
					if i := strings.IndexByte(f, '.'); i > 0 {
						seen[f[:i]] = true
					}
				}
			case <-time.After(3 * time.Second):
				return seen, gap, lines
			}
		}
		return seen, gap, lines
	}
	for _, c := range []struct {
		name   string
		path   string
		events bool
		n      int // items written while the page was away
		gap    bool
	}{
		{"the activity feed sends all of 250 events missed", "/app/projects/" + room + "/events", true, 250, false},
		{"the room sends all of 120 messages missed", "/app/rooms/" + room + "/events", false, 120, false},
		{"the activity feed sends the newest 1,000 of 1,100 events missed, and says the rest are not", "/app/projects/" + room + "/events", true, 1100, true},
		{"the room sends the newest 500 of 520 messages missed, and says the rest are not", "/app/rooms/" + room + "/events", false, 520, true},
	} {
		// One after the other: each writes into the same project.
		t.Run(c.name, func(t *testing.T) {
			marker := fmt.Sprintf("catchup%d", c.n)
			cursor := write(t, marker, c.n, c.events)
			want := c.n
			if c.gap {
				want = 10 * 100
				if !c.events {
					want = 10 * 50
				}
			}
			seen, gap, lines := reconnect(t, c.path, cursor, marker, want, c.gap)
			if len(seen) != want || gap != c.gap {
				t.Fatalf("%d of the %d items sent, gap %v; want %d sent, gap %v", len(seen), c.n, gap, want, c.gap)
			}
			if newest := fmt.Sprint(c.n - 1); !seen[newest] {
				t.Fatalf("the newest item (%s) was not sent", newest)
			}
			if c.events || !c.gap {
				return
			}
			// One more message while the stream stays open: its wake reads back to the
			// newest message sent, not through the 15 s the room's 520 fill, and says
			// nothing is missing (it used to read ten pages again and send a gap).
			write(t, "after", 1, false)
			testfix.Exec(t, s.d, `SELECT pg_notify($1, $2)`, rooms.RoomChannel, room)
			for {
				select {
				case line := <-lines:
					if line == "event: gap\n" {
						t.Fatal("a gap was reported while the stream was connected throughout")
					}
					if strings.Contains(line, "after-0.") {
						return
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the message after never arrived")
				}
			}
		})
	}
}

// TestLiveStreamsPerPersonAreBounded: live streams are not counted per address (they
// outlive the per-request limits by design), and one signed-in person could open them
// without end, holding every connection the server allows. A person holds at most
// dashboard.MaxStreamsPerPerson at once; another person is not held back.
func TestLiveStreamsPerPersonAreBounded(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	p := s.signIn(t, "ana", "mo")
	ana, mo := p[0], p[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(p *person) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/app/rooms/"+s.room+"/events", nil)
		res, err := p.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range dashboard.MaxStreamsPerPerson {
		res := open(ana)
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d", i+1, res.StatusCode)
		}
	}
	res := open(ana)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a stream past the bound: %d", res.StatusCode)
	}
	res = open(mo)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("another person's stream: %d", res.StatusCode)
	}
}
