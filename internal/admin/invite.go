package admin

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/tenancy"
)

// Invitations: an owner or admin invites a person by email from the People page; the
// one-time link (shown once) lets that person join with the role given, creating their
// account when they have none, or, signed in as that email, adding the organisation to
// theirs.

// InvitePrefix starts an invitation link's credential (masked in logs like every qyt_xx_).
const InvitePrefix = "qyt_iv_"

// InvitationTTL is how long a link can be used.
const InvitationTTL = 7 * 24 * time.Hour

// MinPassword is the shortest password an invited person may choose (as apply's).
const MinPassword = 8

// MsgInvitationInvalid answers a link that is unknown, used or expired alike.
const MsgInvitationInvalid = "This invitation link is not valid: it may have been used or have expired. Ask for a new one."

// MsgInvitationMember answers a link opened by someone who is a member already: an
// invitation does not change a member's role.
const MsgInvitationMember = "You are a member of this organisation already: an invitation does not change your role. Ask an owner or admin to change it."

// MsgInvitationSenderCannot answers a live link whose sender has since been demoted or
// deactivated: the role it offers is no longer theirs to give.
const MsgInvitationSenderCannot = "This invitation link is no longer valid: the person who sent it can no longer give this role. Ask an owner or admin for a new one."

// RouteInvite is where a link points (served by the dashboard without a session).
const RouteInvite = "/app/invite/"

// Invitation is a pending or used invitation, as the People page lists it.
type Invitation = db.InvitationListByOrgRow

// InviteOut is a new invitation with its link, shown once.
type InviteOut struct {
	ID        uuid.UUID
	Email     string
	URL       string
	ExpiresAt time.Time
}

// MaxEmailBytes is the longest email address an invitation holds (org_invitation.email).
const MaxEmailBytes = 320

// Invite creates a one-time link for email to join the organisation with role.
func (s *Service) Invite(ctx context.Context, a OrgActor, email, role string) (InviteOut, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email || len(email) > MaxEmailBytes {
		return InviteOut{}, fieldError("email", fmt.Sprintf("enter one email address of at most %d characters, like ana@example.com", MaxEmailBytes))
	}
	if !slices.Contains(Roles, role) {
		return InviteOut{}, fieldError("role", "choose owner, admin or member")
	}
	if role == tenancy.RoleOwner && a.Role != tenancy.RoleOwner {
		return InviteOut{}, apperr.New(apperr.Forbidden, "%s", MsgOwnerRole)
	}
	out := InviteOut{Email: email, ID: newID()}
	err := s.inOrg(ctx, a, "invite", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) error {
		member, err := s.Q.OrgMemberExists(ctx, tx, db.OrgMemberExistsParams{OrgID: a.OrgID, Email: email})
		if err != nil {
			return err
		}
		if member {
			return fieldError("email", "this person is a member already")
		}
		raw, p, err := auth.Generate(InvitePrefix)
		if err != nil {
			return fmt.Errorf("generate link: %w", err)
		}
		out.URL, out.ExpiresAt = s.url(RouteInvite+raw), time.Now().Add(InvitationTTL)
		var by *uuid.UUID
		if a.UserID != uuid.Nil {
			by = &a.UserID
		}
		if err := s.Q.InvitationInsert(ctx, tx, db.InvitationInsertParams{OrgID: a.OrgID, ID: out.ID, InviteID: p.ID, SecretHash: p.Hash(),
			Email: email, Role: role, InvitedByUserID: by, ExpiresAt: out.ExpiresAt}); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, Kind: audit.KindInvitation, ObjectID: out.ID.String(),
			Action: "invited", Detail: map[string]string{"email": email, "role": role}})
	})
	return out, err
}

