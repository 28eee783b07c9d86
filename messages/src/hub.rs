//! Messages of the **Hub** actor: children's slots, queue and envelopes.

use ractor::RpcReplyPort;
use serde::{Deserialize, Serialize};

use crate::envelope::Envelope;
use crate::event::{AgentResult, ApprovalRefusal, SubAgentStatus};
use crate::ids::{AgentId, ToolUseId};

/// A request for a child, as `use_agent run` makes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildRequest {
    /// The agent asking (its events get the child's `ChildStarted`).
    pub requester: AgentId,
    /// The requester's depth (0 for a parent).
    pub requester_depth: u32,
    /// The requester's `use_agent` call.
    pub parent_tool_use_id: ToolUseId,
    /// The child's system prompt; its first line is the child's name.
    pub system_prompt: String,
    /// The child's one input (its task).
    pub input: String,
    /// The tools it may call; `None` inherits every tool the hub offers.
    pub tools: Option<Vec<String>>,
    /// `wait: false`: the requester does not wait.
    pub background: bool,
    /// The child's name; `None`: the first line of its system prompt.
    pub name: Option<String>,
    /// A model override (resolved in the host's model registry).
    pub model: Option<String>,
    /// The override's provider (used only with `model`).
    pub provider: Option<String>,
    /// A cap on the child's model calls, clamped to the parent's own.
    pub max_iterations: Option<u32>,
    /// What happens when the requester gives up before it learns the
    /// child's id (its turn was cut while the request was in flight):
    /// `false` hands the child to the background, `true` stops it.
    pub stop_if_abandoned: bool,
}

impl ChildRequest {
    /// An inline, waited-on request with no overrides; set the other
    /// fields as needed.
    pub fn new(
        requester: AgentId,
        requester_depth: u32,
        parent_tool_use_id: ToolUseId,
        system_prompt: impl Into<String>,
        input: impl Into<String>,
    ) -> Self {
        Self {
            requester,
            requester_depth,
            parent_tool_use_id,
            system_prompt: system_prompt.into(),
            input: input.into(),
            tools: None,
            background: false,
            name: None,
            model: None,
            provider: None,
            max_iterations: None,
            stop_if_abandoned: false,
        }
    }
}

/// What `Detach` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DetachOutcome {
    /// The child now runs in the background.
    Detached,
    /// The child had already finished: here is its envelope (now claimed).
    AlreadyFinished(Box<Envelope>),
    /// No child has that id.
    Unknown,
}

/// The hub's counts, as a query sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubSnapshot {
    /// The live-children cap.
    pub max_live: usize,
    /// Children holding a slot (starting or running).
    pub live: usize,
    /// Children waiting for a slot.
    pub queued: usize,
    /// Children ever requested.
    pub requested: usize,
    /// Children that reached a terminal status.
    pub finished: usize,
}

/// What the Hub actor is told.
#[derive(Debug)]
#[non_exhaustive]
pub enum HubMsg {
    /// Sent by `use_agent run`: request a child. The hub emits
    /// `ChildStarted` then `ChildStatus(queued | running)` (and
    /// `ChildStatus(background)` for a background request) on the
    /// requester's stream, then replies with the child's id — or with a
    /// sentence saying why no child was made. A reply nobody receives (the
    /// requester gave up) abandons the child: it goes to the background,
    /// or stops (`stop_if_abandoned`).
    Spawn {
        /// The request.
        request: ChildRequest,
        /// The child's id, or why not.
        reply: RpcReplyPort<Result<AgentId, String>>,
    },
    /// Sent by `use_agent run` / `result`: reply with the child's envelope
    /// once it reaches a terminal status (at once if it has). Sending the
    /// envelope delivers nothing: the receiver claims the result (with
    /// [`HubMsg::Claimed`]) only once its tool call has taken it.
    Subscribe {
        /// The child.
        id: AgentId,
        /// Receives the final envelope; dropped for an unknown id.
        reply: RpcReplyPort<Envelope>,
    },
    /// Sent when a requester gave up after the hub replied to its `Spawn`
    /// but before it read the id (its turn was cut): as for a reply nobody
    /// received, the child goes to the background, or stops.
    Abandoned {
        /// The child.
        id: AgentId,
        /// Stop it rather than hand it to the background.
        stop: bool,
    },
    /// Sent by a tool call that took a finished child's result (its
    /// output is settled on the parent's turn, so no stop can lose it):
    /// the envelope is already marked claimed, so no wake follows; the hub
    /// tells its observers the final envelope.
    Claimed {
        /// The child.
        id: AgentId,
    },
    /// Sent when the requester stops waiting inline (the wait expired, or
    /// the parent was stopped): the child goes on in the background and
    /// `ChildStatus(background)` marks the hand-off. A child that already
    /// finished and whose result nobody took becomes a background result:
    /// it wakes the parent (the hub tells its observers again).
    Detach {
        /// The child.
        id: AgentId,
        /// What was found, if the sender wants to know.
        reply: Option<RpcReplyPort<DetachOutcome>>,
    },
    /// Sent by `use_agent stop` or the host: stop a running or queued
    /// child. A queued one ends at once; a running one is told to stop its
    /// turn (its own closing events and `Result` come first) and ends when
    /// it reports. Replies with its status after it ended (`stopped`, or
    /// the status it reached at that instant).
    Stop {
        /// The child.
        id: AgentId,
        /// Its status after the stop, or a sentence for an unknown id.
        reply: Option<RpcReplyPort<Result<SubAgentStatus, String>>>,
    },
    /// Sent by the supervisor on a thread switch: stop every live and
    /// queued child, in child-number order. Replies with how many were
    /// asked to stop, once every one of them has ended.
    StopAll {
        /// How many children were stopped.
        reply: Option<RpcReplyPort<usize>>,
    },
    /// Sent by the task that waits on a child's turn: the child's result.
    ChildFinished {
        /// The child.
        id: AgentId,
        /// Its turn's result.
        result: AgentResult,
    },
    /// Sent by a slot reservation dropped before it was committed (the
    /// child could not be started): free the slot.
    ReleaseSlot {
        /// The child the slot was reserved for.
        id: AgentId,
        /// Why it was not committed.
        reason: String,
    },
    /// Sent by the thread supervisor: answer an approval a child asked
    /// for (its id starts with the child's id). Forwarded to that child,
    /// which replies; a child that already ended is `Ended`, an id no child
    /// of this hub has is `Unknown`.
    ResolveApproval {
        /// The approval.
        id: crate::ids::ApprovalId,
        /// The answer.
        decision: crate::event::ApprovalDecision,
        /// Taken, or why not.
        reply: RpcReplyPort<Result<(), ApprovalRefusal>>,
    },
    /// Sent by anyone: reply with the hub's counts. Never waits.
    Snapshot(RpcReplyPort<HubSnapshot>),
}
