package admin

import (
	"fmt"
	"maps"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/auth"
	"github.com/relayroom/relayroom/internal/desk"
	"github.com/relayroom/relayroom/internal/tenancy"
	"github.com/relayroom/relayroom/internal/text"
)

// MaxModelChars bounds an agent's model name ("claude-opus-4", "gpt-5"): it is shown
// after the agent's name everywhere, and recorded in the audit trail.
const MaxModelChars = 200

var (
	slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	partPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
)

// validSlug reports (and records) whether a slug is 1-63 lowercase letters, digits or '-'.
func validSlug(slug, path string, add func(path, format string, args ...any)) bool {
	if slugPattern.MatchString(slug) {
		return true
	}
	add(path+".slug", "must be 1-63 lowercase letters, digits or '-', got %q", slug)
	return false
}

// checkNewSlug checks a slug and that the file declares it once (seen: the slugs of its
// kind declared so far).
func checkNewSlug(seen map[string]bool, slug, path, kind string, add func(path, format string, args ...any)) {
	if validSlug(slug, path, add) && seen[slug] {
		add(path+".slug", "duplicate %s %q", kind, slug)
	}
	seen[slug] = true
}

// MaxNameRunes bounds a display name (an organisation's, a person's, an agent's, a
// project's, a part's nickname): characters, as the database's checks count them.
const MaxNameRunes = 200

// checkName trims a display name and records a problem when it is empty, too long or not
// plain text.
func checkName(name *string, path string, add func(path, format string, args ...any)) {
	if *name = strings.TrimSpace(*name); *name == "" || utf8.RuneCountInString(*name) > MaxNameRunes {
		add(path+".name", "required, at most %d characters", MaxNameRunes)
		return
	}
	checkPlain(*name, path+".name", add)
}

// checkOptionalName is checkName for a name that may be left out (a person's: left out,
// the stored one stays; a part's nickname).
func checkOptionalName(name *string, path string, add func(path, format string, args ...any)) {
	if *name = strings.TrimSpace(*name); *name == "" {
		return
	}
	if utf8.RuneCountInString(*name) > MaxNameRunes {
		add(path, "at most %d characters", MaxNameRunes)
		return
	}
	checkPlain(*name, path, add)
}

// checkPlain refuses what is not storable text, and control characters (a line break, an
// escape sequence) that would show as something else in every list that names it.
func checkPlain(s, path string, add func(path, format string, args ...any)) {
	if err := text.Check(s); err != nil {
		add(path, "%v", err)
	} else if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		add(path, "must not hold control characters (a line break, a tab, an escape…)")
	}
}

// checkOneOf sets an empty *v to its default and records a problem when it is not one of
// allowed.
func checkOneOf(v *string, def string, allowed []string, path string, add func(path, format string, args ...any)) {
	if *v == "" {
		*v = def
	}
	if !slices.Contains(allowed, *v) {
		add(path, "must be one of %s, got %q", strings.Join(allowed, ", "), *v)
	}
}

// grownFrom is a set that starts as what exists already (known may be nil) and grows with
// what the file declares.
func grownFrom(known map[string]bool) map[string]bool {
	set := make(map[string]bool, len(known))
	maps.Copy(set, known)
	return set
}

// known is what exists already in the database, so a file may refer to it.
type known struct {
	orgs   map[string]bool
	agents map[string]bool // "org/slug"
	// agreements[projectKey][guestOrg] for projects that exist ("host/slug").
	agreements map[string]map[string]bool
}

