package pg

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// CitusNodes returns the URLs of baseURL's database server and, when its database is a
// Citus coordinator's (the citus extension, registered workers), of every active worker
// after it, with the same credentials and database name. A plain PostgreSQL gives
// baseURL alone. Whoever makes a database of its own on a coordinator (the test harness,
// the load test) makes it on every node: Citus finds a database's shards on the workers
// by the database's name.
func CitusNodes(ctx context.Context, baseURL string) ([]string, error) {
	base, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("citus nodes: parse the URL: %w", err)
	}
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return nil, fmt.Errorf("citus nodes: connect to %s: %w", base.Redacted(), err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	citus, err := HasCitus(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("citus nodes: look for citus: %w", err)
	}
	if !citus {
		return []string{baseURL}, nil
	}
	rows, err := conn.Query(ctx, "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 AND isactive ORDER BY nodeid")
	if err != nil {
		return nil, fmt.Errorf("citus nodes: list the workers: %w", err)
	}
	out := []string{baseURL}
	var host string
	var port int
	_, err = pgx.ForEachRow(rows, []any{&host, &port}, func() error {
		u := *base
		u.Host = net.JoinHostPort(host, strconv.Itoa(port))
		out = append(out, u.String())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("citus nodes: list the workers: %w", err)
	}
	if len(out) == 1 {
		return nil, fmt.Errorf("citus nodes: %s has the citus extension but no worker: register them (deploy/citus/cluster.sh start)", base.Redacted())
	}
	return out, nil
}

// MakeCitusDatabase makes the empty database name, already created on every node of
// nodes (CitusNodes' order: the coordinator first), a Citus database: the extension on
// every node, and the nodes registered in the coordinator's (Citus keeps its node list
// per database), as deploy/citus/cluster.sh does for the relayroom database. Migrations
// and Distribute come next.
func MakeCitusDatabase(ctx context.Context, nodes []string, name string) error {
	for _, n := range nodes {
		if err := execOn(ctx, n, name, "CREATE EXTENSION citus"); err != nil {
			return err
		}
	}
	c, err := connectTo(ctx, nodes[0], name)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	for i, n := range nodes {
		u, err := url.Parse(n)
		if err != nil {
			return fmt.Errorf("citus database: parse a node's URL: %w", err)
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			return fmt.Errorf("citus database: no port in %s: %w", u.Redacted(), err)
		}
		q := "SELECT citus_add_node($1, $2)"
		if i == 0 {
			q = "SELECT citus_set_coordinator_host($1, $2)"
		}
		if _, err := c.Exec(ctx, q, u.Hostname(), port); err != nil {
			return fmt.Errorf("citus database: register %s: %w", u.Redacted(), err)
		}
	}
	return nil
}

func connectTo(ctx context.Context, server, database string) (*pgx.Conn, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("parse a node's URL: %w", err)
	}
	u.Path = "/" + database
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", u.Redacted(), err)
	}
	return c, nil
}

func execOn(ctx context.Context, server, database, sql string) error {
	c, err := connectTo(ctx, server, database)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	if _, err := c.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s on %s: %w", sql, c.Config().Host, err)
	}
	return nil
}
