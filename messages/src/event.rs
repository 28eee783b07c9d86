//! The event stream a host draws from: one ordered stream per thread.
//! `docs/event-ordering.md` is the contract for the order of these events.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, ApprovalId, ToolUseId};
use crate::limits::LimitKind;
use crate::model::Usage;

/// Everything an agent tells its host, in order.
///
/// The three largest payloads (`ApprovalRequested`, `Result`,
/// `ChildStarted`, each at most once per call, turn or child) are boxed:
/// every slot of an event channel and every nested event is the size of
/// the largest variant (80 bytes rather than 112). A box serializes as its
/// contents, so the wire and disk shapes are unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum AgentEvent {
    /// A text delta from the model.
    Text(String),
    /// The agent is about to run a tool call.
    ToolStarted(ToolStarted),
    /// A tool call finished (successfully or with an error the model reads).
    ToolResult(ToolResult),
    /// A tool call waits for the host's approval.
    ApprovalRequested(Box<ApprovalRequest>),
    /// An approval request is closed: answered, or cancelled because the
    /// turn or the child that asked ended first. Comes once per
    /// `ApprovalRequested`, after it and before the call's `ToolResult`
    /// and the turn's `Result` (so before a child's terminal status).
    ApprovalResolved {
        /// The approval.
        id: ApprovalId,
        /// The call that waited.
        tool_use_id: ToolUseId,
        /// How it was closed.
        outcome: ApprovalOutcome,
    },
    /// The agent's turn ended; its final (or partial) answer.
    Result(Box<AgentResult>),
    /// A child agent was requested. Comes once, before anything else of it.
    ChildStarted(Box<SubAgentInfo>),
    /// One of the child's own events, verbatim. Read back (from the wire
    /// or disk), at most 128 levels deep.
    Child(
        AgentId,
        #[serde(deserialize_with = "nested")] Box<AgentEvent>,
    ),
    /// The child's status moved forward.
    ChildStatus(AgentId, SubAgentStatus),
    /// A child that waited in the queue got its live slot and starts now.
    /// Once per queued child, before any of its own events; an inline
    /// child's `ChildStatus(running)` follows, a background child's status
    /// stays `background` (statuses never move back).
    ChildRunning(AgentId),
    /// A user turn reached the parent (emitted by the thread supervisor as
    /// it hands the turn over): the parent generates from here until the
    /// turn's `Result`.
    UserMessage(String),
    /// The host switched away from this thread (new conversation, open
    /// another, delete, clear): every child started before this event is
    /// stopped and none of them wakes the parent afterwards.
    SwitchedAway,
    /// A finished background child woke the parent: a synthetic user turn
    /// follows. A UI shows `line` as one system-styled line, not a bubble.
    Wake {
        /// The child that finished.
        child: AgentId,
        /// One line for the transcript (`[use_agent agent_3 finished] …`).
        line: String,
    },
    /// A message the agent that started this one sent it (`use_agent
    /// send`), read by its running turn before its next model call: what
    /// it writes from here has read it (its conversation holds it as
    /// `[message from the agent that started you] …`). In a child's events
    /// only, between the answer before it and the one after — without it,
    /// a message read after a final-looking answer joined the two answers
    /// into one text.
    Steered(String),
}

impl AgentEvent {
    /// The child this event is about, if it is a child event.
    pub fn child_id(&self) -> Option<&AgentId> {
        match self {
            AgentEvent::ChildStarted(info) => Some(&info.id),
            AgentEvent::Child(id, _)
            | AgentEvent::ChildStatus(id, _)
            | AgentEvent::ChildRunning(id) => Some(id),
            _ => None,
        }
    }
}

/// `AgentEvent::ToolStarted`'s payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStarted {
    /// The call's id.
    pub tool_use_id: ToolUseId,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them (a JSON string).
    pub arguments: String,
}

/// `AgentEvent::ToolResult`'s payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call's id.
    pub tool_use_id: ToolUseId,
    /// The tool's name.
    pub name: String,
    /// What the model reads back.
    pub output: String,
    /// True when `output` is an error sentence.
    pub is_error: bool,
}