// validate checks the whole file before anything is written; every problem is reported
// with its path, and one problem means nothing is applied.
func validate(f *File, k known) Problems {
	var p Problems
	add := func(path, format string, args ...any) { p = append(p, path+": "+fmt.Sprintf(format, args...)) }

	orgs := grownFrom(k.orgs)
	seenOrg := map[string]bool{}
	for i := range f.Organisations {
		o := &f.Organisations[i]
		path := fmt.Sprintf("organisations[%d]", i)
		checkNewSlug(seenOrg, o.Slug, path, "organisation", add)
		orgs[o.Slug] = true
		checkName(&o.Name, path, add)
		// Left out, the plan and the time zone are trial and UTC for a new organisation and
		// kept for an existing one (OrganisationUpsert).
		if o.Plan != "" {
			checkOneOf(&o.Plan, "", []string{"trial", "starter", "growth", "scale"}, path+".plan", add)
		}
		if o.Timezone != "" {
			if _, err := tenancy.LoadTimezone(o.Timezone); err != nil {
				add(path+".timezone", "%v", err)
			}
		}
	}

	seenUser := map[string]bool{}
	for i := range f.Users {
		u := &f.Users[i]
		path := fmt.Sprintf("users[%d]", i)
		u.Email = strings.ToLower(strings.TrimSpace(u.Email))
		if a, err := mail.ParseAddress(u.Email); err != nil || a.Address != u.Email {
			add(path+".email", "not an email address: %q", u.Email)
		} else if len(u.Email) > MaxEmailBytes {
			// Longer, it reached the operator as Postgres's index error (SQLSTATE 54000).
			add(path+".email", "at most %d characters", MaxEmailBytes)
		}
		key := u.Email + "|" + u.Org
		if seenUser[key] {
			add(path+".email", "duplicate user %q in organisation %q", u.Email, u.Org)
		}
		seenUser[key] = true
		if !orgs[u.Org] {
			add(path+".org", "unknown organisation %q", u.Org)
		}
		checkOptionalName(&u.Name, path+".name", add)
		checkOneOf(&u.Role, "member", []string{"owner", "admin", "member"}, path+".role", add)
		switch {
		case u.Password != "" && len(u.Password) < 8:
			add(path+".password", "must be at least 8 characters")
		case len(u.Password) > auth.MaxPasswordBytes:
			// Refused by the hash after the file's checks, as "hash password: …".
			add(path+".password", "at most %d bytes", auth.MaxPasswordBytes)
		case !utf8.ValidString(u.Password):
			// A sign-in form sends UTF-8: such a password could never be typed.
			add(path+".password", "must be UTF-8 text")
		}
	}

	agents := grownFrom(k.agents)
	seenAgent := map[string]bool{}
	for i := range f.Agents {
		a := &f.Agents[i]
		path := fmt.Sprintf("agents[%d]", i)
		if !orgs[a.Org] {
			add(path+".org", "unknown organisation %q", a.Org)
		}
		validSlug(a.Slug, path, add)
		ref := a.Org + "/" + a.Slug
		if seenAgent[ref] {
			add(path+".slug", "duplicate agent %q", ref)
		}
		seenAgent[ref] = true
		agents[ref] = true
		checkName(&a.Name, path, add)
		if utf8.RuneCountInString(a.Model) > MaxModelChars {
			add(path+".model", "at most %d characters", MaxModelChars)
		}
		if a.Kind == "" {
			a.Kind = "session"
		}
		if a.Kind != "always_on" && a.Kind != "session" {
			add(path+".kind", "must be always_on or session, got %q", a.Kind)
		}
	}

	seenProject := map[string]bool{}
	for i := range f.Projects {
		pr := &f.Projects[i]
		path := fmt.Sprintf("projects[%d]", i)
		// A project is one host's: the same slug under two hosts is two projects.
		if validSlug(pr.Slug, path, add) && seenProject[pr.Host+"/"+pr.Slug] {
			add(path+".slug", "duplicate project %q of %q", pr.Slug, pr.Host)
		}
		seenProject[pr.Host+"/"+pr.Slug] = true
		checkName(&pr.Name, path, add)
		if !orgs[pr.Host] {
			add(path+".host", "unknown organisation %q", pr.Host)
		}
		guests := grownFrom(k.agreements[pr.Host+"/"+pr.Slug])
		seenGuest := map[string]bool{}
		for j := range pr.Guests {
			g := &pr.Guests[j]
			gp := fmt.Sprintf("%s.guests[%d]", path, j)
			switch {
			case !orgs[g.Org]:
				add(gp+".org", "unknown organisation %q", g.Org)
			case g.Org == pr.Host:
				add(gp+".org", "the host %q cannot be its own guest", g.Org)
			case seenGuest[g.Org]:
				add(gp+".org", "duplicate guest %q", g.Org)
			}
			seenGuest[g.Org] = true
			guests[g.Org] = true
			checkOneOf(&g.Status, "pending", []string{"pending", "active", "revoked"}, gp+".status", add)
			for n, gr := range g.Grants {
				if !slices.Contains([]string{"read_memory", "write_memory", "assign_tasks"}, gr) {
					add(fmt.Sprintf("%s.grants[%d]", gp, n), "must be one of read_memory, write_memory, assign_tasks, got %q", gr)
				}
			}
		}
		seenPart, seenMember, mains := map[string]bool{}, map[string]bool{}, 0
		for j := range pr.Members {
			m := &pr.Members[j]
			mp := fmt.Sprintf("%s.members[%d]", path, j)
			org, slug, ok := strings.Cut(m.Agent, "/")
			switch {
			case !ok:
				add(mp+".agent", "must be \"org/agent\", got %q", m.Agent)
			case !agents[m.Agent]:
				add(mp+".agent", "unknown agent %q", m.Agent)
			case seenMember[m.Agent]:
				add(mp+".agent", "agent %q is listed twice", m.Agent)
			case org != pr.Host && !guests[org]:
				add(mp+".agent", "organisation %q is neither the host nor a guest of this project", org)
			}
			seenMember[m.Agent] = true
			if m.Part == "" {
				m.Part = slug
			}
			if !partPattern.MatchString(m.Part) {
				add(mp+".part", "must be 1-63 lowercase letters, digits, '-' or '_', got %q", m.Part)
			} else if seenPart[m.Part] {
				add(mp+".part", "duplicate part %q", m.Part)
			}
			seenPart[m.Part] = true
			if m.Main {
				mains++
				if mains > 1 {
					add(mp+".main", "a project has at most one main agent")
				}
			}
			checkOptionalName(&m.Nickname, mp+".nickname", add)
			checkOneOf(&m.Access, "write", []string{"read", "write", "manager"}, mp+".access", add)
			for n, c := range m.Capabilities {
				if !slices.Contains(Capabilities, c) {
					add(fmt.Sprintf("%s.capabilities[%d]", mp, n), "must be urgent or needsHuman, got %q", c)
				}
			}
		}
	}
	for i, w := range f.Desk {
		path := fmt.Sprintf("desk[%d]", i)
		if !orgs[w.Workspace] {
			add(path+".workspace", "unknown organisation %q", w.Workspace)
		}
		p = append(p, desk.CheckWorkspace(path, w)...)
	}
	return p
}
