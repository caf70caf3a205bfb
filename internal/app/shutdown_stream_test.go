package app_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestShutdownEndsLiveStreams: a dashboard page's live stream (Server-Sent Events) is a
// request that never finishes by itself, and http.Server.Shutdown waits for it; a server
// asked to stop must end its streams instead (the browser reconnects, through a balancer
// to another replica), and stop within its shutdown timeout with no error.
func TestShutdownEndsLiveStreams(t *testing.T) {
	t.Parallel()
	s := startDashboard(t, dashboardFile)
	ana := s.signIn(t, "ana")[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A room's messages and a project's threads: both pages' streams are open at the stop.
	var streams []*bufio.Reader
	for _, path := range []string{"/app/rooms/" + s.room + "/events", "/app/projects/" + s.room + "/events"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
		res, err := ana.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		r := bufio.NewReader(res.Body)
		if _, err := r.ReadString('\n'); err != nil { // open: the handler is in its loop
			t.Fatal(err)
		}
		streams = append(streams, r)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("the server did not stop cleanly with live streams open: %v", err)
	}
	for i, r := range streams {
		for {
			_, err := r.ReadString('\n')
			if err == nil {
				continue
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("stream %d did not end cleanly: %v", i+1, err)
			}
			break
		}
	}
}
