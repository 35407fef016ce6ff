package odek

// Streaming exec over odek_exec_stream. This file holds the cgo export its
// callback calls (a file with //export may declare, not define, C code in
// its preamble: the C side is in capi.go).

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"context"
	"errors"
	"io"
	"runtime"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// ExecStream is a command started by Sandbox.ExecStream: read its output as
// it comes from Stdout and Stderr, and its result from Wait.
//
// Each reader ends (io.EOF) when the command ends. Output not read yet is
// held in memory and never holds the command up: read both readers (or
// Close the one you do not want, which drops its output), or Close the
// stream. Wait returns the same ExecResult Exec would (its Stdout and
// Stderr carry the output again, at most ExecOutputLimit bytes each).
type ExecStream struct {
	// Stdout reads the command's standard output as it comes.
	Stdout io.ReadCloser
	// Stderr reads the command's standard error as it comes (odek's own
	// notes about the command, such as a kill it could not confirm, too).
	Stderr io.ReadCloser

	stdout, stderr *outputBuffer
	cancel         uintptr // odek_cancel_t*, 0 when none could be made
	done           chan struct{}
	res            *ExecResult
	err            error
	closeOnce      sync.Once
	closed         bool // set by Close before it cancels (guarded by mu)
	mu             sync.Mutex
}

// ExecStream runs a command in the sandbox and returns as soon as it has
// started; the command's output is read from the stream's Stdout and
// Stderr while it runs, and Wait returns its result. req is Exec's, and so
// is ctx: a deadline sooner than req.Timeout becomes the timeout, and when
// ctx ends first the command is killed (as a timeout would) and Wait
// returns ctx.Err(). Close kills a command that still runs.
//
// Errors (here, nothing run): ctx already ended (ctx.Err()),
// ErrInvalidHandle after Close of the sandbox, ErrUsage for a negative
// timeout. A bad request (neither or both of Argv and Shell) and
// the exec's own failures are Wait's errors, as Exec returns them.
//
// A Go program is linked against the libodek it was built with, so an
// older library without odek_exec_stream fails at link time, not here.
func (s *Sandbox) ExecStream(ctx context.Context, req ExecRequest) (*ExecStream, error) {
	return s.execStream(ctx, req, nil)
}

// ExecStreamInput is ExecStream with stdin: what is read from stdin reaches
// the command's stdin as it comes (copied by a goroutine of its own), and
// stdin's io.EOF closes it (the command reads end-of-file). Reading stops
// when the command ends; a read error other than io.EOF closes the
// command's stdin too.
//
// Stdin is served by odek's supervisor (the default in a sandbox): in a
// sandbox without it, or when the command runs on the host, Wait returns an
// *Error (CodeExec) and nothing ran. Errors here: as ExecStream's, and
// ErrUsage for a nil stdin.
func (s *Sandbox) ExecStreamInput(ctx context.Context, req ExecRequest, stdin io.Reader) (*ExecStream, error) {
	if stdin == nil {
		return nil, usageError("ExecStreamInput: stdin is nil (use ExecStream for a command without stdin)")
	}
	return s.execStream(ctx, req, stdin)
}

