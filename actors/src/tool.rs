//! The `Tool` trait, the tool registry, and running a call safely: an
//! error or a panic becomes a sentence the model reads, never a crash.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use subagents_messages::{AgentId, ToolSpec, ToolUseId};

use crate::panics::{drop_guarded, panic_text};

/// What a tool call returns: the text the model reads, or an error.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send>>;

/// A tool an agent can call.
///
/// The calls of one model answer run one after another, in the order the
/// model wrote them — a call that waits on a sibling of the same answer
/// waits until the wall clock, and three `use_agent run` calls of one
/// answer start their children one by one. A stop or the wall clock drops
/// a call's future where it waits (its `Drop` runs; a task it spawned
/// runs on): answer it with [`ToolCallContext::settle`] or
/// [`ToolCallContext::on_cut`] to choose what the model reads then.
///
/// A call must not block its thread: a stop, the wall clock and every
/// other actor on that worker (the gate, the hub, other threads; the whole
/// runtime on a current-thread one) wait until it yields. Run blocking
/// work (a process, a slow file system, a large parse) with
/// `tokio::task::spawn_blocking` and await it. Work that ran past the
/// wall clock anyway ends the turn before anything else starts.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> String;

    /// A JSON schema of its arguments.
    fn parameters(&self) -> serde_json::Value;

    /// Whether this call must wait for the host's approval. Called in
    /// the turn's task, as `name`, `description` and `parameters` are
    /// when a request is built: these must answer at once, never block.
    fn requires_approval(&self, _arguments: &str) -> bool {
        false
    }

    /// Runs one call. `call.arguments` is the JSON string the model wrote,
    /// already checked to be valid JSON.
    fn call(&self, call: ToolCallContext) -> ToolFuture;

    /// The spec the model sees.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description(),
            parameters: self.parameters().to_string(),
        }
    }
}

/// Everything a tool learns about the call it is running.
///
/// Not its agent's event stream: a tool's work reaches the stream as its
/// `ToolResult`, written by the agent. A tool that held the turn's sink
/// could write events only the agent writes (a second `Result`, another
/// child's status) or close it, and a turn whose sink a tool closed never
/// ended (its call left unanswered, no `Result`, a stop could not end it):
///
/// ```compile_fail
/// fn forge(call: &subagents_actors::ToolCallContext) {
///     let _ = &call.events;
/// }
/// ```
#[derive(Clone, Debug)]
pub struct ToolCallContext {
    /// The call's id.
    pub tool_use_id: ToolUseId,
    /// The arguments, a JSON string.
    pub arguments: String,
    /// The agent calling.
    pub agent_id: AgentId,
    /// The calling agent's depth: 0 for a parent, 1 for its children.
    pub depth: u32,
    /// Names of the tools the calling agent has.
    pub available_tools: Arc<[String]>,
    /// The call's hold on its turn.
    pub(crate) slot: crate::agent::CallSlot,
    /// What the calling turn has left when the call starts (`None` out of
    /// a turn).
    pub(crate) left: Option<TurnLeft>,
}

/// What a turn has left of its limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TurnLeft {
    /// When its wall clock runs out.
    pub(crate) deadline: tokio::time::Instant,
    /// Tokens of its budget not used yet.
    pub(crate) tokens: u64,
}

impl ToolCallContext {
    /// A context outside any turn (for testing a tool on its own):
    /// [`ToolCallContext::settle`] always succeeds and
    /// [`ToolCallContext::on_cut`] does nothing.
    pub fn detached(
        tool_use_id: ToolUseId,
        arguments: impl Into<String>,
        agent_id: AgentId,
    ) -> Self {
        Self {
            tool_use_id,
            arguments: arguments.into(),
            agent_id,
            depth: 0,
            available_tools: Arc::from(Vec::new()),
            slot: Default::default(),
            left: None,
        }
    }

    /// The output the model reads for this call if the turn is cut (stopped,
    /// or ended by a limit) before the call returns — instead of a sentence
    /// saying it was stopped. Not an error: use it to say what goes on
    /// (`use_agent` says which sub-agent continues in the background).
    pub fn on_cut(&self, output: impl Into<String>) {
        self.slot.on_cut(output.into());
    }

