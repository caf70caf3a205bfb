package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/relayroom/relayroom/internal/admin"
	"github.com/relayroom/relayroom/internal/audit"
	"github.com/relayroom/relayroom/internal/cli"
	"github.com/relayroom/relayroom/internal/config"
	"github.com/relayroom/relayroom/internal/pg"
)

const adminUsage = `Usage: relayroom admin COMMAND [flags]   (every command prints JSON; each takes --help)

  apply -f FILE [--rotate-keys | --if-new]   create or update what FILE (YAML or JSON) declares
  org list | org create                organisations
  user list [--org] | user create      people and their role in an organisation
  agent list [--org] | agent create | agent rotate-key
  project list [--host] | project create | project rotate-code
  member list | member add             agents in a project, as parts
  agreement list | agreement set | agreement revoke
  project ci-token | project ci-token list | project ci-token revoke   tokens CI uses to confirm knowledge over HTTP
  thread cancel                        a person cancels a thread
  knowledge list | knowledge approve | knowledge reject    the review queue of candidates
  wake set-webhook | wake clear-webhook | wake webhooks    where an agent's wakes are delivered
  wake list [--dead] | wake retry      wakes, the dead letters, and retrying one
  desk token create | desk token list | desk token revoke  people's personal access tokens for /desk/mcp
  desk import --workspace SLUG --inbox SLUG FILE            conversations from a CSV file
  desk member deactivate | desk member reactivate            a member's access to a desk workspace
  desk inbox set-secret | desk inbox clear-secret | desk secrets reseal   inbox mail-connection secrets, sealed
  oauth clients list | oauth clients revoke | oauth grants list | oauth grants revoke   apps people signed in with
`

type adminEnv struct {
	cfg            config.Config
	svc            *admin.Service
	stdout, stderr io.Writer
	// args are the arguments after the command's name that are not flags (a file), for a
	// command that takes them (adminCommand.args).
	args []string
}

func adminCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, adminUsage)
		if len(args) == 0 {
			return cli.ErrUsage
		}
		return nil
	}
	name := args[0]
	rest := args[1:]
	if name != "apply" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			// A group without its command (admin org, admin org --help), or no command at
			// all (admin bogus): say which, then the usage. Every command here is two words
			// or more, so a flag in second place is never one's own.
			subs := adminSubcommands(name)
			if len(subs) == 0 {
				fmt.Fprintf(stderr, "unknown admin command %q\n\n%s", name, adminUsage)
				return cli.ErrUsage
			}
			fmt.Fprintf(stderr, "admin %s needs one of: %s\n\n%s", name, strings.Join(subs, ", "), adminUsage)
			return cli.ErrUsage
		}
		name, rest = name+" "+rest[0], rest[1:]
	}
	// Three-word commands (desk token create) first: "project ci-token" issues a token,
	// "project ci-token list" lists them.
	cmd, ok := adminCommand{}, false
	if len(rest) > 0 {
		if cmd, ok = adminCommands()[name+" "+rest[0]]; ok {
			name, rest = name+" "+rest[0], rest[1:]
		}
	}
	if !ok {
		cmd, ok = adminCommands()[name]
	}
	if !ok {
		if subs := adminSubcommands(name); len(subs) > 0 {
			// A two-word group without its command (admin oauth clients), or with one it
			// does not have (admin oauth clients bogus).
			if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
				fmt.Fprintf(stderr, "unknown admin command %q: ", name+" "+rest[0])
			}
			fmt.Fprintf(stderr, "admin %s needs one of: %s\n\n%s", name, strings.Join(subs, ", "), adminUsage)
			return cli.ErrUsage
		}
		fmt.Fprintf(stderr, "unknown admin command %q\n\n%s", name, adminUsage)
		return cli.ErrUsage
	}
	fs := cli.Flags("relayroom admin "+name, stderr)
	run := cmd.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: relayroom admin %s [flags]\n\n%s\n\nFlags:\n", name, cmd.help)
		fs.PrintDefaults()
	}
	var files []string
	if cmd.args {
		// A command that takes a file reads its flags on either side of it: flag's parsing
		// stopped at the file, so "desk import --workspace acme FILE --inbox support" said
		// --inbox was missing.
		var err error
		if files, err = cli.ParseInterspersed(fs, rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return flag.ErrHelp
			}
			return cli.ErrUsage // flag said which, with the usage
		}
	} else if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return cli.ErrUsage // an unknown flag or a value that does not parse: flag said which, with the usage
	}
	// flag stops at the first argument that is not a flag and leaves the rest unread: a
	// command run with flags it never saw must not report success.
	if !cmd.args && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument(s) %q: every flag must come before them, and a true/false flag takes its value as --flag=value\n\n", fs.Args())
		fs.Usage()
		return cli.ErrUsage
	}
	if err := textFlags(fs); err != nil {
		return err
	}
	if err := emptyFlags(fs); err != nil {
		return err
	}
	cfg, err := config.Load(nil, nil, os.Getenv)
	if err != nil {
		return err
	}
	// Say plainly when the schema is missing or behind, rather than failing on the first
	// table or type the command needs.
	// The direct URL when there is one: a one-off command gains nothing from a pooler.
	st, err := pg.StatusURL(ctx, cfg.SessionURL())
	if err != nil {
		return err
	}
	if !st.UpToDate() {
		return fmt.Errorf("the database schema is at migration %d of %d (dirty: %v): run `relayroom migrate up` first", st.Current, st.Latest, st.Dirty)
	}
	database, err := pg.Open(ctx, cfg.SessionURL(), pg.Options{MaxConns: 2, OpsMaxConns: 2})
	if err != nil {
		return err
	}
	defer database.Close()
	env := adminEnv{cfg: cfg, svc: admin.New(database, cfg.Public()), stdout: stdout, stderr: stderr, args: files}
	return run(audit.AsOperator(ctx, operatorName()), env)
}

