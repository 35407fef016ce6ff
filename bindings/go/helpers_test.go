package odek

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The image of the in-memory engine (fake tests: no Docker).
const fakeImage = "odek-test/base:1"

// testNS is this checkout's test namespace (tests/ns.sh, xtask/src/ns.rs):
// ODEK_TEST_NS, else the first 8 hex digits of SHA-256 of the checkout's
// canonical path, so checkouts sharing a Docker daemon keep apart.
func testNS() string {
	if ns := os.Getenv("ODEK_TEST_NS"); ns != "" {
		return ns
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:4])
}

// testImage is the image every real sandbox of these tests uses: this
// checkout's, built offline by tests/images/build.sh (nothing can be pulled
// here).
func testImage() string { return "odek-test-" + testNS() + "/base:1" }

// composeProject is the fixture Compose project of the real-Docker tests
// (tests/fixtures/compose, brought up by up.sh): this checkout's.
// ODEK_GO_TEST_PROJECT overrides it.
func composeProject() string {
	if p := os.Getenv("ODEK_GO_TEST_PROJECT"); p != "" {
		return p
	}
	return "odeke2e" + testNS()
}

// repoRoot is the odek workspace (this package is bindings/go).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// isolated returns a fresh project directory and an environment for
// ResolveRequest.Env with its own $ODEK_HOME (outside the project), so no
// user config, approval store or ODEK_* variable of the machine leaks in.
func isolated(t testing.TB) (workdir string, env map[string]string) {
	t.Helper()
	workdir = t.TempDir()
	home := t.TempDir()
	return workdir, map[string]string{"ODEK_HOME": home, "HOME": home}
}

func writeProjectConfig(t testing.TB, dir, doc string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "odek.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fakeClient(t testing.TB) *Client {
	t.Helper()
	c, err := NewClient(ClientOptions{Engine: "fake"})
	if err != nil {
		t.Fatalf("NewClient(fake): %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("client Close: %v", err)
		}
	})
	return c
}

// dockerClient is a client of the real daemon, after requireDocker.
func dockerClient(t testing.TB) *Client {
	t.Helper()
	requireDocker(t)
	c, err := NewClient(ClientOptions{})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("client Close: %v", err)
		}
	})
	return c
}

var (
	dockerOnce sync.Once
	dockerErr  error
)

// requireDocker makes sure the daemon answers, the test images exist and the
// fixture Compose project runs (both scripts are idempotent). A real-Docker
// test FAILS when any of that is missing: the project never skips them.
func requireDocker(t testing.TB) {
	t.Helper()
	dockerOnce.Do(func() {
		root := repoRoot(t)
		steps := [][]string{
			{"docker", "info", "--format", "{{.ServerVersion}}"},
			{"bash", filepath.Join(root, "tests/images/build.sh")},
			{"bash", filepath.Join(root, "tests/fixtures/compose/up.sh"), composeProject()},
		}
		for _, s := range steps {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			cmd := exec.CommandContext(ctx, s[0], s[1:]...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "ODEK_TEST_NS="+testNS())
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil {
				dockerErr = fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
				return
			}
		}
	})
	if dockerErr != nil {
		t.Fatalf("real-Docker test needs a daemon, the test images and the fixture project (never skipped): %v", dockerErr)
	}
}

// containersFor lists the odek sandbox containers (any state) whose
// dev.odek.workdir label is dir.
func containersFor(t testing.TB, dir string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq",
		"--filter", "label=dev.odek.sandbox=true",
		"--filter", "label=dev.odek.workdir="+dir).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// assertNoContainers fails when a sandbox of dir is left behind (and removes
// it, so one failure does not leak into the next run).
func assertNoContainers(t testing.TB, dir string) {
	t.Helper()
	if ids := containersFor(t, dir); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		t.Errorf("containers left behind for %s: %v", dir, ids)
	}
}

// cleanupContainers registers a final no-leftover check for dir.
func cleanupContainers(t testing.TB, dir string) {
	t.Helper()
	t.Cleanup(func() { assertNoContainers(t, dir) })
}

// sandboxSettings are the operator settings of every real sandbox here.
func sandboxSettings(extra map[string]any) map[string]any {
	return withImage(testImage(), extra)
}

// fakeSettings are the operator settings of the in-memory engine's sandboxes.
func fakeSettings(extra map[string]any) map[string]any {
	return withImage(fakeImage, extra)
}

func withImage(image string, extra map[string]any) map[string]any {
	m := map[string]any{"sandbox_image": image}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// wantCode checks that err is an *Error with code and class, and that the
// given sentinels match it and the others do not.
func wantCode(t testing.TB, err error, code int, class string, sentinels ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s (%d), got nil", CodeName(code), code)
	}
	var oe *Error
	if !errors.As(err, &oe) {
		t.Fatalf("want *odek.Error, got %T: %v", err, err)
	}
	if oe.Code != code || oe.Class != class {
		t.Fatalf("want code %d class %q, got code %d class %q: %s", code, class, oe.Code, oe.Class, oe.Message)
	}
	if oe.Message == "" {
		t.Errorf("empty message for code %d", code)
	}
	if !errors.Is(err, &Error{Code: code}) {
		t.Errorf("errors.Is(err, &Error{Code: %d}) is false", code)
	}
	all := map[error]string{
		ErrConfig: "ErrConfig", ErrApproval: "ErrApproval", ErrNarrow: "ErrNarrow",
		ErrDockerRejected: "ErrDockerRejected", ErrImageUnavailable: "ErrImageUnavailable",
		ErrDaemonUnreachable: "ErrDaemonUnreachable", ErrUsage: "ErrUsage",
		ErrInvalidHandle: "ErrInvalidHandle",
	}
	want := map[error]bool{}
	for _, s := range sentinels {
		want[s] = true
	}
	for s, name := range all {
		if got := errors.Is(err, s); got != want[s] {
			t.Errorf("errors.Is(err, %s) = %v, want %v (err: %v)", name, got, want[s], err)
		}
	}
	// Wrapping keeps all of it.
	wrapped := fmt.Errorf("agent step: %w", err)
	if !errors.As(wrapped, &oe) || oe.Code != code {
		t.Errorf("errors.As through a wrapper lost the code")
	}
	for _, s := range sentinels {
		if !errors.Is(wrapped, s) {
			t.Errorf("errors.Is through a wrapper lost %s", all[s])
		}
	}
}

func contains(haystack []string, needle string) bool {
	for _, h := range haystack {
		if h == needle {
			return true
		}
	}
	return false
}
