package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/httpapi"
)

func answer(t *testing.T, e httpapi.Errors, err error) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r = r.WithContext(httpapi.WithRequestID(r.Context(), "req-123456"))
	w := httptest.NewRecorder()
	e.Write(w, r, err)
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return w, body
}

func TestErrors(t *testing.T) {
	t.Parallel()
	t.Run("flat body carries message, reason and request id", func(t *testing.T) {
		t.Parallel()
		w, body := answer(t, httpapi.Errors{}, apperr.New(apperr.Conflict, "taken").WithReason("already_decided"))
		if w.Code != http.StatusConflict || body["error"] != "taken" || body["reason"] != "already_decided" || body["request_id"] != "req-123456" {
			t.Fatalf("%d %v", w.Code, body)
		}
	})
	t.Run("coded body names the reason as its code", func(t *testing.T) {
		t.Parallel()
		w, body := answer(t, httpapi.Errors{Coded: true}, apperr.New(apperr.NotFound, "gone").WithReason("knowledge_not_found"))
		e, _ := body["error"].(map[string]any)
		if w.Code != http.StatusNotFound || e["code"] != "knowledge_not_found" || e["message"] != "gone" {
			t.Fatalf("%d %v", w.Code, body)
		}
	})
	t.Run("an unexpected error is answered without its text", func(t *testing.T) {
		t.Parallel()
		w, body := answer(t, httpapi.Errors{}, errors.New("pq: secret detail"))
		if w.Code != http.StatusInternalServerError || body["error"] != "internal error" {
			t.Fatalf("%d %v", w.Code, body)
		}
	})
	t.Run("a 401 carries the surface's challenge", func(t *testing.T) {
		t.Parallel()
		w, _ := answer(t, httpapi.Errors{Challenge: `Bearer realm="x"`}, apperr.New(apperr.Unauthenticated, "no"))
		if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Bearer realm="x"` {
			t.Fatalf("%d %v", w.Code, w.Header())
		}
	})
	t.Run("a 429 says when to retry", func(t *testing.T) {
		t.Parallel()
		e := apperr.New(apperr.RateLimited, "slow down")
		e.Details = map[string]any{httpapi.RetryAfterDetail: 3}
		w, _ := answer(t, httpapi.Errors{}, e)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3" {
			t.Fatalf("%d %v", w.Code, w.Header())
		}
	})
}

// TestBodyError: a body that could not be read is answered by what went wrong, never by
// Go's read error.
func TestBodyError(t *testing.T) {
	t.Parallel()
	t.Run("the byte budget's refusal stays a 429 that says when to retry", func(t *testing.T) {
		t.Parallel()
		busy := apperr.New(apperr.RateLimited, "The server holds too many request bodies; retry shortly").WithReason("too_many_request_bytes")
		busy.Details = map[string]any{httpapi.RetryAfterDetail: 1}
		w, body := answer(t, httpapi.Errors{Coded: true}, httpapi.BodyError(fmt.Errorf("read: %w", busy), "body"))
		e, _ := body["error"].(map[string]any)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || e["code"] != "too_many_request_bytes" {
			t.Fatalf("%d %v %v", w.Code, w.Header(), body)
		}
	})
	t.Run("a body past its bound names the bound", func(t *testing.T) {
		t.Parallel()
		w, body := answer(t, httpapi.Errors{}, httpapi.BodyError(&http.MaxBytesError{Limit: 1024}, "body"))
		if w.Code != http.StatusBadRequest || body["error"] != "the body is larger than 1024 bytes" {
			t.Fatalf("%d %v", w.Code, body)
		}
	})
	t.Run("a read that failed does not show the server's addresses", func(t *testing.T) {
		t.Parallel()
		read := &net.OpError{Op: "read", Net: "tcp", Source: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}, Err: os.ErrDeadlineExceeded}
		w, body := answer(t, httpapi.Errors{}, httpapi.BodyError(read, "upload"))
		if w.Code != http.StatusBadRequest || body["error"] != "cannot read the upload: it was cut short or sent too slowly" {
			t.Fatalf("%d %v", w.Code, body)
		}
	})
}

func TestMuxRoutes(t *testing.T) {
	t.Parallel()
	m := &httpapi.Mux{}
	m.Handle(httpapi.Route{Method: http.MethodPost, Path: "/things/{id}/poke"}, func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
	})
	if rts := m.Routes(); len(rts) != 1 || rts[0].Path != "/things/{id}/poke" {
		t.Fatalf("routes %v", rts)
	}
	w := httptest.NewRecorder()
	m.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/things/7/poke", nil))
	if w.Code != http.StatusOK || w.Body.String() != "{\"id\":\"7\"}\n" {
		t.Fatalf("%d %q", w.Code, w.Body.String())
	}
}
