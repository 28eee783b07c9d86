//! The hub's protocol, private to this crate: requests come from this
//! crate's tools and [`HubHandle`](crate::hub::HubHandle)'s methods;
//! results, claims, detaches and releases from the hub's own children and
//! guards. A host cannot write any of it.
//!
//! ```
//! // What a host may do: call the handle.
//! async fn ask(hub: &subagents_actors::HubHandle) {
//!     let _ = hub.snapshot().await;
//! }
//! ```
//!
//! ```compile_fail
//! // A host cannot report a child's result, nor claim one: it cannot name
//! // the hub's messages.
//! use subagents_actors::hub::HubMsg;
//! ```

use ractor::RpcReplyPort;

use crate::hub::error::Refused;
use subagents_messages::{
    AgentId, ApprovalDecision, ApprovalId, ApprovalRefusal, ChildRequest, Envelope, HubSnapshot,
    SubAgentStatus, ToolUseId,
};

/// What the Hub actor is told.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum HubMsg {
    /// Sent by `use_agent run`: request a child. The hub emits
    /// `ChildStarted` then `ChildStatus(queued | running)` (and
    /// `ChildStatus(background)` for a background request) on the
    /// requester's stream, then replies with the child's id — or with a
    /// sentence saying why no child was made. A reply nobody receives (the
    /// requester gave up) abandons the child: it goes to the background,
    /// or stops (`stop_if_abandoned`).
    Spawn {
        /// The request (behind a pointer: it is the largest message by
        /// far; shared, as it arrives, with the child and the book).
        request: std::sync::Arc<ChildRequest>,
        /// The requesting call's span: the child's runs sit under it.
        span: tracing::Span,
        /// The delegation call that asks (none for a host's request): no
        /// child is made, or announced, once it was cut (the hub read
        /// the request after the requester's turn ended), and a queued
        /// child starts on its caps only while it waits.
        call: Option<crate::agent::CallSlot>,
        /// The child's id, or why not.
        reply: RpcReplyPort<Result<AgentId, Refused>>,
    },
    /// Sent by `use_agent run` / `result`: reply with the child's envelope
    /// once it reaches a terminal status (at once if it has). Sending the
    /// envelope delivers nothing: the receiver claims the result (with a sealed
    /// `Claimed` message) only once its tool call has taken it.
    Subscribe {
        /// The child.
        id: AgentId,
        /// Receives the final envelope; dropped for an unknown id.
        reply: RpcReplyPort<Envelope>,
    },
    /// Sent by `use_agent stop` or the host: stop a running or queued
    /// child. A queued one ends at once; a running one is told to stop its
    /// turn (its own closing events and `Result` come first) and ends when
    /// it reports. Replies with its status after it ended (`stopped`, or
    /// the status it reached at that instant).
    Stop {
        /// The child.
        id: AgentId,
        /// `use_agent stop`'s agent and call: nothing is done once that
        /// call was cut (boxed, as an interrupt's). `None` from a host.
        asking: Option<Box<(AgentId, crate::agent::CallSlot)>>,
        /// Its status after the stop, or a sentence for an unknown id.
        reply: Option<RpcReplyPort<Result<SubAgentStatus, Refused>>>,
    },
    /// Sent by `use_agent interrupt`: like `Stop` — its turn ends, the call
    /// in flight cut, the gate permit back — but it ends `interrupted`
    /// and a message resumes it (a new run). Replies with its status after
    /// it ended.
    Interrupt {
        /// The child.
        id: AgentId,
        /// The asking agent and its call: nothing is done once that call
        /// was cut. Boxed, as a send's: the hub's messages move at their
        /// largest variant's size.
        asking: Option<Box<(AgentId, crate::agent::CallSlot)>>,
        /// Its status after the interrupt, or why not.
        reply: Option<RpcReplyPort<Result<SubAgentStatus, Refused>>>,
    },
    /// Sent by the supervisor on a thread switch: stop every live and
    /// queued child, in child-number order. Replies with how many it
    /// stopped (not one that finished in that instant, nor one a stop was
    /// already ending), once every one of them has ended.
    StopAll {
        /// How many children were stopped.
        reply: Option<RpcReplyPort<usize>>,
    },
    /// Sent by the thread supervisor: answer an approval a child asked
    /// for (its id starts with the child's id). Forwarded to that child,
    /// which replies; a child that already ended is `Ended`, an id no child
    /// of this hub has is `Unknown`.
    ResolveApproval {
        /// The approval.
        id: ApprovalId,
        /// The answer.
        decision: ApprovalDecision,
        /// Taken, or why not.
        reply: RpcReplyPort<Result<(), ApprovalRefusal>>,
    },
    /// Sent by `use_agent send`: a message for a child (its latest run).
    /// A running child reads it at its next model call; a queued one after
    /// its task, at its first; a finished one (done, failed, interrupted)
    /// goes on from its conversation as a new run, which reads it. A
    /// stopped child is `Stopped`; one whose turn gave its final answer at
    /// that instant `Finished` (ask again once it ended); an unknown one
    /// `UnknownChild`. Never waits on the child.
    Send {
        /// The child.
        id: AgentId,
        /// The message.
        text: String,
        /// The sender's call (a new run's `ChildStarted` names it).
        call: ToolUseId,
        /// The sender and its call's hold on its turn: a finished child
        /// is not resumed once that call was cut. Boxed: the message is
        /// the hub's largest, and every message is moved at its size.
        asking: Option<Box<(AgentId, crate::agent::CallSlot)>>,
        /// The sending call's span (a new run's spans sit under it).
        span: tracing::Span,
        /// Where it went, or why not.
        reply: RpcReplyPort<Result<crate::hub::Steered, Refused>>,
    },
    /// Sent by anyone: reply with the hub's counts. Never waits.
    Snapshot(RpcReplyPort<HubSnapshot>),
    /// Sent only by this crate: the hub's handles, its tools, its own
    /// tasks (sealed).
    Internal(sealed::HubInternal),
}

