//! How a hub makes children: its configuration and the hooks a host (or
//! the thread supervisor) plugs in.

use std::sync::Arc;

use subagents_messages::{AgentId, ApprovalDecision, ChatMessage, ChildRequest, Envelope, Limits};

use crate::agent::ApprovalPolicy;
use crate::clock::Clock;
use crate::gate::GateHandle;
use crate::hub::book::Book;
use crate::hub::ids::ChildIds;
use crate::model::Model;
use crate::registry::ModelRegistry;
use crate::tool::{Tool, ToolRegistry};

/// Told about every child that reaches a terminal status (the supervisor
/// turns background ones into wakes and persists envelopes), and again
/// when a finished child's envelope changes: its result was claimed, a
/// result nobody took was handed to the background, a message resumed
/// it as a new run (`continued_as`), or a stop reached it after it ended
/// (`cancelled`). Count ends by id, not by calls.
///
/// Every method runs inside the hub's handler (`stepped`, on the child's
/// event path; `finished` for the children a hub's death failed, where
/// its state is dropped — the hub's task after a crash, the task that
/// read its termination after a kill): it must return at once — hand the
/// work to a task or a channel, as the thread's own observer does (it
/// casts). A blocking call holds every start, finish and stop of the hub
/// (a switch or a close waits on it), and a call back into the hub that
/// waits for its answer (`block_on(hub.snapshot())`) never returns.
pub trait HubObserver: Send + Sync + 'static {
    /// A child finished, or its final envelope changed; `envelope` is the
    /// final one, as it is now.
    fn finished(&self, envelope: &Envelope);

    /// A child (a run) was requested — queued or running: its envelope as
    /// it is now and what it was asked. The thread persists both, so a
    /// child running when the process dies is known at the next open.
    fn started(&self, envelope: &Envelope, request: &ChildRequest) {
        let _ = (envelope, request);
    }

    /// A child made a step: its model's answer asked for calls, or a call
    /// was answered — its conversation
    /// ([`HubHandle::conversation`](crate::HubHandle::conversation)) has
    /// grown, and may be read from here — or it took a message as it runs
    /// (in its conversation once it reads it, at its next model call), or
    /// an answer with no call went on to read one, or (on another node)
    /// it read one.
    /// Called from the child's turn just after the answer, the step's
    /// `ToolResult` or the message taken, holding none of its locks: do
    /// not block. A cut call is a step too: then it is called from
    /// whoever cut the turn — a stop in the child's handler, or, when the
    /// hub died, the one ending its children (which holds the hub's
    /// death in progress: do not call `HubHandle::fail_unfinished` from
    /// here).
    fn stepped(&self, id: &AgentId) {
        let _ = id;
    }

    /// A stop (not an interrupt) of a running child was accepted; it ends
    /// when its turn does. `envelope` is as it is now, marked
    /// ([`Envelope::stopping`]): the thread persists it, so a process that
    /// dies before the end leaves the child `stopped`, not resumable.
    fn stopping(&self, envelope: &Envelope) {
        let _ = envelope;
    }
}

/// Tells each observer through `tell`; one that panics is logged (its
/// hook and the child named) and the others are still told: a host's bug
/// must not take the hub, or the child's events, down. A panic in
/// `started` or `stepped` was swallowed without a word.
pub(crate) fn tell_each(
    observers: &[Arc<dyn HubObserver>],
    hook: &'static str,
    child: &AgentId,
    tell: impl Fn(&dyn HubObserver),
) {
    // A turn the host sends from here starts a trace of its own (the
    // span current here read once, not per observer).
    crate::agent::as_callback(|| {
        for observer in observers {
            let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tell(&**observer)));
            if let Err(panic) = told {
                // Read outside the macro (see `panics::drop_guarded`).
                let panic = crate::panics::panic_text(panic);
                tracing::error!(%child, hook, panic, "a hub observer panicked");
            }
        }
    });
}

/// Finished envelopes of earlier sessions (the supervisor's store), so
/// `status` and `result` answer ids the hub itself never ran.
#[doc(hidden)] // plumbing for subagents-supervisor's store, not API
pub trait EnvelopeArchive: Send + Sync + 'static {
    /// The archived envelope with this id.
    fn get(&self, id: &AgentId) -> Option<Envelope>;

    /// What the archived child was asked and its saved conversation (to
    /// resume it), if kept.
    fn run(&self, id: &AgentId) -> Option<(ChildRequest, Vec<ChatMessage>)> {
        let _ = id;
        None
    }

    /// A tool call took the archived child's result (`use_agent result`):
    /// recorded, so no wake owed for it from before a restart follows.
    fn claim(&self, id: &AgentId) {
        let _ = id;
    }

    /// A message is about to resume the archived child `id` as a new run:
    /// `false` if it was resumed already — by another user of the archive,
    /// perhaps in the same instant — so the chain of its runs does not
    /// fork. Decided at once (not when a write lands). `true` by default.
    fn begin_resume(&self, id: &AgentId) -> bool {
        let _ = id;
        true
    }

    /// The resume [`EnvelopeArchive::begin_resume`] allowed did not start
    /// (the spawn was refused): `id` may be resumed again.
    fn resume_failed(&self, id: &AgentId) {
        let _ = id;
    }

    /// A resume of the archived child `id` began
    /// ([`EnvelopeArchive::begin_resume`] allowed it), its link perhaps not
    /// written yet: the run is another user's to reach. `false` by default.
    fn resuming(&self, id: &AgentId) -> bool {
        let _ = id;
        false
    }

    /// A stop reached the archived child `id` after it ended: cancelled
    /// for good ([`Envelope::cancelled`]), recorded so a later session's
    /// message does not resume it either.
    fn cancel(&self, id: &AgentId) {
        let _ = id;
    }

    /// The number the parent's approvals follow, and its children's:
    /// past every number an earlier session's parent may have given (`parent-approval-1` was
    /// that session's too, so a host's row restored from it answered the
    /// new parent's first request). 0 by default: from 1.
    fn approvals_after(&self) -> u64 {
        0
    }
}

