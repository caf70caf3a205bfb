package desk_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/relayroom/relayroom/internal/desk"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite "+desk.OpenAPIPath)

// TestIngestOpenAPI keeps api/desk-ingest.openapi.json equal to what the ingest API's Go
// types derive (`make generate` rewrites it, `make check-generated` runs this test).
func TestIngestOpenAPI(t *testing.T) {
	t.Parallel()
	got, err := desk.IngestOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", desk.OpenAPIPath)
	if *updateOpenAPI {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `make generate`)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: the ingest API's types changed; run `make generate` and review the diff", desk.OpenAPIPath)
	}
	t.Run("every bound is the handler's", func(t *testing.T) {
		var doc struct {
			Components struct {
				Schemas map[string]struct {
					Properties map[string]struct {
						MaxLength *int `json:"maxLength"`
						MaxItems  *int `json:"maxItems"`
						Items     struct {
							Properties map[string]struct {
								MaxLength *int `json:"maxLength"`
							} `json:"properties"`
						} `json:"items"`
					} `json:"properties"`
					AdditionalProperties *bool `json:"additionalProperties"`
				} `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(got, &doc); err != nil {
			t.Fatal(err)
		}
		conv, msg := doc.Components.Schemas["Conversation"], doc.Components.Schemas["Message"]
		if *conv.Properties["messages"].MaxItems != desk.MaxIngestMessages || *conv.Properties["subject"].MaxLength != desk.MaxSubject ||
			*conv.Properties["messages"].Items.Properties["body"].MaxLength != desk.MaxMessageBody ||
			*msg.Properties["external_id"].MaxLength != desk.MaxExternalID || *msg.Properties["attachments"].MaxItems != desk.MaxAttachments ||
			conv.AdditionalProperties == nil || *conv.AdditionalProperties || msg.AdditionalProperties == nil || *msg.AdditionalProperties {
			t.Fatalf("%+v", doc.Components.Schemas)
		}
	})
}
