package knowledge

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/text"
)

// Review is one entry as people see it in the review queue.
type Review struct {
	ID             uuid.UUID  `json:"knowledgeId"`
	Kind           string     `json:"kind"`
	Title          string     `json:"title"`
	Body           string     `json:"body"`
	Status         string     `json:"status"`
	Confidence     float64    `json:"confidence"`
	Source         string     `json:"source"`
	SourceThreadID *uuid.UUID `json:"sourceThreadId,omitempty"`
	AuthorPart     *string    `json:"authorPart,omitempty"`
	DuplicateOf    *uuid.UUID `json:"duplicateOf,omitempty"`
	// The state of the entry DuplicateOf names: "rejected" tells a reviewer the same text
	// was turned down before.
	DuplicateOfStatus *string `json:"duplicateOfStatus,omitempty"`
	Contradictions    int32   `json:"contradictions"`
	ExpiresAt         *string `json:"expiresAt,omitempty"`
	DecidedBy         *string `json:"decidedBy,omitempty"`
	CreatedAt         string  `json:"createdAt"`
}

// MaxList bounds List's limit.
const MaxList = 1000

// List returns a project's entries, newest first, optionally of one status (operator). A
// status that is none (a typo such as "candidates") or a limit out of 1..MaxList is
// refused: taken as given, the review queue read as empty, or the list was cut at 100
// without a word.
func (s *Service) List(ctx context.Context, projectID uuid.UUID, status string, limit int) ([]Review, error) {
	if limit < 1 || limit > MaxList {
		return nil, apperr.New(apperr.Invalid, "limit must be 1 to %d, got %d", MaxList, limit)
	}
	if statuses := []string{StatusCandidate, StatusTrusted, StatusDemoted, StatusRejected, StatusExpired}; status != "" && !slices.Contains(statuses, status) {
		return nil, apperr.New(apperr.Invalid, "status must be one of %s, got %q", strings.Join(statuses, ", "), status)
	}
	var st *string
	if status != "" {
		st = &status
	}
	var rows []db.KnowledgeListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		rows, err = s.Q.KnowledgeList(ctx, tx, db.KnowledgeListParams{ProjectID: projectID, Status: st, Lim: int32(limit)})
		return err
	})
	if err != nil {
		return nil, pg.Classify("list knowledge", err)
	}
	return reviews(rows), nil
}

// reviews are rows of KnowledgeList as people see them.
func reviews(rows []db.KnowledgeListRow) []Review {
	out := make([]Review, 0, len(rows))
	for _, r := range rows {
		rv := Review{ID: r.ID, Kind: r.Kind, Title: r.Title, Body: r.Body, Status: r.Status, Confidence: round(float64(r.Confidence)),
			Source: r.Source, SourceThreadID: r.SourceThreadID, AuthorPart: r.AuthorPart, DuplicateOf: r.DuplicateOf, DuplicateOfStatus: r.DuplicateOfStatus,
			Contradictions: r.Contradictions, DecidedBy: r.DecidedBy, CreatedAt: r.CreatedAt.UTC().Format(timeFormat)}
		if r.ExpiresAt != nil {
			e := r.ExpiresAt.UTC().Format(timeFormat)
			rv.ExpiresAt = &e
		}
		out = append(out, rv)
	}
	return out
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// Decision is the state an entry was moved to.
type Decision struct {
	KnowledgeID uuid.UUID `json:"knowledgeId"`
	Status      string    `json:"status"`
	Confidence  float64   `json:"confidence"`
}

// deciderCI is decided_by for CI's confirmations; a person's is "person:<name>".
const deciderCI = "ci"

// Approve makes a candidate (or a demoted entry) trusted; by names the person.
func (s *Service) Approve(ctx context.Context, projectID, id uuid.UUID, by string) (Decision, error) {
	var d Decision
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		d, err = s.decide(ctx, tx, projectID, id, StatusTrusted, "person:"+by, func(c Config) float64 { return c.ApprovedConfidence })
		return err
	})
	return d, pg.Classify("approve knowledge", err)
}

// Reject refuses a candidate (or retires a demoted or trusted entry).
func (s *Service) Reject(ctx context.Context, projectID, id uuid.UUID, by string) (Decision, error) {
	var d Decision
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		d, err = s.decide(ctx, tx, projectID, id, StatusRejected, "person:"+by, func(Config) float64 { return 0 })
		return err
	})
	return d, pg.Classify("reject knowledge", err)
}

