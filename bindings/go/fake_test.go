package odek

// Tests against the in-memory fake engine ({"engine": "fake"}): image
// odek-test/base:1 and a running Compose project "shop" (networks
// shop_default and the internal shop_backend). No Docker needed.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestFakeLifecycle(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)

	plan, err := c.Resolve(ctx, ResolveRequest{
		Workdir:  dir,
		Settings: fakeSettings(map[string]any{"sandbox_compose_project": "shop", "sandbox_pids_limit": 256}),
		Env:      env,
	})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	// A container-only setting (the pids limit) makes the mode explicit.
	if plan.Mode != ModeExplicit || plan.Isolation.Kind != IsolationContainer {
		t.Errorf("mode %q isolation %+v", plan.Mode, plan.Isolation)
	}
	if plan.Workdir != dir || plan.Image.Reference != fakeImage || plan.Image.Origin != "explicit" {
		t.Errorf("workdir %q image %+v", plan.Workdir, plan.Image)
	}
	if plan.NetworkMode != "none" || plan.NetworkSummary != NetworkAttached || !plan.Internet {
		t.Errorf("network mode %q summary %q internet %v", plan.NetworkMode, plan.NetworkSummary, plan.Internet)
	}
	if plan.PidsLimit != 256 || plan.Sources["sandbox_pids_limit"].Kind != "api" {
		t.Errorf("pids %d source %+v", plan.PidsLimit, plan.Sources["sandbox_pids_limit"])
	}
	if len(plan.Networks) != 2 {
		t.Fatalf("networks %+v", plan.Networks)
	}
	byName := map[string]PlanNetwork{}
	for _, n := range plan.Networks {
		byName[n.Name] = n
		if !hex64.MatchString(n.ID) || n.ComposeProject != "shop" || n.Driver != "bridge" {
			t.Errorf("network %+v", n)
		}
	}
	if !byName["shop_backend"].Internal || byName["shop_default"].Internal {
		t.Errorf("internal flags %+v", plan.Networks)
	}
	if len(plan.Warnings) == 0 || plan.Warnings[0].Kind != "attached_network_not_internal" {
		t.Errorf("warnings %+v", plan.Warnings)
	}
	if plan.Approval != nil || plan.NeedsApproval() {
		t.Errorf("operator settings need no approval, got %+v", plan.Approval)
	}
	var doc map[string]any
	if err := json.Unmarshal(plan.JSON(), &doc); err != nil || doc["schema"] != SchemaPlan {
		t.Errorf("plan JSON: %v %v", err, doc["schema"])
	}

	view, err := c.ConfigView(ctx, plan)
	if err != nil {
		t.Fatalf("ConfigView: %v", err)
	}
	if view.Image.Reference != fakeImage || !view.Init || view.PidsLimit != 256 || len(view.Networks) != 2 ||
		view.Network != NetworkAttached || view.Isolation != IsolationContainer || view.Tmpfs == "" ||
		view.Sources["sandbox_image"].Kind != "api" || view.Workdir != dir {
		t.Errorf("config view %+v", view)
	}

	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if !strings.HasPrefix(sb.Name, "odek-") || !hex64.MatchString(sb.ContainerID) ||
		sb.Isolation.Kind != IsolationContainer || sb.Plan == nil || sb.Plan.Workdir != dir {
		t.Errorf("sandbox %+v", sb)
	}
	if !strings.Contains(sb.StartupLine, "network=attached") || !strings.Contains(sb.StartupLine, "pids=256") {
		t.Errorf("startup line %q", sb.StartupLine)
	}

	d, err := sb.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	e := d.Environment
	if e.Isolation != IsolationContainer || e.Sandbox != sb.Name || e.Workspace.Path != "/workspace" ||
		e.Network != NetworkAttached || !e.Internet || e.PidsLimit != 256 || len(e.Networks) != 2 {
		t.Errorf("environment %+v", e)
	}
	for _, n := range e.Networks {
		if n.Name != "shop_backend" && n.Name != "shop_default" {
			t.Errorf("environment network %+v", n)
		}
	}
	for _, want := range []string{"## Execution environment", sb.Name, "untrusted_content_", "shop_backend"} {
		if !strings.Contains(d.Prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, d.Prompt)
		}
	}
	if !strings.Contains(d.Tool, "sandbox") {
		t.Errorf("tool description %q", d.Tool)
	}

	for _, req := range []ExecRequest{
		{Argv: []string{"redis-cli", "-h", "redis", "ping"}},
		{Shell: "echo $HOME", Env: map[string]string{"A": "b"}, Workdir: "/tmp"},
	} {
		res, err := sb.Exec(ctx, req)
		if err != nil {
			t.Fatalf("Exec(%+v): %v", req, err)
		}
		if res.ExitCode != 0 || res.TimedOut || res.StdoutTruncated || res.StderrTruncated {
			t.Errorf("exec result %+v", res)
		}
	}

	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = sb.Exec(ctx, ExecRequest{Argv: []string{"true"}})
	wantCode(t, err, CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
	_, err = sb.Describe(ctx)
	wantCode(t, err, CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
}

// Closing a sandbox destroys it in libodek: the raw handle is invalid after.
func TestFakeCloseDestroysHandle(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := sb.h
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	// The libodek side, not only the Go flag: destroying again is refused.
	wantCode(t, cSandboxDestroy(h), CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
	_, err = cExec(h, `{"argv":["true"]}`, 0)
	wantCode(t, err, CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
}

// CloseWithResult names a hook written into the working directory while
// the sandbox lived (here by the test: the fake runs nothing), not an edit
// of src/main.py; a second call returns the same result.
func TestFakeCloseWithResultNamesAChangedHook(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	for _, d := range []string{".git/hooks", "src"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git/hooks/pre-commit"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src/main.py"), []byte("print(2)"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := sb.CloseWithResult()
	if err != nil {
		t.Fatal(err)
	}
	want := []HostFileChange{{Path: ".git/hooks/pre-commit", Change: "created, executable", Kinds: []string{"created"}}}
	if r.Name != sb.Name || !reflect.DeepEqual(r.ChangedHostFiles, want) || r.HostFilesUnchecked != "" {
		t.Errorf("close result %+v", r)
	}
	if !strings.HasSuffix(r.Message, "review them before running git or make") {
		t.Errorf("message %q", r.Message)
	}
	if again, err := sb.CloseWithResult(); err != nil || again != r || sb.ClosedResult() != r {
		t.Errorf("second close: %+v, %v", again, err)
	}

	// Only src/main.py changed: nothing to say.
	sb, err = c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src/main.py"), []byte("print(3)"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if r := sb.ClosedResult(); r == nil || len(r.ChangedHostFiles) != 0 || r.Message != "" {
		t.Errorf("close result %+v", r)
	}
}

func TestFakeApprovalRequired(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	writeProjectConfig(t, dir, `{"sandbox_compose_project": "shop"}`)

	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	a := plan.Approval
	if a == nil || !plan.NeedsApproval() {
		t.Fatal("a project compose project needs approval")
	}
	if !contains(a.Knobs, "sandbox_compose_project") || a.RequestedComposeProject != "shop" ||
		a.ProjectDir != dir || !strings.HasSuffix(a.Config, "odek.json") || len(a.Networks) != 2 ||
		a.NetworkSummary != NetworkAttached || !a.Internet || a.Trusted || a.Key == "" {
		t.Errorf("approval request %+v", a)
	}
	for _, n := range a.Networks {
		if !hex64.MatchString(n.ID) || n.ComposeProject != "shop" {
			t.Errorf("card %+v", n)
		}
		if !strings.Contains(a.Card, n.ID) {
			t.Errorf("the card does not show network ID %s:\n%s", n.ID, a.Card)
		}
	}
	if !strings.Contains(a.Card, a.Key) || !strings.Contains(a.Card, "compose") {
		t.Errorf("card:\n%s", a.Card)
	}
	// The request embedded in the plan is the one odek_plan_approval_request gives.
	req, err := cApprovalRequest(string(plan.JSON()))
	if err != nil {
		t.Fatal(err)
	}
	var x, y any
	_ = json.Unmarshal([]byte(req), &x)
	_ = json.Unmarshal(a.JSON(), &y)
	if mustJSON(x) != mustJSON(y) {
		t.Errorf("approval request differs:\n%s\n%s", req, a.JSON())
	}

	_, err = c.Launch(ctx, plan, nil)
	wantCode(t, err, CodeApprovalRequired, ClassConfig, ErrConfig, ErrApproval)

	approval, err := c.Approve(ctx, plan, DecisionOnce)
	if err != nil {
		t.Fatalf("Approve: %v", err)
	}
	if approval.Key != a.Key || approval.Via != "once" || len(approval.NetworkIDs) != 2 {
		t.Errorf("approval %+v", approval)
	}
	round, err := ParseApproval(approval.JSON())
	if err != nil || round.Key != approval.Key {
		t.Errorf("ParseApproval: %v %+v", err, round)
	}
	sb, err := c.Launch(ctx, plan, approval)
	if err != nil {
		t.Fatalf("Launch with approval: %v", err)
	}
	if len(sb.Plan.Networks) != 2 {
		t.Errorf("networks %+v", sb.Plan.Networks)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}

	// An approval of another plan does not fit.
	other, env2 := isolated(t)
	writeProjectConfig(t, other, `{"sandbox_compose_project": "shop", "sandbox_pids_limit": 64}`)
	plan2, err := c.Resolve(ctx, ResolveRequest{Workdir: other, Settings: fakeSettings(nil), Env: env2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Launch(ctx, plan2, approval)
	wantCode(t, err, CodeApprovalMismatch, ClassConfig, ErrConfig, ErrApproval)

	// "trust" persists in $ODEK_HOME: the next resolve needs no approval.
	if _, err := c.Approve(ctx, plan, DecisionTrust); err != nil {
		t.Fatalf("Approve(trust): %v", err)
	}
	again, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if again.Approval == nil || !again.Approval.Trusted || again.NeedsApproval() {
		t.Errorf("after trust: approval %+v", again.Approval)
	}
	sb, err = c.Launch(ctx, again, nil)
	if err != nil {
		t.Fatalf("Launch of a trusted project: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	// ODEK_APPROVE_PROJECT_SANDBOX=1 (in the resolve environment) grants it too.
	envDir, envEnv := isolated(t)
	writeProjectConfig(t, envDir, `{"sandbox_compose_project": "shop"}`)
	envEnv["ODEK_APPROVE_PROJECT_SANDBOX"] = "1"
	byEnv, err := c.Resolve(ctx, ResolveRequest{Workdir: envDir, Settings: fakeSettings(nil), Env: envEnv})
	if err != nil {
		t.Fatal(err)
	}
	if byEnv.Approval == nil || !byEnv.Approval.ApprovedByEnv || byEnv.NeedsApproval() {
		t.Errorf("approved by env: %+v", byEnv.Approval)
	}
	// Whether a question is needed is libodek's decision (the document's
	// "standing"), not the binding's reading of Trusted/ApprovedByEnv.
	var doc map[string]any
	if err := json.Unmarshal(byEnv.Approval.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["standing"] != "env" {
		t.Errorf("standing %v, want env", doc["standing"])
	}
	for _, c := range []struct {
		trusted, byEnv bool
		standing       any
		want           bool
	}{{true, true, nil, false}, {false, false, "env", true}, {false, false, "stored", true}} {
		doc["trusted"], doc["approved_by_env"], doc["standing"] = c.trusted, c.byEnv, c.standing
		edited, _ := json.Marshal(doc)
		a, err := parseApprovalRequest(string(edited))
		if err != nil {
			t.Fatal(err)
		}
		if a.standing() != c.want {
			t.Errorf("%+v: standing %v", c, a.standing())
		}
	}
	sb, err = c.Launch(ctx, byEnv, nil)
	if err != nil {
		t.Fatalf("Launch approved by env: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFakeApproveWithoutRequest(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Approve(ctx, plan, DecisionOnce)
	if err == nil {
		t.Fatal("approving a plan that needs no approval must fail")
	}
	// libodek reports it as a mismatch against "(the plan needs no approval)".
	wantCode(t, err, CodeApprovalMismatch, ClassConfig, ErrConfig, ErrApproval)
	_, err = c.Approve(ctx, plan, Decision("always"))
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
}

func TestFakeConfigError(t *testing.T) {
	c := fakeClient(t)
	dir, env := isolated(t)
	_, err := c.Resolve(context.Background(), ResolveRequest{
		Workdir: dir, Settings: fakeSettings(map[string]any{"sandbox_network": "host"}), Env: env,
	})
	wantCode(t, err, CodeNetworkMode, ClassConfig, ErrConfig)
	if !strings.Contains(err.Error(), "sandbox_network") {
		t.Errorf("message %q", err)
	}

	_, err = c.Resolve(context.Background(), ResolveRequest{
		Workdir: dir, Settings: fakeSettings(map[string]any{"sandbox_compose_project": "nosuchproject"}), Env: env,
	})
	wantCode(t, err, CodeComposeNotRunning, ClassConfig, ErrConfig)

	writeProjectConfig(t, dir, `{"sandbox_pids_limit": `)
	_, err = c.Resolve(context.Background(), ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	wantCode(t, err, CodeConfigMalformed, ClassConfig, ErrConfig)
	_, err = c.Resolve(context.Background(), ResolveRequest{
		Workdir: dir, Settings: fakeSettings(nil), Env: env, IgnoreProjectConfig: true,
	})
	if err != nil {
		t.Errorf("IgnoreProjectConfig still read odek.json: %v", err)
	}
}

func TestDaemonUnreachable(t *testing.T) {
	c, err := NewClient(ClientOptions{DockerHost: "unix:///nonexistent.sock"})
	if err != nil {
		t.Fatalf("NewClient makes no connection, so it succeeds: %v", err)
	}
	defer c.Close()
	dir, env := isolated(t)
	_, err = c.Resolve(context.Background(), ResolveRequest{
		Workdir: dir, Settings: fakeSettings(map[string]any{"sandbox": true}), Env: env,
	})
	wantCode(t, err, CodeDaemonUnreachable, ClassDaemonUnreachable, ErrDaemonUnreachable)
	if !strings.Contains(err.Error(), "/nonexistent.sock") {
		t.Errorf("message does not name the socket: %v", err)
	}
}

// spin is busy work for a goroutine (not inlined: a real call on its stack).
//
//go:noinline
func spin(n int) int {
	for i := 0; i < 1000; i++ {
		n = n*31 + i
	}
	return n
}

// Implicit mode with no daemon: a loud fallback to the host, not an error.
func TestFallbackWithoutDaemon(t *testing.T) {
	ctx := context.Background()
	c, err := NewClient(ClientOptions{DockerHost: "unix:///nonexistent.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir, env := isolated(t)
	// The binding requires a sandbox unless the caller allows the fallback.
	if _, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env}); !errors.Is(err, ErrDaemonUnreachable) {
		t.Fatalf("Resolve without AllowHostFallback: %v, want ErrDaemonUnreachable", err)
	}
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env, AllowHostFallback: true})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if plan.Isolation.Kind != IsolationFallback || plan.Isolation.Class != ClassDaemonUnreachable ||
		plan.Isolation.Reason == "" {
		t.Fatalf("isolation %+v", plan.Isolation)
	}
	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatalf("Launch (fallback): %v", err)
	}
	defer sb.Close()
	if sb.ContainerID != "" || sb.Isolation.Kind != IsolationFallback {
		t.Errorf("sandbox %+v", sb)
	}
	d, err := sb.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Environment.Isolation != IsolationFallback || d.Environment.FallbackReason == "" ||
		d.Environment.Workspace.Path != dir {
		t.Errorf("environment %+v", d.Environment)
	}
	// Commands on the host: libodek reaps its child (tokio; through a pidfd
	// on this kernel, so no SIGCHLD handler of its own). Any handler that
	// non-Go code installs must carry SA_ONSTACK or the Go runtime aborts
	// the program ("non-Go code set up signal handler without SA_ONSTACK
	// flag") when the signal lands on a running goroutine.
	// Several, while goroutines run on their own stacks, so that some
	// SIGCHLD lands on a Go thread that is running Go code.
	stop := make(chan struct{})
	defer close(stop)
	for g := 0; g < 4; g++ {
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					return
				default:
					n = spin(n)
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		res, err := sb.Exec(ctx, ExecRequest{Shell: "echo on-the-host; exit 3"})
		if err != nil {
			t.Fatalf("Exec (fallback): %v", err)
		}
		if res.ExitCode != 3 || strings.TrimSpace(res.Stdout) != "on-the-host" {
			t.Fatalf("host exec result %+v", res)
		}
	}
	// Whether a SIGCHLD happened to land on a running goroutine above is
	// chance; the flag itself is not: read the handler's flags back.
	var act struct{ handler, flags, restorer, mask uint64 }
	if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGCHLD), 0,
		uintptr(unsafe.Pointer(&act)), 8, 0, 0); e != 0 {
		t.Fatalf("rt_sigaction: %v", e)
	}
	const saOnstack = 0x08000000
	if act.flags&saOnstack == 0 {
		t.Errorf("SIGCHLD handler flags %#x lack SA_ONSTACK after a host exec", act.flags)
	}
}

// A narrowed plan keeps its parent's approval request (SPEC §7, §8): with a
// project asking for a Compose project, an image and an env template, the
// child is refused without an approval and launches with the parent's.
func TestFakeNarrowKeepsTheApprovalRequirement(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	writeProjectConfig(t, dir, `{"sandbox_compose_project": "shop", "sandbox_image": "`+fakeImage+`",
		"sandbox_env": {"TOKEN": "${HOME}"}}`)
	parent, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Env: env})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	child, err := Narrow(parent, NarrowRequest{PidsLimit: 100})
	if err != nil {
		t.Fatalf("Narrow: %v", err)
	}
	if !child.NeedsApproval() || child.Approval == nil || child.Approval.Key != parent.Approval.Key {
		t.Fatalf("the child lost the parent's approval request: %+v", child.Approval)
	}
	sb, err := c.Launch(ctx, child, nil)
	if sb != nil {
		_ = sb.Close()
	}
	wantCode(t, err, CodeApprovalRequired, ClassConfig, ErrConfig, ErrApproval)
	approval, err := c.Approve(ctx, parent, DecisionOnce)
	if err != nil {
		t.Fatalf("Approve: %v", err)
	}
	sb, err = c.Launch(ctx, child, approval)
	if err != nil {
		t.Fatalf("Launch child with the parent's approval: %v", err)
	}
	if sb.Isolation.Kind != IsolationContainer || sb.Plan.PidsLimit != 100 {
		t.Errorf("child sandbox %+v, pids limit %d", sb, sb.Plan.PidsLimit)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFakeNarrow(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	parent, err := c.Resolve(ctx, ResolveRequest{
		Workdir: dir, Settings: fakeSettings(map[string]any{"sandbox_compose_project": "shop"}), Env: env,
	})
	if err != nil {
		t.Fatal(err)
	}
	child, err := Narrow(parent, NarrowRequest{Networks: []string{"shop_backend"}, PidsLimit: 64, CPUs: "0.5", Readonly: true})
	if err != nil {
		t.Fatalf("Narrow: %v", err)
	}
	if len(child.Networks) != 1 || child.Networks[0].Name != "shop_backend" || child.Internet ||
		child.PidsLimit != 64 || child.CPUs != "0.5" || !child.Readonly || child.Approval != nil {
		t.Errorf("child %+v", child)
	}
	sb, err := c.Launch(ctx, child, nil)
	if err != nil {
		t.Fatalf("Launch child: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = Narrow(parent, NarrowRequest{PidsLimit: 100000})
	wantCode(t, err, CodeNarrow, ClassConfig, ErrConfig, ErrNarrow)
	_, err = Narrow(parent, NarrowRequest{Image: "odek-test/redis:1"})
	wantCode(t, err, CodeNarrow, ClassConfig, ErrConfig, ErrNarrow)
	_, err = Narrow(child, NarrowRequest{Networks: []string{"shop_default"}})
	wantCode(t, err, CodeNarrow, ClassConfig, ErrConfig, ErrNarrow)
	_, err = Narrow(parent, NarrowRequest{NetworkMode: "bridge"})
	wantCode(t, err, CodeNarrow, ClassConfig, ErrConfig, ErrNarrow)
}

// A sub-agent asked to be offline is offline: NetworkMode "none" of a
// Compose-attached parent drops the parent's networks too, never a silent
// no-op (SPEC §8), whether the parent's own mode is none or bridge.
func TestFakeNarrowNoneOfAComposeAttachedParentIsOffline(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	for _, parentMode := range []string{"none", "bridge"} {
		dir, env := isolated(t)
		parent, err := c.Resolve(ctx, ResolveRequest{
			Workdir: dir, Env: env,
			Settings: fakeSettings(map[string]any{"sandbox_compose_project": "shop", "sandbox_network": parentMode}),
		})
		if err != nil {
			t.Fatal(err)
		}
		if parent.NetworkMode != parentMode || len(parent.Networks) != 2 {
			t.Fatalf("%s: the parent is not attached to shop's networks: %+v", parentMode, parent)
		}
		child, err := Narrow(parent, NarrowRequest{NetworkMode: "none"})
		if err != nil {
			t.Fatalf("%s: Narrow: %v", parentMode, err)
		}
		if child.NetworkMode != "none" || len(child.Networks) != 0 || child.Internet ||
			child.NetworkSummary != NetworkNone {
			t.Errorf("%s: the child is not offline: %+v", parentMode, child)
		}
		sb, err := c.Launch(ctx, child, nil)
		if err != nil {
			t.Fatalf("%s: Launch child: %v", parentMode, err)
		}
		d, err := sb.Describe(ctx)
		if err != nil {
			t.Fatalf("%s: Describe: %v", parentMode, err)
		}
		if e := d.Environment; e.Network != NetworkNone || len(e.Networks) != 0 || e.Internet {
			t.Errorf("%s: the child sandbox is not offline: %s", parentMode, e.JSON())
		}
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	_, err := NewClient(ClientOptions{Engine: "bogus"})
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
	_, err = NewClient(ClientOptions{DockerHost: "ftp://example"})
	wantCode(t, err, CodeEndpoint, ClassConfig, ErrConfig)
	// TLS material only for a tcp:// host, and its files must be there.
	_, err = NewClient(ClientOptions{DockerHost: "unix:///x.sock", DockerCertPath: t.TempDir()})
	wantCode(t, err, CodeEndpoint, ClassConfig, ErrConfig)
	_, err = NewClient(ClientOptions{DockerHost: "tcp://10.1.2.3:2376", DockerCertPath: t.TempDir()})
	wantCode(t, err, CodeEndpoint, ClassConfig, ErrConfig)
	if !strings.Contains(err.Error(), "ca.pem does not exist") {
		t.Fatalf("the missing file is not named: %v", err)
	}

	c := fakeClient(t)
	dir, env := isolated(t)
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: map[string]any{"sandbox_pids_limit": "many"}, Env: env})
	wantCode(t, err, CodeConfig, ClassConfig, ErrConfig)
	_, err = c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: map[string]any{"bad": func() {}}})
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)

	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	_, err = sb.Exec(ctx, ExecRequest{})
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
	_, err = sb.Exec(ctx, ExecRequest{Argv: []string{"true"}, Shell: "true"})
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
	_, err = sb.Exec(ctx, ExecRequest{Argv: []string{"true"}, Timeout: -1})
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)

	// Plans are checked by libodek when they come back.
	_, err = ParsePlan([]byte(`{"schema": "something/1"}`))
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
	_, err = ParsePlan([]byte(`not json`))
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
	bad, err := ParsePlan([]byte(strings.Replace(string(plan.JSON()), `"pids_limit":4096`, `"pids_limit":"x"`, 1)))
	if err == nil {
		_, err = c.Launch(ctx, bad, nil)
	}
	if err == nil || !errors.Is(err, ErrUsage) {
		t.Errorf("a tampered plan: %v", err)
	}
	kept, err := ParsePlan(plan.JSON())
	if err != nil {
		t.Fatal(err)
	}
	sb2, err := c.Launch(ctx, kept, nil)
	if err != nil {
		t.Fatalf("Launch of a kept plan: %v", err)
	}
	if err := sb2.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Launch(ctx, nil, nil)
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
	_, err = Narrow(nil, NarrowRequest{})
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)

	// A closed client.
	c2, err := NewClient(ClientOptions{Engine: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	sb3, err := c2.Launch(ctx, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb3.Close()
	h := c2.h
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = c2.Resolve(ctx, ResolveRequest{Workdir: dir})
	wantCode(t, err, CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
	_, err = c2.Launch(ctx, plan, nil)
	wantCode(t, err, CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
	wantCode(t, cClientFree(h), CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
	// A sandbox outlives its client.
	if _, err := sb3.Exec(ctx, ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Errorf("sandbox after its client closed: %v", err)
	}
}

func TestFakeOneCallLaunch(t *testing.T) {
	ctx := context.Background()
	c := fakeClient(t)
	dir, env := isolated(t)
	sb, err := Launch(ctx, LaunchRequest{
		Workdir:  dir,
		Settings: fakeSettings(map[string]any{"sandbox_compose_project": "shop"}),
		Env:      env,
		Client:   c,
	})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if sb.Isolation.Kind != IsolationContainer {
		t.Errorf("isolation %+v", sb.Isolation)
	}
	res, err := sb.Exec(ctx, ExecRequest{Argv: []string{"true"}})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("Exec: %+v, %v", res, err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	// A project config that asks for networks: refused without a decision,
	// launched with one.
	dir, env = isolated(t)
	writeProjectConfig(t, dir, `{"sandbox_compose_project": "shop"}`)
	req := LaunchRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env, Client: c}
	if _, err := Launch(ctx, req); err == nil {
		t.Fatal("launched a project request without approval")
	} else {
		wantCode(t, err, CodeApprovalRequired, ClassConfig, ErrConfig, ErrApproval)
	}
	bad := req
	bad.Approve = "yes-please"
	if _, err := Launch(ctx, bad); err == nil || !errors.Is(err, ErrUsage) {
		t.Errorf("Launch with Approve %q: %v, want a usage error", bad.Approve, err)
	}
	req.Approve = DecisionOnce
	sb, err = Launch(ctx, req)
	if err != nil {
		t.Fatalf("Launch with DecisionOnce: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestFakeClientPool: a client with a warm pool (SandboxPool) hands out a
// working sandbox per Launch, never the same one twice; a pool above 8 is
// refused.
func TestFakeClientPool(t *testing.T) {
	ctx := context.Background()
	c, err := NewClient(ClientOptions{Engine: "fake", SandboxPool: 2})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	dir, env := isolated(t)
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		sb, err := c.Launch(ctx, plan, nil)
		if err != nil {
			t.Fatalf("Launch %d: %v", i, err)
		}
		if seen[sb.Name] {
			t.Errorf("sandbox %s handed out twice", sb.Name)
		}
		seen[sb.Name] = true
		r, err := sb.Exec(ctx, ExecRequest{Argv: []string{"true"}})
		if err != nil || r.ExitCode != 0 {
			t.Errorf("exec: %v %+v", err, r)
		}
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = NewClient(ClientOptions{Engine: "fake", SandboxPool: 9})
	wantCode(t, err, CodeInvalidArgument, ClassUsage, ErrUsage)
}
