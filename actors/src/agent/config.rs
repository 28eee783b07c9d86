//! How an agent is set up, built and spawned.

use std::sync::Arc;

use ractor::{Actor, ActorCell};
use subagents_messages::{AgentId, ApprovalDecision, Limits, RequestOptions};

use crate::agent::handle::{AgentError, AgentHandle};
use crate::agent::spans::TraceSettings;
use crate::agent::state::{AgentActor, AgentArguments};
use crate::gate::GateHandle;
use crate::model::Model;
use crate::sink::{EventSink, EventStream};
use crate::tool::ToolRegistry;

/// How an agent is set up. Parent and child differ only here.
pub(crate) struct AgentConfig {
    /// Its id (`parent` for a thread's parent, `agent_N` for children).
    pub(crate) id: AgentId,
    /// Its system prompt.
    pub(crate) system_prompt: String,
    /// The model it calls.
    pub(crate) model: Arc<dyn Model>,
    /// The gate its model calls go through.
    pub(crate) gate: GateHandle,
    /// The tools it may call.
    pub(crate) tools: ToolRegistry,
    /// Names of `tools`, shared with every tool call.
    pub(crate) tool_names: Arc<[String]>,
    /// Limits on each turn.
    pub(crate) limits: Limits,
    /// 0 for a parent, 1 for its children.
    pub(crate) depth: u32,
    /// Its profile denies it delegation though it runs above the depth
    /// limit: a delegation call it makes is told so, not that delegation
    /// goes no deeper.
    pub(crate) delegation_denied: bool,
    /// Consulted before asking the host: a decision here answers the
    /// approval at once, with no `ApprovalRequested` event (the hub's
    /// policy for background children uses it).
    pub(crate) approvals: Option<Arc<dyn ApprovalPolicy>>,
    /// `approvals` may come to answer what it said to ask (the hub's, for
    /// a child handed to the background): a request is looked at once
    /// more after it is asked. Never a host's policy: it is asked once.
    pub(crate) approvals_recheck: bool,
    /// Sent with each of its model calls.
    pub(crate) options: RequestOptions,
    /// Where it publishes its running turn (the hub reads a child's
    /// progress there), if anyone reads it.
    pub(crate) probe: Option<crate::agent::Probe>,
    /// Where its runs sit in a trace.
    pub(crate) trace: crate::agent::spans::TraceParent,
    /// Called when the actor is dropped without its stop (killed) while a
    /// turn runs, before that turn ends: a child's (and a thread's
    /// parent's) ends the turns of every child of its hub in a fixed order
    /// if the hub or its thread is dying (see
    /// [`crate::agent::running::TurnEnds`]).
    pub(crate) on_killed: Option<KillHook>,
}

/// See [`AgentConfig::on_killed`].
pub(crate) type KillHook = Arc<dyn Fn() + Send + Sync>;

impl AgentConfig {
    /// What [`Self::approvals`] decides for this agent's call of `tool`
    /// with `arguments` (`None`: no policy, or it asks the host).
    pub(crate) fn policy_decides(&self, tool: &str, arguments: &str) -> Option<ApprovalDecision> {
        (self.approvals.as_ref()).and_then(|p| p.decide(&self.id, tool, arguments))
    }
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("id", &self.id)
            .field("model", &self.model.name())
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

/// Decides an approval without asking the host, or defers (`None`).
/// Called in the calling turn's task (and for a remote child in its
/// proxy's handler): `decide` must answer at once, never block.
pub trait ApprovalPolicy: Send + Sync + 'static {
    /// The decision for `tool` called by `agent`, or `None` to ask.
    fn decide(&self, agent: &AgentId, tool: &str, arguments: &str) -> Option<ApprovalDecision>;
}

/// Builds and spawns an agent.
pub struct AgentBuilder {
    id: AgentId,
    system_prompt: String,
    model: Arc<dyn Model>,
    gate: Option<GateHandle>,
    tools: ToolRegistry,
    limits: Limits,
    depth: u32,
    approvals: Option<Arc<dyn ApprovalPolicy>>,
    options: RequestOptions,
    trace: TraceSettings,
    on_killed: Option<KillHook>,
    approvals_after: u64,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// Starts building an agent on `model` (its id `parent`, no tools, the
    /// default limits, no approval policy).
    pub fn new(model: Arc<dyn Model>) -> AgentBuilder {
        AgentBuilder {
            id: AgentId::new("parent"),
            system_prompt: String::new(),
            model,
            gate: None,
            tools: ToolRegistry::new(),
            limits: Limits::default(),
            depth: 0,
            approvals: None,
            options: RequestOptions::default(),
            trace: TraceSettings::default(),
            on_killed: None,
            approvals_after: 0,
        }
    }
}