func (s *Service) decide(ctx context.Context, tx *pg.Tx, projectID, id uuid.UUID, to, by string, conf func(Config) float64) (Decision, error) {
	st, err := s.load(ctx, tx, projectID)
	if pg.IsNoRows(err) {
		return Decision{}, apperr.New(apperr.NotFound, "no such project")
	}
	if err != nil {
		return Decision{}, err
	}
	from := []string{StatusCandidate, StatusDemoted}
	if to == StatusRejected {
		from = append(from, StatusTrusted)
	}
	if by == deciderCI {
		// A demoted entry was refuted by an agent: only a person may trust it again.
		from = []string{StatusCandidate}
	}
	now := s.now()
	r, err := s.Q.KnowledgeDecide(ctx, tx, db.KnowledgeDecideParams{Status: to, Confidence: float32(conf(st.cfg)), DecidedBy: &by,
		Now: &now, ProjectID: projectID, ID: id, FromStatus: from})
	if pg.IsNoRows(err) {
		cur, err2 := s.Q.KnowledgeGetStatus(ctx, tx, db.KnowledgeGetStatusParams{ProjectID: projectID, ID: id})
		if pg.IsNoRows(err2) {
			return Decision{}, apperr.New(apperr.NotFound, "no knowledge entry %s in this project", id).WithReason(ReasonKnowledgeNotFound)
		}
		if err2 != nil {
			return Decision{}, err2
		}
		if to == StatusTrusted && slices.Contains(from, cur.Status) {
			switch {
			case cur.ExpiresAt != nil && !cur.ExpiresAt.After(now):
				return Decision{}, apperr.New(apperr.Conflict, "knowledge entry %s expired at %s: recall would never return it, so it cannot become trusted",
					id, cur.ExpiresAt.UTC().Format(time.RFC3339)).WithReason(ReasonAlreadyDecided)
			case cur.DuplicateOf != nil && cur.OriginalStatus != nil && *cur.OriginalStatus == StatusTrusted:
				return Decision{}, apperr.New(apperr.Conflict, "knowledge entry %s is a near-duplicate of trusted entry %s, and recall would return both: reject it, or demote %s first",
					id, cur.DuplicateOf, cur.DuplicateOf).WithReason(ReasonAlreadyDecided)
			}
		}
		return Decision{}, apperr.New(apperr.Conflict, "knowledge entry %s is %s and cannot become %s", id, cur.Status, to).WithReason(ReasonAlreadyDecided)
	}
	if err != nil {
		return Decision{}, err
	}
	if r.Status == StatusTrusted {
		// Recall's typo channel learns the words of confirmed entries only (migration
		// 000073): the trigger that feeds it does not fire on a change of status.
		if err := s.Q.KnowledgeWordsAdd(ctx, tx, db.KnowledgeWordsAddParams{ProjectID: projectID, ID: id}); err != nil {
			return Decision{}, err
		}
	}
	// A person's decision on the dashboard is audited here, in its transaction.
	if err := audit.RecordIntended(ctx, tx); err != nil {
		return Decision{}, err
	}
	return decision(r), nil
}

// NewCIToken is a CI token just issued: the only time its secret is shown.
type NewCIToken struct {
	ID    uuid.UUID `json:"id"`
	Token string    `json:"ci_token"`
}

