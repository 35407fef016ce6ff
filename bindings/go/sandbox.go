package odek

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Sandbox is a launched sandbox: a container, or the host in fallback or off
// mode (see Isolation). It is safe for concurrent use by several goroutines.
//
// Close it when done: Close removes the container. A Sandbox that is garbage
// collected unclosed is destroyed by a finalizer as a backstop, but do not
// rely on that — a process that exits leaves the container to
// `odek sandbox gc`.
type Sandbox struct {
	// Name is the sandbox name, e.g. "odek-ae779e0e4611".
	Name string
	// ContainerID is the full container ID ("" on the host).
	ContainerID string
	// Isolation is container, fallback (with the reason) or off.
	Isolation Isolation
	// StartupLine is the one-line summary of SPEC §6.4, e.g.
	// "odek: sandbox network=attached pids=4096 image=… networks=… endpoint=… runtime=… supervisor=…".
	StartupLine string
	// Warnings are the plan's and the engine's warnings.
	Warnings []Warning
	// Plan is the plan the sandbox was launched from.
	Plan *Plan

	mu     sync.Mutex
	h      uintptr // odek_sandbox_t*, an ID: never dereferenced
	closed bool
	// result is what the Close that ran found, once it returned.
	result *CloseResult
}

func newSandbox(h uintptr) (*Sandbox, error) {
	info, err := cSandboxInfo(h)
	if err == nil {
		var s *Sandbox
		if s, err = parseSandboxInfo(info); err == nil {
			s.h = h
			runtime.SetFinalizer(s, finalizeSandbox)
			return s, nil
		}
	}
	// Do not leak the container when its description cannot be read.
	_ = cSandboxDestroy(h)
	return nil, err
}

func finalizeSandbox(s *Sandbox) {
	s.mu.Lock()
	h, closed := s.h, s.closed
	s.closed = true
	s.mu.Unlock()
	if !closed {
		// Destroying blocks on Docker: not on the finalizer goroutine.
		go func() { _ = cSandboxDestroy(h) }()
	}
}

func parseSandboxInfo(doc string) (*Sandbox, error) {
	var w wireSandboxInfo
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return nil, fmt.Errorf("odek: unexpected sandbox info document: %w", err)
	}
	plan, err := parsePlan(string(w.Plan))
	if err != nil {
		return nil, err
	}
	return &Sandbox{
		Name:        w.Name,
		ContainerID: deref(w.ContainerID),
		Isolation:   w.Isolation,
		StartupLine: w.StartupLine,
		Warnings:    w.Warnings,
		Plan:        plan,
	}, nil
}

// handle is the live handle, or the ErrInvalidHandle error once closed.
func (s *Sandbox) handle() (uintptr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, closedError("sandbox")
	}
	return s.h, nil
}

// Close destroys the sandbox: removes its container (force) and frees the
// handle. The handle is freed even when removal fails (the error says so;
// `odek sandbox gc` reaps the container later). Closing again is a no-op that
// returns nil; any other call on a closed sandbox returns an error matching
// ErrInvalidHandle. Close does not wait for an Exec in flight: removing the
// container ends it, and that Exec returns an error. What CloseWithResult
// returns is kept: ClosedResult.
func (s *Sandbox) Close() error {
	_, err := s.CloseWithResult()
	return err
}

// CloseWithResult is Close that also returns what the sandbox changed of
// the files host tools run — git hooks, .git/config, .envrc,
// .vscode/tasks.json, Makefiles, package.json, .pre-commit-config.yaml —
// compared once its container is gone (CloseResult). Show
// CloseResult.Message to the user when it is not "": they should review
// those files before running git or make. Closing again returns the first
// call's result (nil while that call is still running, or when it failed).
func (s *Sandbox) CloseWithResult() (*CloseResult, error) {
	s.mu.Lock()
	if s.closed {
		r := s.result
		s.mu.Unlock()
		return r, nil
	}
	s.closed = true
	h := s.h
	s.mu.Unlock()
	runtime.SetFinalizer(s, nil)
	doc, err := cSandboxClose(h)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	r, err := parseCloseResult(doc)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.result = r
	s.mu.Unlock()
	return r, nil
}

// ClosedResult is what the Close (or CloseWithResult) that ran found; nil
// before it returned, or when it failed.
func (s *Sandbox) ClosedResult() *CloseResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result
}

// parseCloseResult reads an "odek.close-result/1" document.
func parseCloseResult(doc string) (*CloseResult, error) {
	var w wireCloseResult
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return nil, fmt.Errorf("odek: unexpected close result document: %w", err)
	}
	changed := w.ChangedHostFiles
	if changed == nil {
		changed = []HostFileChange{}
	}
	return &CloseResult{
		Name:               w.Name,
		ChangedHostFiles:   changed,
		HostFilesUnchecked: deref(w.HostFilesUnchecked),
		Message:            deref(w.Message),
		CopiedBack:         w.CopiedBack,
	}, nil
}

