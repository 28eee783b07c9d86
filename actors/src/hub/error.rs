//! Why the hub did not do what it was asked: typed, each carrying what it
//! is about; their sentences are what a model reads.

use subagents_messages::AgentId;

use crate::tool::ToolError;

/// Where a message sent to a child went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Steered {
    /// It runs: it reads the message at its next model call.
    Running,
    /// It waits for a slot: it reads the message after its task, at its
    /// first model call.
    Queued,
    /// It had finished: it goes on from its conversation as this new run
    /// (in the background), which reads the message first.
    Resumed(AgentId),
}

/// Why the hub refused a request: no child was made (`request`), or no
/// child was stopped (`stop`). One enum for both, so a caller matches one
/// set of reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The requester is already as deep as children may go (with a
    /// maximum depth of 0, the parent itself: no sub-agents at all).
    #[error("{}", too_deep(*max_depth))]
    TooDeep {
        /// The deepest a child may be.
        max_depth: u32,
    },
    /// The requester is not an agent of this hub.
    #[error("the agent `{0}` is not known to this hub")]
    UnknownRequester(AgentId),
    /// A listed tool is not one the hub offers (always
    /// [`ToolError::Unknown`]: it names the tool and those there are).
    #[error(transparent)]
    UnknownTool(ToolError),
    /// The model override names nothing registered.
    #[error(
        "no model `{model}`{} is registered; the models you may pass are: {available}; or omit `model` to run on your own model",
        provider.as_deref().map(|p| format!(" from provider `{p}`")).unwrap_or_default()
    )]
    UnknownModel {
        /// The model asked for.
        model: String,
        /// The provider asked for, if one was.
        provider: Option<String>,
        /// The models registered, as a model reads them (`` `haiku`
        /// (provider `anthropic`) ``, comma-separated).
        available: String,
    },
    /// The model override names a model several providers serve, and no
    /// provider.
    #[error(
        "the model `{model}` is served by several providers ({}); name the provider",
        providers.join(", ")
    )]
    AmbiguousModel {
        /// The model asked for.
        model: String,
        /// The providers serving it, in registration order.
        providers: Vec<String>,
    },
    /// Every child id up to `ChildIds::MAX`
    /// has been handed out.
    #[error(
        "no child id is left: every number up to agent_{} is taken",
        crate::hub::ChildIds::MAX
    )]
    IdsExhausted,
    /// No child has that id (a stop).
    #[error("there is no sub-agent with id `{0}`; ids look like `agent_1`")]
    UnknownChild(AgentId),
    /// The child's turn gave its final answer as the message arrived, or
    /// it is being stopped: it takes the message once it has ended (a
    /// send).
    #[error(
        "the sub-agent `{id}` is ending and cannot take the message now; send it again once it has ended"
    )]
    Finished {
        /// The child.
        id: AgentId,
    },
    /// The requester's turn has ended (a host's request naming a child
    /// whose turn is over): a sub-agent is requested while the turn that
    /// waits for it runs. It read as a send's refusal ("is ending … send
    /// it again").
    #[error("the agent `{id}` has ended its turn and cannot request a sub-agent now")]
    RequesterEnded {
        /// The requester.
        id: AgentId,
    },
    /// The requester waits in the queue for a slot and has not started
    /// (a grandchild resumed under its requester's newest run, queued; a
    /// host's request in a queued child's name): no sub-agent can be
    /// started for it yet. It read "has ended", or "not known to this
    /// hub".
    #[error(
        "the agent `{id}` waits in the queue and has not started; it cannot request a sub-agent yet"
    )]
    RequesterNotStarted {
        /// The requester.
        id: AgentId,
    },
    /// The child was stopped: a stopped child does not resume (a send).
    #[error(
        "the sub-agent `{id}` was stopped and does not resume; start a new one with action run"
    )]
    Stopped {
        /// The child.
        id: AgentId,
    },
    /// A child of an earlier session whose saved run (what it was asked,
    /// its conversation) is missing or unreadable: it is known (its
    /// envelope answers `status` and `result`) but cannot resume (a send).
    #[error(
        "the sub-agent `{id}` ended in an earlier session, but what it was asked and its conversation were not saved readably, so it cannot resume; action result still reads its answer; start a new one with action run"
    )]
    NotResumable {
        /// The child (the run the message reached).
        id: AgentId,
    },
    /// A finished child whose run cannot go on here: the model it ran on
    /// (or a tool it had) is not registered on this hub — a deploy that
    /// renamed it, another builder on the same store. The refusal of a
    /// `run` ("or omit `model`") is advice a message cannot follow.
    #[error(
        "the sub-agent `{id}` cannot go on here: {why}; action result still reads its answer; start a new one with action run"
    )]
    CannotResume {
        /// The child (the run the message reached).
        id: AgentId,
        /// What is missing here (its model, a tool).
        why: String,
    },
    /// A child of an earlier session another thread on the same store
    /// resumed (perhaps in the same instant): its new run is that
    /// thread's, and the chain of runs does not fork.
    #[error(
        "the sub-agent `{id}` ended in an earlier session and another thread has resumed it, so its new run is not yours to reach; action result still reads its answer; start a new one with action run"
    )]
    ResumedElsewhere {
        /// The child.
        id: AgentId,
    },
    /// A request option no server takes (a host's request, or a stored
    /// run another tool or version wrote): it would fail every model call,
    /// or be dropped without a word (a `temperature` that is not a number
    /// goes to the server as `null`). Checked as a builder's are.
    #[error("the sub-agent's request option `{field}` {why}")]
    Options {
        /// The option.
        field: &'static str,
        /// What is wrong with its value.
        why: String,
    },
    /// A request naming a run to go on from
    /// ([`ChildRequest::resumed_from`](subagents_messages::ChildRequest::resumed_from)):
    /// a finished child goes on only when a message reaches it (`use_agent
    /// send`), checked as one (a stopped child, one another thread
    /// resumed) and linked to its new run. Set by a host, it skipped all
    /// of that: a stopped child's chain went on, or forked.
    #[error(
        "a request cannot name a run to go on from (`{id}`): a finished sub-agent goes on when a message reaches it (use_agent action send)"
    )]
    ResumeRequested {
        /// The run it named.
        id: AgentId,
    },
    /// The request's `input` (the child's task) is empty, or only
    /// whitespace: the child's first model call would hold an empty
    /// message, which servers refuse (a delegation tool's call with an
    /// empty task is refused as such).
    #[error("the sub-agent's task (`input`) is empty")]
    EmptyTask,
    /// The hub is stopped.
    #[error("the sub-agent hub is stopped")]
    Closed,
}

/// [`Refused::TooDeep`]'s sentence: a depth of 0 refuses the parent, which
/// is no sub-agent.
fn too_deep(max_depth: u32) -> String {
    match max_depth {
        0 => "no sub-agents may be started here: the maximum depth is 0".to_owned(),
        n => format!("a sub-agent cannot start sub-agents: the maximum depth is {n}"),
    }
}
