package odek

// The binding's wire types against the JSON Schemas of the C ABI (no Docker).
//
// ffi/schema/*.json are derived from libodek's own types (cargo xtask
// schema, drift-checked by cargo xtask header-check). Every json tag of a
// wire type must be a member of its schema; every member of the schema must
// be a json tag or listed as passed through unread; a member the schema
// requires in a request must not be omitempty. A member added, removed or
// renamed on either side fails here.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

type wireDoc struct {
	file   string       // in ffi/schema
	def    string       // name in $defs, "" for the document itself
	typ    reflect.Type // the Go wire type
	sent   bool         // a request this binding writes
	unread []string     // members of the schema this binding does not read
}

var wireDocs = []wireDoc{
	{file: "client-options.json", typ: reflect.TypeOf(wireClientOptions{}), sent: true},
	{file: "resolve-request.json", typ: reflect.TypeOf(wireResolveRequest{}), sent: true},
	{file: "exec-request.json", typ: reflect.TypeOf(wireExecRequest{}), sent: true},
	{file: "narrow-request.json", typ: reflect.TypeOf(wireNarrowRequest{}), sent: true},
	{file: "plan.json", typ: reflect.TypeOf(wirePlan{}), unread: []string{
		"workdir_id", "odek_home", "endpoint_owner", "engine", "bridge_network_id", "env", "volumes", "masks",
		"log_retention_days", "engine_default_runtime", "dns_forwarding", "egress", "workspace"}},
	{file: "plan.json", def: "Warning", typ: reflect.TypeOf(Warning{})},
	{file: "plan.json", def: "ResolvedNetwork", typ: reflect.TypeOf(PlanNetwork{}), unread: []string{"origins", "scope", "attachable", "stack"}},
	{file: "approval-request.json", typ: reflect.TypeOf(wireApprovalRequest{}), unread: []string{
		"env_binding", "dockerfile_sha256", "egress", "egress_network"}},
	{file: "approval-request.json", def: "EnvKeyView", typ: reflect.TypeOf(EnvKey{})},
	{file: "approval-request.json", def: "NetworkCard", typ: reflect.TypeOf(NetworkCard{})},
	{file: "approval.json", typ: reflect.TypeOf(wireApproval{})},
	{file: "sandbox-info.json", typ: reflect.TypeOf(wireSandboxInfo{}), unread: []string{"applied", "supervisor"}},
	{file: "environment.json", typ: reflect.TypeOf(wireEnvironment{}), unread: []string{"egress"}},
	{file: "environment.json", def: "Workspace", typ: reflect.TypeOf(Workspace{})},
	{file: "environment.json", def: "Peer", typ: reflect.TypeOf(Peer{})},
	{file: "environment.json", def: "SupervisorState", typ: reflect.TypeOf(Supervisor{})},
	{file: "exec-result.json", typ: reflect.TypeOf(wireExecResult{})},
	{file: "close-result.json", typ: reflect.TypeOf(wireCloseResult{})},
	{file: "close-result.json", def: "HostFileChange", typ: reflect.TypeOf(HostFileChange{})},
	{file: "close-result.json", def: "Unpacked", typ: reflect.TypeOf(CopiedBack{})},
	{file: "close-result.json", def: "Skipped", typ: reflect.TypeOf(SkippedEntry{})},
	{file: "config-view.json", typ: reflect.TypeOf(wireConfigView{}), unread: []string{"pending_approval", "dns_forwarding", "egress", "workspace"}},
	{file: "read-file-request.json", typ: reflect.TypeOf(wireReadFileRequest{}), sent: true},
	{file: "read-file-result.json", typ: reflect.TypeOf(wireReadFileResult{})},
	{file: "write-file-request.json", typ: reflect.TypeOf(wireWriteFileRequest{}), sent: true},
	{file: "write-file-result.json", typ: reflect.TypeOf(FileWritten{}), unread: []string{"schema"}},
	{file: "edit-file-request.json", typ: reflect.TypeOf(wireEditFileRequest{}), sent: true},
	{file: "edit-file-request.json", def: "FileEdit", typ: reflect.TypeOf(FileEdit{}), sent: true},
	{file: "edit-file-result.json", typ: reflect.TypeOf(FileEdited{}), unread: []string{"schema"}},
	{file: "list-directory-request.json", typ: reflect.TypeOf(wireListDirectoryRequest{}), sent: true},
	{file: "list-directory-result.json", typ: reflect.TypeOf(DirectoryListing{}), unread: []string{"schema"}},
	{file: "list-directory-result.json", def: "DirEntry", typ: reflect.TypeOf(DirEntry{})},
	{file: "config-view.json", def: "ImageView", typ: reflect.TypeOf(ViewImage{}), unread: []string{
		"digest", "id"}},
}

type objectSchema struct {
	Type       interface{}                `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

func schemaDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "ffi", "schema"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadSchema(t *testing.T, file, def string) objectSchema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(schemaDir(t), file))
	if err != nil {
		t.Fatalf("%v (run `cargo xtask schema`)", err)
	}
	var doc struct {
		objectSchema
		Defs map[string]objectSchema `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	s := doc.objectSchema
	if def != "" {
		var ok bool
		if s, ok = doc.Defs[def]; !ok {
			t.Fatalf("%s has no $defs/%s", file, def)
		}
	}
	if s.Type != "object" || s.Properties == nil {
		t.Fatalf("%s %s: not an object schema", file, def)
	}
	return s
}

