package tenancy

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
)

// Messages of the rooms spec, verbatim: clients match on them.
const (
	MsgNotParticipant = "Agent is not a participant in this room"
	MsgUnauthorized   = "Unauthorized"
	MsgNoAgreement    = "No active agreement between your organisation and the host"
)

// MsgPartNotHeld refuses a threads URL whose part the key's agent does not hold (absent
// and held by another agent alike).
const MsgPartNotHeld = "this agent key does not hold a part %q in this project"

// resolving is the RLS tenant while a Scope is being resolved: the project the credential
// names, before the agreement that decides whether the Scope keeps it is read. The
// directory it may see is computed in the database from it (pg.Tenant.Visible is nil),
// which shows the project's members only to the host or a guest under an active
// agreement; the bind statement returns it for the Scope.
func resolving(s Scope) pg.Tenant {
	return pg.Tenant{OrgID: s.OrgID, ProjectID: s.ProjectID, AgentID: s.AgentID}
}

// Resolver turns credentials into Scopes. Each method is one transaction of at most two
// statements plus its COMMIT (the tenant settings travel pipelined with them), and each
// moves the caller's last_seen: presence must follow every authenticated call (but not a
// guest's whose agreement is not active: it is not acting in the project).
type Resolver struct {
	DB *pg.DB
	Q  *db.Queries
	// cache keeps what a resolution derived (names, directory lists) for ScopeCacheTTL;
	// nil (a Resolver built by hand) resolves every call in full.
	cache *scopeCache
	// final is set on a provisional resolver (Provisional): the resolver it was made from,
	// which a Settle that finds the verification failed resolves with.
	final *Resolver
}

func unauthenticated(msg string) error { return apperr.New(apperr.Unauthenticated, "%s", msg) }

// assume queues CredentialAssumeTenant: the credentials are verified in the database and,
// when they match, the transaction's tenant becomes theirs, with no round trip of its own
// (it travels with the bind statement that follows). The transaction's settings must name
// the credentials' public ids (pg.Tenant.Lookup).
func (r *Resolver) assume(ctx context.Context, tx *pg.Tx, key auth.Parsed, code *auth.Parsed, projectID *uuid.UUID) error {
	p := db.CredentialAssumeTenantParams{KeyID: key.ID, KeyHash: key.Hash(), ProjectID: projectID}
	if code != nil {
		p.CodeID, p.CodeHash = code.ID, code.Hash()
	}
	if err := tx.Pipeline(func() error { return r.Q.CredentialAssumeTenant(ctx, tx, p) }); err != nil {
		return fmt.Errorf("verify credentials: %w", err)
	}
	return nil
}

// bindVerified is the one-round-trip resolution (plain PostgreSQL): BEGIN, the lookup
// settings, CredentialAssumeTenant, the bind statement (which reads the tenant that only
// verified credentials set) and COMMIT, pipelined. found is false when the bind found no
// row: the credentials, the part or the membership is wrong, and the caller takes the
// statement-by-statement path, which says which. A revoked key or code, or an agreement
// suspended a moment ago, is therefore seen by the very next call, as before (the scope
// cache keeps only what this derives; recheck verifies the rest again). A guest without an active agreement gets its Scope (found): Admitted is the
// caller's to check, as with the bind of the other path.
func (r *Resolver) bindVerified(ctx context.Context, what string, key auth.Parsed, code *auth.Parsed, projectID *uuid.UUID, bind func(tx *pg.Tx) (db.ScopeBindPartRow, error)) (s Scope, found bool, err error) {
	lookup := key.ID
	if code != nil {
		lookup += "," + code.ID
	}
	err = r.DB.InTenant(ctx, pg.Tenant{Lookup: lookup}, func(tx *pg.Tx) error {
		if err := r.assume(ctx, tx, key, code, projectID); err != nil {
			return err
		}
		// The bind's one write (last_seen) touches the caller's own admitted part only,
		// so the COMMIT goes with it, as on the other path.
		tx.CommitWithNext(ctx)
		row, err := bind(tx)
		if pg.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bind: %w", err)
		}
		found = true
		s = Scope{OrgID: row.OrgID, AgentID: row.AgentID, ProjectID: row.ProjectID}
		fill(&s, row)
		return nil
	})
	if err != nil {
		return Scope{}, true, pg.Classify(what, err)
	}
	return s, found, nil
}