// WithdrawInvitation ends an open invitation of the organisation: its link stops working
// at once. An owners' or admins' action, as inviting is, and an owner link an owner's
// only. One already accepted, expired, withdrawn, or of another organisation is NotFound.
func (s *Service) WithdrawInvitation(ctx context.Context, a OrgActor, id uuid.UUID) error {
	return s.inOrg(ctx, a, "withdraw invitation", func(tx *pg.Tx, _ db.OrganisationGetByIDRow) error {
		inv, err := s.Q.InvitationWithdraw(ctx, tx, db.InvitationWithdrawParams{OrgID: a.OrgID, ID: id})
		if pg.IsNoRows(err) {
			return apperr.New(apperr.NotFound, "no open invitation %s", id)
		}
		if err != nil {
			return err
		}
		if inv.Role == tenancy.RoleOwner && a.Role != tenancy.RoleOwner {
			return apperr.New(apperr.Forbidden, "%s", MsgOwnerRole) // rolls the withdrawal back
		}
		return audit.Record(ctx, tx, audit.Event{Actor: a.audit(), OrgID: a.OrgID, Kind: audit.KindInvitation, ObjectID: id.String(),
			Action: "withdrawn", Detail: map[string]string{"email": inv.Email, "role": inv.Role}})
	})
}

// OrgInvitations lists the organisation's invitations, newest first.
func (s *Service) OrgInvitations(ctx context.Context, a OrgActor) ([]Invitation, error) {
	return orgList(ctx, s, a, "list invitations", s.Q.InvitationListByOrg)
}

// OpenInvitation is what a link's page shows.
type OpenInvitation struct {
	OrgName    string
	Email      string
	Role       string
	HasAccount bool // the email has an account: its owner signs in to accept
}

// invitation finds the live invitation a link names; NotFound (one message) for a
// malformed, unknown, used or expired link, and its own message for a link whose sender
// may no longer give its role.
func (s *Service) invitation(ctx context.Context, tx *pg.Tx, link string) (db.InvitationRowsByInviteIDRow, error) {
	invalid := apperr.New(apperr.NotFound, "%s", MsgInvitationInvalid)
	p, err := auth.Parse(InvitePrefix, link)
	if err != nil {
		return db.InvitationRowsByInviteIDRow{}, invalid
	}
	rows, err := s.Q.InvitationRowsByInviteID(ctx, tx, p.ID)
	if err != nil {
		return db.InvitationRowsByInviteIDRow{}, err
	}
	for _, r := range rows {
		if p.Matches(r.SecretHash) && r.AcceptedAt == nil && time.Now().Before(r.ExpiresAt) {
			if !r.InviterMayGrant {
				return db.InvitationRowsByInviteIDRow{}, apperr.New(apperr.NotFound, "%s", MsgInvitationSenderCannot)
			}
			return r, nil
		}
	}
	return db.InvitationRowsByInviteIDRow{}, invalid
}

// Invitation reads what a link invites to.
func (s *Service) Invitation(ctx context.Context, link string) (OpenInvitation, error) {
	return operator(ctx, s, "open invitation", func(tx *pg.Tx) (OpenInvitation, error) {
		inv, err := s.invitation(ctx, tx, link)
		if err != nil {
			return OpenInvitation{}, err
		}
		out := OpenInvitation{OrgName: inv.OrgName, Email: inv.Email, Role: inv.Role}
		_, err = s.Q.UserGetByEmail(ctx, tx, inv.Email)
		if pg.IsNoRows(err) {
			return out, nil
		}
		out.HasAccount = err == nil
		return out, err
	})
}

// Joiner is who accepts an invitation: the signed-in person (SignedIn, their email must
// be the invitation's), or a new person choosing a name and password.
type Joiner struct {
	SignedIn      uuid.UUID
	SignedInEmail string
	Name          string
	Password      string
}

