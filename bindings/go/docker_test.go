package odek

// Tests against the real Docker daemon. They FAIL (never skip) when Docker,
// the test images or the fixture Compose project are missing (requireDocker).
// Every sandbox uses testImage() (this checkout's base image) and a fresh workdir, and each test
// checks by the dev.odek.workdir label that no container is left behind.
// They only talk to containers they start (the fixture, the sandboxes).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The agent loop against the Compose fixture, with the project's own
// odek.json asking for the Compose project (so approval is exercised).
func TestDockerAgentLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := dockerClient(t)
	dir, env := isolated(t)
	cleanupContainers(t, dir)
	project := composeProject()
	writeProjectConfig(t, dir, fmt.Sprintf(`{"sandbox_compose_project": %q}`, project))

	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: sandboxSettings(nil), Env: env})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if !plan.NeedsApproval() || plan.Approval.RequestedComposeProject != project || len(plan.Approval.Networks) != 2 {
		t.Fatalf("approval request %+v", plan.Approval)
	}
	if plan.Isolation.Kind != IsolationContainer || plan.NetworkSummary != NetworkAttached {
		t.Fatalf("plan %+v", plan)
	}
	_, err = c.Launch(ctx, plan, nil)
	wantCode(t, err, CodeApprovalRequired, ClassConfig, ErrConfig, ErrApproval)
	if ids := containersFor(t, dir); len(ids) != 0 {
		t.Fatalf("a refused launch left %v", ids)
	}

	approval, err := c.Approve(ctx, plan, DecisionOnce)
	if err != nil {
		t.Fatalf("Approve: %v", err)
	}
	sb, err := c.Launch(ctx, plan, approval)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	defer sb.Close()
	if ids := containersFor(t, dir); len(ids) != 1 || !strings.HasPrefix(sb.ContainerID, ids[0]) {
		t.Fatalf("containers for %s: %v, sandbox %s", dir, ids, sb.ContainerID)
	}

	view, err := c.ConfigView(ctx, plan)
	if err != nil {
		t.Fatalf("ConfigView: %v", err)
	}
	if view.Image.ID == "" || view.APIVersion == "" || len(view.Networks) != 2 {
		t.Errorf("config view %+v", view)
	}

	d, err := sb.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	peers := map[string]bool{}
	for _, n := range d.Environment.Networks {
		if !strings.HasPrefix(n.Name, project+"_") {
			t.Errorf("network %+v", n)
		}
		for _, p := range n.Peers {
			if len(p.Names) > 0 {
				peers[p.Names[0]] = true
			}
		}
	}
	if !peers["redis"] || !peers["postgres"] {
		t.Errorf("peers %v in %+v", peers, d.Environment.Networks)
	}
	for _, want := range []string{"## Execution environment", "redis", "postgres", "untrusted_content_"} {
		if !strings.Contains(d.Prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, d.Prompt)
		}
	}

	res, err := sb.Exec(ctx, ExecRequest{Argv: []string{"redis-cli", "-h", "redis", "ping"}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "PONG" {
		t.Fatalf("redis-cli ping: %+v", res)
	}
	res, err = sb.Exec(ctx, ExecRequest{
		Shell:   `echo "$GREETING from $(pwd)"; echo oops >&2; exit 3`,
		Env:     map[string]string{"GREETING": "hello"},
		Workdir: "/tmp",
	})
	if err != nil {
		t.Fatalf("Exec shell: %v", err)
	}
	if res.ExitCode != 3 || res.Stdout != "hello from /tmp\n" || res.Stderr != "oops\n" {
		t.Errorf("shell result %+v", res)
	}
	// The workspace is the project directory.
	res, err = sb.Exec(ctx, ExecRequest{Argv: []string{"cat", "/workspace/odek.json"}})
	if err != nil || !strings.Contains(res.Stdout, project) {
		t.Errorf("cat /workspace/odek.json: %+v %v", res, err)
	}

	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	assertNoContainers(t, dir)
	_, err = sb.Exec(ctx, ExecRequest{Argv: []string{"true"}})
	wantCode(t, err, CodeInvalidHandle, ClassUsage, ErrUsage, ErrInvalidHandle)
}

// The example program, built and run as a user would.
func TestDockerExampleAgentLoop(t *testing.T) {
	requireDocker(t)
	bin := filepath.Join(t.TempDir(), "agentloop")
	build := exec.Command("go", "build", "-o", bin, "./examples/agentloop")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/agentloop: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cleanupContainers(t, dir)
	cmd := exec.Command(bin, "-project", composeProject(), "-image", testImage(), "-workdir", dir)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "ODEK_HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agentloop: %v\n%s", err, out)
	}
	for _, want := range []string{
		"approval: none needed", "## Execution environment", "exec: redis-cli -h redis ping",
		`exit=0 stdout="PONG"`, "destroyed sandbox odek-",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDockerImageUnavailable(t *testing.T) {
	ctx := context.Background()
	c := dockerClient(t)
	dir, env := isolated(t)
	cleanupContainers(t, dir)
	plan, err := c.Resolve(ctx, ResolveRequest{
		Workdir: dir, Env: env,
		Settings: map[string]any{"sandbox": true, "sandbox_image": "127.0.0.1:1/missing:1"},
	})
	if err == nil {
		var sb *Sandbox
		sb, err = c.Launch(ctx, plan, nil)
		if sb != nil {
			_ = sb.Close()
		}
	}
	wantCode(t, err, CodeImageUnavailable, ClassImageUnavailable, ErrImageUnavailable)
}

func TestDockerRejected(t *testing.T) {
	ctx := context.Background()
	c := dockerClient(t)
	dir, env := isolated(t)
	cleanupContainers(t, dir)
	plan, err := c.Resolve(ctx, ResolveRequest{
		Workdir: dir, Env: env,
		// Docker refuses more CPUs than the host has, at create.
		Settings: sandboxSettings(map[string]any{"sandbox": true, "sandbox_cpus": "1000"}),
	})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	sb, err := c.Launch(ctx, plan, nil)
	if sb != nil {
		_ = sb.Close()
	}
	wantCode(t, err, CodeDockerRejected, ClassDockerRejected, ErrDockerRejected)
	assertNoContainers(t, dir)
}

// Exec timeouts: ExecRequest.Timeout is a result; a context deadline is
// ctx.Err(), returned near the deadline.
func TestDockerExecTimeouts(t *testing.T) {
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

	start := time.Now()
	res, err := sb.Exec(ctx, ExecRequest{Shell: "echo started; sleep 20", Timeout: 700 * time.Millisecond})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if !res.TimedOut || !res.Killed || res.ExitCode != 124 || time.Since(start) > 10*time.Second {
		t.Errorf("timeout result %+v after %v", res, time.Since(start))
	}

	dctx, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = sb.Exec(dctx, ExecRequest{Argv: []string{"sleep", "20"}, Timeout: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec past the context deadline: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned %v after a 700ms deadline", d)
	}
	// The sandbox is still usable.
	res, err = sb.Exec(ctx, ExecRequest{Argv: []string{"echo", "still here"}})
	if err != nil || res.Stdout != "still here\n" {
		t.Errorf("after a timeout: %+v %v", res, err)
	}
}

// A context cancelled mid-exec: Exec returns at once with ctx.Err(), and
// libodek kills the command in the sandbox (odek_exec_cancellable) instead
// of leaving it running until the sandbox is closed.
func TestDockerCancelledExecKillsTheCommand(t *testing.T) {
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
	// The command's processes, by their command line ('[s]' keeps the
	// looking shell and grep from matching themselves).
	running := func() string {
		res, err := sb.Exec(ctx, ExecRequest{Shell: "grep -s -a -l '[s]leep.37' /proc/[0-9]*/cmdline || true"})
		if err != nil {
			t.Fatalf("looking for the command: %v", err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	before := cancelledInCore.Load()
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(time.Second, cancel)
	start := time.Now()
	_, err = sb.Exec(cctx, ExecRequest{Shell: "sleep 37; echo done"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec with a cancelled context: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned %v after a cancel at 1 s", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	left := running()
	for left != "" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		left = running()
	}
	if left != "" {
		t.Fatalf("the cancelled command still runs in the sandbox 10 s later: %s", left)
	}
	for cancelledInCore.Load() == before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if cancelledInCore.Load() == before {
		t.Error("libodek did not report the exec as cancelled (CodeCancelled)")
	}
	res, err := sb.Exec(ctx, ExecRequest{Argv: []string{"echo", "still here"}})
	if err != nil || res.Stdout != "still here\n" {
		t.Errorf("after a cancel: %+v %v", res, err)
	}
}

// A launch cancelled half-way leaves no container once the client is closed.
func TestDockerCancelledLaunchLeavesNoContainer(t *testing.T) {
	requireDocker(t)
	before := abandonedLaunches.Load() + cancelledInCore.Load()
	defer func() {
		// Some cancel must have landed mid-launch (a real launch takes far
		// longer than 5 ms), so a cleanup path really ran: libodek stopped
		// the launch and removed what it made, or the launch had finished
		// and its sandbox was destroyed in the background.
		n := abandonedLaunches.Load() + cancelledInCore.Load() - before
		t.Logf("%d cancelled launches were stopped in libodek or destroyed their sandbox in the background", n)
		if n == 0 {
			t.Error("no cancel landed while a launch was running")
		}
	}()
	for i, delay := range []time.Duration{0, 5 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			c, err := NewClient(ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dir, env := isolated(t)
			cleanupContainers(t, dir)
			plan, err := c.Resolve(context.Background(), ResolveRequest{
				Workdir: dir, Env: env, Settings: sandboxSettings(map[string]any{"sandbox_compose_project": composeProject()}),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(delay, cancel)
			sb, err := c.Launch(ctx, plan, nil)
			cancel()
			if err == nil {
				t.Logf("launch finished before the cancel (%v)", delay)
				if err := sb.Close(); err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(err, context.Canceled) {
				t.Fatalf("Launch: %v", err)
			}
			// Close waits for the abandoned launch, which destroys its sandbox.
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			assertNoContainers(t, dir)
		})
	}
}

// A forgotten sandbox is destroyed by its finalizer (a backstop only).
func TestDockerFinalizerDestroysLeakedSandbox(t *testing.T) {
	ctx := context.Background()
	c := dockerClient(t)
	dir, env := isolated(t)
	cleanupContainers(t, dir)
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Env: env, Settings: sandboxSettings(map[string]any{"sandbox": true})})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		sb, err := c.Launch(ctx, plan, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(containersFor(t, dir)) != 1 {
			t.Fatal("no container launched")
		}
		_ = sb // dropped without Close
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(containersFor(t, dir)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the leaked sandbox was not destroyed by its finalizer")
		}
		runtime.GC()
		time.Sleep(200 * time.Millisecond)
	}
}

// 16 goroutines share one client: launch, exec, destroy, all at once.
func TestDockerConcurrentSandboxes(t *testing.T) {
	const n = 16
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := dockerClient(t)
	dirs := make([]string, n)
	envs := make([]map[string]string, n)
	for i := range dirs {
		dirs[i], envs[i] = isolated(t)
		cleanupContainers(t, dirs[i])
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = func() error {
				plan, err := c.Resolve(ctx, ResolveRequest{
					Workdir: dirs[i], Env: envs[i],
					Settings: sandboxSettings(map[string]any{"sandbox_compose_project": composeProject()}),
				})
				if err != nil {
					return fmt.Errorf("resolve: %w", err)
				}
				sb, err := c.Launch(ctx, plan, nil)
				if err != nil {
					return fmt.Errorf("launch: %w", err)
				}
				defer sb.Close()
				res, err := sb.Exec(ctx, ExecRequest{Argv: []string{"redis-cli", "-h", "redis", "ping"}})
				if err != nil {
					return fmt.Errorf("exec: %w", err)
				}
				if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "PONG" {
					return fmt.Errorf("redis-cli ping: %+v", res)
				}
				return sb.Close()
			}()
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
	for _, d := range dirs {
		assertNoContainers(t, d)
	}
}