// CIToken is a project CI token as listed: its public prefix, never its secret.
type CIToken struct {
	ID        uuid.UUID  `json:"id"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// IssueCIToken issues a project CI token; it is returned once and stored hashed. The
// operator's issue is in the project host's history (a token that confirms knowledge is
// a credential people there should see appear).
func (s *Service) IssueCIToken(ctx context.Context, projectID uuid.UUID) (NewCIToken, error) {
	raw, p, err := auth.Generate(auth.CITokenPrefix)
	if err != nil {
		return NewCIToken{}, err
	}
	id := uuid.Must(uuid.NewV7())
	err = s.DB.Operator(ctx, func(tx *pg.Tx) error {
		if err := s.Q.CITokenInsert(ctx, tx, db.CITokenInsertParams{ProjectID: projectID, ID: id, TokenID: p.ID, SecretHash: p.Hash()}); err != nil {
			return err
		}
		return s.recordCIToken(ctx, tx, projectID, id, "ci_token_issued")
	})
	if err != nil {
		return NewCIToken{}, pg.Classify("issue ci token", err)
	}
	return NewCIToken{ID: id, Token: raw}, nil
}

// ListCITokens lists a project's CI tokens, newest first, revoked ones included.
func (s *Service) ListCITokens(ctx context.Context, projectID uuid.UUID) ([]CIToken, error) {
	var rows []db.CITokenListRow
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		rows, err = s.Q.CITokenList(ctx, tx, projectID)
		return err
	})
	if err != nil {
		return nil, pg.Classify("list ci tokens", err)
	}
	out := make([]CIToken, len(rows))
	for i, r := range rows {
		out[i] = CIToken{ID: r.ID, Prefix: auth.CITokenPrefix + r.TokenID + "…", CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
	}
	return out, nil
}

// RevokeCIToken revokes a project's CI token: its next confirmation is refused like an
// unknown token's. False when it was revoked already; NotFound when the project has no
// such token.
func (s *Service) RevokeCIToken(ctx context.Context, projectID, id uuid.UUID) (bool, error) {
	var n int64
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		var err error
		// n is set here first: a transaction retried runs again from its start.
		if n, err = s.Q.CITokenRevoke(ctx, tx, db.CITokenRevokeParams{ProjectID: projectID, ID: id}); err != nil {
			return err
		}
		if n > 0 {
			return s.recordCIToken(ctx, tx, projectID, id, "ci_token_revoked")
		}
		exists, err := s.Q.CITokenExists(ctx, tx, db.CITokenExistsParams{ProjectID: projectID, ID: id})
		if err == nil && !exists {
			err = apperr.New(apperr.NotFound, "no CI token %s in this project", id)
		}
		return err
	})
	if err != nil {
		return false, pg.Classify("revoke ci token", err)
	}
	return n > 0, nil
}

// recordCIToken records an operator's change of a CI token in the project host's
// history, as a change of the project.
func (s *Service) recordCIToken(ctx context.Context, tx *pg.Tx, projectID, id uuid.UUID, action string) error {
	host, err := s.Q.ProjectGetHost(ctx, tx, projectID)
	if err != nil {
		return err
	}
	return audit.RecordOperator(ctx, tx, audit.Event{OrgID: host, ProjectID: projectID, Kind: audit.KindProject, ObjectID: projectID.String(),
		Action: action, Detail: map[string]string{"token": id.String()}})
}

// errBadCIToken refuses any CI token that is malformed, unknown, revoked or of another
// project. A new value each time: a caller may set its Details.
func errBadCIToken() *apperr.Error {
	return apperr.New(apperr.Unauthenticated, "a valid project CI token (qyt_ci_…) is required")
}

// ConfirmCI makes a candidate trusted on behalf of a project's CI. The token must belong
// to the project named in the URL; a token of another project is refused like a bad one,
// and an entry of another project answers not found.
func (s *Service) ConfirmCI(ctx context.Context, token string, projectID, id uuid.UUID) (Decision, error) {
	p, err := auth.Parse(auth.CITokenPrefix, strings.TrimSpace(token))
	if err != nil {
		return Decision{}, errBadCIToken()
	}
	var d Decision
	err = s.DB.InTenant(ctx, pg.Tenant{Lookup: p.ID}, func(tx *pg.Tx) error {
		rows, err := s.Q.CITokenFind(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		ok := false
		for _, r := range rows {
			if r.ProjectID == projectID && p.Matches(r.SecretHash) {
				ok = true
			}
		}
		if !ok {
			return errBadCIToken()
		}
		tx.SetTenant(pg.Tenant{ProjectID: projectID})
		d, err = s.decide(ctx, tx, projectID, id, StatusTrusted, deciderCI, func(c Config) float64 { return c.CIConfidence })
		return err
	})
	if err != nil {
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return Decision{}, err
		}
		return Decision{}, pg.Classify("confirm knowledge", err)
	}
	return d, nil
}

// ProjectID resolves "host/slug" (operator commands).
func (s *Service) ProjectID(ctx context.Context, ref string) (uuid.UUID, error) {
	host, slug, ok := strings.Cut(ref, "/")
	if !ok {
		return uuid.Nil, apperr.New(apperr.Invalid, "a project is named \"host/slug\", got %q", text.Cut(ref, text.MaxEcho))
	}
	var id uuid.UUID
	err := s.DB.Operator(ctx, func(tx *pg.Tx) (err error) {
		id, err = s.Q.ProjectGetIDBySlug(ctx, tx, db.ProjectGetIDBySlugParams{HostSlug: host, ProjectSlug: slug})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "unknown project %q", text.Cut(ref, text.MaxEcho))
		}
		return err
	})
	return id, pg.Classify("find project", err)
}
