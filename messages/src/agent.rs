//! What an **Agent** shows: its snapshot. Its messages live with the actor (`subagents_actors::agent`).

use serde::{Deserialize, Serialize};

use crate::model::Usage;

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
    /// Tokens its own model calls used, over its finished turns.
    pub usage: Usage,
    /// Tokens the children whose results its finished turns took used
    /// (theirs and their children's).
    pub children_usage: Usage,
    /// Model calls over its finished turns.
    pub model_calls: u64,
    /// Tool calls over its finished turns.
    pub tool_calls: u64,
}
