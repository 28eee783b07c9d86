//! What the **Hub** is asked and shows: a request for a child, what a
//! detach found, its counts. Its messages live with the actor
//! (`subagents_actors::hub`).

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, ToolUseId};
use crate::model::Usage;

/// A request for a child, as `use_agent run` makes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildRequest {
    /// The agent asking (its events get the child's `ChildStarted`).
    pub requester: AgentId,
    /// The requester's depth (0 for a parent). A hub does not take it on
    /// trust: it sets it to the depth it knows for the requester (the
    /// parent 0, a child one below its own requester) before the depth
    /// limit is checked, so a request cannot claim its way past it.
    pub requester_depth: u32,
    /// The requester's `use_agent` call.
    pub parent_tool_use_id: ToolUseId,
    /// The child's system prompt; its first line is the child's name.
    pub system_prompt: String,
    /// The child's one input (its task).
    pub input: String,
    /// The tools it may call, from those its requester may hand on (the
    /// host's for the parent; a child's own, less delegation, for a
    /// child); `None`: all of them.
    pub tools: Option<Vec<String>>,
    /// `wait: false`: the requester does not wait.
    pub background: bool,
    /// The child's name — its profile's, for a delegation call — which
    /// `Placement::Labels` matches against a node's labels; `None`: it is
    /// shown by the first line of its system prompt and placed by no
    /// label.
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
    /// The child never delegates, even below the hub's depth limit (its
    /// profile denies a delegation tool). `false` when read from data
    /// written before it was kept.
    #[serde(default)]
    pub no_delegation: bool,
    /// At most this much wall clock for the child (what its requester has
    /// left, for a requester that waits to the end); `None`: the child
    /// limits alone. Read when the child starts: a child handed to the
    /// background before it started runs on the child limits; one handed
    /// over while it runs (its requester stopped under `Detach`) keeps
    /// the caps it started with — its turn's limits are fixed at its
    /// start (docs/front-ends.md). A host's request
    /// (`HubHandle::request`, always background) is never capped — set
    /// the hub's child limits instead.
    #[serde(default)]
    pub wall_clock_cap: Option<std::time::Duration>,
    /// At most this many tokens for the child, likewise (and likewise only
    /// while the requester waits).
    #[serde(default)]
    pub token_cap: Option<u64>,
    /// Request options for the child's model calls (from its profile),
    /// over the hub's own child options field by field.
    #[serde(default)]
    pub options: Option<crate::model::RequestOptions>,
    /// A new run of this finished child (`use_agent send` to it): the
    /// run goes on from `conversation`, and `input` is the message. Set by
    /// the hub alone: a request naming one is refused
    /// (`Refused::ResumeRequested`).
    #[serde(default)]
    pub resumed_from: Option<AgentId>,
    /// The conversation a resumed run goes on from (empty for a new
    /// child).
    #[serde(default)]
    pub conversation: Vec<crate::model::ChatMessage>,
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
            no_delegation: false,
            wall_clock_cap: None,
            token_cap: None,
            options: None,
            resumed_from: None,
            conversation: Vec::new(),
        }
    }
}

/// The hub's counts, as a query sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubSnapshot {
    /// The live-children cap, per requester (the parent's children share
    /// it, each child's own children another: `live` counts every depth).
    pub max_live: usize,
    /// Children holding a slot (starting or running).
    pub live: usize,
    /// Children waiting for a slot.
    pub queued: usize,
    /// Children ever requested.
    pub requested: usize,
    /// Children that reached a terminal status.
    pub finished: usize,
    /// Tokens every child of the hub used (any depth, running ones so far,
    /// detached and stopped ones included).
    pub usage: Usage,
    /// Model calls every child made.
    pub model_calls: u64,
    /// Tool calls every child made.
    pub tool_calls: u64,
}
