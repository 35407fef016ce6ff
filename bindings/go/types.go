package odek

import (
	"encoding/json"
	"fmt"
)

// Schemas of the JSON documents this binding reads (SPEC §10.1).
const (
	SchemaPlan            = "odek.plan/1"
	SchemaApprovalRequest = "odek.approval-request/1"
	SchemaApproval        = "odek.approval/1"
	SchemaSandboxInfo     = "odek.sandbox-info/1"
	SchemaEnvironment     = "odek.environment/1"
	SchemaExecResult      = "odek.exec-result/1"
	SchemaConfigView      = "odek.config-view/1"
	SchemaCloseResult     = "odek.close-result/1"
)

// Sandbox modes (SPEC §3.3), as in Plan.Mode and ConfigView.Mode.
const (
	ModeExplicit = "explicit" // sandbox=true: an unreachable daemon or image is fatal
	ModeImplicit = "implicit" // nothing said: on, with loud fallback where allowed
	ModeOff      = "off"      // the sandbox is off: commands run on the host
)

// Isolation kinds, as in Isolation.Kind, Environment.Isolation and
// Sandbox.Isolation.Kind.
const (
	IsolationContainer = "container" // a container is (or will be) launched
	IsolationFallback  = "fallback"  // loud fallback: commands run on the host
	IsolationOff       = "off"       // the sandbox is off: commands run on the host
)

// Network summaries (SPEC §4.2): how the container is networked.
const (
	NetworkNone           = "none"
	NetworkBridge         = "bridge"
	NetworkAttached       = "attached"
	NetworkBridgeAttached = "bridge_attached"
)

// Isolation is what the sandbox will be, or why there is none.
type Isolation struct {
	// Kind is IsolationContainer, IsolationFallback or IsolationOff.
	Kind string `json:"kind"`
	// Class is the failure class that caused a fallback (fallback only).
	Class string `json:"class,omitempty"`
	// Reason is the underlying error's message (fallback only).
	Reason string `json:"reason,omitempty"`
}

// Warning is one warning carried by a plan, sandbox or config view (SPEC §4.3).
type Warning struct {
	// Kind is a stable snake_case name, e.g. "attached_network_not_internal".
	Kind string `json:"kind"`
	// Message is the text shown to the operator.
	Message string `json:"message"`
}

// Source says where a setting came from (SPEC §3.2).
type Source struct {
	// Kind is "default", "user", "project", "env", "flag" or "api".
	Kind string `json:"kind"`
	// Path is the config file (user, project).
	Path string `json:"path,omitempty"`
	// Var is the environment variable (env).
	Var string `json:"var,omitempty"`
	// Flag is the CLI flag (flag).
	Flag string `json:"flag,omitempty"`
}

// PlanNetwork is a network the sandbox will be attached to.
type PlanNetwork struct {
	// Name is for display only: a Compose file chose it (untrusted).
	Name string `json:"name"`
	// ID is the full 64-hex network ID the sandbox attaches by.
	ID string `json:"id"`
	// Internal is Docker's Internal flag (no route out of the host).
	Internal bool `json:"internal"`
	// Driver is always "bridge" once accepted.
	Driver string `json:"driver"`
	// ComposeProject is the com.docker.compose.project label, if any.
	ComposeProject string `json:"compose_project,omitempty"`
}

// PlanImage is the image decision of a plan.
type PlanImage struct {
	// Reference is the image reference as configured.
	Reference string
	// Digest is the pinned digest ("" when none).
	Digest string
	// Origin is "explicit", "dockerfile" or "pinned_default".
	Origin string
}

// Plan is a resolved plan (SPEC §3–§5, "odek.plan/1"): what launch will
// create. The typed fields are read from the JSON for convenience; the JSON
// itself is kept unchanged (JSON) and is what Approve, Launch, Narrow and
// ConfigView pass back to libodek.
type Plan struct {
	// Mode is ModeExplicit, ModeImplicit or ModeOff.
	Mode string
	// Isolation is container, fallback (with the reason) or off.
	Isolation Isolation
	// Workdir is the absolute project directory (mounted at /workspace).
	Workdir string
	// Endpoint is the Docker endpoint in display form ("" when none).
	Endpoint string
	// Image is the image decision.
	Image PlanImage
	// NetworkMode is sandbox_network: "none" or "bridge".
	NetworkMode string
	// NetworkSummary is NetworkNone, NetworkBridge, NetworkAttached or
	// NetworkBridgeAttached (SPEC §4.2).
	NetworkSummary string
	// Internet tells whether the internet will be reachable (SPEC §4.2).
	Internet bool
	// Networks are the attached networks, in attach order.
	Networks []PlanNetwork
	// PidsLimit is --pids-limit (processes).
	PidsLimit int64
	// Readonly tells whether /workspace is mounted read-only.
	Readonly bool
	// MemoryBytes is the memory limit in bytes (0: none).
	MemoryBytes int64
	// CPUs is the CPU limit as written, e.g. "0.5" ("" when none).
	CPUs string
	// User is uid[:gid] or a name ("" for the image's): the operator's
	// sandbox_user, else the operator's own uid:gid on a local engine
	// (SPEC §6.1 "user").
	User string
	// UserChoice says why User: UserOperator, UserOperatorIDs,
	// UserRootlessRoot or UserImage ("" in plans of earlier releases).
	UserChoice string
	// Account is the account odek gives a non-root numeric user (nil
	// otherwise).
	Account *Account
	// Runtime is the OCI runtime asked for (sandbox_runtime, e.g. "runsc";
	// "" for the engine's default).
	Runtime string
	// RequireSandbox is ODEK_REQUIRE_SANDBOX=1.
	RequireSandbox bool
	// Sources is where each setting came from, by config key.
	Sources map[string]Source
	// Warnings are the warnings so far.
	Warnings []Warning
	// Approval is what the project asks the operator to approve (SPEC §7),
	// nil when nothing needs approval. It is also set, with Trusted or
	// ApprovedByEnv, when the approval is already granted: use
	// NeedsApproval to know whether to ask.
	Approval *ApprovalRequest

	raw string
}