// jsonTags are the members encoding/json reads or writes for t: tagged
// fields, and the fields of embedded structs without a tag.
func jsonTags(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name := strings.Split(tag, ",")[0]
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			for k := range jsonTags(f.Type) {
				out[k] = true
			}
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = strings.Contains(tag, ",omitempty")
	}
	return out
}

func sorted(m map[string]bool) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// checkWire returns what differs between a wire type and its schema.
func checkWire(d wireDoc, s objectSchema) []string {
	var problems []string
	tags := jsonTags(d.typ)
	unread := map[string]bool{}
	for _, u := range d.unread {
		unread[u] = true
	}
	for _, name := range sorted(tags) {
		if _, ok := s.Properties[name]; !ok {
			problems = append(problems, d.typ.Name()+" has member "+name+" that "+d.file+" does not")
		}
		if unread[name] {
			problems = append(problems, name+" is read by "+d.typ.Name()+" and listed as unread")
		}
	}
	for name := range s.Properties {
		if _, ok := tags[name]; !ok && !unread[name] {
			problems = append(problems, d.file+" "+d.def+" has member "+name+" that "+d.typ.Name()+" neither reads nor lists as unread")
		}
	}
	for u := range unread {
		if _, ok := s.Properties[u]; !ok {
			problems = append(problems, "unread member "+u+" is not in "+d.file)
		}
	}
	if d.sent {
		for _, r := range s.Required {
			if omit, ok := tags[r]; ok && omit {
				problems = append(problems, d.file+" requires "+r+" but "+d.typ.Name()+" may omit it")
			}
		}
	}
	sort.Strings(problems)
	return problems
}

func TestFakeWireTypesMatchTheSchemas(t *testing.T) {
	for _, d := range wireDocs {
		if p := checkWire(d, loadSchema(t, d.file, d.def)); len(p) > 0 {
			t.Errorf("%s (%s %s):\n  %s", d.typ.Name(), d.file, d.def, strings.Join(p, "\n  "))
		}
	}
}

func TestFakeEverySchemaFileHasAWireType(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(schemaDir(t), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema in %s (run `cargo xtask schema`): %v", schemaDir(t), err)
	}
	covered := map[string]bool{}
	for _, d := range wireDocs {
		if d.def == "" {
			covered[d.file] = true
		}
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no wire type in this binding", filepath.Base(f))
		}
	}
}

// The comparison itself fails on a member on one side only.
func TestFakeWireCheckCatchesOneSidedMembers(t *testing.T) {
	s := loadSchema(t, "exec-result.json", "")
	type extra struct {
		wireExecResult
		Extra int `json:"extra"`
	}
	if p := checkWire(wireDoc{file: "exec-result.json", typ: reflect.TypeOf(extra{})}, s); len(p) != 1 ||
		!strings.Contains(p[0], "extra") {
		t.Errorf("a member only in Go: %v", p)
	}
	type fewer struct {
		Schema string `json:"schema"`
	}
	if p := checkWire(wireDoc{file: "exec-result.json", typ: reflect.TypeOf(fewer{})}, s); len(p) != 7 {
		t.Errorf("members only in the schema: %v", p)
	}
	type omits struct {
		wireResolveRequest
		Workdir string `json:"workdir,omitempty"`
	}
	r := loadSchema(t, "resolve-request.json", "")
	if p := checkWire(wireDoc{file: "resolve-request.json", typ: reflect.TypeOf(omits{}), sent: true}, r); len(p) != 1 {
		t.Errorf("a required member that may be omitted: %v", p)
	}
}

// The binding leaves the require-sandbox default to libodek: it sends
// allow_host_fallback only when the caller sets it.
func TestFakeResolveRequestLeavesTheSandboxDefaultToLibodek(t *testing.T) {
	b, err := json.Marshal(wireResolveRequest{Schema: "odek.resolve-request/1", Workdir: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "allow_host_fallback") || strings.Contains(string(b), "settings") {
		t.Errorf("default request: %s", b)
	}
	b, _ = json.Marshal(wireResolveRequest{Workdir: "/w", AllowHostFallback: true})
	if !strings.Contains(string(b), `"allow_host_fallback":true`) {
		t.Errorf("fallback request: %s", b)
	}
}

// TestSchemaCloseResultCopiedBack parses a copy-back in
// "odek.close-result/1" (a copied workspace): what was written and left out
// arrive as CopiedBack; null stays nil.
func TestSchemaCloseResultCopiedBack(t *testing.T) {
	doc := `{"schema":"odek.close-result/1","name":"odek-0123456789ab","changed_host_files":[],` +
		`"host_files_unchecked":null,"message":null,"copied_back":{"written":["out.txt","src/new.py"],` +
		`"skipped":[{"path":"esc","reason":"a symlink to /etc/passwd, outside the workspace"}]}}`
	r, err := parseCloseResult(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := &CopiedBack{
		Written: []string{"out.txt", "src/new.py"},
		Skipped: []SkippedEntry{{Path: "esc", Reason: "a symlink to /etc/passwd, outside the workspace"}},
	}
	if !reflect.DeepEqual(r.CopiedBack, want) {
		t.Fatalf("copied_back: got %+v, want %+v", r.CopiedBack, want)
	}
	r, err = parseCloseResult(`{"schema":"odek.close-result/1","name":"n","changed_host_files":[],"host_files_unchecked":null,"message":null,"copied_back":null}`)
	if err != nil || r.CopiedBack != nil {
		t.Fatalf("null copied_back: %+v %v", r, err)
	}
}
