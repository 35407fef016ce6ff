package odek

import (
	"context"
	"sync"
)

// await runs a blocking libodek call so that a context can end the wait.
//
// A call into libodek blocks its OS thread and cannot be interrupted. So
// every call that waits runs in its own goroutine. When ctx ends first, the
// caller gets ctx.Err() at once and the call finishes in the background;
// then abandon (if not nil) releases what it produced — for Launch it
// destroys the new sandbox, so a cancelled launch never leaks a container.
// done is called when the background goroutine is finished, cleanup included.
//
// If the call's result is already there when ctx ends, it is returned
// rather than thrown away. A context that can never end (Done() == nil, as
// context.Background()) needs no goroutine: the call runs on the caller's.
func await[T any](ctx context.Context, call func() (T, error), abandon func(T), done func()) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		if done != nil {
			done()
		}
		return zero, err
	}
	if ctx.Done() == nil {
		if done != nil {
			defer done()
		}
		return call()
	}
	var (
		mu     sync.Mutex
		gaveUp bool
		ch     = make(chan result[T], 1) // buffered: the send never blocks
	)
	go func() {
		if done != nil {
			defer done()
		}
		v, err := call()
		mu.Lock()
		if !gaveUp {
			ch <- result[T]{v, err}
			mu.Unlock()
			return
		}
		mu.Unlock()
		if err == nil && abandon != nil {
			abandon(v)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case r := <-ch:
			return r.v, r.err
		default:
			gaveUp = true
			return zero, ctx.Err()
		}
	}
}

type result[T any] struct {
	v   T
	err error
}
