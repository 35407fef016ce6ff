//! The client that called a tool, as far as a launch and an exec need it:
//! the human to ask for approval (MCP elicitation, SPEC §7) and where to
//! send progress notifications while the sandbox starts and while a
//! command writes output.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use odek_core::cancel::CancellationToken;
use odek_core::{Reporter, Warning};
use rmcp::model::{
    ElicitRequestParams, ElicitationAction, ElicitationSchema, EnumSchema,
    ProgressNotificationParam, ProgressToken,
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
}

impl Caller {
    /// The caller of the request `ctx`.
    pub(crate) fn of(ctx: &RequestContext<RoleServer>) -> Caller {
        Caller {
            peer: Some(ctx.peer.clone()),
            progress: ctx.meta.get_progress_token(),
            cancel: ctx.ct.clone(),
            sent: Arc::default(),
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
    /// approve the settings shown on `card`.
    pub(crate) async fn ask_approval(&self, card: &str) -> Asked {
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
            Ok(r) => match r.action {
                ElicitationAction::Accept => answer(r.content.as_ref()),
                ElicitationAction::Decline => Asked::Refused("the user declined".into()),
                ElicitationAction::Cancel => {
                    Asked::Refused("the user cancelled the question".into())
                }
                _ => Asked::Refused("the client gave an unknown answer".into()),
            },
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

    #[tokio::test]
    async fn without_a_client_nothing_is_asked() {
        assert_eq!(Caller::default().ask_approval("card").await, Asked::Unasked);
        assert!(
            Caller::default()
                .with_progress(|r| async move { r.is_none() })
                .await
        );
    }
}
