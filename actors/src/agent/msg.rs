//! The agent's protocol: the requests a host (or the supervisor, or the
//! hub) may send, and a sealed part only the agent's own turn task writes.
//!
//! ```
//! // What a host may write.
//! use subagents_actors::agent::AgentMsg;
//! let stop = AgentMsg::Stop;
//! ```
//!
//! ```compile_fail
//! // A host cannot end an agent's turn with a result of its own.
//! use subagents_actors::agent::AgentMsg;
//! let forged = AgentMsg::TurnFinished { run: 1, result: todo!(), history: vec![] };
//! ```

use ractor::RpcReplyPort;
use subagents_messages::{
    AgentResult, AgentSnapshot, ApprovalDecision, ApprovalId, ApprovalRefusal, UserTurn,
};

/// What the Agent actor is told.
#[derive(Debug)]
#[non_exhaustive]
pub enum AgentMsg {
    /// Sent by the host or the supervisor: run a turn. Turns run one at a
    /// time; one sent while another runs waits its turn (FIFO). Events
    /// follow on the agent's stream, ending with `AgentEvent::Result`.
    /// The reply, if given, receives that same result.
    Turn {
        /// The turn.
        turn: UserTurn,
        /// Receives the turn's result.
        reply: Option<RpcReplyPort<AgentResult>>,
    },
    /// Sent by the host, the supervisor or the hub: end the running turn
    /// now (its result is `Outcome::Stopped`) and drop queued ones. The
    /// model call in flight is cancelled and its gate permit released.
    Stop,
    /// Sent by the host (through the supervisor): answer an approval.
    /// The agent emits `ApprovalResolved` on its turn's stream and the
    /// tool goes on (or is denied); replies why not otherwise.
    ResolveApproval {
        /// The approval.
        id: ApprovalId,
        /// The answer.
        decision: ApprovalDecision,
        /// Taken, or why not.
        reply: RpcReplyPort<Result<(), ApprovalRefusal>>,
    },
    /// Sent by anyone: replies with an [`AgentSnapshot`]. Never waits.
    Snapshot(RpcReplyPort<AgentSnapshot>),
    /// Sent only by the agent's own turn task (sealed).
    Internal(sealed::AgentInternal),
}

pub(crate) mod sealed {
    //! Pub in a private module, not re-exported: nameable in this crate
    //! only.
    #![allow(unreachable_pub)]

    use ractor::RpcReplyPort;
    use subagents_messages::{AgentResult, ApprovalDecision, ApprovalId, ChatMessage};

    /// The agent's own messages.
    #[derive(Debug)]
    pub enum AgentInternal {
        /// Sent by the agent's own turn task: a tool call waits for approval;
        /// the decision goes to `responder`.
        ApprovalPending {
            /// The approval.
            id: ApprovalId,
            /// Where the decision goes.
            responder: RpcReplyPort<ApprovalDecision>,
        },
        /// Sent by the agent's own turn task when the turn ends.
        TurnFinished {
            /// Which turn (a counter local to the agent).
            run: u64,
            /// Its result (already emitted as an event).
            result: AgentResult,
            /// The conversation after the turn, to carry into the next one.
            history: Vec<ChatMessage>,
        },
    }
}
