// Package admin holds the operator's operations behind `relayroom admin`: applying a
// declarative file of organisations, people, agents and projects, and the small imperative
// commands built on the same code. It runs with the owning role, across tenants.
package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/relayroom/relayroom/internal/desk"
)

// firstInvalid is the offset of the first byte of b that is not valid UTF-8.
func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// File is the declarative shape of `relayroom admin apply -f FILE`.
type File struct {
	Organisations []OrgSpec     `yaml:"organisations" json:"organisations"`
	Users         []UserSpec    `yaml:"users" json:"users"`
	Agents        []AgentSpec   `yaml:"agents" json:"agents"`
	Projects      []ProjectSpec `yaml:"projects" json:"projects"`
	// Desk declares helpdesk workspaces' inboxes and saved replies (docs/desk.md).
	Desk []desk.WorkspaceSpec `yaml:"desk" json:"desk"`
}

// ProjectKey names a declared project in Result.Projects: its slug, or "host/slug" where
// the file declares that slug under more than one host. A project's slug is unique per
// host, so two companies may each have their own "support".
func (f File) ProjectKey(p ProjectSpec) string {
	for _, q := range f.Projects {
		if q.Slug == p.Slug && q.Host != p.Host {
			return p.Host + "/" + p.Slug
		}
	}
	return p.Slug
}

// OrgSpec declares an organisation.
type OrgSpec struct {
	Slug     string `yaml:"slug" json:"slug"`
	Name     string `yaml:"name" json:"name"`
	Plan     string `yaml:"plan" json:"plan"`
	Timezone string `yaml:"timezone" json:"timezone"`
}

// UserSpec declares a person and their role in one organisation.
type UserSpec struct {
	Email    string `yaml:"email" json:"email"`
	Name     string `yaml:"name" json:"name"`
	Org      string `yaml:"org" json:"org"`
	Role     string `yaml:"role" json:"role"`
	Password string `yaml:"password" json:"password"`
}

// AgentSpec declares an agent of an organisation.
type AgentSpec struct {
	Org   string `yaml:"org" json:"org"`
	Slug  string `yaml:"slug" json:"slug"`
	Name  string `yaml:"name" json:"name"`
	Model string `yaml:"model" json:"model"`
	Kind  string `yaml:"kind" json:"kind"`
}

// ProjectSpec declares a project (room) with its members and guest organisations.
type ProjectSpec struct {
	Slug    string       `yaml:"slug" json:"slug"`
	Name    string       `yaml:"name" json:"name"`
	Host    string       `yaml:"host" json:"host"`
	Members []MemberSpec `yaml:"members" json:"members"`
	Guests  []GuestSpec  `yaml:"guests" json:"guests"`
}

// MemberSpec puts an agent ("org/slug") into a project as a part.
type MemberSpec struct {
	Agent        string   `yaml:"agent" json:"agent"`
	Part         string   `yaml:"part" json:"part"`
	Main         bool     `yaml:"main" json:"main"`
	Nickname     string   `yaml:"nickname" json:"nickname"`
	Access       string   `yaml:"access" json:"access"`
	Capabilities []string `yaml:"capabilities" json:"capabilities"`
}

// GuestSpec is a guest organisation's agreement with the host.
type GuestSpec struct {
	Org    string   `yaml:"org" json:"org"`
	Status string   `yaml:"status" json:"status"`
	Grants []string `yaml:"grants" json:"grants"`
}

// MaxFileBytes is the largest file ParseFile reads.
const MaxFileBytes = 8 << 20

// ParseFile reads YAML or JSON (JSON is YAML), refusing unknown fields so a typo in a key
// is an error rather than a silently ignored line, and refusing whatever it would not
// apply: a second YAML document or JSON value, or a file past MaxFileBytes.
func ParseFile(r io.Reader) (File, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("read file: %w", err)
	}
	if len(b) > MaxFileBytes {
		return File{}, fmt.Errorf("read file: larger than %d MiB", MaxFileBytes>>20)
	}
	if !utf8.Valid(b) {
		// JSON's decoder put U+FFFD in its place and the name was stored so, where the
		// same file in YAML is refused.
		line := 1 + bytes.Count(b[:firstInvalid(b)], []byte("\n"))
		return File{}, fmt.Errorf("read file: line %d is not valid UTF-8 text (save the file as UTF-8)", line)
	}
	var f File
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return File{}, fmt.Errorf("parse JSON: %w", err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return File{}, errors.New("parse JSON: the file holds more than one JSON value: put everything in one object")
		}
		// encoding/json keeps the last of a repeated key and matches keys whatever their
		// case: a file with "organisations" twice was applied in part, silently, where the
		// same file in YAML is refused.
		if err := checkJSONKeys(json.NewDecoder(bytes.NewReader(b)), ""); err != nil {
			return File{}, fmt.Errorf("parse JSON: %w", err)
		}
		return f, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return File{}, fmt.Errorf("parse YAML: %w", err)
	}
	// Further documents must be empty (a trailing --- that tools write when they join files).
	for {
		var more any
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			return f, nil
		}
		if err != nil || more != nil {
			return File{}, errors.New("parse YAML: the file holds more than one document (---): only the first would be applied; put everything in one")
		}
	}
}

// checkJSONKeys walks a JSON value that decoded (so well formed, and nested within
// encoding/json's depth) and refuses a key repeated in its object, and a key not spelled
// in lower case as every key of the file is.
func checkJSONKeys(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string) // an object's key is a string token
			at := key
			if path != "" {
				at = path + "." + key
			}
			if seen[key] {
				return fmt.Errorf("%s: the key appears twice in its object: only one would be applied", at)
			}
			if key != strings.ToLower(key) {
				return fmt.Errorf("%s: keys are lower case (%q)", at, strings.ToLower(key))
			}
			seen[key] = true
			if err := checkJSONKeys(dec, at); err != nil {
				return err
			}
		}
		_, err = dec.Token() // }
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := checkJSONKeys(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
		return err
	}
	return nil
}

// Problems is every problem found in a file, each named by its path.
type Problems []string

func (p Problems) Error() string {
	return fmt.Sprintf("the file was not applied (%d problem(s)):\n  %s", len(p), strings.Join(p, "\n  "))
}