// JSON is the plan document exactly as libodek produced it.
func (p *Plan) JSON() []byte { return []byte(p.raw) }

// NeedsApproval tells whether the operator must be asked, i.e. Launch needs
// an *Approval from Approve: the plan has an approval request that is not
// already granted by a stored trust or ODEK_APPROVE_PROJECT_SANDBOX=1.
func (p *Plan) NeedsApproval() bool { return p.Approval != nil && !p.Approval.standing() }

// ParsePlan reads a plan document (e.g. one kept from Plan.JSON). The
// document is not validated beyond its schema here; libodek checks it when
// it is used.
func ParsePlan(doc []byte) (*Plan, error) {
	if err := checkABI(); err != nil {
		return nil, err
	}
	return parsePlan(string(doc))
}

// Account is the account odek gives a sandbox whose user is a non-root
// numeric uid:gid (SPEC §6.1 "user"): a line in the container's
// /etc/passwd (the image's entries plus this one), an empty private tmpfs
// HOME, and HOME, USER and LOGNAME in its environment.
type Account struct {
	// Name is the login name ("odek").
	Name string `json:"name"`
	// UID is the uid (never 0).
	UID uint32 `json:"uid"`
	// GID is the primary gid.
	GID uint32 `json:"gid"`
	// Home is HOME ("/home/odek"), an empty tmpfs gone with the sandbox.
	Home string `json:"home"`
}

// Why a sandbox runs as its user (Plan.UserChoice, ConfigView.UserChoice).
const (
	// UserOperator: the operator set sandbox_user.
	UserOperator = "operator"
	// UserOperatorIDs: the operator's own uid:gid (a local engine).
	UserOperatorIDs = "operator_ids"
	// UserRootlessRoot: root in the sandbox, which a rootless engine maps to
	// the operator's uid on the host.
	UserRootlessRoot = "rootless_root"
	// UserImage: the image's own user (a remote engine).
	UserImage = "image"
)

type wirePlan struct {
	Schema    string    `json:"schema"`
	Mode      string    `json:"mode"`
	Isolation Isolation `json:"isolation"`
	Workdir   string    `json:"workdir"`
	Endpoint  *string   `json:"endpoint"`
	Image     struct {
		Reference struct {
			Original string  `json:"original"`
			Digest   *string `json:"digest"`
		} `json:"reference"`
		Source struct {
			Kind string `json:"kind"`
		} `json:"source"`
	} `json:"image"`
	NetworkMode    string        `json:"network_mode"`
	Networks       []PlanNetwork `json:"networks"`
	NetworkSummary string        `json:"network_summary"`
	Internet       bool          `json:"internet"`
	PidsLimit      int64         `json:"pids_limit"`
	Readonly       bool          `json:"readonly"`
	MemoryBytes    *int64        `json:"memory_bytes"`
	CPUs           *struct {
		Text string `json:"text"`
	} `json:"cpus"`
	User           *string           `json:"user"`
	UserChoice     *string           `json:"user_choice"`
	Account        *Account          `json:"account"`
	Runtime        *string           `json:"runtime"`
	RequireSandbox bool              `json:"require_sandbox"`
	Sources        map[string]Source `json:"sources"`
	Warnings       []Warning         `json:"warnings"`
	Approval       json.RawMessage   `json:"approval"`
}

