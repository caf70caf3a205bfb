package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/db"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/web"
)

// option is one thing a person may choose at consent: whom the token acts as.
type option struct {
	value   string
	label   string
	orgID   uuid.UUID
	agentID uuid.UUID // nil for the desk
	part    string    // threads only
}

// choices lists what the signed-in person may pick for a resource, and the resource in
// words. Rooms: their organisations' agents that are members of the room (any of their
// agents for the all-rooms address); threads: the parts of the project held by their
// organisations' agents; desk: the workspaces (organisations) they belong to.
func (s *Server) choices(ctx context.Context, sess web.Session, res auth.Resource) (string, string, []option, error) {
	var opts []option
	var words, question string
	err := s.deps.DB.InTenant(ctx, sess.Tenant(), func(tx *pg.Tx) error {
		orgs, err := s.deps.Q.WebSessionListOrgs(ctx, tx, sess.ID)
		if err != nil {
			return fmt.Errorf("consent: organisations: %w", err)
		}
		projectID := res.ProjectID
		if res.Kind == auth.ResourceThreads {
			code, err := auth.Parse(auth.ConnectCodePrefix, res.ConnectCode)
			if err != nil {
				return nil // no such project: nothing to choose
			}
			tx.SetTenant(pg.Tenant{Lookup: code.ID})
			rows, err := s.deps.Q.ConnectCodeRows(ctx, tx, code.ID)
			if err != nil {
				return fmt.Errorf("consent: connect code: %w", err)
			}
			for _, r := range rows {
				if code.Matches(r.SecretHash) {
					projectID = r.ProjectID
				}
			}
			if projectID == uuid.Nil {
				return nil
			}
		}
		switch res.Kind {
		case auth.ResourceThreads:
			question, words = "Act as which part?", "the threads of project "
		case auth.ResourceRoom:
			question, words = "Act as which agent?", "room "
		case auth.ResourceAllRooms:
			question, words = "Act as which agent?", "every room of the agent you choose"
		case auth.ResourceDesk:
			question, words = "Which workspace?", "the helpdesk"
		}
		for _, o := range orgs {
			if o.Deactivated {
				continue // a deactivated member acts for the organisation in nothing
			}
			tx.SetTenant(pg.Tenant{OrgID: o.OrgID, ProjectID: projectID})
			orgName, err := s.deps.Q.OrganisationGetName(ctx, tx, o.OrgID)
			if err != nil {
				return fmt.Errorf("consent: organisation: %w", err)
			}
			switch res.Kind {
			case auth.ResourceDesk:
				opts = append(opts, option{value: o.OrgID.String(), label: orgName, orgID: o.OrgID})
			case auth.ResourceAllRooms:
				agents, err := s.deps.Q.AgentListByOrg(ctx, tx, o.OrgID)
				if err != nil {
					return fmt.Errorf("consent: agents: %w", err)
				}
				for _, a := range agents {
					opts = append(opts, option{value: o.OrgID.String() + "/" + a.ID.String(), label: a.Name + " (" + orgName + ")", orgID: o.OrgID, agentID: a.ID})
				}
			default:
				if projectID == uuid.Nil {
					continue
				}
				rows, err := s.deps.Q.RoomListChoices(ctx, tx, db.RoomListChoicesParams{ProjectID: projectID, OrgID: o.OrgID})
				if err != nil {
					return fmt.Errorf("consent: members: %w", err)
				}
				// Only agents holding an active key: one without would be allowed here and
				// its code then refused (OAuthGrantGetLive).
				keyed, err := s.deps.Q.AgentListByOrg(ctx, tx, o.OrgID)
				if err != nil {
					return fmt.Errorf("consent: agents: %w", err)
				}
				for _, a := range rows {
					if !slices.ContainsFunc(keyed, func(k db.AgentListByOrgRow) bool { return k.ID == a.ID }) {
						continue
					}
					op := option{value: o.OrgID.String() + "/" + a.ID.String(), label: a.Name + " (" + orgName + ")", orgID: o.OrgID, agentID: a.ID}
					if res.Kind == auth.ResourceThreads {
						op.value += "/" + a.Part
						op.label = "part " + a.Part + ": " + a.Name + " (" + orgName + ")"
						op.part = a.Part
					}
					opts = append(opts, op)
				}
			}
		}
		// The room's name and host only for a person with an agent in it: a room id in the
		// sign-in request named another company's room, and whether it exists, to anyone
		// signed in, where every other answer treats it as missing.
		if projectID != uuid.Nil && len(opts) > 0 {
			tx.SetTenant(pg.Tenant{ProjectID: projectID})
			t, err := s.deps.Q.ProjectGetTitle(ctx, tx, projectID)
			if err != nil && !pg.IsNoRows(err) {
				return fmt.Errorf("consent: project: %w", err)
			}
			if err == nil {
				words += t.Name + ", hosted by " + t.HostName
			}
		}
		return nil
	})
	if err != nil {
		return "", "", nil, err
	}
	if words == "" {
		words = res.URL
	}
	return words, question, opts, nil
}

func redirectHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return uri
	}
	return u.Scheme + "://" + u.Host
}

// consent shows (GET) and decides (POST) a pending authorization request. Nothing is
// remembered between requests: every authorization shows the page, so a client never gets
// a token its person did not just approve.
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	site := s.deps.Site
	ctx := r.Context()
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		// As the other pages answer (internal/web): a PUT or DELETE rendered the page as a
		// GET does.
		w.Header().Set("Allow", "GET, HEAD, POST")
		site.Message(w, http.StatusMethodNotAllowed, "Not allowed", "This page is opened or posted to, nothing else.")
		return
	}
	// The query (GET) and the form (POST) alike: a NUL or invalid UTF-8 in the id is a 400.
	if err := web.ParseForm(w, r, 16<<10); err != nil {
		site.Message(w, http.StatusBadRequest, "Allow access?", "The form could not be read.")
		return
	}
	id := r.FormValue("id")
	sess, ok, err := site.Session(r)
	if err != nil {
		s.deps.Log.ErrorContext(ctx, "consent: session", "error", err.Error())
		site.Message(w, http.StatusServiceUnavailable, "Allow access?", "This page is unavailable right now. Please try again.")
		return
	}
	if !ok {
		http.Redirect(w, r, web.LoginURL(RouteConsent+"?id="+url.QueryEscape(id)), http.StatusSeeOther)
		return
	}
	var req db.AuthRequestGetByIDRow
	found := false
	if id != "" && !strings.Contains(id, ",") {
		err = s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: id, SignIn: true}, func(tx *pg.Tx) error {
			req, err = s.deps.Q.AuthRequestGetByID(ctx, tx, id)
			return err
		})
		found = err == nil
		if err != nil && !pg.IsNoRows(err) {
			s.deps.Log.ErrorContext(ctx, "consent: request", "error", err.Error())
			site.Message(w, http.StatusServiceUnavailable, "Allow access?", "This page is unavailable right now. Please try again.")
			return
		}
	}
	if !found {
		site.Message(w, http.StatusBadRequest, "Allow access?", "This sign-in request has expired or was already used. Go back to your client and connect again.")
		return
	}
	res, _ := auth.ParseResource(s.issuer, req.Resource)
	words, question, opts, err := s.choices(ctx, sess, res)
	if err != nil {
		s.deps.Log.ErrorContext(ctx, "consent", "error", err.Error())
		site.Message(w, http.StatusServiceUnavailable, "Allow access?", "This page is unavailable right now. Please try again.")
		return
	}
	var scopes []string
	if res.Kind == auth.ResourceDesk {
		for _, sc := range auth.DeskScopes {
			if len(req.Scopes) == 0 || slices.Contains(req.Scopes, sc) {
				scopes = append(scopes, sc)
			}
		}
	}
	page := web.Consent{
		RequestID: req.ID, ClientName: req.ClientName, RedirectHost: redirectHost(req.RedirectUri), Resource: words,
		Question: question, Scopes: scopes,
		Empty: "None of your organisations' agents can act here, so there is nothing to allow.",
	}
	if page.ClientName == "" {
		page.ClientName = "An unnamed client"
	}
	if s.isMetadataDocumentID(req.ClientID) {
		// Anyone can publish a document that calls itself "Claude": the host that
		// published it is what the person can check (the draft's advice to show it).
		if u, err := url.Parse(req.ClientID); err == nil {
			page.NamedBy = u.Host
		}
	}
	for _, o := range opts {
		page.Choices = append(page.Choices, web.Choice{Value: o.value, Label: o.label})
	}
	if r.Method != http.MethodPost {
		site.RenderConsent(w, http.StatusOK, sess, page, "")
		return
	}
	if !sess.CheckCSRF(r) {
		site.RenderConsent(w, http.StatusForbidden, sess, page, web.MsgFormExpired)
		return
	}
	if r.PostFormValue("decision") != "allow" {
		s.finish(w, r, req, url.Values{"error": {"access_denied"}, "error_description": {"the person denied access"}})
		return
	}
	i := slices.IndexFunc(opts, func(o option) bool { return o.value == r.PostFormValue("choice") })
	if i < 0 {
		site.RenderConsent(w, http.StatusBadRequest, sess, page, "Choose one of the options.")
		return
	}
	chosen := opts[i]
	granted := res.Scopes()
	if res.Kind == auth.ResourceDesk {
		granted = nil
		for _, sc := range r.PostForm["scope"] {
			if slices.Contains(scopes, sc) && !slices.Contains(granted, sc) {
				granted = append(granted, sc)
			}
		}
		if len(granted) == 0 {
			site.RenderConsent(w, http.StatusBadRequest, sess, page, "Allow at least one of the listed permissions, or deny.")
			return
		}
	}
	code, cp, err := auth.Generate(auth.CodePrefix)
	if err == nil {
		g := db.OAuthGrantInsertParams{
			OrgID: chosen.orgID, ID: uuid.Must(uuid.NewV7()), ClientID: req.ClientID, UserID: sess.Person.ID,
			Resource: req.Resource, Scopes: granted, CodeID: cp.ID, CodeHash: cp.Hash(), CodeChallenge: req.CodeChallenge,
			RedirectUri: req.RedirectUri, CodeLifetimeSeconds: CodeLifetime.Seconds(),
		}
		if chosen.agentID != uuid.Nil {
			g.AgentID = &chosen.agentID
		}
		if chosen.part != "" {
			g.Part = &chosen.part
		}
		err = s.deps.DB.InTenant(ctx, pg.Tenant{OrgID: chosen.orgID, Lookup: req.ID}, func(tx *pg.Tx) error {
			// The request goes first: of two answers at once (a double-clicked Allow) the
			// second waits on its row and finds it gone, instead of issuing a second code
			// and grant nobody exchanges.
			n, err := s.deps.Q.AuthRequestDelete(ctx, tx, req.ID)
			if err != nil {
				return err
			}
			if n == 0 {
				return errAnswered
			}
			return s.deps.Q.OAuthGrantInsert(ctx, tx, g)
		})
	}
	if errors.Is(err, errAnswered) {
		site.Message(w, http.StatusBadRequest, "Allow access?", "This sign-in request has expired or was already used. Go back to your client and connect again.")
		return
	}
	if err != nil {
		s.deps.Log.ErrorContext(ctx, "consent: grant", "error", err.Error())
		site.Message(w, http.StatusServiceUnavailable, "Allow access?", "This page is unavailable right now. Please try again.")
		return
	}
	http.Redirect(w, r, s.responseURL(req.RedirectUri, url.Values{"code": {code}}, req.State), http.StatusSeeOther)
}

// errAnswered: the authorization request was answered by another submission meanwhile.
var errAnswered = errors.New("authorization request already answered")

// finish ends a request without a grant (deny), telling the client.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, req db.AuthRequestGetByIDRow, v url.Values) {
	ctx := r.Context()
	if err := s.deps.DB.InTenant(ctx, pg.Tenant{Lookup: req.ID}, func(tx *pg.Tx) error {
		_, err := s.deps.Q.AuthRequestDelete(ctx, tx, req.ID)
		return err
	}); err != nil {
		s.deps.Log.ErrorContext(ctx, "consent: end request", "error", err.Error())
	}
	http.Redirect(w, r, s.responseURL(req.RedirectUri, v, req.State), http.StatusSeeOther)
}
