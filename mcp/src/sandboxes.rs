//! The sandboxes one server process launched: opaque ids → [`Sandbox`],
//! the conversation's default, launches in flight, the cap on their number
//! ([`crate::limits`]), and removal of them all when the server stops.
//!
//! Every launch is cancellable ([`LaunchOptions::cancel`], the core's
//! `LaunchGuard` removes what it created): the client's `notifications/cancelled`
//! for the tool call, or the server stopping, ends it and removes what it
//! created, so a cancelled launch leaves no container, no table entry and
//! no slot taken.
//!
//! An id is `sbx-` and 16 random hex digits, drawn by this process; it is
//! never a container name, so a caller cannot reach a sandbox this process
//! did not launch (another server's id, or any container's name, is
//! unknown here).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use odek_core::advice::Surface;
use odek_core::approval::{Approval, ApprovalError, ApprovalRequest, Decision, Via};
use odek_core::approve::{Asker, Decided};
use odek_core::audit::Call;
use odek_core::cancel::CancellationToken;
use odek_core::config::ConfigInputs;
use odek_core::host_files::Report;
use odek_core::launch::{new_launch_id, new_sandbox_name};
use odek_core::pool::{ClaimedFrom, Pool};
use odek_core::{Client, Error, Isolation, LaunchOptions, Plan, Reporter, Sandbox};

use crate::caller::{Asked, Caller, Pending};
use crate::limits::{Limits, Slot, Slots};
use crate::StderrReporter;

/// Label carrying the MCP sandbox id on the container (for people reading
/// `docker ps`; odek never trusts it).
pub const MCP_ID_LABEL: &str = "dev.odek.mcp-id";

/// How long shutdown waits for cancelled launches to remove what they
/// created: the core's launch waits up to 10 s for a create call already
/// on its way, then removes the container.
const INFLIGHT_SETTLE: Duration = Duration::from_secs(30);

/// One launched sandbox and where it came from.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) sandbox: Arc<Sandbox>,
    pub(crate) parent: Option<String>,
    /// Its place under the cap, given back when the entry leaves the table.
    _slot: Arc<Slot>,
}

/// Why a sandbox can be gone, for the texts of [`Sandboxes::get`].
const GONE_WHY: &str =
    "its container was removed or stopped outside odek, or the Docker daemon restarted";

/// A sandbox a tool call acts in: its id, the sandbox, and, when the call
/// relaunched the conversation's sandbox, the note saying so.
pub(crate) struct Target {
    pub(crate) id: String,
    pub(crate) sandbox: Arc<Sandbox>,
    pub(crate) relaunched: Option<String>,
    /// Set when networks the sandbox reaches are gone (their Compose
    /// project is down, [`odek_core::link::Relinked::down_note`]): the call
    /// goes on, and its result says so.
    pub(crate) networks_down: Option<String>,
}

/// An error's message as an MCP client reads it: its advice in MCP's
/// words (settings, tools), never a command-line flag.
pub(crate) fn mcp_words(e: &Error) -> String {
    e.render(odek_core::advice::Surface::Mcp)
}

/// A refusal shown to the client as a tool error: the text names the cause
/// and the fix.
#[derive(Debug)]
pub(crate) struct Refusal(pub(crate) String);

impl From<Error> for Refusal {
    /// A launch's refusal. odek mcp never runs a command on the host; that
    /// no container was left is said only when the error's removal says so
    /// (the error's own text names what may be left, and the fix).
    fn from(e: Error) -> Refusal {
        let left = match e.removal() {
            None | Some(odek_core::error::Removal::Removed) => {
                "; nothing ran on the host and no container was left"
            }
            Some(_) => "; nothing ran on the host (see above for the container)",
        };
        Refusal(format!(
            "{}\n(odek refused: failure class {}{left})",
            mcp_words(&e),
            e.reported_class()
        ))
    }
}

impl Refusal {
    /// The server's sandbox cap is reached ([`Slots::take`]).
    pub(crate) fn cap(why: String) -> Refusal {
        Refusal(why)
    }

