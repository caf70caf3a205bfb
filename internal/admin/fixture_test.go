package admin_test

import (
	"testing"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/testfix"
)

// racing sizes the pools for two changes held at once and the test's polls.
var racing = testfix.Options{MaxConns: 4, OpsMaxConns: 4}

// seededAdmin seeds file and returns it with the admin service over it and acme's owner,
// Ana, who makes the company admin's changes.
func seededAdmin(t *testing.T, file string, o testfix.Options) (*testfix.Bundle, *admin.Service, admin.OrgActor) {
	t.Helper()
	b := testfix.SeedWith(t, file, o)
	owner := admin.OrgActor{OrgID: b.Result.Organisations["acme"].ID, UserID: b.Result.Users["ana@acme.test"].ID, Name: "Ana", Role: "owner"}
	return b, admin.New(b.DB, testfix.PublicURL), owner
}