// credentials verifies an agent key and, when code is not nil, a connect code, in one
// query. It must be the transaction's first statement: the lookup tenant is its own.
func (r *Resolver) credentials(ctx context.Context, tx *pg.Tx, key auth.Parsed, code *auth.Parsed) (orgID, agentID, projectID uuid.UUID, err error) {
	lookup, codeID := key.ID, ""
	if code != nil {
		lookup, codeID = key.ID+","+code.ID, code.ID
	}
	tx.SetTenant(pg.Tenant{Lookup: lookup})
	rows, err := r.Q.CredentialRows(ctx, tx, db.CredentialRowsParams{KeyID: key.ID, CodeID: codeID})
	if err != nil {
		return orgID, agentID, projectID, fmt.Errorf("verify credentials: %w", err)
	}
	for _, row := range rows {
		switch {
		case row.Kind == "key" && key.Matches(row.SecretHash):
			orgID, agentID = row.OwnerID, row.AgentID
		case row.Kind == "code" && code != nil && code.Matches(row.SecretHash):
			projectID = row.OwnerID
		}
	}
	if code != nil && projectID == uuid.Nil {
		return orgID, agentID, projectID, unauthenticated("unknown connect code")
	}
	if agentID == uuid.Nil {
		return orgID, agentID, projectID, unauthenticated(MsgUnauthorized)
	}
	return orgID, agentID, projectID, nil
}

// resolveVerified is a resolution without the cache (and on Citus the only one): one
// transaction that verifies the key, and the connect code when code is not nil, with no
// tenant (credentials), then runs bind under the caller's resolving tenant. The caller's
// project is the code's, or projectID when the address names a room (nil: none).
func (r *Resolver) resolveVerified(ctx context.Context, what string, key auth.Parsed, code *auth.Parsed, projectID *uuid.UUID, bind func(tx *pg.Tx, s *Scope) error) (Scope, error) {
	var s Scope
	err := r.DB.InTenant(ctx, pg.Tenant{}, func(tx *pg.Tx) error {
		orgID, agentID, codeProject, err := r.credentials(ctx, tx, key, code)
		if err != nil {
			return err
		}
		s = Scope{OrgID: orgID, AgentID: agentID, ProjectID: codeProject}
		if projectID != nil {
			s.ProjectID = *projectID
		}
		tx.SetTenant(resolving(s))
		return bind(tx, &s)
	})
	if err != nil {
		return Scope{}, pg.Classify(what, err)
	}
	return s, nil
}

// Agent resolves an agent key alone (the all-rooms address).
func (r *Resolver) Agent(ctx context.Context, key string) (Scope, error) {
	k, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized) // no database work for a mistyped key
	}
	ck := scopeKey{kind: 'a', creds: credentialsDigest(k.Hash())}
	if !r.DB.Citus() {
		full := func(ctx context.Context) (Scope, error) { return r.final.Agent(ctx, key) }
		if s, ok, err := r.recheck(ctx, "resolve agent", ck, k, nil, nil, full); ok || err != nil {
			return s, err
		}
		var s Scope
		found := false
		err := r.DB.InTenant(ctx, pg.Tenant{Lookup: k.ID}, func(tx *pg.Tx) error {
			if err := r.assume(ctx, tx, k, nil, nil); err != nil {
				return err
			}
			tx.CommitWithNext(ctx)
			id, err := r.Q.AgentGetOwnIdentity(ctx, tx)
			if pg.IsNoRows(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("resolve agent: identity: %w", err)
			}
			found = true
			s = Scope{OrgID: id.OrgID, AgentID: id.ID}
			s.AgentSlug, s.AgentName, s.AgentModel, s.AgentKind, s.OrgName = id.Slug, id.Name, id.Model, id.Kind, id.OrgName
			s.Visible = &pg.Visible{Orgs: id.VisibleOrgs, Projects: id.VisibleProjects, Agents: id.VisibleAgents, Users: id.VisibleUsers}
			return nil
		})
		if err != nil {
			return Scope{}, pg.Classify("resolve agent", err)
		}
		if found {
			r.cache.put(ck, s)
			return s, nil
		}
	}
	return r.resolveVerified(ctx, "resolve agent", k, nil, nil, func(tx *pg.Tx, s *Scope) error {
		// The touch returns nothing anyone reads: it travels with the identity's query,
		// and so does the COMMIT (nothing after it can undo the touch).
		if err := tx.Pipeline(func() error { return r.Q.MembershipTouchByAgent(ctx, tx, s.AgentID) }); err != nil {
			return fmt.Errorf("resolve agent: touch: %w", err)
		}
		tx.CommitWithNext(ctx)
		id, err := r.Q.AgentGetIdentity(ctx, tx, db.AgentGetIdentityParams{OrgID: s.OrgID, ID: s.AgentID})
		if err != nil {
			return fmt.Errorf("resolve agent: identity: %w", err)
		}
		s.AgentSlug, s.AgentName, s.AgentModel, s.AgentKind, s.OrgName = id.Slug, id.Name, id.Model, id.Kind, id.OrgName
		s.Visible = &pg.Visible{Orgs: id.VisibleOrgs, Projects: id.VisibleProjects, Agents: id.VisibleAgents, Users: id.VisibleUsers}
		return nil
	})
}

