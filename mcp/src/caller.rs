//! The client that called a tool, as far as a launch and an exec need it:
//! the human to ask for approval (MCP elicitation, SPEC §7) and where to
//! send progress notifications while the sandbox starts and while a
//! command writes output.
//!
//! A client on MCP 2026-07-28 or newer with form elicitation is asked
//! without a request of its own: the tool call ends with an
//! `InputRequiredResult` carrying the question, and the client retries the
//! call with the answer ([`Round`]). Older clients get an
//! `elicitation/create` request while the call waits.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use odek_core::cancel::CancellationToken;
use odek_core::{Reporter, Warning};
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, EnumSchema, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use crate::StderrReporter;

/// The field of the approval question, and its answers.
pub(crate) const DECISION: &str = "decision";
/// Approve this launch only.
pub(crate) const ONCE: &str = "once";
/// Approve and remember (the approval store).
pub(crate) const TRUST: &str = "trust";
/// Refuse.
pub(crate) const DENY: &str = "deny";

/// The key of the approval question among an `InputRequiredResult`'s
/// input requests (and of its answer among the retry's input responses).
pub(crate) const APPROVAL_INPUT: &str = "approval";
/// How many approval questions asked through an `InputRequiredResult` wait
/// for their retry at most; a newer one forgets the oldest (whose retry is
/// then refused and asks again).
const MAX_PENDING: usize = 32;

/// How often a launch in progress is reported.
const TICK: Duration = Duration::from_secs(1);

/// The caller of one tool call.
#[derive(Clone, Debug, Default)]
pub(crate) struct Caller {
    peer: Option<Peer<RoleServer>>,
    progress: Option<ProgressToken>,
    /// Cancelled when the client sends `notifications/cancelled` for this
    /// call (or the session ends).
    cancel: CancellationToken,
    /// The last progress value sent for this call: every notification of
    /// one call (launch, then output) carries a greater one.
    sent: Arc<AtomicU64>,
    /// The call's multi-round-trip state, when the client takes questions
    /// as an `InputRequiredResult` ([`Round::of`]).
    round: Option<Arc<Round>>,
}

/// Approval questions asked through an `InputRequiredResult` and not yet
/// answered, kept in the server: each `requestState` is a random handle
/// (128 bits, never derived from the settings) naming the approval key of
/// the settings shown. The client's echo is untrusted: a handle this
/// server did not issue, or one already used, approves nothing.
#[derive(Debug, Default)]
pub(crate) struct Pending(Mutex<VecDeque<(String, String)>>);

impl Pending {
    /// A new handle for a question about the settings `bound`.
    fn issue(&self, bound: &str) -> String {
        let handle = format!("odek-approval-{}", odek_core::launch::new_launch_id());
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        while q.len() >= MAX_PENDING {
            q.pop_front();
        }
        q.push_back((handle.clone(), bound.to_string()));
        handle
    }

    /// The settings the question `handle` showed, forgetting it (a handle
    /// answers once); `None` for a handle not issued here or already used.
    fn take(&self, handle: &str) -> Option<String> {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let at = q.iter().position(|(h, _)| h == handle)?;
        q.remove(at).map(|(_, bound)| bound)
    }
}

/// The multi-round-trip state of one `tools/call` (MCP 2026-07-28,
/// "input required"): the retry's `requestState` and `inputResponses`, and
/// the question the call ends with when it asks one.
#[derive(Debug)]
pub(crate) struct Round {
    pending: Arc<Pending>,
    /// The retry's `requestState`, until a question of this call used it
    /// (a call that launches two sandboxes asks its second question anew).
    state: Mutex<Option<String>>,
    responses: InputResponses,
    /// The `InputRequiredResult` the call ends with, once a question is
    /// asked.
    asked: Mutex<Option<InputRequiredResult>>,
}

impl Round {
    /// The round of the call `request` when its client negotiated MCP
    /// 2026-07-28 or newer and declared form elicitation; `None` otherwise
    /// (the client is asked with `elicitation/create`, or not at all).
    pub(crate) fn of(
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
        pending: &Arc<Pending>,
    ) -> Option<Arc<Round>> {
        let modern = ctx.protocol_version().is_some_and(|v| !v.has_initialize());
        let form = ctx
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        (modern && form).then(|| {
            Arc::new(Round {
                pending: pending.clone(),
                state: Mutex::new(request.request_state.clone()),
                responses: request.input_responses.clone().unwrap_or_default(),
                asked: Mutex::new(None),
            })
        })
    }

