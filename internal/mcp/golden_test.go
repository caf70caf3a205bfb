package mcp

import (
	"bufio"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the expected responses of testdata/*.txt")

const (
	requestMarker  = "-- request --\n"
	responseMarker = "-- response --\n"
)

// transcript is one golden file: comment lines, the request as sent, the response as
// expected. The format is plain HTTP-ish text so that a reviewer reads it without tools:
//
//	# what rule this checks
//	-- request --
//	POST /rooms
//	Header: value
//
//	body bytes, exactly
//	-- response --
//	HTTP 200
//	Header: value
//
//	body bytes, exactly
type transcript struct {
	head     string // everything up to and including the request section
	method   string
	target   string
	header   http.Header
	body     string
	expected string // the response section as written
}

func parseTranscript(text string) (*transcript, error) {
	ri := strings.Index(text, requestMarker)
	si := strings.Index(text, "\n"+responseMarker)
	if ri < 0 || si < 0 || si < ri {
		return nil, fmt.Errorf("want a %q section followed by a %q section", requestMarker, responseMarker)
	}
	tr := &transcript{head: text[:si+1], expected: text[si+1+len(responseMarker):], header: http.Header{}}
	req := text[ri+len(requestMarker) : si]
	headPart, body, found := strings.Cut(req, "\n\n")
	if !found {
		headPart, body = strings.TrimSuffix(req, "\n"), ""
	}
	tr.body = body
	sc := bufio.NewScanner(strings.NewReader(headPart))
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			method, target, ok := strings.Cut(line, " ")
			if !ok {
				return nil, fmt.Errorf("request line %q: want METHOD TARGET", line)
			}
			tr.method, tr.target, first = method, target, false
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("header line %q: want Name: value", line)
		}
		tr.header.Add(k, v)
	}
	if first {
		return nil, fmt.Errorf("missing request line")
	}
	return tr, nil
}

// renderResponse writes a recorded response in the transcript format: every header the
// handler set (sorted), then the body bytes unchanged.
func renderResponse(rec *httptest.ResponseRecorder) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d\n", rec.Code)
	keys := make([]string, 0, len(rec.Header()))
	for k := range rec.Header() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range rec.Header()[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	if body := rec.Body.String(); body != "" {
		b.WriteString("\n")
		b.WriteString(body)
		b.WriteString("\n")
	}
	return b.String()
}

// TestTranscripts replays every testdata/*.txt against the fake endpoints and compares
// the response byte for byte. `go test ./internal/mcp -update` rewrites the responses;
// review the diff before committing it.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	mux := newTestMux(t, nil)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := parseTranscript(string(raw))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			req := httptest.NewRequest(tr.method, tr.target, strings.NewReader(tr.body))
			req.Header = tr.header
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			got := renderResponse(rec)
			if *update {
				if err := os.WriteFile(file, []byte(tr.head+responseMarker+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != tr.expected {
				t.Errorf("%s: response differs (run with -update to accept)\n--- want\n%s--- got\n%s", file, tr.expected, got)
			}
		})
	}
}
