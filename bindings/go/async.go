package odek

import (
	"context"
	"errors"
	"sync"
)

// await runs a blocking libodek call so that a context can end the wait.
//
// A call into libodek blocks its OS thread. So every call that waits runs
// in its own goroutine, and is given a libodek cancel handle (cancel, an
// odek_cancel_t*; 0 when ctx can never end). When ctx ends first, the caller
// gets ctx.Err() at once and odek_cancel stops the call in the core: a
// launch removes what it created, an exec kills its command (as its timeout
// would), the others stop waiting. The call then ends in the background with
// CodeCancelled; should it have finished first after all, abandon (if not
// nil) releases what it produced — for Launch it destroys the new sandbox,
// so a cancelled launch never leaks a container. done is called when the
// background goroutine is finished, cleanup included.
//
// If the call's result is already there when ctx ends, it is returned
// rather than thrown away. A context that can never end (Done() == nil, as
// context.Background()) needs no goroutine: the call runs on the caller's.
func await[T any](ctx context.Context, call func(cancel uintptr) (T, error), abandon func(T), done func()) (T, error) {
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
		return call(0)
	}
	var (
		mu     sync.Mutex
		gaveUp bool
		ch     = make(chan result[T], 1) // buffered: the send never blocks
	)
	cancel := cCancelNew()
	go func() {
		if done != nil {
			defer done()
		}
		defer func() { _ = cCancelFree(cancel) }()
		v, err := call(cancel)
		mu.Lock()
		if !gaveUp {
			ch <- result[T]{v, err}
			mu.Unlock()
			return
		}
		mu.Unlock()
		var oe *Error
		if errors.As(err, &oe) && oe.Code == CodeCancelled {
			cancelledInCore.Add(1)
		}
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
			_ = cCancel(cancel) // the goroutine frees the handle, after the call
			return zero, ctx.Err()
		}
	}
}

type result[T any] struct {
	v   T
	err error
}
