package odek

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A cancelled context returns at once; the call finishes in the background
// and what it produced is released.
func TestAwaitCancelReleasesResult(t *testing.T) {
	release := make(chan struct{})
	abandoned := make(chan int, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	v, err := await(ctx, func(uintptr) (int, error) {
		<-release
		return 42, nil
	}, func(v int) { abandoned <- v }, wg.Done)
	if !errors.Is(err, context.Canceled) || v != 0 {
		t.Fatalf("got %v, %v", v, err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("cancel took %v", time.Since(start))
	}
	select {
	case <-abandoned:
		t.Fatal("released before the call finished")
	default:
	}
	close(release)
	wg.Wait()
	if got := <-abandoned; got != 42 {
		t.Fatalf("released %d", got)
	}
}

// A failed call has nothing to release.
func TestAwaitCancelFailedCall(t *testing.T) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := await(ctx, func(uintptr) (int, error) { called = true; return 0, nil }, nil, wg.Done)
	wg.Wait()
	if !errors.Is(err, context.Canceled) || called {
		t.Fatalf("an already cancelled context must not start the call: %v %v", err, called)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	wg.Add(1)
	_, err = await(ctx, func(uintptr) (int, error) { <-release; return 0, errors.New("boom") },
		func(int) { t.Error("released a failed call's result") }, wg.Done)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	close(release)
	wg.Wait()
}

func TestAwaitResult(t *testing.T) {
	v, err := await(context.Background(), func(uintptr) (string, error) { return "ok", nil }, nil, nil)
	if v != "ok" || err != nil {
		t.Fatalf("%v %v", v, err)
	}
	_, err = await(context.Background(), func(uintptr) (string, error) { return "", errors.New("x") }, nil, nil)
	if err == nil || err.Error() != "x" {
		t.Fatal(err)
	}
}

// Cancelled calls on the fake engine: nothing is left running and the
// client still closes cleanly.
func TestFakeCancelledContext(t *testing.T) {
	c := fakeClient(t)
	dir, env := isolated(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Resolve(ctx, ResolveRequest{Workdir: dir, Env: env}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve: %v", err)
	}
	plan, err := c.Resolve(context.Background(), ResolveRequest{Workdir: dir, Settings: fakeSettings(nil), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if sb, err := c.Launch(ctx, plan, nil); !errors.Is(err, context.Canceled) || sb != nil {
		t.Fatalf("Launch: %v %v", sb, err)
	}
	sb, err := c.Launch(context.Background(), plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.Exec(ctx, ExecRequest{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec: %v", err)
	}
	past, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := sb.Exec(past, ExecRequest{Argv: []string{"true"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec past deadline: %v", err)
	}
	if _, err := sb.Describe(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Describe: %v", err)
	}
}