func parsePlan(doc string) (*Plan, error) {
	var w wirePlan
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return nil, usageError("not a plan document: %v", err)
	}
	if w.Schema != SchemaPlan {
		return nil, usageError("not a plan document: schema %q, want %q", w.Schema, SchemaPlan)
	}
	p := &Plan{
		Mode:           w.Mode,
		Isolation:      w.Isolation,
		Workdir:        w.Workdir,
		Endpoint:       deref(w.Endpoint),
		NetworkMode:    w.NetworkMode,
		NetworkSummary: w.NetworkSummary,
		Internet:       w.Internet,
		Networks:       w.Networks,
		PidsLimit:      w.PidsLimit,
		Readonly:       w.Readonly,
		User:           deref(w.User),
		UserChoice:     deref(w.UserChoice),
		Account:        w.Account,
		Runtime:        deref(w.Runtime),
		RequireSandbox: w.RequireSandbox,
		Sources:        w.Sources,
		Warnings:       w.Warnings,
		raw:            doc,
	}
	p.Image = PlanImage{
		Reference: w.Image.Reference.Original,
		Digest:    deref(w.Image.Reference.Digest),
		Origin:    imageOrigin(w.Image.Source.Kind),
	}
	if w.MemoryBytes != nil {
		p.MemoryBytes = *w.MemoryBytes
	}
	if w.CPUs != nil {
		p.CPUs = w.CPUs.Text
	}
	if len(w.Approval) > 0 && string(w.Approval) != "null" {
		a, err := parseApprovalRequest(string(w.Approval))
		if err != nil {
			return nil, err
		}
		p.Approval = a
	}
	return p, nil
}

func imageOrigin(kind string) string {
	if kind == "pinned_default" || kind == "dockerfile" {
		return kind
	}
	return "explicit"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// EnvKey is one sandbox_env key of a project config.
type EnvKey struct {
	// Key is the variable name (values are never shown).
	Key string `json:"key"`
	// InterpolatesHost tells whether its value pulls in host variables (${…}).
	InterpolatesHost bool `json:"interpolates_host"`
	// Reads are the names of the host variables the value reads.
	Reads []string `json:"reads"`
}

// NetworkCard is one resolved network on an approval request (SPEC §7.2).
type NetworkCard struct {
	// Name is terminal-safe.
	Name string `json:"name"`
	// ID is the full 64-hex network ID.
	ID string `json:"id"`
	// Internal is Docker's Internal flag.
	Internal bool `json:"internal"`
	// ComposeProject is the Compose project label (terminal-safe) or "-".
	ComposeProject string `json:"compose_project"`
	// Stack is the Docker Swarm stack label (terminal-safe) of a stack's
	// network, nil otherwise (SPEC §4.1).
	Stack *string `json:"stack"`
	// Scope is "swarm" for a stack's overlay, nil for a local network; an
	// approval binds it with the ID (SPEC §7.3).
	Scope *string `json:"scope"`
	// Attachable is Docker's Attachable flag (true for an accepted overlay).
	Attachable bool `json:"attachable"`
}

// ApprovalRequest is what the operator is asked to approve before a project
// config may widen the sandbox (SPEC §7.2, "odek.approval-request/1").
type ApprovalRequest struct {
	// Key is the approval key (SPEC §7.3).
	Key string `json:"key"`
	// ProjectDir is the absolute project directory.
	ProjectDir string `json:"project_dir"`
	// Config is the project config file.
	Config string `json:"config"`
	// Knobs are the config keys asking for approval.
	Knobs []string `json:"knobs"`
	// Image is sandbox_image from the project ("" when not set).
	Image string `json:"-"`
	// Network is sandbox_network from the project ("" when not set).
	Network string `json:"-"`
	// Env are the project's sandbox_env keys.
	Env []EnvKey `json:"env"`
	// Volumes are the project's sandbox_volumes entries.
	Volumes []string `json:"volumes"`
	// RequestedNetworks are the project's sandbox_networks, as written.
	RequestedNetworks []string `json:"requested_networks"`
	// RequestedComposeProject is the project's sandbox_compose_project.
	RequestedComposeProject string `json:"-"`
	// RequestedStack is the project's sandbox_stack, a Docker Swarm stack
	// ("" when not set; SPEC §4.1).
	RequestedStack string `json:"-"`
	// Runtime is the project's sandbox_runtime ("" when not set).
	Runtime string `json:"-"`
	// Networks are the project-requested networks, resolved.
	Networks []NetworkCard `json:"networks"`
	// NetworkSummary is the network the sandbox would have (SPEC §4.2).
	NetworkSummary string `json:"network_summary"`
	// Internet tells whether the internet would be reachable.
	Internet bool `json:"internet"`
	// Trusted tells whether the project is already trusted in the store
	// (then the operator need not be asked: Launch takes a nil approval).
	Trusted bool `json:"trusted"`
	// ApprovedByEnv tells whether ODEK_APPROVE_PROJECT_SANDBOX=1 is set.
	ApprovedByEnv bool `json:"approved_by_env"`
	// HostFallback tells what a failure to make the sandbox leads to: false
	// — refused, nothing runs (always, as a project setting makes the
	// sandbox required, SPEC §6.3); true would be a host run.
	HostFallback bool `json:"host_fallback"`
	// PreviouslyTrusted tells whether the store trusts this project
	// directory with other settings or networks (review what changed).
	PreviouslyTrusted bool `json:"previously_trusted"`
	// Engine is what the approval key binds the engine by (SPEC §7.3):
	// "engine:<ID>" (the engine's /info ID) or "endpoint:<endpoint>" for
	// an engine that reports none. A trust holds on that engine only.
	Engine string `json:"engine"`
	// TrustedBeforeEngineBinding tells whether the store trusts these
	// settings under the key of earlier releases, which bound no engine:
	// the operator is asked once more.
	TrustedBeforeEngineBinding bool `json:"trusted_before_engine_binding"`
	// Card is the plain-text card the odek CLI prompts with (lines ending in
	// "\n", names terminal-safe): show it to the operator as is.
	Card string `json:"card"`

	raw string
	// standingVia is libodek's decision ("stored", "env"), "" when the
	// operator must be asked.
	standingVia string
}

// JSON is the approval request document as libodek produced it.
func (a *ApprovalRequest) JSON() []byte { return []byte(a.raw) }

// standing tells whether the request is granted without a question: a
// stored trust or ODEK_APPROVE_PROJECT_SANDBOX=1, as libodek decided it (the
// document's "standing").
func (a *ApprovalRequest) standing() bool { return a.standingVia != "" }

// wireApprovalRequest is "odek.approval-request/1" as read.
type wireApprovalRequest struct {
	ApprovalRequest
	Schema                  string  `json:"schema"`
	Image                   *string `json:"image"`
	Network                 *string `json:"network"`
	RequestedComposeProject *string `json:"requested_compose_project"`
	RequestedStack          *string `json:"requested_stack"`
	Runtime                 *string `json:"runtime"`
	Standing                *string `json:"standing"`
}

func parseApprovalRequest(doc string) (*ApprovalRequest, error) {
	var w wireApprovalRequest
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return nil, usageError("not an approval request: %v", err)
	}
	if w.Schema != SchemaApprovalRequest {
		return nil, usageError("not an approval request: schema %q", w.Schema)
	}
	a := w.ApprovalRequest
	a.Image = deref(w.Image)
	a.Network = deref(w.Network)
	a.RequestedComposeProject = deref(w.RequestedComposeProject)
	a.RequestedStack = deref(w.RequestedStack)
	a.Runtime = deref(w.Runtime)
	a.standingVia = deref(w.Standing)
	a.raw = doc
	return &a, nil
}

