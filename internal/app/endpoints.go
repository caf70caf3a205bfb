package app

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/relayroom/relayroom/internal/apperr"
	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/httpapi"
	"github.com/relayroom/relayroom/internal/mcp"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/throttle"
)

// Path values are handed from echo's router to the MCP handler through the context.
type pathKey int

const (
	connectCodeKey pathKey = iota
	projectIDKey
)

func pathValue(ctx context.Context, k pathKey) string {
	v, _ := ctx.Value(k).(string)
	return v
}

// Scopes announced in each endpoint's 401 and metadata.
const (
	threadsScope = "threads"
	roomsScope   = "rooms"
)

var deskScopes = desk.Scopes

// challenge names the endpoint's own metadata document. The resource is the endpoint URL
// without query (auth.ResourceAt): the threads part is chosen at consent, not in the URL.
func (a *App) challenge(scope string) func(r *http.Request, err *apperr.Error) string {
	return func(r *http.Request, err *apperr.Error) string {
		if err == nil || err.Code != apperr.Unauthenticated {
			return "" // a 403 is not fixed by signing in again
		}
		return auth.Challenge(r, a.public()+auth.MetadataPath(r.URL.EscapedPath()), scope)
	}
}

// limited wraps an endpoint's Authenticate with the failed-authentication limits
// (docs/auth-limits.md): a caller whose address or key id is blocked is refused with 429
// before any database work; a refused credential is counted, and so is an unknown one
// whose caller hung up before the answer (hanging up must not dodge the count); a request
// without any credential is not (it guessed nothing, and costs nothing). A credential this
// replica verified recently costs a map lookup; another first reads the shared counts
// (throttle.Admit), so no replica checks a guess past the limit.
func (a *App) limited(credential func(*http.Request) string, authenticate func(context.Context, *http.Request) (tenancy.Scope, error)) func(context.Context, *http.Request) (tenancy.Scope, error) {
	return func(ctx context.Context, r *http.Request) (tenancy.Scope, error) {
		at := a.attempt(r, credential)
		if err := a.throttle.Admit(ctx, at); err != nil {
			return tenancy.Scope{}, err
		}
		s, err := authenticate(ctx, r)
		if err == nil {
			noteCaller(ctx, s)
		}
		switch {
		case err == nil && !s.Settled():
			// Provisional (settleScope): verified a moment ago, and again with the call's
			// first statements; the throttle hears of it when it is settled.
		case err == nil:
			a.throttle.Verified(ctx, at)
		case at.Credential == "":
			// nothing presented, nothing guessed
		case apperr.CodeOf(err) == apperr.Unauthenticated:
			a.throttle.Refused(ctx, at)
		case ctx.Err() != nil:
			a.throttle.Abandoned(ctx, at)
		}
		return s, err
	}
}

// limitedRoute puts an HTTP route that checks its credential inside its own package
// (httpapi.Route.Credential: the rooms routes, the pager's, CI confirmation) under the same failed-authentication limits as the
// MCP endpoints: a blocked caller is answered 429 (in the route's format, errs) before the
// route runs, and the route's 401 counts as a refused credential.
func (a *App) limitedRoute(credential func(*http.Request) string, errs httpapi.Errors, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		at := a.attempt(r, credential)
		if err := a.throttle.Admit(r.Context(), at); err != nil {
			errs.Write(c.Response(), r, err)
			return nil
		}
		err := next(c)
		switch status := c.Response().Status; {
		case at.Credential == "":
			// nothing presented, nothing guessed
		case status == http.StatusUnauthorized:
			a.throttle.Refused(r.Context(), at)
		case status < http.StatusBadRequest:
			a.throttle.Verified(r.Context(), at)
		case r.Context().Err() != nil:
			a.throttle.Abandoned(r.Context(), at)
		}
		return err
	}
}

// attempt is a request's authentication as the limits see it: its address and credential,
// and for an agent key its public id (limited per key too). The MCP endpoints and the HTTP
// routes build it alike, so neither counts a guess the other would not.
func (a *App) attempt(r *http.Request, credential func(*http.Request) string) throttle.Attempt {
	at := throttle.Attempt{Address: a.clientAddress(r), Credential: credential(r)}
	if k, err := auth.Parse(auth.AgentKeyPrefix, at.Credential); err == nil {
		at.KeyID, at.Random = k.ID, true
	}
	return at
}

func (a *App) clientAddress(r *http.Request) string {
	return throttle.ClientAddress(r, a.cfg.TrustedProxies)
}

