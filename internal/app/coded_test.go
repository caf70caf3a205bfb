package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/testfix"
)

// TestACodedRouteAnswersAWrongMethodInItsFormat: the desk's ingest API and CI
// confirmation give every failure as {"error":{"code","message"}} (their OpenAPI says so);
// a GET of one of their POST routes was the router's {"error":"Method Not Allowed"}, a
// body their clients cannot read.
func TestACodedRouteAnswersAWrongMethodInItsFormat(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for name, path := range map[string]string{
		"ingest":       desk.RouteIngestConversations,
		"confirmation": "/api/projects/" + s.res.Projects["escalations"].ID.String() + "/knowledge/" + uuid.NewString() + "/confirm",
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := http.Get(s.base + path)
			if err != nil {
				t.Fatal(err)
			}
			body := testfix.Body(t, resp)
			var coded httpapi.CodedError
			if resp.StatusCode != http.StatusMethodNotAllowed || json.Unmarshal([]byte(body), &coded) != nil ||
				coded.Error.Code != "method_not_allowed" || coded.Error.Message == "" {
				t.Fatalf("GET %s: %d %s; want 405 {\"error\":{\"code\":\"method_not_allowed\",…}}", path, resp.StatusCode, body)
			}
			if allow := resp.Header.Get("Allow"); !strings.Contains(allow, http.MethodPost) {
				t.Fatalf("Allow %q, want POST named", allow)
			}
		})
	}
	t.Run("other routes keep the flat format", func(t *testing.T) {
		resp, err := http.Post(s.base+"/healthz", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		var flat struct {
			Error string `json:"error"`
		}
		if body := testfix.Body(t, resp); resp.StatusCode != http.StatusMethodNotAllowed || json.Unmarshal([]byte(body), &flat) != nil || flat.Error == "" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
}