// Decision is how the operator approves a plan.
type Decision string

const (
	// DecisionOnce approves this launch only.
	DecisionOnce Decision = "once"
	// DecisionTrust approves and records the project as trusted in
	// $ODEK_HOME/project_sandbox_approvals.json (until its settings change).
	DecisionTrust Decision = "trust"
)

// Approval is an operator's approval of a plan ("odek.approval/1"), passed
// to Launch.
type Approval struct {
	// Key is the approved key.
	Key string `json:"key"`
	// NetworkIDs are the full IDs of the project-requested networks as
	// approved; launch refuses if they changed (SPEC §7.4).
	NetworkIDs []string `json:"network_ids"`
	// Via is "once", "trust", "stored" or "env".
	Via string `json:"via"`

	raw string
}

// JSON is the approval document as libodek produced it.
func (a *Approval) JSON() []byte { return []byte(a.raw) }

// ParseApproval reads an approval document (e.g. one kept from Approval.JSON).
func ParseApproval(doc []byte) (*Approval, error) {
	var w wireApproval
	if err := json.Unmarshal(doc, &w); err != nil {
		return nil, usageError("not an approval document: %v", err)
	}
	if w.Schema != SchemaApproval {
		return nil, usageError("not an approval document: schema %q", w.Schema)
	}
	a := w.Approval
	a.raw = string(doc)
	return &a, nil
}

// Peer is another container on an attached network.
type Peer struct {
	// Names it answers to (Compose service first); each passed SPEC §9.3.
	Names []string `json:"names"`
}

// EnvNetwork is one attached network as the agent sees it.
type EnvNetwork struct {
	// Name is "" when it failed the SPEC §9.3 name rule (omitted).
	Name string `json:"-"`
	// Internal is Docker's Internal flag.
	Internal bool `json:"internal"`
	// Peers are the other containers with at least one listed name.
	Peers []Peer `json:"peers"`
	// Stack names the Docker Swarm stack of a stack's network (its peers
	// are the stack's services with a task on the engine's node), nil
	// otherwise (SPEC §9.1).
	Stack *string `json:"stack"`
}