func (s *Sandbox) execStream(ctx context.Context, req ExecRequest, stdin io.Reader) (*ExecStream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	doc, fromCtx, err := execDocument(ctx, "ExecStream", req)
	if err != nil {
		return nil, err
	}
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	st := &ExecStream{
		stdout: newOutputBuffer(),
		stderr: newOutputBuffer(),
		cancel: cCancelNew(),
		done:   make(chan struct{}),
	}
	st.Stdout, st.Stderr = st.stdout, st.stderr
	var pipe uintptr
	if stdin != nil {
		if pipe = cStdinNew(); pipe == 0 {
			return nil, &Error{Code: CodeForked, Class: ClassUsage, Message: "odek_stdin_new failed (a forked process)"}
		}
		go copyStdin(pipe, stdin)
	}
	user := cgo.NewHandle(st)
	go func() {
		var out string
		var err error
		if pipe != 0 {
			out, err = cExecStreamStdin(h, doc, st.cancel, pipe, uintptr(user))
			// The copier's later writes fail on the freed handle and stop it.
			_ = cStdinFree(pipe)
		} else {
			out, err = cExecStream(h, doc, st.cancel, uintptr(user))
		}
		runtime.KeepAlive(s)
		user.Delete()
		st.stdout.closeWrite()
		st.stderr.closeWrite()
		var res *ExecResult
		if err == nil {
			res, err = parseExecResult(out)
		}
		var oe *Error
		switch {
		case ctx.Err() != nil && errors.As(err, &oe) && oe.Code == CodeCancelled:
			res, err = nil, ctx.Err()
		case err == nil && res.TimedOut && fromCtx:
			// The timeout was the context's deadline: report it as such.
			<-ctx.Done()
			res, err = nil, ctx.Err()
		}
		st.mu.Lock()
		st.res, st.err = res, err
		k := st.cancel
		st.cancel = 0
		st.mu.Unlock()
		if k != 0 {
			_ = cCancelFree(k)
		}
		close(st.done)
	}()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				st.kill()
			case <-st.done:
			}
		}()
	}
	return st, nil
}

// copyStdin writes what r yields to the stdin handle p until r ends (then
// closes it) or a write fails (the command ended, the handle was freed).
func copyStdin(p uintptr, r io.Reader) {
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if cStdinWrite(p, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = cStdinClose(p)
			return
		}
	}
}

// kill cancels the call (the command is killed as a timeout would) unless
// it already ended.
func (e *ExecStream) kill() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel != 0 {
		_ = cCancel(e.cancel)
	}
}

// Wait waits for the command to end and returns its result (what Exec
// returns), or the exec's error. It may be called several times, from any
// goroutine, before or after the output was read.
func (e *ExecStream) Wait() (*ExecResult, error) {
	<-e.done
	return e.res, e.err
}

// Close kills the command if it still runs (as its timeout would), waits
// for the call to end and drops the output not read; Wait then returns an
// *Error with CodeCancelled (class "cancelled"). Idempotent; returns nil.
func (e *ExecStream) Close() error {
	e.closeOnce.Do(func() {
		e.kill()
		<-e.done
		_ = e.stdout.Close()
		_ = e.stderr.Close()
	})
	return nil
}

//export godekStreamOutput
func godekStreamOutput(user C.uintptr_t, stream C.int32_t, data *C.uint8_t, n C.size_t) {
	st, ok := cgo.Handle(uintptr(user)).Value().(*ExecStream)
	if !ok || n == 0 {
		return
	}
	chunk := unsafe.Slice((*byte)(unsafe.Pointer(data)), int(n))
	switch int(stream) {
	case cStreamStdout:
		st.stdout.write(chunk)
	case cStreamStderr:
		st.stderr.write(chunk)
	}
}

// outputBuffer is one stream's output: written by the callback (copied,
// never blocking it), read as an io.ReadCloser that ends with io.EOF once
// the command ended and everything was read.
type outputBuffer struct {
	mu     sync.Mutex
	more   *sync.Cond
	chunks [][]byte
	ended  bool // the command ended: no more writes
	closed bool // the reader closed: writes are dropped
}

func newOutputBuffer() *outputBuffer {
	b := &outputBuffer{}
	b.more = sync.NewCond(&b.mu)
	return b
}

func (b *outputBuffer) write(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.chunks = append(b.chunks, append([]byte(nil), p...))
	b.more.Broadcast()
}

func (b *outputBuffer) closeWrite() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = true
	b.more.Broadcast()
}

// Read reads what has come, waiting for more while the command runs.
func (b *outputBuffer) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.chunks) == 0 && !b.ended && !b.closed {
		b.more.Wait()
	}
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	if len(b.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.chunks[0])
	if n == len(b.chunks[0]) {
		b.chunks[0] = nil
		b.chunks = b.chunks[1:]
	} else {
		b.chunks[0] = b.chunks[0][n:]
	}
	return n, nil
}

// Close drops the output not read and any to come; Read then returns
// io.ErrClosedPipe. The command keeps running (Close the ExecStream to
// kill it).
func (b *outputBuffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.chunks = nil
	b.more.Broadcast()
	return nil
}
