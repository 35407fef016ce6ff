// Package odek is the Go binding of odek, Docker sandboxes for AI coding
// agents (SPEC §10.2). It wraps the stable C ABI of libodek (ffi/include/odek.h)
// with cgo.
//
// The flow of an agent framework:
//
//	c, err := odek.NewClient(odek.ClientOptions{})
//	defer c.Close()
//	plan, err := c.Resolve(ctx, odek.ResolveRequest{Workdir: dir,
//		Settings: map[string]any{"sandbox_compose_project": "shop"}})
//	var approval *odek.Approval
//	if plan.Approval != nil { // show plan.Approval to the operator, then:
//		approval, err = c.Approve(ctx, plan, odek.DecisionOnce)
//	}
//	sb, err := c.Launch(ctx, plan, approval)
//	defer sb.Close() // removes the container
//	d, err := sb.Describe(ctx) // d.Prompt goes into the system prompt
//	res, err := sb.Exec(ctx, odek.ExecRequest{Argv: []string{"redis-cli", "-h", "redis", "ping"}})
//
// See examples/agentloop for a complete program.
//
// # Errors
//
// Failures from libodek are *Error values with a stable Code (the Code*
// constants), the failure Class of SPEC §6.3 and a Message. Test them with
// errors.Is against ErrConfig, ErrApproval, ErrNarrow, ErrDockerRejected,
// ErrImageUnavailable, ErrDaemonUnreachable, ErrUsage and ErrInvalidHandle,
// or read the code with errors.As.
//
// # Contexts and blocking
//
// Calls that talk to Docker block their OS thread inside libodek. They take
// a context.Context: when it ends first, the method returns ctx.Err() at once
// and libodek is told to stop the call (a cancelled Exec kills its command, a
// cancelled Launch removes what it created); the C call ends in a background
// goroutine. A sandbox that a cancelled Launch produces anyway is destroyed
// there, so no container leaks; Client.Close waits for such background calls.
// Exec passes a context deadline to libodek as its timeout when it is the
// sooner one.
//
// # Resources
//
// Client and Sandbox hold libodek handles. Close them explicitly (Close is
// idempotent and safe from any goroutine); finalizers free a forgotten client
// and destroy a forgotten sandbox as a backstop only. Strings crossing the
// boundary are copied into Go memory and freed at once; nothing returned by
// this package refers to C memory.
//
// # fork() without exec
//
// libodek refuses to be used in a process forked (without exec) from the
// one that made its state: every call there fails with CodeForked and
// touches nothing of the parent's (see "fork() without exec" in odek.h).
// A Go program cannot get into that state: the Go runtime offers no fork
// without exec (syscall.ForkExec and os/exec start a new program, which
// loads libodek afresh), so Go code never sees CodeForked unless C code
// linked into the program forks and calls back into Go. The code is listed
// so that the table matches the header.
//
// # Linking
//
// By default the package links libodek.so with the flags from
// `pkg-config odek` (point PKG_CONFIG_PATH at an installed prefix's
// lib/pkgconfig, e.g. one made by `cargo xtask dist`); the header is part of
// the module. The build tag odek_static links libodek.a instead, through
// `pkg-config odek-static`. CGO_CFLAGS / CGO_LDFLAGS add flags to either.
package odek