/// A tool call waiting for approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Resolve it by this id.
    pub id: ApprovalId,
    /// The call that waits.
    pub tool_use_id: ToolUseId,
    /// The tool's name.
    pub tool_name: String,
    /// The call's arguments (a JSON string).
    pub arguments: String,
}

/// How an approval request was closed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// The host approved; the tool runs.
    Approved,
    /// The host denied; the model reads that it was denied.
    Denied,
    /// Nobody will answer: the turn or the child that asked ended first
    /// (stopped, switched away, cut by a limit). The text says which.
    Cancelled(String),
}

/// Why an answer to an approval was not taken. Carries the approval's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalRefusal {
    /// No agent of the thread ever asked for this id.
    #[error("there is no approval `{0}`")]
    Unknown(ApprovalId),
    /// It was answered before (with this decision); the first answer stands.
    #[error("the approval `{id}` was already answered ({})", decision.said())]
    AlreadyAnswered {
        /// The approval.
        id: ApprovalId,
        /// The answer that was taken.
        decision: ApprovalDecision,
    },
    /// The turn or the child that asked ended before the answer arrived;
    /// its request was closed as cancelled.
    #[error("the approval `{0}` is closed: the agent that asked for it ended first")]
    Ended(ApprovalId),
    /// The answer was sent on to the node running the agent that asked,
    /// and the run ended here (its node lost or silent, a stop it never
    /// answered, the proxy gone) before the node said whether its agent
    /// took it: it may have been (a run kept there goes on, and runs an
    /// approved call). The request is closed here as cancelled.
    #[error(
        "the answer to the approval `{0}` was sent, but the run ended here before its node said whether it was taken (it may have been)"
    )]
    Unsettled(ApprovalId),
}

/// The host's answer to an [`ApprovalRequest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ApprovalDecision {
    /// Run the tool.
    Approve,
    /// Do not run it; the model reads that it was denied.
    Deny,
}

impl ApprovalDecision {
    /// In a sentence: "approved" or "denied" (its `Debug` read `Approve`).
    fn said(self) -> &'static str {
        match self {
            Self::Approve => "approved",
            Self::Deny => "denied",
        }
    }
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The model answered without tool calls.
    Completed,
    /// A limit cut the turn short; the text is a partial result.
    LimitReached(LimitKind),
    /// The model or the runtime failed; the text names what went wrong.
    Failed(String),
    /// The turn was stopped from outside.
    Stopped,
}

impl Outcome {
    /// True for [`Outcome::Completed`].
    pub fn is_completed(&self) -> bool {
        matches!(self, Outcome::Completed)
    }
}

/// An agent's answer at the end of a turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentResult {
    /// The final answer, or a partial result that says what was done and
    /// why it stopped.
    pub text: String,
    /// How the turn ended.
    pub outcome: Outcome,
    /// Model calls made. Read from `turns` too: its name in a log an
    /// earlier version wrote.
    #[serde(alias = "turns")]
    pub model_calls: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tokens this agent's own model calls used.
    pub usage: Usage,
    /// Tokens used by the children whose results this turn took (inline,
    /// or through `result`), their own and, recursively, their children's.
    /// 0 when read from data written before it was kept.
    #[serde(default)]
    pub children_usage: Usage,
    /// Time taken (tokio time: virtual under `tokio::time::pause`).
    pub elapsed: Duration,
}

/// What a host learns about a child when it is requested.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubAgentInfo {
    /// The child's id.
    pub id: AgentId,
    /// The parent's call that requested it: a `use_agent`,
    /// `delegate_task` or `agent` call, or the `send` that resumed a
    /// finished child as this run.
    pub parent_tool_use_id: ToolUseId,
    /// Its name: its profile's name, else the first line of its system
    /// prompt.
    pub name: String,
    /// The tools it may call.
    pub tools: Vec<String>,
    /// True when nobody waits for it inline: the parent's call said so
    /// (`wait: false`), its profile runs in the background, or a host
    /// requested it.
    pub background: bool,
    /// A new run of a finished child, which it goes on from (see
    /// docs/lifecycle.md, "Runs").
    #[serde(default)]
    pub resumed_from: Option<AgentId>,
}