    /// An error of a call on a running sandbox (a command, which may have
    /// partly run, a background process, a describe): the error's own text
    /// says what ran; nothing is said of containers (the sandbox stays).
    /// A file tool's refusal ([`Error::File`]: a path that does not exist,
    /// a directory, permission denied, …) names its kind instead of a
    /// failure class — `(odek: file error not_found)` — as the C ABI's
    /// result does: it is the path's matter, not the sandbox's setup
    /// (`config`).
    pub(crate) fn during_exec(e: Error) -> Refusal {
        if let Error::File(f) = &e {
            let kind = serde_json::to_value(f.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "other".to_string());
            return Refusal(format!("{}\n(odek: file error {kind})", mcp_words(&e)));
        }
        Refusal(format!(
            "{}\n(odek: failure class {})",
            mcp_words(&e),
            e.reported_class()
        ))
    }
}

/// The server's sandboxes.
pub(crate) struct Sandboxes {
    odek: Client,
    inputs: ConfigInputs,
    table: Mutex<BTreeMap<String, Entry>>,
    /// The id of the conversation's sandbox; the async lock is held while
    /// it launches, so two first calls launch one sandbox.
    default: tokio::sync::Mutex<Option<String>>,
    /// The cap on the number of sandboxes.
    slots: Slots,
    /// Launches in flight (each removes what it created when cancelled).
    inflight: tokio::sync::watch::Sender<usize>,
    /// Fired at shutdown: cancels every launch in flight.
    closing: CancellationToken,
    closed: AtomicBool,
    /// The approval key (and env-template binding) of the plan resolved when
    /// the server started, if it needed approval: the only settings that
    /// `ODEK_APPROVE_PROJECT_SANDBOX=1` approves in this server. The agent
    /// can rewrite `./odek.json` through `exec`; a standing approval from
    /// the environment must not approve what it wrote (SPEC §7).
    pinned: Mutex<Option<(String, Option<String>)>>,
    /// The warm pool (`sandbox_pool`, 0 = off): every launch claims from
    /// it, and it refills for the plans claimed (docs/MCP.md).
    pool: Pool,
    /// Approval questions asked through an `InputRequiredResult` whose
    /// retry has not come ([`crate::caller::Round`]).
    pending: Arc<Pending>,
}

fn new_id() -> String {
    format!("sbx-{}", &new_launch_id()[..16])
}

impl Sandboxes {
    /// Sandboxes launched with `odek` from `inputs` (whose sandbox mode the
    /// caller has forced on), at most `limits.max_sandboxes` at once.
    /// The warm pool keeps `sandbox_pool` ready sandboxes per plan (read
    /// from `inputs`; a setting that does not load keeps none, and every
    /// launch then reports the error).
    pub(crate) fn new(odek: Client, inputs: ConfigInputs, limits: Limits) -> Sandboxes {
        let size = odek_core::config::load(&inputs)
            .map(|s| usize::try_from(s.pool.value).unwrap_or(0))
            .unwrap_or(0);
        Sandboxes {
            pool: Pool::on_ready(odek.clone(), size, |sb| {
                errln!(
                    "odek: warm pool: sandbox {} ready",
                    odek_core::text::shown(&sb.name)
                );
            }),
            odek,
            inputs,
            table: Mutex::new(BTreeMap::new()),
            default: tokio::sync::Mutex::new(None),
            slots: Slots::new(limits),
            inflight: tokio::sync::watch::Sender::new(0),
            closing: CancellationToken::new(),
            closed: AtomicBool::new(false),
            pinned: Mutex::new(None),
            pending: Arc::default(),
        }
    }

    /// The approval questions waiting for a client's retry.
    pub(crate) fn pending(&self) -> &Arc<Pending> {
        &self.pending
    }

    /// A place under the cap for one more sandbox, taken before anything
    /// is resolved, asked or created. Errors: the cap is reached.
    pub(crate) fn reserve(&self) -> Result<Slot, Refusal> {
        self.slots.take().map_err(Refusal::cap)
    }

