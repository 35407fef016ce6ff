package odek

// File tools: read, write, edit and list files inside a sandbox
// (odek_read_file, odek_write_file, odek_edit_file, odek_list_directory;
// docs/SANDBOXING.md "File tools"). Each runs inside the sandbox as its
// command user, with its mounts: a path (absolute, or relative to
// /workspace) and every symlink in it resolve in the sandbox, never on the
// host; a read-only workspace refuses a write (CodeFile, ErrFile). They
// need odek's supervisor in the sandbox (the default); without it, or on
// the host, they fail with CodeFile and nothing is done. Content is
// []byte, sent as base64.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
)

// FileReadLimit is the most bytes one ReadFile returns (4 MiB):
// ODEK_FILE_READ_LIMIT.
const FileReadLimit = 4 << 20

// FileWriteLimit is the most bytes WriteFile writes, and the largest file
// EditFile edits (16 MiB): ODEK_FILE_WRITE_LIMIT.
const FileWriteLimit = 16 << 20

// FileContent is what ReadFile read.
type FileContent struct {
	Path       string // the file (absolute, inside the sandbox)
	Content    []byte // the bytes read
	Size       int64  // the file's whole size
	Offset     int64  // the first byte read
	Length     int64  // bytes read
	Truncated  bool   // the file goes on after this piece
	NextOffset *int64 // where the next piece starts when Truncated
	Limit      int64  // most bytes one call returns (FileReadLimit)
}

// FileWritten is what WriteFile wrote ("odek.write-file-result/1").
type FileWritten struct {
	Path         string `json:"path"`          // the file written (symlinks resolved in the sandbox)
	BytesWritten int64  `json:"bytes_written"` // bytes written
	Created      bool   `json:"created"`       // the file did not exist before
}

// FileEdit is one exact-text replacement of EditFile: OldText must occur
// exactly once in the file (as the earlier edits left it).
type FileEdit struct {
	OldText string `json:"oldText"`
	NewText string `json:"newText"`
}

// FileEdited is what EditFile changed ("odek.edit-file-result/1").
type FileEdited struct {
	Path  string `json:"path"`  // the file edited
	Diff  string `json:"diff"`  // unified diff, at most 256 KiB; empty when nothing changed (nothing written)
	Edits int    `json:"edits"` // edits applied
	// DiffTruncated: the diff was cut (the edit was applied in full).
	DiffTruncated bool `json:"diff_truncated"`
}