impl AgentBuilder {
    /// Its id (default `parent`).
    pub fn id(mut self, id: impl Into<AgentId>) -> Self {
        self.id = id.into();
        self
    }

    /// Its system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// The gate its model calls go through (default: a new gate of
    /// capacity 1 for this agent alone).
    pub fn gate(mut self, gate: GateHandle) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Its tools.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Its limits (default: 20 model calls, 50,000 tokens, 300 s).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Its depth (0 for a parent).
    pub fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// Answers approvals by `policy` before asking the host.
    pub fn approvals(mut self, policy: Arc<dyn ApprovalPolicy>) -> Self {
        self.approvals = Some(policy);
        self
    }

    /// Options sent with each of its model calls (`tool_choice`,
    /// `max_tokens`, `temperature`, …; default: none, the server's own). A
    /// choice that forces a tool goes out until the turn has tool results,
    /// then the server's default applies (sent again, no turn could answer).
    pub fn request_options(mut self, options: RequestOptions) -> Self {
        self.options = options;
        self
    }

    /// The conversation its spans belong to: `gen_ai.conversation.id` on
    /// each of them (default: none; a thread opened through `Threads`
    /// gets its thread id).
    pub fn conversation_id(mut self, id: impl Into<String>) -> Self {
        self.trace.conversation = Some(id.into().into());
        self
    }

    /// Records message content on its spans: the system prompt, each
    /// model call's input and output messages, each tool call's arguments
    /// and result (default: off, no content in any span). Content may hold
    /// what a user typed and what tools read: turn it on only where the
    /// trace's readers may see that.
    pub fn record_content(mut self, record: bool) -> Self {
        self.trace.content = record;
        self
    }

    /// Sets both span settings at once (for the delegation builder).
    pub(crate) fn trace_settings(mut self, settings: TraceSettings) -> Self {
        self.trace = settings;
        self
    }

    /// See [`AgentConfig::on_killed`] (a thread's parent: its children's
    /// turns end before its own when the whole thread is killed).
    pub(crate) fn on_killed(mut self, hook: KillHook) -> Self {
        self.on_killed = Some(hook);
        self
    }

    /// The number its first approval follows (0: it is `…-approval-1`).
    pub(crate) fn approvals_after(mut self, n: u64) -> Self {
        self.approvals_after = n;
        self
    }

    /// The finished config, spawning a gate if none was given.
    pub(crate) async fn config(self) -> Result<AgentConfig, AgentError> {
        check_options(&self.options).and(check_limits(&self.limits))?;
        let gate = match self.gate {
            Some(gate) => gate,
            None => GateHandle::spawn(1)
                .await
                .map_err(|e| AgentError::from_spawn(&e))?,
        };
        let tool_names = self.tools.shared_names();
        Ok(AgentConfig {
            id: self.id,
            system_prompt: self.system_prompt,
            model: self.model,
            gate,
            tools: self.tools,
            tool_names,
            limits: self.limits,
            depth: self.depth,
            delegation_denied: false,
            approvals: self.approvals,
            approvals_recheck: false,
            options: self.options,
            probe: None,
            on_killed: self.on_killed,
            trace: crate::agent::spans::TraceParent {
                span: None,
                parent_agent: None,
                mode: "top",
                settings: self.trace,
            },
        })
    }

    /// Spawns the agent with a stream of its own.
    pub async fn spawn(self) -> Result<(AgentHandle, EventStream), AgentError> {
        let (events, stream) = EventSink::channel();
        let handle = self.spawn_into(events, None).await?;
        Ok((handle, stream))
    }

    /// Spawns the agent writing to `events`, linked under `supervisor` if
    /// given (a ractor actor of the host, which must override
    /// `handle_supervisor_evt`: ractor's default stops it when the agent
    /// stops).
    pub async fn spawn_into(
        self,
        events: EventSink,
        supervisor: Option<ActorCell>,
    ) -> Result<AgentHandle, AgentError> {
        let approvals_after = self.approvals_after;
        let config = Arc::new(self.config().await?);
        spawn_numbered(config, events, Vec::new(), supervisor, approvals_after).await
    }
}