    /// Fixes what the model reads for this call before the tool returns
    /// it: the call is answered with `output` (in the stream and in the
    /// conversation) whatever the tool returns after, and if the turn is
    /// cut from now on. Returns `false`
    /// when the turn was already cut: then `output` will never reach the
    /// model, and a tool that delivers something exactly once (the
    /// delegation tools, a child's result) must deliver it another way —
    /// and when the call was settled already: the first settle stands
    /// (a second replaced it while both said `true`). Outside a turn it
    /// returns `true`.
    pub fn settle(&self, output: &Result<String, ToolError>) -> bool {
        self.slot.settle(output)
    }

    /// Settles the call's output and takes what `claim` delivers with it
    /// (a child's tokens, counted in the calling turn's `children_usage`)
    /// in one step: see [`CallSlot::deliver`](crate::agent::CallSlot).
    pub(crate) fn deliver(
        &self,
        output: &Result<String, ToolError>,
        claim: impl FnOnce() -> Option<subagents_messages::Usage>,
    ) -> bool {
        self.slot.deliver(output, claim)
    }
}

/// A tool call failed; the text is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments do not fit the tool.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// There is no tool of that name (the call, or a list of tools, named
    /// one the registry lacks).
    #[error("there is no tool named `{name}`; the tools available are: {available}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names available, comma-separated (`none` if empty).
        available: String,
    },
}

/// A set of tools by name, in the order added. Cheap to clone.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    inner: Arc<Tools>,
}

/// What a registry shares between its clones.
#[derive(Default)]
struct Tools {
    tools: Vec<Arc<dyn Tool>>,
    index: rustc_hash::FxHashMap<String, usize>,
    /// The names, in the order added: kept, so each agent and child that
    /// gets the registry shares them instead of copying every name.
    names: Arc<[String]>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool (replacing one of the same name).
    pub fn with(self, tool: impl Tool) -> Self {
        self.with_shared(Arc::new(tool))
    }

    /// Adds a shared tool (replacing one of the same name).
    pub fn with_shared(self, tool: Arc<dyn Tool>) -> Self {
        let name = tool.name().to_owned();
        self.with_named(tool, name)
    }

    /// Adds `tool` under `name`, read once: the index, the names and the
    /// spec the model sees all say it, whatever `name()` says later (a
    /// tool whose name changed between calls, or whose `spec()` named
    /// another, had the model call a name the registry did not know).
    fn with_named(self, tool: Arc<dyn Tool>, name: String) -> Self {
        let mut tools: Vec<Arc<dyn Tool>> = self.inner.tools.clone();
        let mut names: Vec<String> = self.inner.names.to_vec();
        let mut index = self.inner.index.clone();
        match index.get(&name) {
            Some(&at) => tools[at] = tool,
            None => {
                index.insert(name.clone(), tools.len());
                tools.push(tool);
                names.push(name);
            }
        }
        let names = names.into();
        Self {
            inner: Arc::new(Tools {
                tools,
                index,
                names,
            }),
        }
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.inner.index.get(name).map(|&at| &self.inner.tools[at])
    }

    /// True when a tool of this name is here.
    pub fn contains(&self, name: &str) -> bool {
        self.inner.index.contains_key(name)
    }

    /// The names, in the order added.
    pub fn names(&self) -> Vec<String> {
        self.inner.names.to_vec()
    }

    /// The names, shared (no copy).
    pub(crate) fn shared_names(&self) -> Arc<[String]> {
        self.inner.names.clone()
    }

