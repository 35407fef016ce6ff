package odek

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fileUser is the command user of the file-tool sandboxes: not the suite's
// own uid, so a file's owner on the host shows whose write it was.
const fileUser = 1000

// TestDockerFileTools: ReadFile/WriteFile/EditFile/ListDirectory inside a
// real sandbox as uid 1000; 300 KiB and binary content round-trip, the
// host file is the command user's, a refused edit writes nothing. Without
// odek's supervisor (ODEK_SUPERVISOR empty or unset) every call is
// CodeFile and nothing is written.
func TestDockerFileTools(t *testing.T) {
	ctx := context.Background()
	c := dockerClient(t)
	dir, env := isolated(t)
	cleanupContainers(t, dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	plan, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Env: env, Settings: sandboxSettings(map[string]any{
		"sandbox": true, "sandbox_user": "1000:1000"})})
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
	if !strings.HasSuffix(sb.StartupLine, " supervisor=on") {
		if os.Getenv("ODEK_SUPERVISOR") != "" {
			t.Fatalf("ODEK_SUPERVISOR names a supervisor, yet it is off: %s", sb.StartupLine)
		}
		_, err := sb.WriteFile(ctx, "made.txt", []byte("x"))
		wantCode(t, err, CodeFile, ClassConfig, ErrConfig, ErrFile)
		if _, serr := os.Stat(filepath.Join(dir, "made.txt")); serr == nil {
			t.Fatal("a file was written without the supervisor")
		}
		return
	}
	var text strings.Builder
	for i := 0; i < 6000; i++ {
		text.WriteString("the quick brown fox jumps over the lazy dog, café\n")
	}
	big := []byte(text.String())
	w, err := sb.WriteFile(ctx, "deep/big.txt", big)
	if err != nil {
		t.Fatal(err)
	}
	if w.Path != "/workspace/deep/big.txt" || w.BytesWritten != int64(len(big)) || !w.Created {
		t.Errorf("write result %+v", w)
	}
	st, err := os.Stat(filepath.Join(dir, "deep", "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != fileUser || sys.Gid != fileUser {
		t.Errorf("owned by %d:%d, not the command user", sys.Uid, sys.Gid)
	}
	r, err := sb.ReadFile(ctx, "deep/big.txt")
	if err != nil || !bytes.Equal(r.Content, big) || r.Truncated || r.Size != int64(len(big)) {
		t.Fatalf("read back: %v (%d bytes, truncated %v)", err, len(r.Content), r.Truncated)
	}
	piece, err := sb.ReadFileRange(ctx, "deep/big.txt", 4, 5)
	if err != nil || string(piece.Content) != "quick" || !piece.Truncated || piece.NextOffset == nil || *piece.NextOffset != 9 {
		t.Fatalf("piece: %+v %v", piece, err)
	}
	blob := bytes.Repeat([]byte{0, 1, 2, 0xff, 0xfe}, 1000)
	if _, err := sb.WriteFile(ctx, "/workspace/bin/blob", blob); err != nil {
		t.Fatal(err)
	}
	if r, err := sb.ReadFile(ctx, "bin/blob"); err != nil || !bytes.Equal(r.Content, blob) {
		t.Fatalf("binary: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.py"), []byte("x = 1\ny = 2\nx = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = sb.EditFile(ctx, "a.py", []FileEdit{{OldText: "x = 1", NewText: "x = 2"}})
	wantCode(t, err, CodeFile, ClassConfig, ErrConfig, ErrFile)
	if b, _ := os.ReadFile(filepath.Join(dir, "a.py")); string(b) != "x = 1\ny = 2\nx = 1\n" {
		t.Fatalf("a refused edit wrote %q", b)
	}
	e, err := sb.EditFile(ctx, "a.py", []FileEdit{{OldText: "y = 2", NewText: "y = 3"}})
	if err != nil || !strings.Contains(e.Diff, "-y = 2\n+y = 3\n") {
		t.Fatalf("edit: %+v %v", e, err)
	}
	l, err := sb.ListDirectory(ctx, ".")
	if err != nil || l.Listing != "[FILE] a.py\n[DIR] bin\n[DIR] deep" {
		t.Fatalf("list: %+v %v", l, err)
	}
	_, err = sb.ReadFile(ctx, "nope")
	var oe *Error
	if !errors.As(err, &oe) || oe.Code != CodeFile || !strings.Contains(oe.Message, "does not exist in the sandbox") {
		t.Fatalf("absent: %v", err)
	}
}
