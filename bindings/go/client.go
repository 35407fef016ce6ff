package odek

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"
)

// abandonedLaunches counts sandboxes destroyed because their Launch was
// cancelled (for tests).
var abandonedLaunches atomic.Int64

// cancelledInCore counts calls whose context ended while they ran and that
// libodek then stopped (CodeCancelled), cleanup included (for tests).
var cancelledInCore atomic.Int64

// ClientOptions configures a Client (odek_client_new).
type ClientOptions struct {
	// DockerHost is the daemon endpoint, "unix:///path", "tcp://host:port"
	// or "ssh://[user@]host[:port]". Empty: the rules of SPEC §6.2
	// (DOCKER_HOST, the Docker context, the default socket).
	DockerHost string
	// DockerCertPath, with a "tcp://" DockerHost, is the absolute path of the directory of
	// ca.pem, cert.pem and key.pem: the daemon is reached over TLS and its
	// certificate verified (SPEC §6.2.1). Empty: plain TCP. Set without a
	// tcp:// DockerHost, or with files that fail their check, NewClient
	// returns CodeEndpoint naming the file and the fix.
	DockerCertPath string
	// Engine is "docker" (the default when empty) or "fake": an in-memory
	// engine for tests with the image odek-test/base:1 and a running Compose
	// project "shop" (networks shop_default and the internal shop_backend).
	Engine string
	// SandboxPool gives the client a warm pool: it keeps this many
	// sandboxes ready (0–8; 0, the default, none) for each plan it
	// launched. Launch then hands over a ready sandbox of exactly its plan,
	// after the approval re-check and the inspect-verify a launch does (a
	// failing one is removed and a fresh one launched), and starts a
	// replacement in the background; Close removes the ready ones
	// (docs/SANDBOXING.md, "The warm pool").
	SandboxPool uint8
}

// Client talks to one Docker daemon (or the fake engine). It is safe for
// concurrent use by several goroutines. Close it when done; a Client that is
// garbage collected unclosed is freed by a finalizer. Sandboxes launched from
// a client stay usable after the client is closed.
type Client struct {
	mu     sync.Mutex
	h      uintptr // odek_client_t*, an ID: never dereferenced
	closed bool
	calls  sync.WaitGroup // calls in flight, background ones included
}

// NewClient creates a client. No connection is made until a call needs the
// daemon. The first call of the process also checks that the loaded libodek
// implements ABIVersion (else the error wraps ErrABIVersion).
func NewClient(opts ClientOptions) (*Client, error) {
	if err := checkABI(); err != nil {
		return nil, err
	}
	h, err := cClientNew(mustJSON(wireClientOptions{
		Schema: "odek.client-options/1", DockerHost: opts.DockerHost,
		DockerCertPath: opts.DockerCertPath, Engine: opts.Engine, SandboxPool: opts.SandboxPool,
	}))
	if err != nil {
		return nil, err
	}
	c := &Client{h: h}
	runtime.SetFinalizer(c, func(c *Client) {
		// Unreachable, so no call is in flight: free the handle. Errors
		// (already freed) cannot be reported from here.
		c.mu.Lock()
		h, closed := c.h, c.closed
		c.mu.Unlock()
		if !closed {
			_ = cClientFree(h)
		}
	})
	return c, nil
}

// begin registers a call; the caller runs end() when it is completely done.
func (c *Client) begin() (uintptr, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, nil, closedError("client")
	}
	c.calls.Add(1)
	return c.h, func() { c.calls.Done(); runtime.KeepAlive(c) }, nil
}

// Close frees the client. It waits for calls in flight on it to finish,
// including calls whose context was cancelled and that still run in the
// background (so a cancelled Launch has destroyed its sandbox when Close
// returns). Closing again is a no-op that returns nil; using a closed client
// returns an error matching ErrInvalidHandle.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	h := c.h
	c.mu.Unlock()
	c.calls.Wait()
	runtime.SetFinalizer(c, nil)
	err := cClientFree(h)
	runtime.KeepAlive(c)
	return err
}