    /// The specs the model sees, in the order added, each under the name
    /// its tool was added with.
    ///
    /// A tool whose `description` or `parameters` panics is left out
    /// (logged): built for every model call, it failed every turn of the
    /// agent as "crashed", naming no tool.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.inner
            .tools
            .iter()
            .zip(self.inner.names.iter())
            .filter_map(|(tool, name)| {
                match std::panic::catch_unwind(AssertUnwindSafe(|| tool.spec())) {
                    Ok(spec) => Some(ToolSpec {
                        name: name.clone(),
                        ..spec
                    }),
                    Err(panic) => {
                        let panic = panic_text(panic);
                        tracing::warn!(tool = %name, %panic, "a tool's description or parameters panicked: left out of the model's list");
                        None
                    }
                }
            })
            .collect()
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.inner.tools.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.inner.tools.is_empty()
    }

    /// The tools named, in the order named; the first unknown name is an
    /// error the model can read ([`ToolError::Unknown`]).
    pub fn subset<S: AsRef<str>>(&self, names: &[S]) -> Result<ToolRegistry, ToolError> {
        // Built once: added one at a time, each name copied every tool,
        // name and index entry so far (a model's list of 15,000 names,
        // one repeated, was 10⁸ copies in the hub's handler).
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut index = rustc_hash::FxHashMap::default();
        let mut kept: Vec<String> = Vec::new();
        for name in names {
            let name = name.as_ref();
            let tool = self.get(name).ok_or_else(|| self.unknown(name))?;
            if !index.contains_key(name) {
                index.insert(name.to_owned(), tools.len());
                tools.push(tool.clone());
                kept.push(name.to_owned());
            }
        }
        Ok(Self {
            inner: Arc::new(Tools {
                tools,
                index,
                names: kept.into(),
            }),
        })
    }

    /// The registry without the tool of this name.
    pub fn without(&self, name: &str) -> ToolRegistry {
        // Shared when there is nothing to take out, else built once:
        // added one at a time, each tool copied every tool, name and
        // index entry so far — n² for a host's n tools, three times in
        // the hub's handler for every request a child made.
        if !self.contains(name) {
            return self.clone();
        }
        let mut tools: Vec<Arc<dyn Tool>> = Vec::with_capacity(self.len());
        let mut index = rustc_hash::FxHashMap::default();
        let mut kept: Vec<String> = Vec::with_capacity(self.len());
        for (tool, n) in self.inner.tools.iter().zip(self.inner.names.iter()) {
            if n != name {
                index.insert(n.clone(), tools.len());
                tools.push(tool.clone());
                kept.push(n.clone());
            }
        }
        Self {
            inner: Arc::new(Tools {
                tools,
                index,
                names: kept.into(),
            }),
        }
    }

    /// The error for a name not here ([`ToolError::Unknown`]).
    pub fn unknown(&self, name: &str) -> ToolError {
        let names = self.names();
        ToolError::Unknown {
            name: name.to_owned(),
            available: if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            },
        }
    }
}

/// The outcome of one call as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolOutcome {
    /// The text the model reads.
    pub(crate) output: String,
    /// True when `output` is an error sentence.
    pub(crate) is_error: bool,
}

impl ToolOutcome {
    fn error(output: String) -> Self {
        Self {
            output,
            is_error: true,
        }
    }
}

/// Runs one call of `tool` (its arguments an object: the turn refuses any
/// other before it asks an approval), turning an error or a panic into an
/// error sentence for the model. Registered as `name` (read once, at
/// registration: a tool's `name()` is not asked again, outside every
/// panic guard, and may not say what it said then).
pub(crate) async fn run_tool(
    tool: &Arc<dyn Tool>,
    name: &str,
    call: ToolCallContext,
) -> ToolOutcome {
    let future = match std::panic::catch_unwind(AssertUnwindSafe(|| tool.call(call))) {
        Ok(future) => future,
        Err(panic) => return ToolOutcome::error(crashed(name, panic)),
    };
    match AssertUnwindSafe(Contained(Some(future)))
        .catch_unwind()
        .await
    {
        Ok(Ok(output)) => ToolOutcome {
            output,
            is_error: false,
        },
        Ok(Err(e)) => ToolOutcome::error(error_output(name, &e)),
        Err(panic) => ToolOutcome::error(crashed(name, panic)),
    }
}

/// A tool's future, dropped inside a panic guard: a future whose `Drop`
/// panics — as its call completes, or as a stop or the wall clock drops
/// it — crashed the whole turn (the call that had finished was answered
/// as cut, the answer's other calls never ran, a wall-clock cut read as a
/// crash). Such a panic is logged; the call's outcome stands.
struct Contained(Option<ToolFuture>);

impl Future for Contained {
    type Output = Result<String, ToolError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(future) = self.0.as_mut() else {
            // Polled after it completed: never (it is awaited once).
            return std::task::Poll::Pending;
        };
        let out = std::task::ready!(future.as_mut().poll(cx));
        drop_contained(self.0.take());
        std::task::Poll::Ready(out)
    }
}

impl Drop for Contained {
    fn drop(&mut self) {
        drop_contained(self.0.take());
    }
}

fn drop_contained(future: Option<ToolFuture>) {
    drop_guarded(future, "a tool's future");
}

/// What the model reads for a tool that returned an error.
pub(crate) fn error_output(name: &str, error: &ToolError) -> String {
    format!("the tool `{name}` failed: {error}")
}

fn crashed(name: &str, panic: Box<dyn std::any::Any + Send>) -> String {
    format!(
        "the tool `{name}` crashed ({}); try another approach",
        panic_text(panic)
    )
}

#[cfg(test)]
mod tests;
