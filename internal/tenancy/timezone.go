package tenancy

import (
	"fmt"
	"strings"
	"time"
)

// LoadTimezone is an organisation's timezone by its IANA name. "Local" is refused though
// Go knows it: it is the zone of whichever machine runs the server, so days would move
// between replicas, and PostgreSQL (which computes the reports' days) knows no such zone.
// "localtime" and "posixrules" are the same in disguise (links to the machine's zone):
// the app's machine for Go, the database's for PostgreSQL.
func LoadTimezone(name string) (*time.Location, error) {
	if name == "" || machineZones[strings.ToLower(name)] {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin or UTC", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin or UTC", name)
	}
	return loc, nil
}

// machineZones name the machine's own zone rather than a place.
var machineZones = map[string]bool{"local": true, "localtime": true, "posixrules": true}