// ResolveRequest is what Resolve resolves ("odek.resolve-request/1").
type ResolveRequest struct {
	// Workdir is the project directory (absolute, or relative to the
	// process's working directory). It is mounted at /workspace.
	Workdir string
	// Settings are operator settings with the highest precedence: config
	// keys of SPEC §3.1 as in odek.json, e.g.
	// {"sandbox": true, "sandbox_image": "odek-test/base:1",
	//  "sandbox_compose_project": "shop", "sandbox_pids_limit": 256}.
	Settings map[string]any
	// IgnoreUserConfig skips $ODEK_HOME/config.json.
	IgnoreUserConfig bool
	// IgnoreProjectConfig skips ./odek.json in Workdir.
	IgnoreProjectConfig bool
	// Env replaces the process environment for ODEK_* variables, $ODEK_HOME
	// and ${…} interpolation (nil: the process environment).
	Env map[string]string
	// AllowHostFallback keeps SPEC §6.3's implicit mode: an unreachable
	// daemon or an image that cannot be pulled falls back to running
	// commands on the host (Sandbox.Isolation.Kind == IsolationFallback).
	// By default (false) a sandbox is required: unless Settings says
	// "sandbox" itself, libodek sets it to true (the resolve request's
	// allow_host_fallback, decided there for every caller), so those
	// failures are errors instead of a host shell for the agent.
	AllowHostFallback bool
}

// Resolve resolves configuration, networks and image into a plan (SPEC
// §3–§5). When plan.Approval is not nil, the operator must approve it
// (Approve) before Launch. Blocks until done or ctx ends (see await: the
// call then finishes in the background).
//
// Errors: ErrConfig (bad settings; e.g. CodeNetworkMode,
// CodeComposeNotRunning), ErrApproval (CodeApprovalStore),
// ErrDaemonUnreachable when no fallback is allowed, ErrDockerRejected.
func (c *Client) Resolve(ctx context.Context, req ResolveRequest) (*Plan, error) {
	w := wireResolveRequest{
		Schema:            "odek.resolve-request/1",
		Workdir:           req.Workdir,
		Settings:          req.Settings,
		Env:               req.Env,
		AllowHostFallback: req.AllowHostFallback,
	}
	no := false
	if req.IgnoreUserConfig {
		w.ReadUserConfig = &no
	}
	if req.IgnoreProjectConfig {
		w.ReadProjectConfig = &no
	}
	doc, err := encodeJSON(w)
	if err != nil {
		return nil, err
	}
	h, end, err := c.begin()
	if err != nil {
		return nil, err
	}
	return await(ctx, func(cancel uintptr) (*Plan, error) {
		out, err := cResolve(h, doc, cancel)
		if err != nil {
			return nil, err
		}
		return parsePlan(out)
	}, nil, end)
}

// Approve approves a plan's project settings (SPEC §7): DecisionOnce for
// this launch, DecisionTrust to also record the project as trusted in
// $ODEK_HOME (a failed write is CodeApprovalStore and grants nothing). Pass
// the result to Launch. It is an error (ErrApproval) to approve a plan that
// needs no approval.
func (c *Client) Approve(ctx context.Context, plan *Plan, d Decision) (*Approval, error) {
	if plan == nil {
		return nil, usageError("Approve: plan is nil")
	}
	h, end, err := c.begin()
	if err != nil {
		return nil, err
	}
	return await(ctx, func(uintptr) (*Approval, error) {
		out, err := cApprove(h, plan.raw, string(d))
		if err != nil {
			return nil, err
		}
		return ParseApproval([]byte(out))
	}, nil, end)
}

// Launch launches a sandbox from a plan (SPEC §6): re-checks approved
// networks, ensures the image, creates, starts, connects and verifies the
// container — or fails leaving no container. approval is the result of
// Approve, or nil when plan.NeedsApproval() is false (no request, or a
// request the operator already granted: a trusted project or
// ODEK_APPROVE_PROJECT_SANDBOX=1).
//
// Close the sandbox when done: that removes the container. If ctx ends
// before the launch is done, Launch returns ctx.Err() at once; libodek
// stops the launch in the background and removes what it created (a
// sandbox finished just before is destroyed; Client.Close waits for that).
//
// Errors: ErrApproval (CodeApprovalRequired when an approval is missing),
// ErrDockerRejected, ErrImageUnavailable, ErrDaemonUnreachable, ErrConfig.
func (c *Client) Launch(ctx context.Context, plan *Plan, approval *Approval) (*Sandbox, error) {
	if plan == nil {
		return nil, usageError("Launch: plan is nil")
	}
	a := "null"
	if approval != nil {
		a = approval.raw
	}
	h, end, err := c.begin()
	if err != nil {
		return nil, err
	}
	return await(ctx, func(cancel uintptr) (*Sandbox, error) {
		// With a nil approval, libodek accepts a standing one by itself: a
		// key still trusted in the store, or ODEK_APPROVE_PROJECT_SANDBOX=1.
		sh, err := cLaunch(h, plan.raw, a, cancel)
		if err != nil {
			return nil, err
		}
		return newSandbox(sh)
	}, func(s *Sandbox) {
		abandonedLaunches.Add(1)
		_ = s.Close()
	}, end)
}

