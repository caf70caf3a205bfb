package oauth_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/pg"
	"github.com/relayroom/relayroom/internal/pg/pgtest"
)

// TestRefreshSiblingsBothStayLive: a refresh token used twice within its grace gives two
// successors that both stay live, as Claude.ai refreshes from two addresses at once. The
// first use of the later one revoked the earlier (every token of the grant issued before
// it), whose first use was then taken for reuse and revoked the whole grant. The first
// token is inserted without a parent, as tokens issued before parents were recorded.
func TestRefreshSiblingsBothStayLive(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	raw, _ := seedRefreshGrant(t, d, 0, "clientA")
	s := newHandler(t, d, false)
	refresh := func(rt string) (int, map[string]any) {
		t.Helper()
		return postToken(t, s, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"clientA"}})
	}
	s1, a := refresh(raw) // two processes refresh with R0 at once
	s2, b := refresh(raw)
	if s1 != http.StatusOK || s2 != http.StatusOK {
		t.Fatalf("R0 twice within the grace: %d %v, %d %v", s1, a, s2, b)
	}
	r1a, r1b := a["refresh_token"].(string), b["refresh_token"].(string)
	if st, body := refresh(r1b); st != http.StatusOK {
		t.Fatalf("the later sibling: %d %v", st, body)
	}
	if st, body := refresh(r1a); st != http.StatusOK {
		t.Fatalf("the earlier sibling, never used, after the later one's first use: %d %v", st, body)
	}
	if st, body := refresh(r1b); st != http.StatusOK {
		t.Fatalf("the later sibling once more (within its grace): %d %v", st, body)
	}
}

// TestRefreshGraceIsTheDatabasesClock: a refresh token's grace is measured on one clock
// whichever replica answers. Its first use is stamped by the database (used_at = now()),
// and a replica decided the grace with its own clock: one running two minutes ahead of the
// database took a second use within the grace (two places refreshing at once, the second
// through that replica) for a use after it, revoked the first use's successor as "lost",
// and that successor's next refresh then revoked the whole grant; one running two minutes
// behind took a use 90 s after the first for one within the grace and left the lost
// successor live beside the new one.
func TestRefreshGraceIsTheDatabasesClock(t *testing.T) {
	t.Parallel()
	d, _ := pgtest.Open(t)
	inSync, ahead, behind := newHandler(t, d, false), skewedHandler(t, d, 2*time.Minute), skewedHandler(t, d, -2*time.Minute)
	grant := func(t *testing.T, n int) (string, uuid.UUID) {
		t.Helper()
		return seedRefreshGrant(t, d, n, fmt.Sprintf("client%d", n))
	}
	refresh := func(t *testing.T, s http.Handler, client, rt string) (int, map[string]any) {
		t.Helper()
		return postToken(t, s, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {client}})
	}

	t.Run("a second use within the grace through a replica ahead of the database keeps both successors", func(t *testing.T) {
		raw, _ := grant(t, 1)
		s1, a := refresh(t, inSync, "client1", raw)
		s2, b := refresh(t, ahead, "client1", raw)
		if s1 != http.StatusOK || s2 != http.StatusOK {
			t.Fatalf("R0 twice within the grace, through two replicas: %d %v, %d %v", s1, a, s2, b)
		}
		if st, body := refresh(t, inSync, "client1", a["refresh_token"].(string)); st != http.StatusOK {
			t.Fatalf("the successor of the first use, after the second use through the replica ahead: %d %v", st, body)
		}
		if st, body := refresh(t, inSync, "client1", b["refresh_token"].(string)); st != http.StatusOK {
			t.Fatalf("the successor of the second use: %d %v", st, body)
		}
	})

	t.Run("a use past the grace through a replica behind the database replaces the lost successor", func(t *testing.T) {
		raw, g := grant(t, 2)
		s1, a := refresh(t, inSync, "client2", raw)
		if s1 != http.StatusOK {
			t.Fatalf("first use: %d %v", s1, a)
		}
		// R0's first use 90 s ago by the database's clock: past its one-minute grace, and
		// its successor never used, so the client lost that answer.
		ownerExec(t, d, `UPDATE oauth_token SET used_at = now() - interval '90 seconds' WHERE grant_id = '`+g.String()+`' AND parent_id IS NULL`)
		if st, body := refresh(t, behind, "client2", raw); st != http.StatusOK {
			t.Fatalf("R0 past its grace, its successor unused, through the replica behind: %d %v", st, body)
		}
		if st, body := refresh(t, inSync, "client2", a["refresh_token"].(string)); st != http.StatusBadRequest {
			t.Fatalf("the lost successor after R0 came back past its grace: %d %v, want 400 (revoked when replaced)", st, body)
		}
	})
}

// seedRefreshGrant makes a person's desk grant to client, its code spent, with one
// refresh token never used (inserted without a parent, as tokens issued before parents
// were recorded), and returns the token and the grant's id.
func seedRefreshGrant(t *testing.T, d *pg.DB, n int, client string) (string, uuid.UUID) {
	t.Helper()
	user, org := seedPerson(t, d, n, client)
	grant := uuid.New()
	raw, p, err := auth.Generate(auth.RefreshTokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	ownerExec(t, d,
		fmt.Sprintf(`INSERT INTO oauth_grant (org_id, id, client_id, user_id, resource, scopes, code_id, code_hash, code_challenge, redirect_uri, code_expires_at, code_used_at)
		 VALUES ('%s', '%s', '%s', '%s', '%s/desk/mcp', '{conversations:read}', 'code%d-%s', '\x00', 'c', 'http://127.0.0.1/cb', now(), now())`, org, grant, client, user, publicURL, n, client),
		fmt.Sprintf(`INSERT INTO oauth_token (org_id, token_id, grant_id, kind, secret_hash, expires_at) VALUES ('%s', '%s', '%s', 'refresh', '\x%x', now() + interval '1 day')`, org, p.ID, grant, p.Hash()),
	)
	return raw, grant
}