// AcceptInvitation joins the invited person to the organisation with the invitation's
// role, in one transaction with the invitation's use and the audit event: a link works
// once.
func (s *Service) AcceptInvitation(ctx context.Context, link string, j Joiner) error {
	err := s.DB.Operator(ctx, func(tx *pg.Tx) error {
		inv, err := s.invitation(ctx, tx, link)
		if err != nil {
			return err
		}
		existing, err := s.Q.UserGetByEmail(ctx, tx, inv.Email)
		hasAccount := err == nil
		if err != nil && !pg.IsNoRows(err) {
			return err
		}
		var userID uuid.UUID
		name := audit.PersonName(existing.Name, inv.Email)
		switch {
		case j.SignedIn != uuid.Nil:
			if !strings.EqualFold(j.SignedInEmail, inv.Email) {
				return apperr.New(apperr.Forbidden, "This invitation is for %s: sign in as that person to accept it.", inv.Email)
			}
			userID = j.SignedIn
		case hasAccount:
			return apperr.New(apperr.Forbidden, "%s has an account: sign in as that person to accept the invitation.", inv.Email)
		default:
			if name = strings.TrimSpace(j.Name); name == "" || len(name) > 200 {
				return fieldError("name", "required, at most 200 characters")
			}
			if len(j.Password) < MinPassword {
				return fieldError("password", fmt.Sprintf("at least %d characters", MinPassword))
			}
			if len(j.Password) > auth.MaxPasswordBytes {
				return fieldError("password", fmt.Sprintf("at most %d characters", auth.MaxPasswordBytes))
			}
			hash, err := auth.HashPassword(j.Password)
			if err != nil {
				return fmt.Errorf("hash password: %w", err)
			}
			userID, err = s.Q.UserCreate(ctx, tx, db.UserCreateParams{ID: newID(), Email: inv.Email, Name: name, PasswordHash: &hash})
			if pg.IsNoRows(err) {
				// Created since it was read (another invitation of this email accepted at
				// the same time): refused as if it had been there, never overwritten.
				return apperr.New(apperr.Forbidden, "%s has an account: sign in as that person to accept the invitation.", inv.Email)
			}
			if err != nil {
				return err
			}
		}
		// An invitation makes a member; it never changes the role of one (an owner may have
		// changed it since the link was sent). Taken in turns with the organisation's other
		// role changes: two links of one person accepted at once would otherwise each
		// retire the other's row and deadlock.
		if err := s.Q.OrgOwnersLock(ctx, tx, inv.OrgID); err != nil {
			return err
		}
		member, err := s.Q.OrgMemberExists(ctx, tx, db.OrgMemberExistsParams{OrgID: inv.OrgID, Email: inv.Email})
		if err != nil {
			return err
		}
		if member {
			return apperr.New(apperr.Conflict, "%s", MsgInvitationMember)
		}
		n, err := s.Q.InvitationAccept(ctx, tx, db.InvitationAcceptParams{OrgID: inv.OrgID, ID: inv.ID, UserID: &userID})
		if err != nil {
			return err
		}
		if n == 0 { // used by a concurrent request since it was read
			return apperr.New(apperr.NotFound, "%s", MsgInvitationInvalid)
		}
		if err := s.Q.InvitationRetireOthers(ctx, tx, db.InvitationRetireOthersParams{OrgID: inv.OrgID, Email: inv.Email, ID: inv.ID}); err != nil {
			return err
		}
		if err := s.Q.OrgMemberUpsert(ctx, tx, db.OrgMemberUpsertParams{OrgID: inv.OrgID, UserID: userID, Role: inv.Role}); err != nil {
			return err
		}
		actor := audit.Actor{OrgID: inv.OrgID, UserID: userID, Name: name}
		if err := audit.Record(ctx, tx, audit.Event{Actor: actor, OrgID: inv.OrgID, Kind: audit.KindInvitation, ObjectID: inv.ID.String(), Action: "accepted"}); err != nil {
			return err
		}
		return audit.Record(ctx, tx, audit.Event{Actor: actor, OrgID: inv.OrgID, Kind: audit.KindPerson, ObjectID: userID.String(),
			Action: "joined", Detail: map[string]string{"role": inv.Role, "invitation": inv.ID.String()}})
	})
	if in := (*InputError)(nil); errors.As(err, &in) {
		return err // field errors, shown beside their fields: not wrapped as an operation's failure
	}
	return wrap("accept invitation", err)
}