// UnmarshalJSON reads a network whose name may be null.
func (n *EnvNetwork) UnmarshalJSON(b []byte) error {
	type plain EnvNetwork
	var w struct {
		plain
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*n = EnvNetwork(w.plain)
	n.Name = deref(w.Name)
	return nil
}

// Workspace is the /workspace mount.
type Workspace struct {
	// Path is /workspace, or the host directory without a sandbox.
	Path string `json:"path"`
	// Readonly tells whether it is mounted read-only.
	Readonly bool `json:"readonly"`
	// Copied tells whether it is a copy of the working directory
	// (sandbox_workspace "copy", SPEC §6.1 "workspace"), not the checkout.
	Copied bool `json:"copied"`
}

// Environment is the structured description of a sandbox for the agent
// (SPEC §9.1, "odek.environment/1").
type Environment struct {
	// Isolation is IsolationContainer, IsolationFallback or IsolationOff.
	Isolation string `json:"isolation"`
	// FallbackReason says why there is no sandbox (fallback only).
	FallbackReason string `json:"-"`
	// Sandbox is the sandbox name.
	Sandbox string `json:"sandbox"`
	// Workspace is the project directory mount.
	Workspace Workspace `json:"workspace"`
	// Network is the network summary the container actually has ("" on
	// the host).
	Network string `json:"-"`
	// Internet tells whether the internet is reachable (on the host: assumed).
	Internet bool `json:"internet"`
	// DNSForwarding says, for a sandbox with no route out, whether the
	// engine's forwarding of DNS lookups to the host's resolver is closed
	// ("closed_by_odek", "engine_refuses") or may carry them out
	// ("may_forward", CVE-2024-29018); "" otherwise (SPEC §4.6).
	DNSForwarding string `json:"dns_forwarding"`
	// Networks are the attached networks (at most 8 listed).
	Networks []EnvNetwork `json:"networks"`
	// OmittedNetworks counts networks over the cap.
	OmittedNetworks int `json:"omitted_networks"`
	// OmittedNames counts names dropped by SPEC §9.3 or over the cap.
	OmittedNames int `json:"omitted_names"`
	// PidsLimit is --pids-limit (0 on the host).
	PidsLimit int64 `json:"-"`
	// MemoryBytes is the memory limit in bytes (0: none).
	MemoryBytes int64 `json:"-"`
	// CPUs is the CPU limit as written ("" when none).
	CPUs string `json:"-"`
	// User is the user commands run as (uid:gid or a name; "" for the
	// image's own), SPEC §6.1 "user".
	User string `json:"-"`
	// Account is the account odek gave that user (nil for root, a name, or
	// the image's user).
	Account *Account `json:"account"`
	// Supervisor says whether commands run through odek's supervisor, and
	// if not why (nil on the host).
	Supervisor *Supervisor `json:"supervisor"`
	// Runtime is the OCI runtime the container runs with ("runc",
	// "runsc", …; "" on the host or when the engine does not say).
	Runtime string `json:"-"`
	// Tools are the notable tools (bash, git, curl, python3, node, psql,
	// redis-cli, …) the image has in /usr/local/bin, /usr/bin or /bin, as
	// odek's image probe found them; nil when not known.
	Tools []string `json:"tools"`

	raw string
}

// Supervisor says whether a sandbox's commands run through odek's
// supervisor; when not, why, and which guarantees then do not hold
// (docs/SANDBOXING.md, "The supervisor").
type Supervisor struct {
	// On is true when commands run through the supervisor.
	On bool `json:"on"`
	// Reason says why it is off (nil when on).
	Reason *string `json:"reason"`
	// NotHeld names the guarantees that do not hold while it is off.
	NotHeld []string `json:"not_held"`
}

// JSON is the environment document as libodek produced it.
func (e *Environment) JSON() []byte { return []byte(e.raw) }

// wireEnvironment is "odek.environment/1" as read.
type wireEnvironment struct {
	Environment
	Schema         string  `json:"schema"`
	FallbackReason *string `json:"fallback_reason"`
	Network        *string `json:"network"`
	PidsLimit      *int64  `json:"pids_limit"`
	MemoryBytes    *int64  `json:"memory_bytes"`
	CPUs           *string `json:"cpus"`
	User           *string `json:"user"`
	Runtime        *string `json:"runtime"`
}

func parseEnvironment(doc string) (*Environment, error) {
	var w wireEnvironment
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return nil, fmt.Errorf("odek: unexpected environment document: %w", err)
	}
	e := w.Environment
	e.FallbackReason = deref(w.FallbackReason)
	e.Network = deref(w.Network)
	if w.PidsLimit != nil {
		e.PidsLimit = *w.PidsLimit
	}
	if w.MemoryBytes != nil {
		e.MemoryBytes = *w.MemoryBytes
	}
	e.CPUs = deref(w.CPUs)
	e.User = deref(w.User)
	e.Runtime = deref(w.Runtime)
	e.raw = doc
	return &e, nil
}

// Description is what Describe returns (SPEC §9): the structured environment,
// the "Execution environment" block for the agent's system prompt, and the
// short description for its shell tool. Prompt and Tool carry a fresh nonce
// per call.
type Description struct {
	Environment *Environment
	// Prompt is the "## Execution environment" block (Markdown).
	Prompt string
	// Tool is the shell tool's description.
	Tool string
}