// provisional lets the agents' endpoints serve a caller resolved a moment ago (the scope
// cache) without a round trip of its own: its verification travels with the tool's
// first statements, or is made when the scope is settled (mcp.Provisional,
// tenancy.Resolver.Provisional).
func (a *App) provisional() *mcp.Provisional[tenancy.Scope] {
	return &mcp.Provisional[tenancy.Scope]{Defer: tenancy.Defer, Settle: a.settleScope}
}

// settleScope settles a provisional scope under the failed-authentication limits, as
// Authenticate would have resolved it: a refusal counts as one.
func (a *App) settleScope(ctx context.Context, r *http.Request, s tenancy.Scope) (tenancy.Scope, bool, error) {
	if s.Settled() {
		return s, true, nil
	}
	held := false
	s, err := a.limited(credential, func(ctx context.Context, _ *http.Request) (tenancy.Scope, error) {
		settled, ok, err := a.resolver.Settle(ctx, s)
		held = ok
		return settled, err
	})(ctx, r)
	return s, held, err
}

func noCredential() error { return apperr.New(apperr.Unauthenticated, tenancy.MsgUnauthorized) }

// agentOrToken authenticates an agents' endpoint under the limits: a sign-in access token
// for the resource when one is sent without an agent key, otherwise the agent key, which
// byKey resolves; neither is a 401.
func (a *App) agentOrToken(resource string, byKey func(ctx context.Context, r *http.Request, key string) (tenancy.Scope, error)) func(context.Context, *http.Request) (tenancy.Scope, error) {
	return a.limited(credential, func(ctx context.Context, r *http.Request) (tenancy.Scope, error) {
		if s, ok, err := a.tokenScope(ctx, r, resource); ok {
			return s, err
		}
		key := auth.AgentKey(r)
		if key == "" {
			return tenancy.Scope{}, noCredential()
		}
		return byKey(ctx, r, key)
	})
}

// admitted puts every tool of an endpoint behind the scope's agreement check, before its
// handler runs: a guest whose organisation's agreement is not active is refused whatever
// the tool, so a tool added later cannot forget it. App.Endpoints applies it to every
// endpoint, and the served handlers are built from App.Endpoints. The threads endpoint
// already refuses such a guest when it resolves the part; the rooms spec has the per-room
// address accept a member's call and refuse each tool with its text, which this gives;
// the all-rooms address binds room_id inside the tool (tenancy.Resolver.Room refuses
// there). TestIsolationMatrix checks every declared tool of every endpoint against it.
func admitted(ep mcp.Endpoint[tenancy.Scope]) mcp.Endpoint[tenancy.Scope] {
	ep.Tools = slices.Clone(ep.Tools)
	for i := range ep.Tools {
		h := ep.Tools[i].Handler
		ep.Tools[i].Handler = func(ctx context.Context, sc tenancy.Scope, args json.RawMessage) (any, error) {
			if err := sc.Admitted(); err != nil {
				return nil, err
			}
			return h(ctx, sc, args)
		}
	}
	return ep
}

// urlPart is the threads endpoint's ?part=, refused when missing or malformed: the POST
// and the description a person checks the URL with answer it alike.
func urlPart(r *http.Request) (string, error) {
	part := r.URL.Query().Get("part")
	if part == "" {
		return "", apperr.New(apperr.Forbidden, "the URL needs ?part=<your part>")
	}
	if err := tenancy.CheckPart(part); err != nil {
		return "", err
	}
	return part, nil
}

func (a *App) threadsEndpoint() mcp.Endpoint[tenancy.Scope] {
	resolver := a.resolver.Provisional()
	return mcp.Endpoint[tenancy.Scope]{
		Name: "threads", Service: "relayroom-threads", ServerName: "relayroom-threads", ServerVersion: Version,
		Instructions: "Threads between the parts of this project. Start with whoami and roster; read inbox, open threads with show, close them when done.",
		Authenticate: a.agentOrToken(auth.ResourceThreads, func(ctx context.Context, r *http.Request, key string) (tenancy.Scope, error) {
			part, err := urlPart(r)
			if err != nil {
				return tenancy.Scope{}, err
			}
			return resolver.Part(ctx, pathValue(ctx, connectCodeKey), part, key)
		}),
		Provisional: a.provisional(),
		Challenge:   a.challenge(threadsScope),
		Describe: func(r *http.Request) (map[string]any, error) {
			// A code that cannot exist (mistyped: its checksum fails) and a ?part= that is
			// not one are answered as the POST answers them, never "ok": the description is
			// how a person checks the URL they were given. Whether a well-formed code names
			// a project needs a credential, as on the POST.
			if _, err := auth.Parse(auth.ConnectCodePrefix, pathValue(r.Context(), connectCodeKey)); err != nil {
				return nil, apperr.New(apperr.Unauthenticated, "unknown connect code")
			}
			part, err := urlPart(r)
			if err != nil {
				return nil, err
			}
			return map[string]any{"part": part}, nil
		},
		Tools:  a.threads.Tools(),
		Format: mcp.ThreadsFormat,
	}
}