// DirEntry is one entry of a DirectoryListing.
type DirEntry struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`   // "file", "dir", "symlink" (not followed) or "other"
	Size   *int64  `json:"size"`   // a regular file's size
	Target *string `json:"target"` // a symlink's target as written in the link
}

// DirectoryListing is what ListDirectory found
// ("odek.list-directory-result/1").
type DirectoryListing struct {
	Path    string     `json:"path"`    // the directory (absolute, inside the sandbox)
	Entries []DirEntry `json:"entries"` // sorted by name; at most 10000, the first by name
	Listing string     `json:"listing"` // "[FILE] name", "[DIR] name", "[SYMLINK] name -> target", "[OTHER] name" lines
	// Total is the directory's number of entries (more than len(Entries)
	// when Truncated); Truncated says Entries holds only the first.
	Total     int64 `json:"total"`
	Truncated bool  `json:"truncated"`
}

type wireReadFileRequest struct {
	Schema   string `json:"schema"`
	Path     string `json:"path"`
	Encoding string `json:"encoding"`
	Offset   *int64 `json:"offset,omitempty"`
	Length   *int64 `json:"length,omitempty"`
}

type wireReadFileResult struct {
	Schema     string `json:"schema"`
	Path       string `json:"path"`
	Encoding   string `json:"encoding"`
	Content    string `json:"content"`
	Size       int64  `json:"size"`
	Offset     int64  `json:"offset"`
	Length     int64  `json:"length"`
	Truncated  bool   `json:"truncated"`
	NextOffset *int64 `json:"next_offset"`
	Limit      int64  `json:"limit"`
}

type wireWriteFileRequest struct {
	Schema   string `json:"schema"`
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
}

type wireEditFileRequest struct {
	Schema string     `json:"schema"`
	Path   string     `json:"path"`
	Edits  []FileEdit `json:"edits"`
}

type wireListDirectoryRequest struct {
	Schema string `json:"schema"`
	Path   string `json:"path"`
}

// fileCall runs one file entry point (fn: odek_read_file, …) with the
// request req and decodes its result into out; ctx cancels it in libodek.
func fileCall(ctx context.Context, s *Sandbox, fn func(uintptr, string, uintptr) (string, error), req any, out any) error {
	doc, err := json.Marshal(req)
	if err != nil {
		return err
	}
	h, err := s.handle()
	if err != nil {
		return err
	}
	res, err := await(ctx, func(cancel uintptr) (string, error) {
		r, err := fn(h, string(doc), cancel)
		runtime.KeepAlive(s)
		return r, err
	}, nil, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(res), out); err != nil {
		return fmt.Errorf("odek: unexpected file result document: %w", err)
	}
	return nil
}

// ReadFile reads a file inside the sandbox (at most FileReadLimit bytes
// from its start; see ReadFileRange), as its command user with its mounts.
// Errors: *Error with CodeFile (ErrFile) when the file is absent, a
// directory, not permitted, or the sandbox has no supervisor.
func (s *Sandbox) ReadFile(ctx context.Context, path string) (*FileContent, error) {
	return s.readFile(ctx, path, nil, nil)
}

// ReadFileRange reads at most length bytes (capped at FileReadLimit) of a
// file inside the sandbox from offset. Errors: as ReadFile; a length of 0
// is CodeInvalidArgument.
func (s *Sandbox) ReadFileRange(ctx context.Context, path string, offset, length int64) (*FileContent, error) {
	return s.readFile(ctx, path, &offset, &length)
}

func (s *Sandbox) readFile(ctx context.Context, path string, offset, length *int64) (*FileContent, error) {
	req := wireReadFileRequest{Schema: "odek.read-file-request/1", Path: path, Encoding: "base64", Offset: offset, Length: length}
	var w wireReadFileResult
	if err := fileCall(ctx, s, cReadFile, req, &w); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(w.Content)
	if err != nil {
		return nil, fmt.Errorf("odek: file content is not base64: %w", err)
	}
	return &FileContent{Path: w.Path, Content: b, Size: w.Size, Offset: w.Offset, Length: w.Length,
		Truncated: w.Truncated, NextOffset: w.NextOffset, Limit: w.Limit}, nil
}

// WriteFile creates or replaces a whole file inside the sandbox, as its
// command user with its mounts: parent directories are created, a
// replaced file keeps its permissions (a temporary file and a rename), a
// symlink is followed inside the sandbox. At most FileWriteLimit bytes;
// the content goes over stdin, not an argument list. Errors: CodeFile
// (ErrFile) when over the limit, on a read-only file system (e.g. a
// sandbox_readonly workspace, named in the message), not permitted, or
// without a supervisor; nothing is written then.
func (s *Sandbox) WriteFile(ctx context.Context, path string, content []byte) (*FileWritten, error) {
	req := wireWriteFileRequest{Schema: "odek.write-file-request/1", Path: path,
		Content: base64.StdEncoding.EncodeToString(content), Encoding: "base64"}
	var w FileWritten
	if err := fileCall(ctx, s, cWriteFile, req, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// EditFile applies exact-text replacements to a UTF-8 file inside the
// sandbox, in order, and writes it back; each OldText must occur exactly
// once, otherwise nothing is written (CodeFile, the message names the
// edit). Not atomic against a process in the sandbox writing the same
// file meanwhile.
func (s *Sandbox) EditFile(ctx context.Context, path string, edits []FileEdit) (*FileEdited, error) {
	req := wireEditFileRequest{Schema: "odek.edit-file-request/1", Path: path, Edits: edits}
	var w FileEdited
	if err := fileCall(ctx, s, cEditFile, req, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// ListDirectory lists a directory inside the sandbox, as its command user
// ("." is /workspace). Errors: CodeFile (absent, not a directory, not
// permitted, no supervisor).
func (s *Sandbox) ListDirectory(ctx context.Context, path string) (*DirectoryListing, error) {
	req := wireListDirectoryRequest{Schema: "odek.list-directory-request/1", Path: path}
	var w DirectoryListing
	if err := fileCall(ctx, s, cListDirectory, req, &w); err != nil {
		return nil, err
	}
	return &w, nil
}
