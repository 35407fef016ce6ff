package odek

// Owner lifetime (SPEC §6.1) with the real daemon: a Go process that holds
// a sandbox and is killed by SIGKILL — no deferred Close, no finalizer —
// leaves no container behind; the engine removes it by itself.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdEnv, when set to a working directory, makes the test binary a holder:
// it launches a sandbox there, prints its container ID and sleeps.
const holdEnv = "ODEK_GO_TEST_HOLD_SANDBOX"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		os.Exit(holdSandbox(dir))
	}
	os.Exit(m.Run())
}

// holdSandbox launches a sandbox for dir and never closes it.
func holdSandbox(dir string) int {
	ctx := context.Background()
	c, err := NewClient(ClientOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "NewClient:", err)
		return 1
	}
	env := map[string]string{"ODEK_HOME": os.Getenv("ODEK_HOME"), "HOME": os.Getenv("ODEK_HOME")}
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Settings: sandboxSettings(nil), Env: env})
	if err != nil {
		fmt.Fprintln(os.Stderr, "Resolve:", err)
		return 1
	}
	sb, err := c.Launch(ctx, plan, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Launch:", err)
		return 1
	}
	fmt.Println(sb.ContainerID)
	time.Sleep(10 * time.Minute)
	return 0
}

func TestDockerSigkillOfTheOwnerRemovesItsSandbox(t *testing.T) {
	requireDocker(t)
	dir, env := isolated(t)
	cleanupContainers(t, dir)

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holdEnv+"="+dir, "ODEK_HOME="+env["ODEK_HOME"])
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	var id string
	select {
	case id = <-line:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the holder printed no container ID; stderr:\n%s", stderr.String())
	}
	if ids := containersFor(t, dir); id == "" || len(ids) != 1 || !strings.HasPrefix(id, ids[0]) {
		t.Fatalf("holder's sandbox %q, containers for %s: %v; stderr:\n%s", id, dir, ids, stderr.String())
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(containersFor(t, dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if ids := containersFor(t, dir); len(ids) > 0 {
		t.Fatalf("10 s after SIGKILL of its owner, the sandbox %v is still there (no gc was run)", ids)
	}
}
