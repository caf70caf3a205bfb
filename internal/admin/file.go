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

	"gopkg.in/yaml.v3"

	"github.com/relayroom/relayroom/internal/desk"
)

// File is the declarative shape of `relayroom admin apply -f FILE`.
type File struct {
	Organisations []OrgSpec     `yaml:"organisations" json:"organisations"`
	Users         []UserSpec    `yaml:"users" json:"users"`
	Agents        []AgentSpec   `yaml:"agents" json:"agents"`
	Projects      []ProjectSpec `yaml:"projects" json:"projects"`
	// Desk declares helpdesk workspaces' inboxes and saved replies (docs/desk.md).
	Desk []desk.WorkspaceSpec `yaml:"desk" json:"desk"`
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

// Problems is every problem found in a file, each named by its path.
type Problems []string

func (p Problems) Error() string {
	return fmt.Sprintf("the file was not applied (%d problem(s)):\n  %s", len(p), strings.Join(p, "\n  "))
}