    /// The `InputRequiredResult` the call ends with, if it asked.
    pub(crate) fn question(&self) -> Option<InputRequiredResult> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The answer about the settings `bound` (shown on `card`): from the
    /// retry, when its `requestState` names a question about exactly these
    /// settings; otherwise a new question ([`Asked::InputRequired`]).
    fn ask(&self, card: &str, bound: &str) -> Asked {
        let state = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = state {
            match self.pending.take(&handle) {
                None => {
                    return Asked::Refused(
                        "the retry's requestState names no question this server is waiting on (it was not issued by this server, was already answered, or was forgotten); call the tool again without it to be asked"
                            .into(),
                    )
                }
                Some(shown) if shown == bound => {
                    return match self.responses.get(APPROVAL_INPUT) {
                        None => Asked::Refused(format!(
                            "the retry carried no answer to the question `{APPROVAL_INPUT}`"
                        )),
                        Some(v) => match serde_json::from_value::<ElicitResult>(v.clone()) {
                            Ok(r) => decided(&r),
                            Err(e) => Asked::Refused(format!(
                                "the answer to the question `{APPROVAL_INPUT}` is not an elicitation result ({e})"
                            )),
                        },
                    };
                }
                // The settings changed between the rounds: the answer was
                // about others, so these are asked about anew.
                Some(_) => errln!(
                    "odek: the project's sandbox settings changed since the user was asked; asking again"
                ),
            }
        }
        let requested_schema = match approval_schema() {
            Ok(s) => s,
            Err(e) => return Asked::Refused(format!("the question could not be built: {e}")),
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question(card),
            requested_schema,
        };
        let requests = InputRequests::from([(
            APPROVAL_INPUT.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        )]);
        let handle = self.pending.issue(bound);
        *self.asked.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(InputRequiredResult::new(Some(requests), Some(handle)));
        Asked::InputRequired
    }
}

/// The answer to the approval question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// The client cannot be asked (no elicitation capability, or the
    /// request failed).
    Unasked,
    /// `once`.
    Once,
    /// `trust`.
    Trust,
    /// Anything else: why, for the refusal.
    Refused(String),
    /// The question goes to the client as the call's `InputRequiredResult`
    /// ([`Round::question`]); the call ends without launching and the
    /// client retries it with the answer.
    InputRequired,
}

impl Caller {
    /// The caller of the request `ctx`.
    pub(crate) fn of(ctx: &RequestContext<RoleServer>) -> Caller {
        Caller {
            peer: Some(ctx.peer.clone()),
            progress: ctx.meta.get_progress_token(),
            cancel: ctx.ct.clone(),
            sent: Arc::default(),
            round: ctx.extensions.get::<Arc<Round>>().cloned(),
        }
    }

    /// Sends one progress notification with the next progress value.
    async fn notify(&self, peer: &Peer<RoleServer>, token: &ProgressToken, message: String) {
        let n = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        // Progress values are f64 in MCP; exact up to 2^53 notifications.
        #[allow(clippy::cast_precision_loss)]
        let progress = n as f64;
        let _ = peer
            .notify_progress(
                ProgressNotificationParam::new(token.clone(), progress).with_message(message),
            )
            .await;
    }

    /// An output splitter and the task that sends its lines: when the
    /// caller sent a progress token, each line of a command's output
    /// written to the splitter goes out as a progress notification while
    /// the command runs; without one, no splitter and a task that does
    /// nothing. Run the task beside the exec (`tokio::join!`) and call
    /// [`crate::output::Lines::finish`] when the exec returns: the task
    /// then sends what is still queued and ends, so no notification
    /// follows the tool's result.
    pub(crate) fn output_progress(
        &self,
    ) -> (Option<crate::output::Lines>, impl Future<Output = ()> + '_) {
        let (lines, queued) = match (&self.peer, &self.progress) {
            (Some(_), Some(_)) => {
                let (l, q) = crate::output::Lines::new();
                (Some(l), Some(q))
            }
            _ => (None, None),
        };
        let send = async move {
            let (Some(peer), Some(token), Some(mut queued)) = (&self.peer, &self.progress, queued)
            else {
                return;
            };
            loop {
                let line = queued.rx.recv().await;
                let skipped = queued.skipped.swap(0, Ordering::Relaxed);
                let ended = line.is_none();
                if let Some(line) = line {
                    self.notify(peer, token, line).await;
                }
                if skipped > 0 {
                    self.notify(peer, token, crate::output::skipped_note(skipped))
                        .await;
                }
                if ended {
                    break;
                }
            }
        };
        (lines, send)
    }

