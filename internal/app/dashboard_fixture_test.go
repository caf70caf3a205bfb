package app_test

import (
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
)

// dashboardTest is what a dashboard test starts from: a real server on one of the
// dashboard's files (dashboardFile, needsFile, threadsFile: each has Escalations, hosted by
// Acme with Globex as its guest, and the people below), its database as the operator, and
// the addresses every test uses.
type dashboardTest struct {
	*server
	d         *pg.DB
	room      string // Escalations' id
	roomURL   string // its rooms endpoint
	threads   string // the architect's threads URL in it
	architect string // the agents' keys
	qa        string
}

// startDashboard starts a dashboard test's server on file.
func startDashboard(t *testing.T, file string) *dashboardTest {
	t.Helper()
	s := startServerFile(t, file, nil)
	room := s.res.Projects["escalations"].ID.String()
	return &dashboardTest{server: s, d: openSeeded(t, s), room: room, roomURL: s.base + "/api/mcp/p/" + room,
		threads: s.threadsURL("escalations", "architect"), architect: s.key("acme/architect"), qa: s.key("globex/qa-lead")}
}

// dashboardPeople are the people of the dashboard's files, by first name: Acme's owner
// Ana and member Mo, Globex's admin Gus, Initech's owner Ivy. Each one's password is
// demo-password-<name>.
var dashboardPeople = map[string]string{"ana": "ana@acme.test", "mo": "mo@acme.test", "gus": "gus@globex.test", "ivy": "ivy@initech.test"}

// signIn signs the named people in, in order, each with a cookie jar of their own.
func (dt *dashboardTest) signIn(t *testing.T, names ...string) []*person {
	t.Helper()
	out := make([]*person, len(names))
	for i, n := range names {
		out[i] = signIn(t, dt.base, dashboardPeople[n], "demo-password-"+n)
	}
	return out
}