// NarrowRequest is what a sub-agent asks for (SPEC §8,
// "odek.narrow-request/1"): every field is optional and unset inherits the
// parent; anything that would widen is refused (ErrNarrow).
type NarrowRequest struct {
	// Networks keeps a subset of the parent's networks, by name or full ID
	// (nil: all of them; empty non-nil: none).
	Networks []string `json:"networks,omitempty"`
	// ComposeProject keeps only the parent's networks of this project.
	ComposeProject string `json:"compose_project,omitempty"`
	// NetworkMode may go from "bridge" to "none", never back. "none"
	// without Networks or ComposeProject leaves the child no network at
	// all (the parent's attached networks are dropped too); with them,
	// exactly those.
	NetworkMode string `json:"network_mode,omitempty"`
	// PidsLimit may only go down (0: inherit).
	PidsLimit int64 `json:"pids_limit,omitempty"`
	// Memory may only go down, e.g. "256m".
	Memory string `json:"memory,omitempty"`
	// CPUs may only go down, e.g. "0.5".
	CPUs string `json:"cpus,omitempty"`
	// Readonly may only be turned on.
	Readonly bool `json:"readonly,omitempty"`
	// Image must equal the parent's image reference when given.
	Image string `json:"image,omitempty"`
	// Runtime must name the parent's OCI runtime when given (a sub-agent
	// keeps its parent's).
	Runtime string `json:"runtime,omitempty"`
}

// wireNarrowRequest is "odek.narrow-request/1" as sent: a nil Networks is
// left out (inherit), an empty one sent (keep none).
type wireNarrowRequest struct {
	Schema         string    `json:"schema"`
	Networks       *[]string `json:"networks,omitempty"`
	ComposeProject string    `json:"compose_project,omitempty"`
	NetworkMode    string    `json:"network_mode,omitempty"`
	PidsLimit      int64     `json:"pids_limit,omitempty"`
	Memory         string    `json:"memory,omitempty"`
	CPUs           string    `json:"cpus,omitempty"`
	Readonly       bool      `json:"readonly,omitempty"`
	Image          string    `json:"image,omitempty"`
	Runtime        string    `json:"runtime,omitempty"`
}

func (r NarrowRequest) encode() string {
	w := wireNarrowRequest{
		Schema: "odek.narrow-request/1", ComposeProject: r.ComposeProject,
		NetworkMode: r.NetworkMode, PidsLimit: r.PidsLimit, Memory: r.Memory,
		CPUs: r.CPUs, Readonly: r.Readonly, Image: r.Image, Runtime: r.Runtime,
	}
	if r.Networks != nil {
		w.Networks = &r.Networks
	}
	return mustJSON(w)
}

// ViewImage is the image in a config view.
type ViewImage struct {
	// Reference is the reference as configured.
	Reference string `json:"reference"`
	// Digest is the pinned digest ("" when none).
	Digest string `json:"-"`
	// ID is the local image ID when present on the daemon ("" otherwise).
	ID string `json:"-"`
	// RepoDigests are the local RepoDigests.
	RepoDigests []string `json:"repo_digests"`
	// Origin is "explicit", "dockerfile" or "pinned_default".
	Origin string `json:"origin"`
	// WhenMissing says, when a container is planned and the image is not
	// present locally, what launch does about it and what a failure means
	// ("" when the image is present).
	WhenMissing string `json:"when_missing"`
}

// ViewNetwork is one network in a config view.
type ViewNetwork struct {
	// Name is sanitised ("" when it fails SPEC §9.3).
	Name string
	// ID is the full network ID.
	ID string
	// Internal is Docker's Internal flag.
	Internal bool
	// ComposeProject is the Compose project label, sanitised.
	ComposeProject string
}

// ConfigView is the settings a plan actually applies, with each value's
// source (SPEC §10.4, "odek.config-view/1").
type ConfigView struct {
	Mode           string
	Isolation      string
	FallbackReason string
	// FallbackAllowed is false when every setup failure is a refusal
	// (explicit mode, ODEK_REQUIRE_SANDBOX, or networks attached).
	FallbackAllowed bool
	Endpoint        string
	// EndpointOwner is who owns the endpoint's Unix socket, "uid 0 (root)"
	// ("" for TCP); another user's socket also has a warning (SPEC §6.2).
	EndpointOwner string
	APIVersion    string
	Image         ViewImage
	NetworkMode   string
	// Network is the SPEC §4.2 summary.
	Network  string
	Internet bool
	Networks []ViewNetwork
	// PidsLimit is the processes limit.
	PidsLimit int64
	// Init is --init (always on).
	Init bool
	// Tmpfs is the /tmp tmpfs options.
	Tmpfs string
	// MemoryBytes is the memory limit in bytes (0: none).
	MemoryBytes int64
	CPUs        string
	// User is the user commands run as ("" for the image's own).
	User string
	// UserChoice says why (UserOperator, UserOperatorIDs, …).
	UserChoice string
	// Account is the account odek gives a non-root numeric user.
	Account *Account
	// Runtime is the OCI runtime asked for ("" for the engine's default,
	// DefaultRuntime when the engine said).
	Runtime        string
	DefaultRuntime string
	Readonly       bool
	Workdir        string
	// EnvKeys are the container's env keys (values are never shown).
	EnvKeys  []string
	Volumes  []string
	Masks    []string
	Sources  map[string]Source
	Warnings []Warning
	// Supervisor says whether a sandbox launched now would have odek's
	// supervisor, and if not why (nil without a container or an engine).
	Supervisor *Supervisor

	raw string
}

