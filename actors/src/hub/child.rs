//! A child as the hub holds it while it is queued or runs: what it was
//! asked, its tools, model and limits, its sinks, and how it is ending.

use std::sync::Arc;

use ractor::RpcReplyPort;
use subagents_messages::{AgentEvent, AgentResult, ChildRequest, Envelope, Limits, SubAgentStatus};

use crate::agent::AgentHandle;
use crate::gate::GateHandle;
use crate::hub::stop::StopReply;
use crate::model::Model;
use crate::sink::EventSink;
use crate::tool::ToolRegistry;

/// How a child ends: its status, result and error.
pub(super) type Ending = (SubAgentStatus, Option<String>, Option<String>);

pub(super) struct Child {
    pub(super) request: Arc<ChildRequest>,
    pub(super) tools: ToolRegistry,
    pub(super) model: Arc<dyn Model>,
    pub(super) gate: GateHandle,
    pub(super) limits: Limits,
    pub(super) sink: EventSink,
    pub(super) requester_sink: EventSink,
    pub(super) agent: Option<AgentHandle>,
    /// The child's turn result, sent before `ChildFinished` tells the hub
    /// (and read by the hub's own stop, its mailbox closed).
    pub(super) last_result: Option<tokio::sync::oneshot::Receiver<AgentResult>>,
    pub(super) subscribers: Vec<RpcReplyPort<Envelope>>,
    /// Told to stop (why); it ends when its turn reports.
    pub(super) stopping: Option<&'static str>,
    /// The stop is an interrupt: it ends `interrupted`, and a message
    /// resumes it.
    pub(super) interrupted: bool,
    pub(super) stop_replies: Vec<StopReply>,
    /// What a stop that found its turn already over means if it ends all
    /// the same (done or failed).
    pub(super) after_end: AfterEnd,
    /// Its turn ended (status, result, error) while children it asked for
    /// still ran: it ends with the last of them, so their ends reach the
    /// stream inside its row, before its own.
    pub(super) ending: Option<Box<Ending>>,
    /// Messages sent while it waited for a slot (read after its task).
    pub(super) followups: Vec<String>,
    /// The span of the call that requested it: its runs' spans sit under it.
    pub(super) span: tracing::Span,
    /// When it was queued for a slot (its wall-clock cap counts from there).
    pub(super) queued_at: Option<tokio::time::Instant>,
    /// It runs on another node (`LeastLoaded` counts only those here).
    pub(super) remote: bool,
    /// The delegation call that asked for it (whose caps it carries, if
    /// that call waits on it to its end).
    pub(super) call: Option<crate::agent::CallSlot>,
}

/// A stop that reaches a child as its turn ends — its answer given and
/// its end notice on the way, or its own children still stopping — does
/// not stop it: it ends done or failed all the same. What the stops meant
/// still holds then — each of them (one slot, a stop by name and a cut in
/// the same window erased each other's meaning).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct AfterEnd {
    /// A stop by name (the host's, or the model's `use_agent stop`): it is
    /// cancelled for good, as a stop of a child that had ended is — it
    /// answered `done` and a later message resumed it, though the model
    /// was told `"cancelled": true`.
    pub(super) cancel: bool,
    /// The parent's turn was cut under `Cascade`: its result becomes a
    /// wake, as the cut call said ("if it had already finished, its
    /// result will arrive as a message") — it reached nobody.
    pub(super) release: bool,
}

impl Child {
    /// Emits the hub's word on this child (a status move, its start from
    /// the queue) on its requester's stream beside the child's own sink,
    /// only while that sink is open: the terminal status it is closed
    /// with — by a kill's hook on another worker, while the hub's handler
    /// had not reached its next await — comes after every such word.
    pub(super) fn emit_beside(&self, event: AgentEvent) {
        self.sink.while_open(|| {
            self.requester_sink.emit(event);
        });
    }

    /// Its limits as it starts. A requester that waits to the end (a
    /// `delegate_task` call) caps them with what it had left when it
    /// asked, and that wall clock counts from then, so the time it waited
    /// in the queue comes off it (counted from its start, a queued child
    /// ran past its requester's own wall clock, which then read no partial
    /// result, only its own cut). Handed to the background meanwhile
    /// (`background`: its requester stopped waiting), nobody waits on it
    /// to the end: the caps do not carry over (a spent one started it with
    /// no wall clock, ending it at once with nothing done).
    pub(super) fn limits_now(&self, background: bool) -> Limits {
        let mut limits = self.limits;
        // Its call cut, nobody waits on it either — also before its
        // detach reaches the hub, which went when the cut turn's task was
        // dropped: admitted first, it started on a spent cap.
        if background || self.call.as_ref().is_some_and(|call| !call.is_open()) {
            return limits;
        }
        if let Some(cap) = self.request.wall_clock_cap {
            let waited = self.queued_at.map(|at| at.elapsed()).unwrap_or_default();
            limits.wall_clock = limits.wall_clock.min(cap.saturating_sub(waited));
        }
        if let Some(cap) = self.request.token_cap {
            limits.token_budget = limits.token_budget.min(cap);
        }
        limits
    }
}