// Built with ractor's `cluster` feature (only by the subagents-cluster
// workspace, which sets `--cfg subagents_cluster`), a message type says
// it is one: the blanket impl is gone then. It never crosses a node.
#[cfg(subagents_cluster)]
impl ractor::Message for HubMsg {}

pub(crate) mod sealed {
    //! Pub in a private module, not re-exported: nameable in this crate
    //! only.
    #![allow(unreachable_pub)]

    use crate::hub::stop::DetachOutcome;
    use ractor::RpcReplyPort;
    use subagents_messages::AgentId;

    /// The hub's own messages.
    #[derive(Debug)]
    pub enum HubInternal {
        /// Sent by [`crate::HubHandle::sync`]: answered once every message
        /// sent before it is handled.
        Ping(RpcReplyPort<()>),
        /// Sent by this crate's tests: how many waits on a child the hub
        /// holds.
        #[cfg(test)]
        Subscribers {
            /// The child.
            id: AgentId,
            /// Receives the count.
            reply: RpcReplyPort<usize>,
        },
        /// Sent by a tool call that took a finished child's result (its
        /// output is settled on the parent's turn, so no stop can lose it):
        /// the envelope is already marked claimed, so no wake follows; the hub
        /// tells its observers the final envelope.
        Claimed {
            /// The child.
            id: AgentId,
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
        /// Sent when the requester stops waiting inline (the wait expired, or
        /// the parent was stopped): the child goes on in the background and
        /// `ChildStatus(background)` marks the hand-off. A child that already
        /// finished and whose result nobody took becomes a background result:
        /// it wakes the parent (the hub tells its observers again).
        Detach {
            /// The child.
            id: AgentId,
            /// Only if it is still queued (else `Started`, nothing done):
            /// read and acted on in one handler, so it cannot start on a
            /// spent cap as the requester stops waiting.
            if_queued: bool,
            /// What was found, if the sender wants to know.
            reply: Option<RpcReplyPort<DetachOutcome>>,
        },
        /// Sent when a turn waiting on `id` inline was cut, under
        /// `ParentStopPolicy::Cascade`: a child still running is stopped;
        /// one that finished first (its answer not taken) becomes a
        /// background result, as a detach makes it — its call said so.
        Cascade {
            /// The child.
            id: AgentId,
        },
        /// Sent by the hub as a requester ends, for each of its children
        /// in the book: one still running stops; one whose end came first
        /// (read, or on its way) keeps it — resumable, not cancelled as a
        /// stop by name cancels.
        StopOrphan {
            /// The child.
            id: AgentId,
        },
        /// Sent from a child's handler when its turn ended, after the
        /// result went into the child's `last_result`.
        ChildFinished {
            /// The child.
            id: AgentId,
        },
    }
}