// JSON is the config view document as libodek produced it.
func (v *ConfigView) JSON() []byte { return []byte(v.raw) }

// wireConfigView is "odek.config-view/1" as read.
type wireConfigView struct {
	Schema          string  `json:"schema"`
	Mode            string  `json:"mode"`
	Isolation       string  `json:"isolation"`
	FallbackReason  *string `json:"fallback_reason"`
	FallbackAllowed bool    `json:"fallback_allowed"`
	Endpoint        *string `json:"endpoint"`
	EndpointOwner   *string `json:"endpoint_owner"`
	APIVersion      *string `json:"api_version"`
	Image           struct {
		ViewImage
		Digest *string `json:"digest"`
		ID     *string `json:"id"`
	} `json:"image"`
	NetworkMode string `json:"network_mode"`
	Network     string `json:"network"`
	Internet    bool   `json:"internet"`
	Networks    []struct {
		Name           *string `json:"name"`
		ID             string  `json:"id"`
		Internal       bool    `json:"internal"`
		ComposeProject *string `json:"compose_project"`
	} `json:"networks"`
	PidsLimit   int64             `json:"pids_limit"`
	Init        bool              `json:"init"`
	Tmpfs       string            `json:"tmpfs"`
	MemoryBytes *int64            `json:"memory_bytes"`
	CPUs        *string           `json:"cpus"`
	User        *string           `json:"user"`
	UserChoice  *string           `json:"user_choice"`
	Account     *Account          `json:"account"`
	Runtime     *string           `json:"runtime"`
	DefaultRt   *string           `json:"default_runtime"`
	Readonly    bool              `json:"readonly"`
	Workdir     string            `json:"workdir"`
	EnvKeys     []string          `json:"env_keys"`
	Volumes     []string          `json:"volumes"`
	Masks       []string          `json:"masks"`
	Sources     map[string]Source `json:"sources"`
	Warnings    []Warning         `json:"warnings"`
	Supervisor  *Supervisor       `json:"supervisor"`
}

func parseConfigView(doc string) (*ConfigView, error) {
	var w wireConfigView
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return nil, fmt.Errorf("odek: unexpected config view document: %w", err)
	}
	v := &ConfigView{
		Mode: w.Mode, Isolation: w.Isolation, FallbackReason: deref(w.FallbackReason),
		FallbackAllowed: w.FallbackAllowed,
		Endpoint:        deref(w.Endpoint), EndpointOwner: deref(w.EndpointOwner),
		APIVersion:  deref(w.APIVersion),
		Image:       w.Image.ViewImage,
		NetworkMode: w.NetworkMode, Network: w.Network, Internet: w.Internet,
		PidsLimit: w.PidsLimit, Init: w.Init, Tmpfs: w.Tmpfs,
		CPUs: deref(w.CPUs), User: deref(w.User), UserChoice: deref(w.UserChoice),
		Account: w.Account, Runtime: deref(w.Runtime), DefaultRuntime: deref(w.DefaultRt),
		Readonly: w.Readonly, Workdir: w.Workdir,
		EnvKeys: w.EnvKeys, Volumes: w.Volumes, Masks: w.Masks, Sources: w.Sources,
		Warnings: w.Warnings, Supervisor: w.Supervisor, raw: doc,
	}
	v.Image.Digest = deref(w.Image.Digest)
	v.Image.ID = deref(w.Image.ID)
	if w.MemoryBytes != nil {
		v.MemoryBytes = *w.MemoryBytes
	}
	for _, n := range w.Networks {
		v.Networks = append(v.Networks, ViewNetwork{
			Name: deref(n.Name), ID: n.ID, Internal: n.Internal, ComposeProject: deref(n.ComposeProject),
		})
	}
	return v, nil
}

// wireApproval is "odek.approval/1" as read.
type wireApproval struct {
	Approval
	Schema string `json:"schema"`
}

