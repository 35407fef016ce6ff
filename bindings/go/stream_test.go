package odek

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitForGo prints a line on each stream, then waits until the file go
// exists in its working directory: the test creates it only after reading
// "a" from Stdout, so the command can end only if output comes while it
// runs (shown by ordering, not timing).
const waitForGo = "echo a; echo oops >&2; while [ ! -e go ]; do sleep 0.02; done; echo b; exit 3"

// checkStream runs waitForGo through ExecStream in sb, whose /workspace (or
// host workdir) is dir.
func checkStream(t *testing.T, sb *Sandbox, dir string) {
	t.Helper()
	ctx := context.Background()
	st, err := sb.ExecStream(ctx, ExecRequest{Shell: waitForGo, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("ExecStream: %v", err)
	}
	defer st.Close()
	errs := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(st.Stderr)
		errs <- b
	}()
	r := bufio.NewReader(st.Stdout)
	first, err := r.ReadString('\n')
	if err != nil || first != "a\n" {
		t.Fatalf("first stdout line %q, %v", first, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "b\n" {
		t.Errorf("rest of stdout %q, %v", rest, err)
	}
	if e := <-errs; string(e) != "oops\n" {
		t.Errorf("stderr %q", e)
	}
	res, err := st.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.ExitCode != 3 || res.TimedOut || res.Stdout != "a\nb\n" || res.Stderr != "oops\n" {
		t.Errorf("result %+v", res)
	}

	// A timeout: the command is killed, the result says so.
	st2, err := sb.ExecStream(ctx, ExecRequest{Shell: "echo a; sleep 30; touch late", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = st2.Stderr.Close() // not wanted: dropped, never holding the command up
	out, _ := io.ReadAll(st2.Stdout)
	res, err = st2.Wait()
	if err != nil || string(out) != "a\n" || !res.TimedOut || res.ExitCode != 124 || !res.Killed {
		t.Errorf("timeout: %q %+v %v", out, res, err)
	}

	// A cancelled context kills the command; Wait says why.
	cctx, cancel := context.WithCancel(ctx)
	st3, err := sb.ExecStream(cctx, ExecRequest{Shell: "echo a; sleep 30; touch late"})
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(st3.Stdout).ReadString('\n')
	cancel()
	if _, err := st3.Wait(); !errors.Is(err, context.Canceled) || line != "a\n" {
		t.Errorf("cancelled: %q %v", line, err)
	}

	// Close kills a running command.
	st4, err := sb.ExecStream(ctx, ExecRequest{Shell: "echo a; sleep 30; touch late"})
	if err != nil {
		t.Fatal(err)
	}
	line, _ = bufio.NewReader(st4.Stdout).ReadString('\n')
	_ = st4.Close()
	var oe *Error
	if _, err := st4.Wait(); !errors.As(err, &oe) || oe.Code != CodeCancelled || line != "a\n" {
		t.Errorf("closed: %q %v", line, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "late")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed command went on: %v", err)
	}
}

// The in-memory engine (no Docker; its commands print nothing): the
// readers end, Wait gives Exec's result, refusals are Exec's. (The host
// tier, sandbox off, cannot run under Go: libodek's host exec installs a
// SIGCHLD handler without SA_ONSTACK, which the Go runtime refuses.)
func TestFakeExecStream(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Env: env, Settings: map[string]any{"sandbox_image": "odek-test/base:1"}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	st, err := sb.ExecStream(ctx, ExecRequest{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err1 := io.ReadAll(st.Stdout)
	errOut, err2 := io.ReadAll(st.Stderr)
	res, err := st.Wait()
	if err1 != nil || err2 != nil || len(out) != 0 || len(errOut) != 0 || err != nil || res.ExitCode != 0 {
		t.Errorf("fake exec: %q %q %+v %v %v %v", out, errOut, res, err, err1, err2)
	}
	if err := st.Close(); err != nil {
		t.Errorf("Close after the end: %v", err)
	}

	// A bad request is Wait's error, as Exec's.
	st, err = sb.ExecStream(ctx, ExecRequest{Shell: "touch ran", Argv: []string{"touch", "ran"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Wait(); !errors.Is(err, ErrUsage) {
		t.Errorf("bad request: %v", err)
	}
	if _, err := sb.ExecStream(ctx, ExecRequest{Shell: "true", Timeout: -time.Second}); !errors.Is(err, ErrUsage) {
		t.Errorf("negative timeout: %v", err)
	}
	// An ended context: Wait says so, nothing runs.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sb.ExecStream(dead, ExecRequest{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v", err)
	}
	// Stdin needs odek's supervisor, which the fake's sandbox has not:
	// Wait's CodeExec, and a nil stdin is a usage error.
	st, err = sb.ExecStreamInput(ctx, ExecRequest{Argv: []string{"cat"}}, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	var oe *Error
	if _, err := st.Wait(); !errors.As(err, &oe) || oe.Code != CodeExec || !strings.Contains(oe.Message, "supervisor") {
		t.Errorf("stdin without the supervisor: %v", err)
	}
	if _, err := sb.ExecStreamInput(ctx, ExecRequest{Argv: []string{"cat"}}, nil); !errors.Is(err, ErrUsage) {
		t.Errorf("nil stdin: %v", err)
	}
	_ = sb.Close()
	if _, err := sb.ExecStream(ctx, ExecRequest{Shell: "true"}); !errors.Is(err, ErrInvalidHandle) {
		t.Errorf("after Close: %v", err)
	}
}

// Real Docker, through the exec API or odek's supervisor as ODEK_SUPERVISOR
// says.
func TestDockerExecStream(t *testing.T) {
	ctx := context.Background()
	c := dockerClient(t)
	dir, env := isolated(t)
	cleanupContainers(t, dir)
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Env: env, Settings: sandboxSettings(map[string]any{"sandbox": true})})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	}()
	res, err := sb.Exec(ctx, ExecRequest{Shell: "test -e /.odek/odek-supervisor && echo supervisor || echo exec-api"})
	want := "exec-api"
	if os.Getenv("ODEK_SUPERVISOR") != "" {
		want = "supervisor"
	}
	if err != nil || strings.TrimSpace(res.Stdout) != want {
		t.Fatalf("commands run through %+v %v, want %s", res, err, want)
	}
	checkStream(t, sb, dir)
	if want != "supervisor" {
		return
	}
	// Stdin through the supervisor: what the reader yields, as it comes
	// (a pipe written while the command runs), then its EOF closes it.
	pr, pw := io.Pipe()
	st, err := sb.ExecStreamInput(ctx, ExecRequest{Argv: []string{"cat"}, Timeout: time.Minute}, pr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(st.Stdout)
	if _, err := pw.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "one\n" {
		t.Fatalf("echoed line %q, %v", line, err)
	}
	_, _ = pw.Write([]byte("two\x00\n"))
	_ = pw.Close()
	rest, _ := io.ReadAll(r)
	res, err = st.Wait()
	if err != nil || res.ExitCode != 0 || string(rest) != "two\x00\n" {
		t.Errorf("stdin round trip: %q %+v %v", rest, res, err)
	}
}