/// What a background child's approval request does — also the one it
/// waits on as it is handed to the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundApprovals {
    /// Ask the host, as for any agent.
    #[default]
    Ask,
    /// Deny at once; the child reads that it was denied.
    Deny,
    /// Approve at once.
    Approve,
}

/// How the hub makes children.
pub(crate) struct HubConfig {
    /// Live children at once (Loopl: 3).
    pub(crate) max_live: usize,
    /// The model children run on.
    pub(crate) model: Arc<dyn Model>,
    /// The gate they share with the parent.
    pub(crate) gate: GateHandle,
    /// The host's tools a child may be given (the delegation tools are
    /// not among them: a child below the depth limit gets those from
    /// `delegation_tools`).
    pub(crate) tools: ToolRegistry,
    /// Limits on a child's turn.
    pub(crate) child_limits: Limits,
    /// Children deeper than this are refused (1: children cannot spawn).
    pub(crate) max_depth: u32,
    /// Appended to every child's system prompt (inherited workflow
    /// instructions), if set.
    pub(crate) instructions: Option<String>,
    /// Wall-clock stamps.
    pub(crate) clock: Arc<dyn Clock>,
    /// Told when a child finishes, in this order.
    pub(crate) observers: Vec<Arc<dyn HubObserver>>,
    /// Answers ids of earlier sessions.
    pub(crate) archive: Option<Arc<dyn EnvelopeArchive>>,
    /// Where child ids come from; share one counter between hubs whose
    /// envelopes meet (one store), and start it past the archived ids.
    pub(crate) ids: ChildIds,
    /// What a background child's approval request does — also the one it
    /// waits on as it is handed to the background.
    pub(crate) background_approvals: BackgroundApprovals,
    /// Models a child may ask for by name (falls back to `model`).
    pub(crate) models: ModelRegistry,
    /// The parent's own turn cap: a child's `max_iterations` is clamped to
    /// it.
    pub(crate) parent_max_model_calls: u32,
    /// The delegation tools (`use_agent`, …) bound to this hub, set once
    /// it is spawned: a child that may still delegate (its depth below
    /// `max_depth`) gets them too.
    pub(crate) delegation_tools: Arc<std::sync::OnceLock<Vec<Arc<dyn Tool>>>>,
    /// Request options for every child's model calls.
    pub(crate) child_options: subagents_messages::RequestOptions,
    /// The span settings every child inherits.
    pub(crate) trace: crate::agent::spans::TraceSettings,
    /// Where each child runs.
    pub(crate) placement: crate::remote::Placement,
    /// A child on another node goes on (and its result is kept there)
    /// when this node is lost: the parent-stop policy is `Detach`.
    pub(crate) keep_orphans: bool,
    /// The number every child's approvals follow: the thread's block, as
    /// its parent's (a child never written to disk may have its id handed
    /// out again by a later session, and numbered from 1 its first request
    /// had the id of the earlier child's, which a host's kept row then
    /// answered).
    pub(crate) approvals_after: u64,
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("max_live", &self.max_live)
            .field("tools", &self.tools)
            .field("child_limits", &self.child_limits)
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

/// Answers a child's approvals while it runs in the background.
struct BackgroundPolicy {
    book: Book,
    id: AgentId,
    decision: ApprovalDecision,
}

impl ApprovalPolicy for BackgroundPolicy {
    fn decide(&self, _: &AgentId, _: &str, _: &str) -> Option<ApprovalDecision> {
        self.book.in_background(&self.id).then_some(self.decision)
    }
}

/// The approval policy a child of this hub runs with (`None`: ask).
pub(crate) fn approvals_for(
    policy: BackgroundApprovals,
    book: &Book,
    id: &AgentId,
) -> Option<Arc<dyn ApprovalPolicy>> {
    let decision = match policy {
        BackgroundApprovals::Ask => return None,
        BackgroundApprovals::Deny => ApprovalDecision::Deny,
        BackgroundApprovals::Approve => ApprovalDecision::Approve,
    };
    Some(Arc::new(BackgroundPolicy {
        book: book.clone(),
        id: id.clone(),
        decision,
    }))
}

/// A hub's archive as its handles hold it: let go when the hub stops, so
/// a closed thread's handle keeps no store (and its directory's lock)
/// open.
pub(crate) struct ArchiveSlot(std::sync::Mutex<Option<Arc<dyn EnvelopeArchive>>>);

impl ArchiveSlot {
    pub(crate) fn new(archive: Arc<dyn EnvelopeArchive>) -> Arc<Self> {
        Arc::new(Self(std::sync::Mutex::new(Some(archive))))
    }

    /// The archive, unless the hub has stopped.
    pub(crate) fn get(&self) -> Option<Arc<dyn EnvelopeArchive>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The hub stopped: nothing reads the archive through it any more.
    pub(crate) fn let_go(&self) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }
}
