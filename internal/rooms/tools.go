package rooms

import (
	"context"
	"encoding/json"

	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// AllRoomsTools declares the tools of the all-rooms address.
func (s *Service) AllRoomsTools() []mcp.Tool[tenancy.Scope] {
	return []mcp.Tool[tenancy.Scope]{
		{
			Name:  "list_rooms",
			Title: "List your rooms",
			Description: "List every room you can work in through this address: each room's id, its name, the company that hosts it " +
				"(host_company) and whether your company is the host or a guest there (role). Pass a room's id as room_id to the " +
				"other tools. Rooms where your company is a guest without an active agreement are not listed. No arguments. " +
				"Returns {rooms:[{id, name, host_company, role}], count}.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
			Annotations: mcp.Annotations{ReadOnly: true, Idempotent: true},
			Handler: func(ctx context.Context, sc tenancy.Scope, _ json.RawMessage) (any, error) {
				rooms, err := s.ListRooms(ctx, sc)
				if err != nil {
					return nil, err
				}
				return map[string]any{"rooms": rooms, "count": len(rooms)}, nil
			},
		},
	}
}
