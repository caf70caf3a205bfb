// Package sql holds the schema migrations (golang-migrate files, embedded in the binary)
// and the queries that sqlc compiles into package db.
package sql

import (
	"embed"
	"io/fs"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the migration files, rooted at their directory.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the directory is embedded at build time: absent only if the build is broken
	}
	return sub
}
