//! The agent's protocol, private to this crate: a host (or the
//! supervisor) talks to an agent through [`AgentHandle`]'s methods, so it
//! cannot write any of it — not a turn's result, not an approval's
//! responder.
//!
//! ```
//! // What a host may do: call the handle.
//! fn stop(agent: &subagents_actors::AgentHandle) {
//!     let _ = agent.stop_turn();
//! }
//! ```
//!
//! ```compile_fail
//! // A host cannot name the agent's messages, so cannot end a turn with a
//! // result of its own.
//! use subagents_actors::agent::AgentMsg;
//! ```
//!
//! ```compile_fail
//! // Nor reach them through the actor: the handle gives a cell, whose
//! // messages must be named to be sent.
//! fn forge(agent: &subagents_actors::AgentHandle) {
//!     let _ = agent.actor().send_message(subagents_actors::agent::AgentMsg::Stop);
//! }
//! ```
//!
//! [`AgentHandle`]: crate::AgentHandle

use ractor::RpcReplyPort;
use subagents_messages::{
    AgentResult, AgentSnapshot, ApprovalDecision, ApprovalId, ApprovalRefusal,
};

/// A turn for an agent to run.
#[derive(Clone, Debug)]
pub(crate) struct UserTurn {
    /// The text the model reads as the user's message (a human's, or a
    /// wake's synthetic one: the agent runs both alike).
    pub(crate) text: String,
    /// Messages sent to it before it started (`use_agent send` to a
    /// queued child): read after `text`, at its first model call.
    pub(crate) followups: Vec<String>,
    /// A span this turn's run follows from (a wake: the child's run).
    pub(crate) follows: Option<tracing::Span>,
    /// The span its run sits under: the host's, current when it sent the
    /// turn; `None`: a trace of its own. (A child's run sits under the
    /// call that requested it, from its config.)
    pub(crate) parent: Option<tracing::Span>,
}

/// What the Agent actor is told.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum AgentMsg {
    /// Sent by the host or the supervisor: run a turn. Turns run one at a
    /// time; one sent while another runs waits its turn (FIFO). Events
    /// follow on the agent's stream, ending with `AgentEvent::Result`.
    /// The reply, if given, receives that same result.
    Turn {
        /// The turn.
        turn: UserTurn,
        /// Receives the turn's result.
        reply: Option<TurnReply>,
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
    /// Sent by the hub (`use_agent send`): a message for the running turn,
    /// read at its next model call. Refused as finished when no turn
    /// runs or its answer was final.
    Steer {
        /// The message.
        text: String,
        /// The call that sends it (empty for a host's or a node's): taken
        /// only while it is open, under its lock.
        asking: crate::agent::CallSlot,
        /// Taken, or why not.
        reply: RpcReplyPort<Result<crate::hub::Steered, crate::hub::Refused>>,
    },
    /// Sent by anyone: replies with an [`AgentSnapshot`]. Never waits.
    Snapshot(RpcReplyPort<AgentSnapshot>),
    /// Sent only by the agent's own turn task (sealed).
    Internal(sealed::AgentInternal),
}

// Built with ractor's `cluster` feature (only by the subagents-cluster
// workspace, which sets `--cfg subagents_cluster`), a message type says
// it is one: the blanket impl is gone then. It never crosses a node.
#[cfg(subagents_cluster)]
impl ractor::Message for AgentMsg {}

/// Where a turn's result goes.
pub(crate) enum TurnReply {
    /// To a caller awaiting it.
    Port(RpcReplyPort<AgentResult>),
    /// To a function, called once from the agent's handler (see
    /// [`TurnReply::kept_then`]).
    Then(Box<dyn FnOnce(AgentResult) + Send>),
}

impl TurnReply {
    /// Into `keep`, and then `notice` is called — in that order, once,
    /// from the agent's handler: a hub's child hands its result to the
    /// hub this way (the hub, told, finds it in place), with no task
    /// waiting on it.
    pub(crate) fn kept_then(
        keep: tokio::sync::oneshot::Sender<AgentResult>,
        notice: impl FnOnce() + Send + 'static,
    ) -> Self {
        TurnReply::Then(Box::new(move |result| {
            let _ = keep.send(result);
            notice();
        }))
    }

    /// Delivers the result (to nobody, if the caller went away).
    pub(crate) fn send(self, result: AgentResult) {
        match self {
            TurnReply::Port(port) => {
                let _ = port.send(result);
            }
            TurnReply::Then(then) => then(result),
        }
    }
}

impl std::fmt::Debug for TurnReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TurnReply::Port(_) => "TurnReply::Port",
            TurnReply::Then(_) => "TurnReply::Then",
        })
    }
}

impl From<RpcReplyPort<AgentResult>> for TurnReply {
    fn from(port: RpcReplyPort<AgentResult>) -> Self {
        TurnReply::Port(port)
    }
}

pub(crate) mod sealed {
    //! Pub in a private module, not re-exported: nameable in this crate
    //! only.
    #![allow(unreachable_pub)]

    use ractor::RpcReplyPort;
    use subagents_messages::{ApprovalDecision, ApprovalId};

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
            /// The asking turn's state: a stop that reached the agent first
            /// ended that turn, and the approval with it.
            turn: crate::agent::turn_state::Shared,
        },
        /// Sent by the agent's own turn task when the turn ends. Its
        /// result (already emitted as an event) and the conversation to
        /// carry into the next turn wait in the turn's state, put there
        /// first: an agent ended before it reads this (a stop through its
        /// cell, read before messages; a kill) still answers with them.
        TurnFinished {
            /// Which turn (a counter local to the agent).
            run: u64,
        },
        /// Sent by a transport, to the proxy of a child on another node
        /// only: a report of its node.
        Report(subagents_messages::remote::RunReport),
        /// Sent by a transport, to the proxy of a child on another node
        /// only: its node or the link to it is gone (why).
        Lost(String),
        /// Sent by the proxy of a child on another node to itself, the
        /// stop's grace after it told run `key` to stop: still running,
        /// the run ends here.
        StopOverdue(u64),
        /// Sent by the proxy of a child on another node to itself, the
        /// grace after report `missing` of run `key` was found missing
        /// (later ones arrived): still missing, the run fails.
        GapOverdue {
            /// The run.
            key: u64,
            /// The report it waits for.
            missing: u64,
        },
        /// Sent by the proxy of a child on another node to itself, its
        /// wall clock and the grace after run `key` started: still
        /// running here (its last report lost, or none after its start,
        /// its node up), the run ends here.
        RunOverdue(u64),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A hub reads its child's result when `ChildFinished` arrives: it
    /// must be in place before the notice goes.
    #[test]
    fn the_result_is_in_place_before_the_notice() {
        let (keep, kept) = tokio::sync::oneshot::channel();
        let kept = Arc::new(Mutex::new(kept));
        let seen = Arc::new(Mutex::new(None));
        let (reader, seen_by) = (kept.clone(), seen.clone());
        let reply = TurnReply::kept_then(keep, move || {
            let found = reader.lock().unwrap().try_recv().ok();
            *seen_by.lock().unwrap() = Some(found.map(|r| r.text));
        });
        let progress = crate::agent::turn_state::Progress::default();
        reply.send(crate::agent::turn_state::result(
            "done".into(),
            subagents_messages::Outcome::Completed,
            &progress,
            tokio::time::Instant::now(),
        ));
        assert_eq!(
            *seen.lock().unwrap(),
            Some(Some("done".to_owned())),
            "the notice ran, and found the result"
        );
    }
}