    /// True when `key` (with `binding`) is the approval the server started
    /// with ([`Sandboxes::pin`]).
    fn is_pinned(&self, key: &str, binding: Option<&str>) -> bool {
        self.pinned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|(k, b)| k == key && b.as_deref() == binding)
    }

    /// The client.
    pub(crate) fn odek(&self) -> &Client {
        &self.odek
    }

    fn table(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the plan resolved at start-up: its approval request (if any)
    /// is what `ODEK_APPROVE_PROJECT_SANDBOX=1` approves from now on.
    pub(crate) fn pin(&self, plan: &Plan) {
        if let Some(req) = &plan.approval {
            *self
                .pinned
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some((req.key.clone(), req.env_binding.clone()));
        }
    }

    /// Starts filling the warm pool for `plan` (the plan resolved at
    /// start-up) when it needs no approval or has a standing one (a stored
    /// trust, or `ODEK_APPROVE_PROJECT_SANDBOX=1` for the request the
    /// server started with); otherwise the pool fills after the first
    /// approved launch.
    pub(crate) fn warm(&self, plan: &Plan) {
        if self.pool.size() == 0 || plan.isolation != Isolation::Container {
            return;
        }
        match &plan.approval {
            None => self.pool.fill(plan, None),
            Some(req) => {
                if let Some(a) = req.standing() {
                    self.pool.fill(plan, Some(&a));
                }
            }
        }
    }

    /// Resolves the plan for a new sandbox (SPEC §3–§5), fail-closed.
    pub(crate) async fn resolve(&self) -> Result<Plan, Error> {
        self.odek.resolve(&self.inputs, &StderrReporter).await
    }

    /// The sandbox with this id, or the default one (launched now if need
    /// be). A default sandbox that is gone ([`Client::is_gone`]: removed
    /// outside odek, stopped, lost with a daemon restart) is relaunched —
    /// resolved, approved and checked as any launch — and
    /// [`Target::relaunched`] says so; a named one that is gone is an error
    /// naming `sandbox_down` and `sandbox_up`. Errors: an unknown id; a
    /// vanished named sandbox; the default's launch refused.
    ///
    /// Before the target is handed out, the services of its networks are
    /// connected ([`odek_core::Client::relink`], SPEC §4.4: a Compose
    /// project recreated with `down` and `up` since the last call); new IDs
    /// of networks the project's `odek.json` asked for are approved by the
    /// user through elicitation as a launch's settings are, else the call
    /// is refused.
    pub(crate) async fn get(&self, id: Option<&str>, caller: &Caller) -> Result<Target, Refusal> {
        let mut target = self.get_unlinked(id, caller).await?;
        let asker = Elicit {
            sandboxes: self,
            caller,
        };
        let relinked = self.odek.relink(&target.sandbox, &asker).await?;
        for line in relinked.notes(&target.sandbox.name) {
            errln!("{line}");
        }
        target.networks_down = relinked
            .down_note(&target.sandbox.name)
            .map(|n| n.trim_start_matches("odek: ").to_string());
        Ok(target)
    }

    async fn get_unlinked(&self, id: Option<&str>, caller: &Caller) -> Result<Target, Refusal> {
        let Some(id) = id else {
            return self.default_sandbox(caller).await;
        };
        let sandbox = self
            .table()
            .get(id)
            .map(|e| e.sandbox.clone())
            .ok_or_else(|| unknown(id))?;
        if self.odek.is_gone(&sandbox).await {
            return Err(Refusal(format!(
                "sandbox {id} (container {}) is gone: {GONE_WHY}. Nothing ran. Call sandbox_down with this id to forget it and sandbox_up for a new one (background processes, installed packages and files outside /workspace are lost; /workspace is the developer's checkout and kept)",
                sandbox.name
            )));
        }
        Ok(Target {
            id: id.to_string(),
            sandbox,
            relaunched: None,
            networks_down: None,
        })
    }

    async fn default_sandbox(&self, caller: &Caller) -> Result<Target, Refusal> {
        let mut slot = self.default.lock().await;
        let mut gone = None;
        if let Some(id) = slot.clone() {
            let live = self.table().get(&id).map(|e| e.sandbox.clone());
            if let Some(sandbox) = live {
                if !self.odek.is_gone(&sandbox).await {
                    return Ok(Target {
                        id,
                        sandbox,
                        relaunched: None,
                        networks_down: None,
                    });
                }
                // Gone: forget it (its place under the cap comes back) and
                // clean up what the engine may still hold of it.
                // Compared now: the relaunch records the checkout afresh, so
                // what the old sandbox changed of the files host tools run
                // would otherwise never be named.
                let old = self.table().remove(&id);
                let mut changed = String::new();
                if let Some(old) = old {
                    if let Ok(report) = self.odek.close(&old.sandbox).await {
                        if let Some(line) = report.line() {
                            errln!("odek: sandbox {} (MCP id {id}): {line}", old.sandbox.name);
                            changed = format!(" Before it went, {line}; tell the user.");
                        }
                    }
                }
                *slot = None;
                gone = Some((format!("{id} (container {})", sandbox.name), changed));
            }
        }
        let relaunch = |r: Refusal| {
            match &gone {
            Some((old, changed)) => Refusal(format!(
                "the conversation's sandbox {old} is gone ({GONE_WHY}) and relaunching it was refused:{changed}\n{}",
                r.0
            )),
            None => r,
        }
        };
        let place = self.reserve().map_err(relaunch)?;
        let plan = self.resolve().await.map_err(|e| relaunch(e.into()))?;
        let (id, sandbox) = self
            .launch(&plan, None, caller, place)
            .await
            .map_err(relaunch)?;
        *slot = Some(id.clone());
        let relaunched = gone.map(|(old, changed)| {
            errln!("odek: the conversation's sandbox {old} was gone; launched {id} in its place");
            format!(
                "The conversation's sandbox {old} was gone ({GONE_WHY}); odek launched {id} (container {}) in its place, resolved and approved as any launch. Lost with the old one: background processes, installed packages and files outside /workspace; /workspace is the developer's checkout and kept.{changed}",
                sandbox.name
            )
        });
        Ok(Target {
            id,
            sandbox,
            relaunched,
            networks_down: None,
        })
    }

    /// Resolves, approves and launches a new sandbox.
    pub(crate) async fn up(&self, caller: &Caller) -> Result<(String, Arc<Sandbox>), Refusal> {
        let place = self.reserve()?;
        let plan = self.resolve().await?;
        self.launch(&plan, None, caller, place).await
    }

    /// Launches `plan` (approved by a standing approval when it needs one,
    /// else by the user answering the caller's client through MCP
    /// elicitation) and records it under a new id. `parent` is `(id,
    /// container name)` of the sandbox a narrowed plan came from; `place`
    /// its slot under the cap ([`Sandboxes::reserve`]). While the launch
    /// runs, the caller gets progress notifications if it asked; the
    /// caller's cancellation stops it and removes what it created.
    pub(crate) async fn launch(
        &self,
        plan: &Plan,
        parent: Option<(&str, &str)>,
        caller: &Caller,
        place: Slot,
    ) -> Result<(String, Arc<Sandbox>), Refusal> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Refusal(
                "the odek MCP server is shutting down; no sandbox is launched".into(),
            ));
        }
        if plan.isolation != Isolation::Container {
            // Never reached with the sandbox forced on; refuse rather than
            // run anything on the host.
            return Err(Refusal(
                "odek mcp runs commands only in a sandbox, and this configuration has none; remove --no-sandbox/ODEK_SANDBOX=false and make the Docker daemon reachable".into(),
            ));
        }
        let asker = Elicit {
            sandboxes: self,
            caller,
        };
        let approval = match self.odek.decide_approval(plan, &asker).await? {
            Decided::Launch(a) => {
                if let (Some(a), Some(req)) = (&a, &plan.approval) {
                    match a.via {
                        Via::Env => errln!(
                            "odek: project settings of {} approved by {}=1",
                            odek_core::text::shown(&req.config),
                            odek_core::config::APPROVE_ENV
                        ),
                        Via::Once | Via::Trust => errln!(
                            "odek: project settings of {} approved by the user through the MCP client ({})",
                            odek_core::text::shown(&req.config),
                            a.via
                        ),
                        Via::Stored => {}
                    }
                }
                a
            }
            Decided::Unasked { env_refused } => {
                let Some(req) = &plan.approval else {
                    unreachable!("a plan without a request is never refused approval")
                };
                if env_refused {
                    return Err(Refusal(format!(
                        "{} asks for sandbox settings ({}) other than those it asked for when this MCP server started, and {}=1 approves only those (the agent can rewrite the file). Nothing was launched. To allow the new settings, the operator reviews and trusts them with `{}` in a terminal (answer t; this server then launches them without asking), or reviews them and restarts the server.\n\n{}",
                        odek_core::text::shown(&req.config),
                        req.knobs.join(", "),
                        odek_core::config::APPROVE_ENV,
                        odek_core::approval::approve_command(&req.project_dir),
                        req.render_card()
                    )));
                }
                let e = Error::from(ApprovalError::NonInteractive {
                    config: req.config.clone(),
                    knobs: req.knobs.join(", "),
                    project_dir: req.project_dir.clone(),
                });
                let note = req
                    .asks_again_because()
                    .map(|why| format!("\nNote: {why}."))
                    .unwrap_or_default();
                return Err(Refusal(format!(
                    "{}\n(odek refused: failure class {}; the MCP server cannot ask at a terminal. Nothing was launched.){note}\n\n{}",
                    mcp_words(&e),
                    e.reported_class(),
                    req.render_card()
                )));
            }
        };
        self.launch_approved(plan, parent, approval, caller, place)
            .await
    }

    /// Launches an approved `plan` (see [`Sandboxes::launch`]) with the
    /// core's cancellable launch, stopped by the caller's cancellation or
    /// the server's shutdown.
    async fn launch_approved(
        &self,
        plan: &Plan,
        parent: Option<(&str, &str)>,
        approval: Option<Approval>,
        caller: &Caller,
        place: Slot,
    ) -> Result<(String, Arc<Sandbox>), Refusal> {
        let _inflight = Inflight::new(&self.inflight);
        let id = new_id();
        let mut labels = BTreeMap::from([(MCP_ID_LABEL.to_string(), id.clone())]);
        if let Some((_, pname)) = parent {
            labels.insert(odek_core::labels::PARENT.to_string(), pname.to_string());
        }
        // Cancelled by the shutdown, and linked below to the caller's.
        let cancel = self.closing.child_token();
        // A ready sandbox of the pool has its own name; without a pool the
        // name is chosen here.
        let pooled = self.pool.size() > 0;
        let opts = LaunchOptions {
            detached: false,
            name: (!pooled).then(new_sandbox_name),
            labels,
            approval,
            progress: None,
            cancel: Some(cancel.clone()),
        };
        let launched = caller
            .with_progress(|reporter| {
                let cancel = &cancel;
                let opts = &opts;
                async move {
                    let reporter: &dyn Reporter = match &reporter {
                        Some(r) => r,
                        None => &StderrReporter,
                    };
                    let work = self.pool.claim(plan, opts, reporter);
                    tokio::pin!(work);
                    tokio::select! {
                        out = &mut work => out,
                        () = caller.cancel().cancelled() => {
                            cancel.cancel();
                            work.await
                        }
                    }
                }
            })
            .await;
        let claimed = launched?;
        let from_pool = claimed.from == ClaimedFrom::Pool;
        let sandbox = Arc::new(claimed.sandbox);
        if sandbox.container_id.is_none() {
            return Err(Refusal(
                "the sandbox image could not be used and odek mcp never falls back to the host; make the image available (docker pull/build) or pass --sandbox-image with a local image".into(),
            ));
        }
        self.table().insert(
            id.clone(),
            Entry {
                sandbox: sandbox.clone(),
                parent: parent.map(|(p, _)| p.to_string()),
                _slot: Arc::new(place),
            },
        );
        // After the insert: a shutdown that took the table before it has
        // set `closed` first, so one of the two removes this sandbox.
        if self.closed.load(Ordering::SeqCst) {
            if self.table().remove(&id).is_some() {
                let _ = self.odek.destroy(&sandbox).await;
            }
            return Err(Refusal(
                "the odek MCP server is shutting down; the sandbox was removed".into(),
            ));
        }
        errln!(
            "{} (MCP id {id}{})",
            sandbox.startup_line(),
            if from_pool {
                ", from the warm pool"
            } else {
                ""
            }
        );
        Ok((id, sandbox))
    }

    /// Removes one sandbox; returns what it changed of the files host tools
    /// run (docs/SECURITY.md, "Files host tools run"), also said on stderr.
    /// Errors: an unknown id; Docker refusing.
    pub(crate) async fn down(&self, id: &str) -> Result<Report, Refusal> {
        let entry = self.table().remove(id).ok_or_else(|| unknown(id))?;
        let call = Call::start(&entry.sandbox, Surface::Mcp, "sandbox_down");
        match self.odek.close_recorded(&entry.sandbox, Some(call)).await {
            Ok(report) => {
                if let Some(line) = report.line() {
                    errln!("odek: sandbox {} (MCP id {id}): {line}", entry.sandbox.name);
                }
                Ok(report)
            }
            Err(e) => {
                // Keep it listed so the caller can try again.
                self.table().insert(id.to_string(), entry);
                Err(Refusal(format!(
                    "{}\n(odek: failure class {}; sandbox {id} is still listed: call sandbox_down again)",
                    mcp_words(&e),
                    e.reported_class()
                )))
            }
        }
    }

    /// `(id, entry, is_default)` of every sandbox.
    pub(crate) async fn list(&self) -> Vec<(String, Entry, bool)> {
        let default = self.default.try_lock().ok().and_then(|d| d.clone());
        self.table()
            .iter()
            .map(|(id, e)| (id.clone(), e.clone(), default.as_deref() == Some(id)))
            .collect()
    }

    /// Removes every sandbox this server launched and refuses new ones:
    /// launches in flight are cancelled (each removes what it created, as
    /// the core's cancellable launch does) and waited for, up to 30 s.
    /// Returns what could not be removed, and for each sandbox removed the
    /// files host tools run that it changed (docs/SECURITY.md, "Files host
    /// tools run"), as lines for stderr.
    pub(crate) async fn shutdown(&self) -> Vec<String> {
        self.closed.store(true, Ordering::SeqCst);
        self.closing.cancel();
        let pool = self.pool.clone();
        let draining = tokio::spawn(async move { pool.drain().await });
        // Concurrently: a client that closes stdin may SIGKILL the server a
        // couple of seconds later.
        let mut tasks = tokio::task::JoinSet::new();
        let all: Vec<(String, Entry)> = std::mem::take(&mut *self.table()).into_iter().collect();
        for (id, e) in all {
            let odek = self.odek.clone();
            tasks.spawn(async move {
                match odek.close(&e.sandbox).await {
                    // The files host tools run that it changed
                    // (docs/SECURITY.md, "Files host tools run").
                    Ok(report) => report
                        .line()
                        .map(|line| format!("sandbox {} (MCP id {id}): {line}", e.sandbox.name)),
                    Err(err) => Some(format!(
                        "could not remove sandbox {} ({err}); `odek sandbox gc` removes it once the daemon answers",
                        e.sandbox.name
                    )),
                }
            });
        }
        let mut inflight = self.inflight.subscribe();
        tasks.spawn(async move {
            match tokio::time::timeout(INFLIGHT_SETTLE, inflight.wait_for(|n| *n == 0)).await {
                Ok(_) => None,
                Err(_) => Some(
                    "a sandbox launch was still being cancelled when the server stopped; `odek sandbox gc` removes what it left".to_string(),
                ),
            }
        });
        let mut problems = Vec::new();
        if let Ok(left) = draining.await {
            problems.extend(left.into_iter().map(|name| format!("could not remove the ready sandbox {name}; the engine removes it when this server exits")));
        }
        while let Some(r) = tasks.join_next().await {
            match r {
                Ok(Some(p)) => problems.push(p),
                Ok(None) => {}
                Err(e) => problems.push(format!(
                    "a removal task failed ({e}); `odek sandbox gc` removes what is left"
                )),
            }
        }
        problems
    }
}

