package admin_test

import (
	"context"
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

// inTurn holds what the statement lock locks, starts first and waits until it queues
// behind the hold, then second likewise, and lets both go: first goes on from where it was
// held with second already under way, as when two people change one thing at the same
// moment. It returns what each returned.
func inTurn(t *testing.T, b *testfix.Bundle, first, second func() error, lock string, args ...any) (error, error) {
	t.Helper()
	ctx := context.Background()
	holder := b.Holder(t)
	if _, err := holder.Exec(ctx, lock, args...); err != nil {
		t.Fatal(err)
	}
	one, two := make(chan error, 1), make(chan error, 1)
	go func() { one <- first() }()
	b.AwaitLockWaiters(t, 1, one)
	go func() { two <- second() }()
	b.AwaitLockWaiters(t, 2, two)
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return <-one, <-two
}
