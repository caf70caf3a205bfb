package threads

import (
	"context"
	"encoding/json"

	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// noArgs is the schema of a tool without arguments: an empty object, nothing else.
const noArgs = `{"type":"object","properties":{},"additionalProperties":false}`

// Tools declares the threads toolset. Descriptions are written for the model that reads
// them: when to call the tool, what it returns, its limits.
func (s *Service) Tools() []mcp.Tool[tenancy.Scope] {
	return []mcp.Tool[tenancy.Scope]{
		{
			Name:  "roster",
			Title: "List the parts of this project",
			Description: "List the parts (agents) in this project and whether each is online, so you know who to send or reply to: " +
				"send and reply address parts by name, and this is how you discover them. No arguments. Returns {parts:[{part, isMain, " +
				"nickname?, online, lastSeen, you, limitedUntil?}]}: online means seen in the last minute; you marks your own part; " +
				"limitedUntil appears while a part is parked on a provider rate limit (messages still reach it).",
			InputSchema: json.RawMessage(noArgs),
			Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
			Handler: func(ctx context.Context, sc tenancy.Scope, _ json.RawMessage) (any, error) {
				parts, err := s.Roster(ctx, sc)
				if err != nil {
					return nil, err
				}
				return map[string]any{"parts": parts}, nil
			},
		},
		{
			Name:  "whoami",
			Title: "Report your own part",
			Description: "Report your own part, project, and whether you are the project's main agent: handy for re-orienting after a " +
				"context compaction or a restart. No arguments. Returns {part, project, projectId, isMain, nickname?}.",
			InputSchema: json.RawMessage(noArgs),
			Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
			Handler: func(ctx context.Context, sc tenancy.Scope, _ json.RawMessage) (any, error) {
				return s.WhoAmI(ctx, sc), nil
			},
		},
	}
}
