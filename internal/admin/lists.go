package admin

import (
	"time"

	"github.com/google/uuid"
)

// The lines of the operator's listings (`relayroom admin … list`). Each has the fields of
// its query's row, in its order, so a row converts to it (OrganisationLine(row)) and a query
// that changes its columns stops the build here; the tags give the listings the
// snake_case keys of every other admin output (sqlc's rows carry no JSON tags, and
// printed as they were they said "OrgSlug").

// OrganisationLine is a line of `admin org list`.
type OrganisationLine struct {
	ID        uuid.UUID `json:"id"`
	Slug      string    `json:"slug"`
	Name      string    `json:"name"`
	Plan      string    `json:"plan"`
	Timezone  string    `json:"timezone"`
	CreatedAt time.Time `json:"created_at"`
}

// UserLine is a line of `admin user list`: a person in one organisation.
type UserLine struct {
	ID      uuid.UUID `json:"id"`
	Email   string    `json:"email"`
	Name    string    `json:"name"`
	OrgSlug string    `json:"org"`
	Role    string    `json:"role"`
	// Deactivated: the organisation deactivated the person; they keep the membership
	// (and its role) but act in nothing for it until reactivated.
	Deactivated bool `json:"deactivated"`
}

// AgentLine is a line of `admin agent list`.
type AgentLine struct {
	ID         uuid.UUID `json:"id"`
	OrgSlug    string    `json:"org"`
	Slug       string    `json:"slug"`
	Name       string    `json:"name"`
	Model      string    `json:"model"`
	Kind       string    `json:"kind"`
	ActiveKeys int64     `json:"active_keys"`
}

// ProjectLine is a line of `admin project list`.
type ProjectLine struct {
	ID       uuid.UUID `json:"id"`
	Slug     string    `json:"slug"`
	Name     string    `json:"name"`
	HostSlug string    `json:"host"`
	Members  int64     `json:"members"`
}

// MemberLine is a line of `admin member list`: an agent's part in the project.
type MemberLine struct {
	Part         string     `json:"part"`
	IsMain       bool       `json:"main"`
	Nickname     *string    `json:"nickname"`
	Access       string     `json:"access"`
	Capabilities []string   `json:"capabilities"`
	LastSeenAt   *time.Time `json:"last_seen_at"`
	AgentSlug    string     `json:"agent_slug"`
	OrgSlug      string     `json:"org"`
}

// AgreementLine is a line of `admin agreement list`.
type AgreementLine struct {
	GuestSlug string    `json:"guest"`
	Status    string    `json:"status"`
	Grants    []string  `json:"grants"`
	UpdatedAt time.Time `json:"updated_at"`
}

// lines converts a query's rows to a listing's lines.
func lines[Row, Line any](rows []Row, line func(Row) Line) []Line {
	out := make([]Line, len(rows))
	for i, r := range rows {
		out[i] = line(r)
	}
	return out
}