/// MCP's [`Asker`]: the user answers the caller's client through MCP
/// elicitation; `ODEK_APPROVE_PROJECT_SANDBOX=1` approves only the request
/// the server started with ([`Sandboxes::pin`]).
struct Elicit<'a> {
    sandboxes: &'a Sandboxes,
    caller: &'a Caller,
}

impl Asker for Elicit<'_> {
    type Error = Refusal;

    fn accepts_env(&self, req: &ApprovalRequest) -> bool {
        self.sandboxes
            .is_pinned(&req.key, req.env_binding.as_deref())
    }

    /// `Ok(Some(_))` approved (once, or trust), `Ok(None)` when the client
    /// cannot be asked. Errors: the user denied, declined or cancelled,
    /// the caller cancelled the call, or the question failed.
    async fn ask(&self, req: &ApprovalRequest) -> Result<Option<Decision>, Refusal> {
        let card = req.render_card();
        // What an answer given through a retry approves: exactly these
        // settings (the file may change between the rounds).
        let bound = serde_json::to_string(&(&req.key, &req.env_binding)).unwrap_or_default();
        let caller = self.caller;
        let asked = tokio::select! {
            a = caller.ask_approval(&card, &bound) => a,
            () = caller.cancel().cancelled() => {
                return Err(Refusal(
                    "the client cancelled the call while the user was asked for approval; nothing was launched".into(),
                ))
            }
        };
        match asked {
            Asked::Unasked => Ok(None),
            // The call ends here with the question (the server's tool-call
            // handler returns it in place of this text); nothing launched.
            Asked::InputRequired => Err(Refusal(
                "the approval question went to the client as an input request; the client retries the call with the answer. Nothing was launched".into(),
            )),
            Asked::Once => Ok(Some(Decision::Once)),
            Asked::Trust => Ok(Some(Decision::Trust)),
            Asked::Refused(why) => {
                let e = Error::from(ApprovalError::Denied {
                    config: req.config.clone(),
                });
                Err(Refusal(format!(
                    "{} (asked through the MCP client: {why})\n(odek refused: failure class {}; nothing ran and no container was left. The next call that launches a sandbox asks again; or the operator trusts the settings with `{}` in a terminal (answer t), and this server then launches them without asking.)\n\n{}",
                    mcp_words(&e),
                    e.reported_class(),
                    odek_core::approval::approve_command(&req.project_dir),
                    req.render_card()
                )))
            }
        }
    }
}