/// Refuses options no server takes, as a profile's are refused: a NaN or
/// out-of-range sampling setting was sent as `null` (silently nothing),
/// `max_tokens` 0 failed every model call.
pub(crate) fn check_options(options: &RequestOptions) -> Result<(), AgentError> {
    let sampling = [
        ("temperature", options.temperature, 2.0),
        ("top_p", options.top_p, 1.0),
    ];
    for (field, value, high) in sampling {
        if let Some(v) = value.filter(|v| !(v.is_finite() && (0.0..=high).contains(v))) {
            let why = format!("must be a number from 0 to {high}, not {v}");
            return Err(AgentError::Options { field, why });
        }
    }
    if options.max_tokens == Some(0) {
        let why = "must be at least 1 (0 would fail every model call)".to_owned();
        return Err(AgentError::Options {
            field: "max_tokens",
            why,
        });
    }
    if let Some(seed) = options.seed.filter(|s| *s > MAX_SEED) {
        return Err(AgentError::Options {
            field: "seed",
            why: seed_why(seed),
        });
    }
    Ok(())
}

/// The largest seed servers take: vLLM and Ollama read it as a signed
/// 64-bit integer and refuse a larger one (400) on every call.
pub(crate) const MAX_SEED: u64 = i64::MAX as u64;

/// Why a seed past [`MAX_SEED`] is refused.
pub(crate) fn seed_why(seed: u64) -> String {
    format!("must be at most {MAX_SEED} (servers read a signed 64-bit integer and refuse {seed})")
}

/// Refuses limits under which no turn can do anything: 0 model calls, a
/// budget of 0 tokens or a wall clock of 0 (every turn ended at once, a
/// partial result with nothing done).
pub(crate) fn check_limits(limits: &Limits) -> Result<(), AgentError> {
    let zero = [
        ("max_model_calls", limits.max_model_calls == 0),
        ("token_budget", limits.token_budget == 0),
        ("wall_clock", limits.wall_clock.is_zero()),
    ];
    match zero.into_iter().find(|(_, zero)| *zero) {
        Some((field, _)) => Err(AgentError::Limits {
            field,
            why: "is 0: every turn would end at once, with nothing done".to_owned(),
        }),
        None => Ok(()),
    }
}

/// Spawns an agent from a finished config, its approvals numbered after
/// `approvals_after` (its thread's block: a thread's parent or child after
/// a restart, past every earlier session's). Not kept in the config: only
/// the spawn reads it.
pub(crate) async fn spawn_numbered(
    config: Arc<AgentConfig>,
    events: EventSink,
    history: Vec<subagents_messages::ChatMessage>,
    supervisor: Option<ActorCell>,
    approvals_after: u64,
) -> Result<AgentHandle, AgentError> {
    let id = config.id.clone();
    let args = AgentArguments {
        config,
        events,
        history,
        approvals_after,
    };
    let spawned = match supervisor {
        Some(supervisor) => Actor::spawn_linked(None, AgentActor, args, supervisor).await,
        None => Actor::spawn(None, AgentActor, args).await,
    };
    let (actor, _) = spawned.map_err(|e| AgentError::from_spawn(&e))?;
    Ok(AgentHandle::new(id, actor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::{Reply, ScriptedModel};

    /// Defect 10 of the edge review: an agent's private gate outlived it.
    #[tokio::test(start_paused = true)]
    async fn a_private_gate_stops_with_its_agent() {
        let config = AgentBuilder::new(ScriptedModel::new(vec![Reply::answer("hi")]).shared())
            .config()
            .await
            .unwrap();
        let gate = config.gate.actor().clone();
        let (events, _stream) = EventSink::channel();
        let agent = spawn_numbered(Arc::new(config), events, Vec::new(), None, 0)
            .await
            .unwrap();
        agent.run("hello").await.unwrap();
        agent.shutdown();
        agent.actor().wait(None).await.ok();
        tokio::time::timeout(std::time::Duration::from_secs(1), gate.wait(None))
            .await
            .expect("the agent's private gate stops with the agent")
            .ok();
    }
}