type adminCommand struct {
	help  string
	flags func(fs *flag.FlagSet) func(ctx context.Context, env adminEnv) error
	// args: the command takes arguments after its flags (a file); any other command
	// refuses them.
	args bool
}

// adminSubcommands lists the commands of the group named prefix ("oauth clients": list,
// revoke), sorted.
func adminSubcommands(prefix string) []string {
	var subs []string
	for full := range adminCommands() {
		if sub, ok := strings.CutPrefix(full, prefix+" "); ok {
			subs = append(subs, sub)
		}
	}
	slices.Sort(subs)
	return subs
}

// textFlags refuses a flag value that is not text (invalid UTF-8, or a NUL byte): Postgres
// refuses it with its own error, which reached the operator as "SQLSTATE 22021".
func textFlags(fs *flag.FlagSet) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if v := f.Value.String(); !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			bad = append(bad, dashed(f.Name))
		}
	})
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s: not valid UTF-8 text", cli.ErrUsage, strings.Join(bad, ", "))
	}
	return nil
}

// emptyFlags refuses a flag given an empty value where leaving it out means something
// else (its default is not empty): --role "" (an unset variable in a script) demoted an
// owner to member, and --status "" set a revoked guest's agreement back to pending.
func emptyFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && f.Value.String() == "" && f.DefValue != "" {
			err = fmt.Errorf("%w: --%s given an empty value: want %s, or leave the flag out", cli.ErrUsage, f.Name, f.Usage)
		}
	})
	return err
}

// promptOnTerminal says on w what a command waits for when it reads in from a terminal
// (a person, not a pipe): run by hand, `desk inbox set-secret` and `apply -f -` waited
// for input without a word, like a hung command.
func promptOnTerminal(in interface{ Stat() (os.FileInfo, error) }, w io.Writer, what string) {
	if fi, err := in.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		fmt.Fprintln(w, what)
	}
}

// dashed is a flag's name as its usage writes it: -f, --project.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagsSet names the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// keep is an update's value of a field: the flag's when it was given, else the stored one.
func keep(set map[string]bool, flag, given, stored string) string {
	if set[flag] {
		return given
	}
	return stored
}

