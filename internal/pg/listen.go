package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ListenPing is how long a listening connection may stay quiet before AwaitNotification
// asks the server whether it is still there, and ListenPingTimeout how long the answer
// may take. A connection that a NAT or a load balancer dropped without a reset sends
// nothing and receives nothing: without the question, a listener would wait on it until
// TCP keepalive gave up (tens of minutes on Linux), its replica's long polls answered only
// at the poll interval and its dashboard streams never updated.
const (
	ListenPing        = time.Minute
	ListenPingTimeout = 10 * time.Second
)

// AwaitNotification waits for the next notification on conn, which LISTENs. Every ping of
// quiet it runs SELECT 1 (bounded by pingTimeout); a connection that does not answer is an
// error, for the caller to drop the connection and listen again on a new one. A wait cut
// by its own deadline leaves the connection usable (pgconn closes it only on other read
// errors), so the question goes on the same connection.
func AwaitNotification(ctx context.Context, conn *pgx.Conn, ping, pingTimeout time.Duration) (*pgconn.Notification, error) {
	for {
		wctx, cancel := context.WithTimeout(ctx, ping)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			return n, nil
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		_, err = conn.Exec(pctx, "SELECT 1")
		cancel()
		if err != nil {
			return nil, fmt.Errorf("listening connection did not answer within %s after %s of quiet: %w", pingTimeout, ping, err)
		}
	}
}