    /// The call's cancellation: fired by the client's
    /// `notifications/cancelled` for it, or when the session ends.
    pub(crate) fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Asks the user, through the client's form elicitation, whether to
    /// approve the settings shown on `card`, whose approval key (with the
    /// env-template binding) is `bound`: in the call's [`Round`] when it
    /// has one, else with an `elicitation/create` request.
    pub(crate) async fn ask_approval(&self, card: &str, bound: &str) -> Asked {
        if let Some(round) = &self.round {
            return round.ask(card, bound);
        }
        let Some(peer) = &self.peer else {
            return Asked::Unasked;
        };
        if !peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            return Asked::Unasked;
        }
        let requested_schema = match approval_schema() {
            Ok(s) => s,
            Err(e) => return Asked::Refused(format!("the question could not be built: {e}")),
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question(card),
            requested_schema,
        };
        match peer.create_elicitation(params).await {
            Ok(r) => decided(&r),
            // Nobody was asked (e.g. a revision that forbids requests to
            // the client): the refusal without a question applies.
            Err(e) => {
                errln!("odek: could not ask for approval through the MCP client: {e}");
                Asked::Unasked
            }
        }
    }

    /// Runs `launch` with a reporter that, when the caller sent a progress
    /// token, turns the start, every progress line (pull, build) and a tick
    /// every second into progress notifications; `None` otherwise.
    pub(crate) async fn with_progress<F, Fut, T>(&self, launch: F) -> T
    where
        F: FnOnce(Option<ProgressReporter>) -> Fut,
        Fut: Future<Output = T>,
    {
        let (Some(peer), Some(token)) = (&self.peer, &self.progress) else {
            return launch(None).await;
        };
        let (tx, mut rx) = unbounded_channel::<String>();
        let _ = tx.send("launching the sandbox".into());
        let ticker = async {
            let start = tokio::time::Instant::now();
            let mut tick = tokio::time::interval_at(start + TICK, TICK);
            loop {
                let message = tokio::select! {
                    m = rx.recv() => match m {
                        Some(m) => m,
                        None => break,
                    },
                    _ = tick.tick() => format!(
                        "still launching the sandbox ({}s)",
                        start.elapsed().as_secs()
                    ),
                };
                self.notify(peer, token, message).await;
            }
        };
        let work = launch(Some(ProgressReporter { tx }));
        tokio::pin!(work);
        tokio::pin!(ticker);
        tokio::select! {
            out = &mut work => out,
            () = &mut ticker => work.await,
        }
    }
}

/// Reports to stderr and forwards progress lines as notifications.
#[derive(Debug)]
pub(crate) struct ProgressReporter {
    tx: UnboundedSender<String>,
}

impl Reporter for ProgressReporter {
    fn warning(&self, w: &Warning) {
        StderrReporter.warning(w);
    }

    fn progress(&self, line: &str) {
        StderrReporter.progress(line);
        let _ = self.tx.send(line.to_string());
    }
}

/// The text of the approval question: the CLI's card and the choices.
fn question(card: &str) -> String {
    format!(
        "{card}\nApprove? `{ONCE}`: this sandbox only; `{TRUST}`: remember these settings for this project (stored in odek's approval store until they change); `{DENY}`: launch nothing."
    )
}

/// The form: one enum string field, [`DECISION`].
fn approval_schema() -> Result<ElicitationSchema, String> {
    let choice = EnumSchema::builder(vec![ONCE.into(), TRUST.into(), DENY.into()])
        .title("Approve the project's sandbox settings?")
        .description(
            "once: this sandbox only; trust: remember for this project; deny: launch nothing",
        )
        .build();
    ElicitationSchema::builder()
        .required_enum_schema(DECISION, choice)
        .build()
        .map_err(str::to_string)
}

/// The answer an elicitation result gives.
fn decided(r: &ElicitResult) -> Asked {
    match r.action {
        ElicitationAction::Accept => answer(r.content.as_ref()),
        ElicitationAction::Decline => Asked::Refused("the user declined".into()),
        ElicitationAction::Cancel => Asked::Refused("the user cancelled the question".into()),
        _ => Asked::Refused("the client gave an unknown answer".into()),
    }
}