// Describe describes the sandbox for the agent (SPEC §9): the structured
// environment, read back from Docker, the "Execution environment" block for
// the system prompt and the shell tool's description. Blocks until done or
// ctx ends (the call then finishes in the background).
func (s *Sandbox) Describe(ctx context.Context) (*Description, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	return await(ctx, func(cancel uintptr) (*Description, error) {
		env, prompt, tool, err := cDescribe(h, cancel)
		runtime.KeepAlive(s)
		if err != nil {
			return nil, err
		}
		e, err := parseEnvironment(env)
		if err != nil {
			return nil, err
		}
		return &Description{Environment: e, Prompt: prompt, Tool: tool}, nil
	}, nil, nil)
}

// ExecRequest is a command to run in the sandbox ("odek.exec-request/1").
// Set exactly one of Argv and Shell.
type ExecRequest struct {
	// Argv is the command and its arguments, run without a shell.
	Argv []string
	// Shell is a command line run by /bin/sh -c.
	Shell string
	// Env adds environment variables for the command.
	Env map[string]string
	// Timeout ends the wait after this long (0: none): the result then has
	// ExitCode 124 and TimedOut set, and the command's processes are killed
	// with SIGKILL (through odek's supervisor: its process group, session
	// and descendants; without it: those carrying its ODEK_EXEC_ID tag, and
	// their children); Killed is true only when none was left. A context
	// deadline that comes sooner is passed on as the timeout.
	Timeout time.Duration
	// Workdir is the command's working directory in the sandbox (default
	// /workspace).
	Workdir string
}

// ExecResult is what a command did ("odek.exec-result/1"). A non-zero exit
// is a result, not an error.
type ExecResult struct {
	// ExitCode is the command's exit status (124 after a timeout).
	ExitCode int
	// Stdout and Stderr are the output as UTF-8 (invalid bytes replaced),
	// at most ExecOutputLimit bytes each.
	Stdout, Stderr string
	// TimedOut tells whether ExecRequest.Timeout ended the wait.
	TimedOut bool
	// Killed is true after a timeout only when odek killed the command and
	// saw none of its (tagged) processes left; false when the kill failed
	// or could not be confirmed (Stderr then says why).
	Killed bool
	// StdoutTruncated and StderrTruncated tell whether output was cut at
	// ExecOutputLimit.
	StdoutTruncated, StderrTruncated bool
}

// Exec runs a command in the sandbox and waits for it. If ctx has a deadline
// sooner than req.Timeout, the time left is passed to libodek as the timeout,
// so the call ends near the deadline and the command is killed; when ctx is
// cancelled first Exec returns ctx.Err() at once and libodek kills the
// command (and its descendants) as a timeout would, in the background.
//
// Errors: ErrInvalidHandle after Close, ErrUsage for a bad request (neither
// or both of Argv and Shell), ErrDockerRejected (CodeExec) when the command
// cannot be run, ErrDaemonUnreachable.
func (s *Sandbox) Exec(ctx context.Context, req ExecRequest) (*ExecResult, error) {
	doc, fromCtx, err := execDocument(ctx, "Exec", req)
	if err != nil {
		return nil, err
	}
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	res, err := await(ctx, func(cancel uintptr) (*ExecResult, error) {
		out, err := cExec(h, doc, cancel)
		runtime.KeepAlive(s)
		if err != nil {
			return nil, err
		}
		return parseExecResult(out)
	}, nil, nil)
	if err == nil && res.TimedOut && fromCtx {
		// The timeout was the context's deadline: report it as such.
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return res, err
}

// execDocument is the "odek.exec-request/1" document of req for Exec and
// ExecStream (what), with ctx's deadline as the timeout when it comes
// sooner (fromCtx: the timeout is the context's). A deadline already passed
// waits for ctx to end and returns ctx.Err().
func execDocument(ctx context.Context, what string, req ExecRequest) (doc string, fromCtx bool, err error) {
	m := wireExecRequest{Schema: "odek.exec-request/1", Env: req.Env}
	if req.Argv != nil {
		m.Argv = &req.Argv
	}
	if req.Shell != "" {
		m.Shell = &req.Shell
	}
	if req.Workdir != "" {
		m.Workdir = &req.Workdir
	}
	if req.Timeout < 0 {
		return "", false, usageError("%s: negative timeout %v", what, req.Timeout)
	}
	timeout := req.Timeout
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			<-ctx.Done()
			return "", false, ctx.Err()
		}
		if timeout == 0 || left < timeout {
			timeout = left
		}
	}
	fromCtx = timeout != req.Timeout
	if timeout > 0 {
		secs := timeout.Seconds()
		m.TimeoutSecs = &secs
	}
	doc, err = encodeJSON(m)
	return doc, fromCtx, err
}

// parseExecResult reads an "odek.exec-result/1" document.
func parseExecResult(doc string) (*ExecResult, error) {
	var w wireExecResult
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return nil, fmt.Errorf("odek: unexpected exec result document: %w", err)
	}
	return &ExecResult{
		ExitCode: w.ExitCode, Stdout: w.Stdout, Stderr: w.Stderr, TimedOut: w.TimedOut, Killed: w.Killed,
		StdoutTruncated: w.StdoutTruncated, StderrTruncated: w.StderrTruncated,
	}, nil
}
