package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerOptions say how to start `relayroom serve` as a child process.
type ServerOptions struct {
	Bin         string   // the relayroom binary
	DatabaseURL string   // its DATABASE_URL
	LogPath     string   // its stdout and stderr are appended here
	Env         []string // extra settings, KEY=value (they win over the inherited environment)
	Addr        string   // 127.0.0.1:port; empty picks a free loopback port
}

// readyTimeout bounds how long a starting server may take to answer /readyz.
const readyTimeout = 60 * time.Second

// Server is a running `relayroom serve`.
type Server struct {
	Base string // http://127.0.0.1:port
	opts ServerOptions
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the process's exit, once done is closed
	log  *os.File
}

// FreeLoopbackAddr asks the kernel for a free port on 127.0.0.1.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// StartServer starts the server and waits until /readyz answers 200.
func StartServer(ctx context.Context, opts ServerOptions) (*Server, error) {
	if opts.Addr == "" {
		addr, err := FreeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		opts.Addr = addr
	}
	logf, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	base := "http://" + opts.Addr
	cmd := exec.Command(opts.Bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+opts.DatabaseURL, "RELAYROOM_ADDR="+opts.Addr, "RELAYROOM_PUBLIC_URL="+base)
	cmd.Env = append(cmd.Env, opts.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s serve: %w", opts.Bin, err)
	}
	s := &Server{Base: base, opts: opts, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() {
		s.err = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	if err := s.waitReady(ctx, readyTimeout); err != nil {
		if kerr := s.Kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-s.done:
			return fmt.Errorf("relayroom serve exited while starting (%v); see %s", s.err, s.opts.LogPath)
		default:
		}
		if code, err := probe(ctx, client, s.Base+"/readyz"); err == nil && code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("relayroom serve not ready after %v; see %s", timeout, s.opts.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probe GETs url and returns its status.
func probe(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, resp.Body.Close()
}

// Health GETs /healthz with a short timeout: the status, and how long the answer took.
func (s *Server) Health(ctx context.Context, timeout time.Duration) (int, time.Duration, error) {
	t0 := time.Now()
	code, err := probe(ctx, &http.Client{Timeout: timeout}, s.Base+"/healthz")
	return code, time.Since(t0), err
}

// PID is the server's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Opts are the options the server was started with (its address included), for a restart.
func (s *Server) Opts() ServerOptions { return s.opts }

// Kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (s *Server) Kill() error {
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill -9 relayroom serve: %w", err)
	}
	<-s.done
	return nil
}

// Stop sends SIGTERM (in-flight calls finish) and waits up to timeout, then kills.
func (s *Server) Stop(timeout time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop relayroom serve: %w", err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(timeout):
		if err := s.Kill(); err != nil {
			return err
		}
		return fmt.Errorf("relayroom serve did not stop within %v: killed", timeout)
	}
}

// Memory reads the server's resident set size now and its peak (VmRSS, VmHWM), in bytes.
func (s *Server) Memory() (rss, peak int64, err error) {
	f, err := os.Open("/proc/" + strconv.Itoa(s.PID()) + "/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return parseStatus(f)
}

// parseStatus reads VmRSS and VmHWM (kB) from a /proc/<pid>/status file, in bytes.
func parseStatus(r io.Reader) (rss, peak int64, err error) {
	sc := bufio.NewScanner(r)
	found := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		var dst *int64
		switch fields[0] {
		case "VmRSS:":
			dst = &rss
		case "VmHWM:":
			dst = &peak
		default:
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s: %w", fields[0], err)
		}
		*dst = kb << 10
		found++
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("no VmRSS and VmHWM in the process status (the process is gone?)")
	}
	return rss, peak, nil
}

// OpenFiles counts the server's open file descriptors (its connections among them).
func (s *Server) OpenFiles() (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(s.PID()) + "/fd")
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}

// LogBytes is the size of the server's log file so far.
func (s *Server) LogBytes() (int64, error) {
	st, err := os.Stat(s.opts.LogPath)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// LoadAverage is the machine's 1-minute load average, the noise figure printed beside
// every measurement ("unknown" where /proc/loadavg cannot be read).
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