// roomsEndpoint declares one of the two addresses of the rooms server, one room's and
// every room's: a client sees the same server at both, with the same scope to ask for and
// the same answers' format, and only the address's name, instructions, credential check
// and tools differ.
func (a *App) roomsEndpoint(name, instructions, resource string, byKey func(ctx context.Context, r *http.Request, key string) (tenancy.Scope, error),
	tools []mcp.Tool[tenancy.Scope]) mcp.Endpoint[tenancy.Scope] {
	return mcp.Endpoint[tenancy.Scope]{
		Name: name, Service: "quayutec-mcp", ServerName: "relayroom-rooms", ServerVersion: Version,
		Instructions: instructions,
		Authenticate: a.agentOrToken(resource, byKey),
		Provisional:  a.provisional(),
		Challenge:    a.challenge(roomsScope),
		Tools:        tools,
		Format:       mcp.RoomsFormat,
	}
}

func (a *App) roomEndpoint() mcp.Endpoint[tenancy.Scope] {
	resolver := a.resolver.Provisional()
	ep := a.roomsEndpoint("rooms", "A room shared by companies: memory, tasks and chat.", auth.ResourceRoom,
		func(ctx context.Context, r *http.Request, key string) (tenancy.Scope, error) {
			id, err := uuid.Parse(pathValue(ctx, projectIDKey))
			if err != nil {
				// Not a room id at all: answered like a room the agent is not in.
				if _, err := a.resolver.Agent(ctx, key); err != nil {
					return tenancy.Scope{}, err
				}
				return tenancy.Scope{}, apperr.New(apperr.Forbidden, tenancy.MsgNotParticipant)
			}
			return resolver.RoomByKey(ctx, key, id)
		}, a.rooms.RoomTools())
	ep.Describe = func(r *http.Request) (map[string]any, error) {
		id := pathValue(r.Context(), projectIDKey)
		if _, err := uuid.Parse(id); err != nil {
			// Not a room id at all: answered like a room the caller cannot see (the
			// refusal Authenticate gives an agent outside a room), never "ok".
			return nil, apperr.New(apperr.Forbidden, tenancy.MsgNotParticipant)
		}
		return map[string]any{"project_id": id}, nil
	}
	return ep
}

func (a *App) allRoomsEndpoint() mcp.Endpoint[tenancy.Scope] {
	resolver := a.resolver.Provisional()
	return a.roomsEndpoint("all_rooms", "Every room your agent is in. Call list_rooms first and pass room_id to the other tools.",
		auth.ResourceAllRooms, func(ctx context.Context, _ *http.Request, key string) (tenancy.Scope, error) {
			return resolver.Agent(ctx, key)
		}, a.rooms.AllRoomsTools())
}

func (a *App) deskEndpoint() mcp.Endpoint[tenancy.Scope] {
	return mcp.Endpoint[tenancy.Scope]{
		Name: "desk", Service: "relaydesk-mcp", ServerName: "relaydesk", ServerVersion: Version,
		Instructions: "Helpdesk tools for a support person's assistant: search and read conversations, list inboxes, find saved " +
			"replies, daily reports, and (Scale, with the user's approval) private notes. No tool sends anything to a customer.",
		// People reach it with a bearer token that fixes the workspace: a personal access
		// token, or an OAuth access token issued for this endpoint (deskTokens, signin.go).
		Authenticate: a.limited(auth.BearerToken, func(ctx context.Context, r *http.Request) (tenancy.Scope, error) {
			return a.desk.Authenticate(ctx, auth.BearerToken(r))
		}),
		Challenge: a.challenge(strings.Join(deskScopes, " ")),
		Tools:     a.desk.Tools(),
		Format:    mcp.DeskFormat,
	}
}