func required(fs *flag.FlagSet, names ...string) error {
	set := flagsSet(fs)
	var missing, empty []string
	for _, n := range names {
		switch {
		case !set[n]:
			missing = append(missing, dashed(n))
		case fs.Lookup(n).Value.String() == "":
			// --client "" looked a client up by the empty id and failed "not found".
			empty = append(empty, dashed(n))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing required flag(s): %s (see --help)", cli.ErrUsage, strings.Join(missing, ", "))
	}
	if len(empty) > 0 {
		return fmt.Errorf("%w: required flag(s) given an empty value: %s", cli.ErrUsage, strings.Join(empty, ", "))
	}
	return nil
}

// applyOne applies a one-object file: the imperative `create` commands share the file's
// validation and write path.
func applyOne(ctx context.Context, env adminEnv, f admin.File) (admin.Result, error) {
	res, err := env.svc.Apply(ctx, f, admin.Options{})
	return res, withoutFile(err)
}

// withoutFile is the error of a command that applies a one-object file of its own
// (create, member add, agreement set): there is no file, so its problems are said
// without the file's words ("the file was not applied", "projects[0].members[0].access: …"),
// a field the command's flag names otherwise under the flag's name (flagOf, pairs of
// field and flag: a guest's "org" is agreement set's "guest").
func withoutFile(err error, flagOf ...string) error {
	var problems admin.Problems
	if !errors.As(err, &problems) {
		return err
	}
	said := make([]string, len(problems))
	for i, p := range problems {
		said[i] = fileIndex.ReplaceAllString(p, "")
		for j := 0; j+1 < len(flagOf); j += 2 {
			if rest, ok := strings.CutPrefix(said[i], flagOf[j]+": "); ok {
				said[i] = flagOf[j+1] + ": " + rest
			}
		}
	}
	return errors.New(strings.Join(said, "; "))
}

// fileIndex is where a problem of an applied file names the object ("agents[0].", or
// "projects[0].members[0]." for a member).
var fileIndex = regexp.MustCompile(`^(\w+\[\d+\]\.)+`)

// command is an admin command whose flags are declared by flags (need names the required
// ones) and which prints as JSON what run returns.
func command(help string, flags func(fs *flag.FlagSet) (need []string, run runFunc)) adminCommand {
	return adminCommand{help: help, flags: func(fs *flag.FlagSet) func(context.Context, adminEnv) error {
		need, run := flags(fs)
		return func(ctx context.Context, env adminEnv) error {
			if err := required(fs, need...); err != nil {
				return err
			}
			v, err := run(ctx, env)
			if err != nil {
				return err
			}
			warnDerivedURLs(env, v)
			return printJSON(env.stdout, v)
		}
	}}
}

// runFunc is what a command does once its flags are read.
type runFunc = func(ctx context.Context, env adminEnv) (any, error)

// list is a command without flags that prints what fn returns.
func list(help string, fn runFunc) adminCommand {
	return command(help, func(*flag.FlagSet) ([]string, runFunc) { return nil, fn })
}

// orgFilter is a listing with an optional organisation flag (name: org, or host for
// projects) that narrows it to one organisation's lines.
func orgFilter(help, name string, fn func(ctx context.Context, env adminEnv, org string) (any, error)) adminCommand {
	return command(help, func(fs *flag.FlagSet) ([]string, runFunc) {
		org := fs.String(name, "", "only this organisation's (slug; an unknown one fails)")
		return nil, func(ctx context.Context, env adminEnv) (any, error) {
			if flagsSet(fs)[name] && *org == "" {
				// --org "$ORG" with ORG unset listed every organisation's lines.
				return nil, fmt.Errorf("%w: --%s given an empty value: name the organisation, or leave the flag out to list every one", cli.ErrUsage, name)
			}
			return fn(ctx, env, *org)
		}
	})
}

// oneFlag is a command that takes one required flag and prints what fn returns.
func oneFlag(help, name, usage string, fn func(ctx context.Context, env adminEnv, v string) (any, error)) adminCommand {
	return command(help, func(fs *flag.FlagSet) ([]string, runFunc) {
		v := fs.String(name, "", usage)
		return []string{name}, func(ctx context.Context, env adminEnv) (any, error) { return fn(ctx, env, *v) }
	})
}

func csv(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// adminCommands is every admin command; toolsets add theirs from files of their own
// (admin_<area>.go) through moreAdminCommands.
func adminCommands() map[string]adminCommand {
	cmds := coreAdminCommands()
	for _, more := range moreAdminCommands() {
		for name, c := range more {
			cmds[name] = c
		}
	}
	return cmds
}

func coreAdminCommands() map[string]adminCommand {
	return map[string]adminCommand{
		"apply": command("Create or update the organisations, users, agents and projects that FILE declares, idempotently by slug.\nPrints the ids and every credential newly issued (a key is shown once, when created). A file with any\nproblem is refused whole, each problem named by its path.", func(fs *flag.FlagSet) ([]string, runFunc) {
			file := fs.String("f", "", "the file (YAML or JSON; - for stdin)")
			rotate := fs.Bool("rotate-keys", false, "revoke the declared agents' keys and projects' connect codes and issue new ones")
			ifNew := fs.Bool("if-new", false, "apply only when FILE declares an agent or project the database lacks, else change nothing\n(a seed run on every start: it does not set back what people changed since); prints {\"applied\": …, \"result\": …}")
			return []string{"f"}, func(ctx context.Context, env adminEnv) (any, error) {
				if *ifNew && *rotate {
					// A usage error (exit 2), said before the file is read.
					return nil, fmt.Errorf("%w: --if-new and --rotate-keys do not go together: rotating changes what exists", cli.ErrUsage)
				}
				r := io.Reader(os.Stdin)
				if *file == "-" {
					promptOnTerminal(os.Stdin, env.stderr, "reading the file from stdin: paste it, then Ctrl-D on a line of its own")
				} else {
					fh, err := os.Open(*file)
					if err != nil {
						return nil, fmt.Errorf("-f: %w", err) // os's error names the file: "open x.yaml: no such file…"
					}
					defer fh.Close()
					r = fh
				}
				f, err := admin.ParseFile(r)
				if err != nil {
					return nil, err
				}
				if len(f.Organisations)+len(f.Users)+len(f.Agents)+len(f.Projects)+len(f.Desk) == 0 {
					// An empty file, or a pipe whose writer failed (curl … | admin apply -f -),
					// was applied as a success that changed nothing.
					return nil, fmt.Errorf("%s declares nothing: it needs organisations, users, agents, projects or desk", fileName(*file))
				}
				if *ifNew {
					res, applied, err := env.svc.ApplyIfNew(ctx, f)
					return map[string]any{"applied": applied, "result": res}, err
				}
				return env.svc.Apply(ctx, f, admin.Options{RotateKeys: *rotate})
			}
		}),
		"org list": list("List organisations.", func(ctx context.Context, env adminEnv) (any, error) { return env.svc.ListOrganisations(ctx) }),
		"org create": command("Create or update an organisation.", func(fs *flag.FlagSet) ([]string, runFunc) {
			slug, name := fs.String("slug", "", "organisation slug"), fs.String("name", "", "display name")
			plan, tz := fs.String("plan", "trial", "trial, starter, growth or scale"), fs.String("timezone", "UTC", "an IANA time zone, such as Europe/Berlin")
			return []string{"slug", "name"}, func(ctx context.Context, env adminEnv) (any, error) {
				o := admin.OrgSpec{Slug: *slug, Name: *name, Plan: *plan, Timezone: *tz}
				// An update changes what its flags name and keeps the rest, not the flags'
				// defaults (a new name must not put a paying organisation back on trial).
				orgs, err := env.svc.ListOrganisations(ctx)
				if err != nil {
					return nil, err
				}
				set := flagsSet(fs)
				for _, cur := range orgs {
					if cur.Slug == *slug {
						o.Plan = keep(set, "plan", o.Plan, cur.Plan)
						o.Timezone = keep(set, "timezone", o.Timezone, cur.Timezone)
					}
				}
				return applyOne(ctx, env, admin.File{Organisations: []admin.OrgSpec{o}})
			}
		}),
		"user list": orgFilter("List people with their organisations and roles.", "org", func(ctx context.Context, env adminEnv, org string) (any, error) { return env.svc.ListUsers(ctx, org) }),
		"user create": command("Create or update a person and their role in an organisation. The password is read from\n$RELAYROOM_PASSWORD when set (never from a flag, which other users of the machine could see).", func(fs *flag.FlagSet) ([]string, runFunc) {
			email, name := fs.String("email", "", "email address"), fs.String("name", "", "display name")
			org, role := fs.String("org", "", "organisation slug"), fs.String("role", "member", "owner, admin or member")
			return []string{"email", "org"}, func(ctx context.Context, env adminEnv) (any, error) {
				u := admin.UserSpec{Email: *email, Name: *name, Org: *org, Role: *role, Password: os.Getenv("RELAYROOM_PASSWORD")}
				// An update keeps what its flags do not name: setting a password must not
				// blank the person's name or demote an owner to member.
				users, err := env.svc.ListUsers(ctx, "")
				if err != nil {
					return nil, err
				}
				set := flagsSet(fs)
				for _, cur := range users {
					if !strings.EqualFold(cur.Email, *email) {
						continue
					}
					u.Name = keep(set, "name", u.Name, cur.Name)
					if cur.OrgSlug == *org {
						u.Role = keep(set, "role", u.Role, cur.Role)
					}
				}
				return applyOne(ctx, env, admin.File{Users: []admin.UserSpec{u}})
			}
		}),
		"agent list": orgFilter("List agents with their number of active keys.", "org", func(ctx context.Context, env adminEnv, org string) (any, error) { return env.svc.ListAgents(ctx, org) }),
		"agent create": command("Create or update an agent; a new agent's key is printed once.", func(fs *flag.FlagSet) ([]string, runFunc) {
			org, slug, name := fs.String("org", "", "organisation slug"), fs.String("slug", "", "agent slug"), fs.String("name", "", "display name")
			model, kind := fs.String("model", "", "model id, e.g. claude-opus-4"), fs.String("kind", "session", "always_on or session")
			return []string{"org", "slug", "name"}, func(ctx context.Context, env adminEnv) (any, error) {
				a := admin.AgentSpec{Org: *org, Slug: *slug, Name: *name, Model: *model, Kind: *kind}
				// An update keeps what its flags do not name: a new name must not turn an
				// always-on agent into a session one (rooms wake only always-on agents).
				agents, err := env.svc.ListAgents(ctx, "")
				if err != nil {
					return nil, err
				}
				set := flagsSet(fs)
				for _, cur := range agents {
					if cur.OrgSlug == *org && cur.Slug == *slug {
						a.Model = keep(set, "model", a.Model, cur.Model)
						a.Kind = keep(set, "kind", a.Kind, cur.Kind)
					}
				}
				return applyOne(ctx, env, admin.File{Agents: []admin.AgentSpec{a}})
			}
		}),
		"agent rotate-key": oneFlag("Revoke an agent's keys and issue a new one (printed once).", "agent", "the agent, as org/slug", func(ctx context.Context, env adminEnv, v string) (any, error) { return env.svc.RotateAgentKey(ctx, v) }),
		"project list": orgFilter("List projects.", "host", func(ctx context.Context, env adminEnv, host string) (any, error) {
			return env.svc.ListProjects(ctx, host)
		}),
		"project create": command("Create or update a project hosted by an organisation; a new project's connect code is printed once.", func(fs *flag.FlagSet) ([]string, runFunc) {
			host, slug, name := fs.String("host", "", "host organisation slug"), fs.String("slug", "", "project slug"), fs.String("name", "", "display name")
			return []string{"host", "slug", "name"}, func(ctx context.Context, env adminEnv) (any, error) {
				return applyOne(ctx, env, admin.File{Projects: []admin.ProjectSpec{{Slug: *slug, Name: *name, Host: *host}}})
			}
		}),
		"project rotate-code": oneFlag("Revoke a project's connect codes and issue a new one (printed once, with the parts' URLs).", "project", "the project, as host/slug", func(ctx context.Context, env adminEnv, v string) (any, error) {
			return env.svc.RotateConnectCode(ctx, v)
		}),
		"member list": oneFlag("List a project's parts.", "project", "the project, as host/slug", func(ctx context.Context, env adminEnv, v string) (any, error) { return env.svc.ListMembers(ctx, v) }),
		"member add": command("Add an agent to a project as a part, or update its membership.", func(fs *flag.FlagSet) ([]string, runFunc) {
			project, agent := fs.String("project", "", "the project, as host/slug"), fs.String("agent", "", "the agent, as org/slug")
			part, main := fs.String("part", "", "part name (default: the agent's slug)"), fs.Bool("main", false, "make it the project's main agent")
			nick, access := fs.String("nickname", "", "nickname"), fs.String("access", "write", "read, write or manager")
			caps := fs.String("capabilities", "", "comma-separated: urgent, needsHuman")
			return []string{"project", "agent"}, func(ctx context.Context, env adminEnv) (any, error) {
				m := admin.MemberSpec{Agent: *agent, Part: *part, Main: *main, Nickname: *nick, Access: *access, Capabilities: csv(*caps)}
				// An update changes what its flags name and keeps the rest, not the flags'
				// defaults (a manager stays a manager when only the nickname is given).
				set := flagsSet(fs)
				if set["part"] && *part == "" {
					// As emptyFlags: --part "" renamed a member's part back to the agent's slug.
					return nil, fmt.Errorf("%w: --part given an empty value: name the part, or leave the flag out", cli.ErrUsage)
				}
				res, err := env.svc.SetMember(ctx, *project, m, admin.MemberKeep{Part: !set["part"], Main: !set["main"],
					Nickname: !set["nickname"], Access: !set["access"], Capabilities: !set["capabilities"]})
				return res, withoutFile(err)
			}
		}),
		"agreement list": oneFlag("List a project's guest agreements.", "project", "the project, as host/slug", func(ctx context.Context, env adminEnv, v string) (any, error) { return env.svc.ListAgreements(ctx, v) }),
		"agreement set": command("Create or update a guest organisation's agreement: status and grants.", func(fs *flag.FlagSet) ([]string, runFunc) {
			project, guest := fs.String("project", "", "the project, as host/slug"), fs.String("guest", "", "guest organisation slug")
			status, grants := fs.String("status", "active", "pending, active or revoked (an update without it keeps the agreement's status)"), fs.String("grants", "", "comma-separated: read_memory, write_memory, assign_tasks (an update without it keeps the grants)")
			return []string{"project", "guest"}, func(ctx context.Context, env adminEnv) (any, error) {
				// An update changes what its flags name: new grants must not re-admit a
				// revoked guest.
				set := flagsSet(fs)
				res, err := env.svc.SetAgreement(ctx, *project, admin.GuestSpec{Org: *guest, Status: *status, Grants: csv(*grants)}, !set["status"], !set["grants"])
				return res, withoutFile(err, "org", "guest")
			}
		}),
		"agreement revoke": command("Revoke a guest organisation's agreement; its agents are refused from their next call.", func(fs *flag.FlagSet) ([]string, runFunc) {
			project, guest := fs.String("project", "", "the project, as host/slug"), fs.String("guest", "", "guest organisation slug")
			return []string{"project", "guest"}, func(ctx context.Context, env adminEnv) (any, error) {
				changed, err := env.svc.SetAgreementStatus(ctx, *project, *guest, "revoked")
				if err != nil {
					return nil, err
				}
				// changed false: revoked already (a script's repeat), nothing written.
				return map[string]any{"project": *project, "guest": *guest, "status": "revoked", "changed": changed}, nil
			}
		}),
	}
}

// fileName is how an error names apply's -f: stdin for "-".
func fileName(f string) string {
	if f == "-" {
		return "stdin"
	}
	return f
}

// warnDerivedURLs says, on stderr, when the URLs an output holds are derived from the
// listen address because RELAYROOM_PUBLIC_URL is unset: run on a bastion, admin printed
// http://localhost:48801 URLs to hand out that reach nothing.
func warnDerivedURLs(env adminEnv, v any) {
	if env.cfg.PublicURL != "" {
		return
	}
	switch out := v.(type) {
	case admin.Result:
		if len(out.Projects) == 0 {
			return
		}
	case admin.ProjectOut:
	default:
		return
	}
	fmt.Fprintf(env.stderr, "warning: RELAYROOM_PUBLIC_URL is not set: the URLs printed start with %s, derived from the listen address\n", env.cfg.Public())
}

// operatorName is who runs the command, for the audit trail: $RELAYROOM_OPERATOR when
// set (a script acting for someone), else the system's user. Not the host: the trail is
// read by the organisations' admins, and the operator's machines are not their business.
func operatorName() string {
	if n := os.Getenv("RELAYROOM_OPERATOR"); n != "" {
		return n
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "unknown"
}
