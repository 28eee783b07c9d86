//! Messages of the **Agent** actor (parent and child alike).

use ractor::RpcReplyPort;
use serde::{Deserialize, Serialize};

use crate::event::{AgentResult, ApprovalDecision, ApprovalRefusal};
use crate::ids::ApprovalId;
use crate::model::ChatMessage;

/// Where a user turn came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOrigin {
    /// A human typed it.
    User,
    /// A finished background child woke the parent (a synthetic turn).
    Wake,
}

/// A turn for an agent to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserTurn {
    /// The text the model reads as the user's message.
    pub text: String,
    /// Who sent it.
    pub origin: TurnOrigin,
}

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
    /// Sent by anyone: replies with an [`AgentSnapshot`]. Never waits.
    Snapshot(RpcReplyPort<AgentSnapshot>),
}

/// An agent's state, as a query sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSnapshot {
    /// A turn is running.
    pub busy: bool,
    /// Turns waiting behind it.
    pub queued_turns: usize,
    /// Approvals waiting for the host.
    pub pending_approvals: usize,
    /// Turns finished so far.
    pub turns_finished: u64,
}