// Room binds an already verified agent to one room (the all-rooms address's room_id). An
// agent that is not a member gets the spec's refusal, and so does a guest whose
// organisation's agreement is not active (Scope.Admitted).
func (r *Resolver) Room(ctx context.Context, agent Scope, projectID uuid.UUID) (Scope, error) {
	s := Scope{OrgID: agent.OrgID, AgentID: agent.AgentID, ProjectID: projectID}
	// It runs inside a tool call (all-rooms address) and may write last_seen: that is not
	// the tool's write, so it must not commit the call's idempotency claim.
	err := r.DB.InTenant(pg.WithoutClaim(ctx), resolving(s), func(tx *pg.Tx) error {
		if err := r.bindRoom(ctx, tx, &s); err != nil {
			return err
		}
		// Binding happens inside a tool call (room_id), so the refusal reaches the client
		// as that tool's error, in the rooms spec's words.
		return s.Admitted()
	})
	if err != nil {
		return Scope{}, pg.Classify("resolve room", err)
	}
	return s, nil
}

// RoomByKey verifies a key and binds it to one room in a single transaction. A member
// whose organisation is a guest without an active agreement still gets its Scope: the
// rooms spec has the per-room address accept a member's call and each tool refuse it
// (Error: No active agreement …), so the refusal is Scope.Admitted, which every tool of
// every endpoint checks before it runs (internal/app) and which keeps the project out of
// the scope's RLS tenant meanwhile. Callers that are not MCP tools check Admitted
// themselves.
func (r *Resolver) RoomByKey(ctx context.Context, key string, projectID uuid.UUID) (Scope, error) {
	k, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized)
	}
	if !r.DB.Citus() {
		ck := scopeKey{kind: 'r', creds: credentialsDigest(k.Hash()), project: projectID}
		full := func(ctx context.Context) (Scope, error) { return r.final.RoomByKey(ctx, key, projectID) }
		if s, ok, err := r.recheck(ctx, "resolve room", ck, k, nil, &projectID, full); ok || err != nil {
			return s, err
		}
		s, found, err := r.bindVerified(ctx, "resolve room", k, nil, &projectID, func(tx *pg.Tx) (db.ScopeBindPartRow, error) {
			row, err := r.Q.ScopeBindAgentRoom(ctx, tx, projectID)
			return db.ScopeBindPartRow(row), err
		})
		if found && err == nil {
			r.cache.put(ck, s)
		}
		if found || err != nil {
			return s, err
		}
	}
	return r.resolveVerified(ctx, "resolve room", k, nil, &projectID, func(tx *pg.Tx, s *Scope) error {
		return r.bindRoom(ctx, tx, s)
	})
}

// bindRoom is the transaction's last statement: it commits with it (the touch moves the
// caller's own presence only where it is admitted, so a refusal has nothing to undo).
func (r *Resolver) bindRoom(ctx context.Context, tx *pg.Tx, s *Scope) error {
	tx.CommitWithNext(ctx)
	row, err := r.Q.ScopeBindAgentRoom(ctx, tx, s.ProjectID)
	if pg.IsNoRows(err) {
		return apperr.New(apperr.Forbidden, MsgNotParticipant)
	}
	if err != nil {
		return fmt.Errorf("bind room: %w", err)
	}
	fill(s, db.ScopeBindPartRow(row))
	return nil
}