// wireClientOptions is "odek.client-options/1" as sent.
type wireClientOptions struct {
	Schema         string `json:"schema"`
	DockerHost     string `json:"docker_host,omitempty"`
	DockerCertPath string `json:"docker_cert_path,omitempty"`
	Engine         string `json:"engine,omitempty"`
	// SandboxPool is sent only when set (0 is the default: no pool).
	SandboxPool uint8 `json:"sandbox_pool,omitempty"`
}

// wireResolveRequest is "odek.resolve-request/1" as sent. A nil Env is
// null (the process environment); AllowHostFallback is sent only when set,
// so libodek decides the default (a sandbox is required).
type wireResolveRequest struct {
	Schema            string            `json:"schema"`
	Workdir           string            `json:"workdir"`
	Settings          map[string]any    `json:"settings,omitempty"`
	ReadUserConfig    *bool             `json:"read_user_config,omitempty"`
	ReadProjectConfig *bool             `json:"read_project_config,omitempty"`
	Env               map[string]string `json:"env"`
	AllowHostFallback bool              `json:"allow_host_fallback,omitempty"`
}

// wireExecRequest is "odek.exec-request/1" as sent.
type wireExecRequest struct {
	Schema      string            `json:"schema"`
	Argv        *[]string         `json:"argv,omitempty"`
	Shell       *string           `json:"shell,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	TimeoutSecs *float64          `json:"timeout_secs,omitempty"`
	Workdir     *string           `json:"workdir,omitempty"`
}

// HostFileChange is a file host tools run (a git hook, .git/config,
// .envrc, .vscode/tasks.json, a Makefile, package.json,
// .pre-commit-config.yaml) that changed while the sandbox lived.
type HostFileChange struct {
	// Path is relative to the working directory, e.g.
	// ".git/hooks/pre-commit". The sandbox chose the name: escape control
	// characters before printing it to a terminal.
	Path string `json:"path"`
	// Change says what changed, e.g. "created, executable", "content
	// changed", "mode 0644 → 0755, now executable".
	Change string `json:"change"`
	// Kinds is the same as data: "created", "deleted", "content", "mode",
	// "symlink_target", "kind", "unreadable", "too_many_entries".
	Kinds []string `json:"kinds"`
}

// CloseResult is what closing a sandbox found ("odek.close-result/1"): the
// files host tools run that it changed, compared once its container was
// removed against what its launch recorded. Review them before running git
// or make in the working directory.
type CloseResult struct {
	// Name is the sandbox name.
	Name string
	// ChangedHostFiles is empty when none changed, on the host and for a
	// read-only workspace.
	ChangedHostFiles []HostFileChange
	// HostFilesUnchecked says why they could not be compared ("" when they
	// were).
	HostFilesUnchecked string
	// Message is the report as one line to show (names escaped), "" when
	// there is nothing to say.
	Message string
	// CopiedBack is, for a copied workspace, what its copy-back before
	// removal wrote and left out; nil for a bind-mounted or read-only one.
	CopiedBack *CopiedBack
}

// CopiedBack is what a copied workspace's copy-back wrote into the working
// directory and left out (docs/SANDBOXING.md "A copied workspace").
type CopiedBack struct {
	// Written lists the files and symlinks written, relative to the
	// working directory, in archive order.
	Written []string `json:"written"`
	// Skipped lists each entry left out, with why.
	Skipped []SkippedEntry `json:"skipped"`
}

// SkippedEntry is one entry a copy-back left out.
type SkippedEntry struct {
	// Path is relative to the working directory (foreign text: escape it
	// before printing it to a terminal).
	Path string `json:"path"`
	// Reason says why, e.g. "a symlink to /etc/passwd, outside the
	// workspace".
	Reason string `json:"reason"`
}

// wireCloseResult is "odek.close-result/1" as read.
type wireCloseResult struct {
	Schema             string           `json:"schema"`
	Name               string           `json:"name"`
	ChangedHostFiles   []HostFileChange `json:"changed_host_files"`
	HostFilesUnchecked *string          `json:"host_files_unchecked"`
	Message            *string          `json:"message"`
	CopiedBack         *CopiedBack      `json:"copied_back"`
}

// wireExecResult is "odek.exec-result/1" as read.
type wireExecResult struct {
	Schema          string `json:"schema"`
	ExitCode        int    `json:"exit_code"`
	TimedOut        bool   `json:"timed_out"`
	Killed          bool   `json:"killed"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
}

// wireSandboxInfo is "odek.sandbox-info/1" as read (the plan is parsed
// on its own).
type wireSandboxInfo struct {
	Schema      string          `json:"schema"`
	Name        string          `json:"name"`
	ContainerID *string         `json:"container_id"`
	Isolation   Isolation       `json:"isolation"`
	StartupLine string          `json:"startup_line"`
	Warnings    []Warning       `json:"warnings"`
	Plan        json.RawMessage `json:"plan"`
}

func mustJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings, numbers, booleans and slices are encoded.
		panic("odek: cannot encode request: " + err.Error())
	}
	return string(b)
}