/// Where a child (one run of it) is in its life. Statuses only move
/// forward, in this order: `Queued` → `Running` → `Background` → one
/// terminal status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubAgentStatus {
    /// Waiting for a live slot.
    Queued,
    /// It took a live slot and runs. A child started with `wait: false`
    /// shows it only when it got a slot at once (then `background` follows
    /// at once); a queued background child's start is `ChildRunning`.
    Running,
    /// Handed off: the parent no longer waits; it runs or waits on its own.
    Background,
    /// Finished with an answer (possibly a partial one).
    Done,
    /// Failed: the model erred, or the child panicked.
    Failed,
    /// Stopped from outside.
    Stopped,
    /// Interrupted: its call in flight was cut and it waits for a message
    /// (`use_agent send` resumes it as a new run); also a child that was
    /// running or queued when its process died.
    Interrupted,
}

impl SubAgentStatus {
    /// The position in the forward-only order (terminal statuses share one).
    pub fn rank(self) -> u8 {
        match self {
            SubAgentStatus::Queued => 0,
            SubAgentStatus::Running => 1,
            SubAgentStatus::Background => 2,
            SubAgentStatus::Done
            | SubAgentStatus::Failed
            | SubAgentStatus::Stopped
            | SubAgentStatus::Interrupted => 3,
        }
    }

    /// True for `Done`, `Failed`, `Stopped` and `Interrupted`.
    pub fn is_terminal(self) -> bool {
        self.rank() == 3
    }

    /// The lower-case name used in text (`"done"`).
    pub fn as_str(self) -> &'static str {
        match self {
            SubAgentStatus::Queued => "queued",
            SubAgentStatus::Running => "running",
            SubAgentStatus::Background => "background",
            SubAgentStatus::Done => "done",
            SubAgentStatus::Failed => "failed",
            SubAgentStatus::Stopped => "stopped",
            SubAgentStatus::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for SubAgentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How deep `Child` events may nest when read back. Each level is a frame
/// of the decoder's stack, and bytes from another node must not overflow
/// it (that aborts the process; it is not an error). Deeper than any
/// delegation tree (a remote child's reports hold none at all), and
/// serde_json's own limit.
pub(crate) const MAX_NESTING: u32 = 128;

thread_local! {
    /// `Child` levels being read on this thread now.
    static NESTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Reads a `Child`'s event one level deeper; an error past [`MAX_NESTING`].
fn nested<'de, D: serde::Deserializer<'de>>(reader: D) -> Result<Box<AgentEvent>, D::Error> {
    one_level_deeper(reader)
}

/// Reads `T` one level deeper (a child's event, a child's transcript); an
/// error past [`MAX_NESTING`] levels of either.
pub(crate) fn one_level_deeper<'de, D, T>(reader: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    /// Leaves the level however the read ends.
    struct Level;
    impl Drop for Level {
        fn drop(&mut self) {
            NESTING.with(|n| n.set(n.get().saturating_sub(1)));
        }
    }
    let depth = NESTING.with(|n| {
        n.set(n.get() + 1);
        n.get()
    });
    let _level = Level;
    if depth > MAX_NESTING {
        return Err(serde::de::Error::custom(format!(
            "children nested deeper than {MAX_NESTING} levels"
        )));
    }
    T::deserialize(reader)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every slot of an event channel's blocks and every nested event's
    /// box is the size of the largest variant: large payloads are boxed.
    #[test]
    fn an_event_is_at_most_80_bytes() {
        let size = std::mem::size_of::<AgentEvent>();
        assert!(size <= 80, "AgentEvent is {size} bytes");
    }

    /// The typed host boundary (review): a refusal read "already answered
    /// (Approve)" — the decision's `Debug`, in a sentence a host shows.
    #[test]
    fn an_answered_approval_says_its_answer_in_words() {
        let refusal = ApprovalRefusal::AlreadyAnswered {
            id: ApprovalId::new("agent_1-approval-1"),
            decision: ApprovalDecision::Deny,
        };
        assert_eq!(
            refusal.to_string(),
            "the approval `agent_1-approval-1` was already answered (denied)"
        );
    }
}
