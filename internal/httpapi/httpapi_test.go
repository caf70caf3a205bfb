package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
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