// ConfigView is the settings plan actually applies, with sources (SPEC
// §10.4). Looks the image up on the daemon when it answers (never pulls).
func (c *Client) ConfigView(ctx context.Context, plan *Plan) (*ConfigView, error) {
	if plan == nil {
		return nil, usageError("ConfigView: plan is nil")
	}
	h, end, err := c.begin()
	if err != nil {
		return nil, err
	}
	return await(ctx, func(cancel uintptr) (*ConfigView, error) {
		out, err := cConfigView(h, plan.raw, cancel)
		if err != nil {
			return nil, err
		}
		return parseConfigView(out)
	}, nil, end)
}

// Narrow derives a sub-agent's plan from its parent's resolved plan (SPEC
// §8), never from Docker, so it does not block. Anything that would widen
// the parent's sandbox is refused with an error matching ErrNarrow. The
// child keeps the parent's approval request (SPEC §7): when the parent
// needed approval, so does the child — launch it with the parent's
// Approval (same key and networks), one from Approve on the child, or a
// standing approval (a stored trust, ODEK_APPROVE_PROJECT_SANDBOX at the
// parent's resolve); otherwise launching it fails with ErrApproval and
// creates nothing. The launch re-checks the project's networks (SPEC §7.4).
func Narrow(parent *Plan, req NarrowRequest) (*Plan, error) {
	if err := checkABI(); err != nil {
		return nil, err
	}
	if parent == nil {
		return nil, usageError("Narrow: parent plan is nil")
	}
	out, err := cNarrow(parent.raw, req.encode())
	if err != nil {
		return nil, err
	}
	return parsePlan(out)
}

// encodeJSON encodes a request built from caller-supplied values (settings
// may hold anything), reporting failure as a usage error.
func encodeJSON(v interface{}) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", usageError("cannot encode the request as JSON: %v", err)
	}
	return string(b), nil
}

// LaunchRequest is what the one-call Launch needs.
type LaunchRequest struct {
	// Workdir, Settings, Env and AllowHostFallback are as in ResolveRequest.
	Workdir           string
	Settings          map[string]any
	Env               map[string]string
	AllowHostFallback bool
	// Approve grants the project config's approval request, if there is
	// one: DecisionOnce or DecisionTrust. Empty grants nothing: a stored
	// trust or ODEK_APPROVE_PROJECT_SANDBOX=1 still counts; otherwise
	// Launch fails with an error matching ErrApproval
	// (CodeApprovalRequired) and nothing is created.
	Approve Decision
	// Client is the client to use; nil: a client for the default Docker
	// endpoint, closed before Launch returns (the sandbox stays usable).
	// Closing it waits for calls still running in the background, so with a
	// nil Client a cancelled ctx makes Launch return only once the
	// abandoned resolve or launch has finished (and its sandbox is
	// removed); pass a long-lived Client to return at once.
	Client *Client
}

// Launch resolves, approves when req.Approve says so, and launches a
// sandbox in one call (Client.Resolve, Client.Approve, Client.Launch):
//
//	sb, err := odek.Launch(ctx, odek.LaunchRequest{Workdir: ".", Settings: map[string]any{"sandbox_compose_project": "shop"}})
//	defer sb.Close() // removes the container
//	res, err := sb.Exec(ctx, odek.ExecRequest{Argv: []string{"redis-cli", "-h", "redis", "ping"}})
//
// Errors: those of NewClient, Resolve, Approve and Launch.
func Launch(ctx context.Context, req LaunchRequest) (*Sandbox, error) {
	switch req.Approve {
	case "", DecisionOnce, DecisionTrust:
	default:
		return nil, usageError("Launch: Approve must be empty, DecisionOnce or DecisionTrust (got %q)", string(req.Approve))
	}
	c := req.Client
	if c == nil {
		own, err := NewClient(ClientOptions{})
		if err != nil {
			return nil, err
		}
		defer own.Close()
		c = own
	}
	plan, err := c.Resolve(ctx, ResolveRequest{
		Workdir:           req.Workdir,
		Settings:          req.Settings,
		Env:               req.Env,
		AllowHostFallback: req.AllowHostFallback,
	})
	if err != nil {
		return nil, err
	}
	var approval *Approval
	if plan.NeedsApproval() && req.Approve != "" {
		if approval, err = c.Approve(ctx, plan, req.Approve); err != nil {
			return nil, err
		}
	}
	return c.Launch(ctx, plan, approval)
}
