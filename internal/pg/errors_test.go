package pg_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/relayroom/relayroom/internal/pg"
)

// TestIsInfrastructure: what is the database's or the network's failure (worth a retry,
// answered "unavailable") and what is not. A syscall.Errno is a net.Error by its methods,
// and a missing file passed for a lost connection.
func TestIsInfrastructure(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"a missing file":                     {&fs.PathError{Op: "open", Path: "x.yaml", Err: syscall.ENOENT}, false},
		"a file without permission":          {fmt.Errorf("read: %w", &os.PathError{Op: "open", Path: "y", Err: syscall.EACCES}), false},
		"a plain error":                      {errors.New("boom"), false},
		"a reset connection, bare":           {fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		"a refused connection in an OpError": {&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, true},
		"a broken pipe, bare":                {syscall.EPIPE, true},
		"a deadline":                         {fmt.Errorf("query: %w", context.DeadlineExceeded), true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := pg.IsInfrastructure(tc.err); got != tc.want {
				t.Fatalf("IsInfrastructure(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