/// The decision in an accepted form.
fn answer(content: Option<&serde_json::Value>) -> Asked {
    match content
        .and_then(|c| c.get(DECISION))
        .and_then(|v| v.as_str())
    {
        Some(ONCE) => Asked::Once,
        Some(TRUST) => Asked::Trust,
        Some(other) => Asked::Refused(format!(
            "the user answered {}",
            odek_core::text::quote(other)
        )),
        None => Asked::Refused(format!("the answer carried no `{DECISION}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_once_and_trust_approve() {
        let v = |d: &str| serde_json::json!({ DECISION: d });
        assert_eq!(answer(Some(&v("once"))), Asked::Once);
        assert_eq!(answer(Some(&v("trust"))), Asked::Trust);
        assert!(matches!(answer(Some(&v("deny"))), Asked::Refused(_)));
        assert!(matches!(answer(Some(&v("TRUST"))), Asked::Refused(_)));
        assert!(matches!(answer(None), Asked::Refused(_)));
        assert!(matches!(
            answer(Some(&serde_json::json!({ DECISION: true }))),
            Asked::Refused(_)
        ));
    }

    #[test]
    fn the_form_offers_the_three_choices() {
        let s = serde_json::to_value(approval_schema().expect("schema")).expect("json");
        assert_eq!(s["required"], serde_json::json!([DECISION]));
        assert_eq!(
            s["properties"][DECISION]["enum"],
            serde_json::json!([ONCE, TRUST, DENY])
        );
    }

    /// A retry's round: `state` echoed, answering `decision`.
    fn retry(pending: &Arc<Pending>, state: Option<&str>, decision: &str) -> Round {
        let answer = serde_json::json!({ "action": "accept", "content": { DECISION: decision } });
        Round {
            pending: pending.clone(),
            state: Mutex::new(state.map(str::to_string)),
            responses: InputResponses::from([(APPROVAL_INPUT.to_string(), answer)]),
            asked: Mutex::new(None),
        }
    }

    #[test]
    fn a_round_asks_then_takes_the_answer_once() {
        let pending = Arc::default();
        let first = retry(&pending, None, ONCE);
        assert_eq!(first.ask("card", "key-a"), Asked::InputRequired);
        let asked = first.question().expect("a question");
        let v = serde_json::to_value(&asked).expect("json");
        assert_eq!(v["resultType"], "input_required");
        assert_eq!(
            v["inputRequests"][APPROVAL_INPUT]["method"],
            "elicitation/create"
        );
        assert_eq!(
            v["inputRequests"][APPROVAL_INPUT]["params"]["requestedSchema"]["properties"][DECISION]
                ["enum"],
            serde_json::json!([ONCE, TRUST, DENY])
        );
        let state = asked.request_state.expect("a requestState");
        assert!(!state.contains("key-a"), "{state}");
        let again = retry(&pending, Some(&state), ONCE);
        assert_eq!(again.ask("card", "key-a"), Asked::Once);
        assert!(again.question().is_none());
        // Used: a replay approves nothing.
        let replay = retry(&pending, Some(&state), TRUST);
        assert!(matches!(replay.ask("card", "key-a"), Asked::Refused(_)));
        assert!(replay.question().is_none());
    }

    #[test]
    fn a_round_refuses_a_forged_state_and_asks_again_for_changed_settings() {
        let pending = Arc::default();
        let forged = retry(&pending, Some("odek-approval-0000"), ONCE);
        assert!(matches!(forged.ask("card", "key-a"), Asked::Refused(_)));
        let first = retry(&pending, None, ONCE);
        assert_eq!(first.ask("card", "key-a"), Asked::InputRequired);
        let state = first
            .question()
            .and_then(|q| q.request_state)
            .expect("state");
        let changed = retry(&pending, Some(&state), ONCE);
        assert_eq!(changed.ask("card b", "key-b"), Asked::InputRequired);
        let state_b = changed
            .question()
            .and_then(|q| q.request_state)
            .expect("state");
        assert_ne!(state, state_b);
        // The old handle is spent; the new one approves key-b only.
        let old = retry(&pending, Some(&state), ONCE);
        assert!(matches!(old.ask("card", "key-a"), Asked::Refused(_)));
        assert_eq!(
            retry(&pending, Some(&state_b), TRUST).ask("card b", "key-b"),
            Asked::Trust
        );
    }

    #[test]
    fn a_round_refuses_deny_and_a_missing_answer() {
        let pending: Arc<Pending> = Arc::default();
        for (decision, responses) in [(DENY, true), (ONCE, false)] {
            let first = retry(&pending, None, ONCE);
            assert_eq!(first.ask("card", "k"), Asked::InputRequired);
            let state = first
                .question()
                .and_then(|q| q.request_state)
                .expect("state");
            let mut r = retry(&pending, Some(&state), decision);
            if !responses {
                r.responses.clear();
            }
            assert!(
                matches!(r.ask("card", "k"), Asked::Refused(_)),
                "{decision}"
            );
        }
    }

    #[tokio::test]
    async fn without_a_client_nothing_is_asked() {
        assert_eq!(
            Caller::default().ask_approval("card", "key").await,
            Asked::Unasked
        );
        assert!(
            Caller::default()
                .with_progress(|r| async move { r.is_none() })
                .await
        );
    }
}
