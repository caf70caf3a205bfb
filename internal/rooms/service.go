// Package rooms is the rooms toolset: rooms hosted by one company with guest companies
// under agreements, and the all-rooms address that serves every room an agent is in.
package rooms

import (
	"context"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Service holds the toolset's dependencies.
type Service struct {
	DB *pg.DB
	Q  *db.Queries
}

// Room is one entry of list_rooms.
type Room struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	HostCompany string `json:"host_company"`
	Role        string `json:"role"` // "host" or "guest": the caller's company's place in the room
}

// ListRooms lists every room the agent is in, except rooms where its company is a guest
// without an active agreement (pending or revoked): those are not the agent's to use.
func (s *Service) ListRooms(ctx context.Context, sc tenancy.Scope) ([]Room, error) {
	var rows []db.AgentRoomsRow
	err := s.DB.InTenant(ctx, sc.Tenant(), func(tx *pg.Tx) (err error) {
		rows, err = s.Q.AgentRooms(ctx, tx, sc.AgentID)
		return err
	})
	if err != nil {
		return nil, pg.Classify("list rooms", err)
	}
	out := make([]Room, 0, len(rows))
	for _, r := range rows {
		role := "guest"
		if r.HostOrgID == r.OrgID {
			role = "host"
		} else if r.AgreementStatus == nil || *r.AgreementStatus != tenancy.AgreementActive {
			continue
		}
		out = append(out, Room{ID: r.ID.String(), Name: r.Name, HostCompany: r.HostName, Role: role})
	}
	return out, nil
}