/// One launch in flight, counted while it lives.
struct Inflight<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> Inflight<'a> {
    fn new(count: &'a tokio::sync::watch::Sender<usize>) -> Inflight<'a> {
        count.send_modify(|n| *n += 1);
        Inflight(count)
    }
}

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

fn unknown(id: &str) -> Refusal {
    Refusal(format!(
        "no sandbox with id {} was launched by this odek MCP server; ids are those sandbox_up, sandbox_narrow or sandbox_list returned in this session (a container name, or another server's id, is not accepted); call sandbox_list to see them, or omit sandbox_id to use this conversation's sandbox",
        odek_core::text::quote(id)
    ))
}

#[cfg(test)]
mod refusal_tests {
    use super::*;
    use odek_core::error::Removal;

    fn rejected(removal: Option<Removal>) -> Error {
        Error::Rejected {
            step: odek_core::Step::Start,
            message: "the daemon refused".into(),
            fix: None,
            removal,
        }
    }

    #[test]
    fn no_container_left_is_said_only_when_the_removal_says_so() {
        for r in [None, Some(Removal::Removed)] {
            let Refusal(text) = rejected(r).into();
            assert!(text.contains("no container was left"), "{text}");
        }
        let left = Removal::Left {
            name: "odek-x".into(),
            detached: false,
            why: Some("busy".into()),
        };
        let Refusal(text) = rejected(Some(left)).into();
        assert!(!text.contains("no container was left"), "{text}");
        assert!(text.contains("odek-x"), "{text}");
    }

    /// A file tool's refusal of a missing path is classed by its kind
    /// (`not_found`), not as the sandbox's configuration; other errors of
    /// a call keep their failure class.
    #[test]
    fn a_missing_file_is_a_file_error_not_found_not_config() {
        let e = Error::File(odek_core::error::FileError {
            kind: odek_core::error::FileErrorKind::NotFound,
            path: "/workspace/nope".into(),
            message: "/workspace/nope does not exist".into(),
        });
        let Refusal(text) = Refusal::during_exec(e);
        assert!(text.ends_with("(odek: file error not_found)"), "{text}");
        assert!(!text.contains("config"), "{text}");
        let Refusal(text) = Refusal::during_exec(rejected(None));
        assert!(
            text.ends_with("(odek: failure class docker-rejected)"),
            "{text}"
        );
    }
}