// Part resolves the threads endpoint: a connect code naming the project, the part asked
// for in the URL, and an agent key that must belong to the agent holding that part. A
// guest part is refused (Scope.Admitted) unless its organisation's agreement is active.
func (r *Resolver) Part(ctx context.Context, connectCode, part, key string) (Scope, error) {
	code, err := auth.Parse(auth.ConnectCodePrefix, connectCode)
	if err != nil {
		return Scope{}, unauthenticated("unknown connect code")
	}
	k, err := auth.Parse(auth.AgentKeyPrefix, key)
	if err != nil {
		return Scope{}, unauthenticated(MsgUnauthorized)
	}
	if !r.DB.Citus() {
		ck := scopeKey{kind: 'p', creds: credentialsDigest(k.Hash(), code.Hash()), part: part}
		full := func(ctx context.Context) (Scope, error) { return r.final.Part(ctx, connectCode, part, key) }
		if s, ok, err := r.recheck(ctx, "resolve part", ck, k, &code, nil, full); ok || err != nil {
			if err == nil {
				// Admitted when it was cached, and the agreement is read again: a change
				// of it takes the uncached path (recheck), which refuses as below.
				err = s.Admitted()
			}
			if err != nil {
				return Scope{}, err
			}
			return s, nil
		}
		s, found, err := r.bindVerified(ctx, "resolve part", k, &code, nil, func(tx *pg.Tx) (db.ScopeBindPartRow, error) {
			row, err := r.Q.ScopeBindOwnPart(ctx, tx, part)
			return db.ScopeBindPartRow(row), err
		})
		if err == nil && found {
			// A guest part without an active agreement is refused here, as below.
			err = s.Admitted()
		}
		if err != nil {
			return Scope{}, err
		}
		if found {
			r.cache.put(ck, s)
			return s, nil
		}
	}
	return r.resolveVerified(ctx, "resolve part", k, &code, nil, func(tx *pg.Tx, s *Scope) error {
		// The bind's one write (last_seen) touches the caller's own part only when it is
		// admitted, so the COMMIT goes with it: a refusal below has nothing to undo.
		tx.CommitWithNext(ctx)
		return r.bindPart(ctx, tx, s, part)
	})
}

// bindPart binds part of s's project to s, whose agent must hold it, and admits it.
func (r *Resolver) bindPart(ctx context.Context, tx *pg.Tx, s *Scope, part string) error {
	row, err := r.Q.ScopeBindPart(ctx, tx, db.ScopeBindPartParams{ProjectID: s.ProjectID, Part: part})
	if err != nil && !pg.IsNoRows(err) {
		return fmt.Errorf("resolve part: %w", err)
	}
	if err != nil || row.AgentID != s.AgentID {
		// A part may only act as itself: the key must be the part's own agent's. An
		// absent part and another agent's part get the same answer, so that a key
		// holder cannot list a project's parts by trying names.
		return apperr.New(apperr.Forbidden, MsgPartNotHeld, part)
	}
	fill(s, row)
	// A guest without an active agreement is refused before any tool or method runs:
	// it learns nothing of the project. The error rolls the transaction back, so its
	// last_seen does not move either.
	return s.Admitted()
}

func fill(s *Scope, m db.ScopeBindPartRow) {
	s.MemberID, s.Part, s.IsMain, s.Nickname = m.ID, m.Part, m.IsMain, m.Nickname
	s.Access, s.Capabilities, s.ParkedUntil = m.Access, m.Capabilities, m.ParkedUntil
	s.AgentSlug, s.AgentName, s.AgentModel, s.AgentKind, s.OrgName = m.AgentSlug, m.AgentName, m.AgentModel, m.AgentKind, m.OrgName
	s.ProjectName, s.HostOrgID, s.HostName = m.ProjectName, m.HostOrgID, m.HostName
	s.AgreementStatus, s.Grants = "", nil
	if m.AgreementStatus != nil {
		s.AgreementStatus, s.Grants = *m.AgreementStatus, m.AgreementGrants
	}
	s.Visible = &pg.Visible{Orgs: m.VisibleOrgs, Projects: m.VisibleProjects, Agents: m.VisibleAgents, Users: m.VisibleUsers}
}
