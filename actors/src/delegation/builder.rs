//! Wiring a parent that can delegate: one gate, one hub, a `use_agent`
//! tool, and the parent agent — sharing one event stream.

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorCell;
use subagents_messages::{AgentId, Limits, RequestOptions};

use crate::agent::spans::TraceSettings;
use crate::agent::{AgentBuilder, AgentError};
use crate::clock::{Clock, SystemClock};
use crate::delegation::DelegatingAgent;
use crate::delegation::agent_tool::AgentTool;
use crate::delegation::delegate_task::DelegateTask;
use crate::delegation::engine::{AGENT, DELEGATE_TASK, Delegator, ParentStopPolicy, USE_AGENT};
use crate::delegation::use_agent::UseAgent;
use crate::gate::GateHandle;
use crate::hub::{
    BackgroundApprovals, ChildIds, EnvelopeArchive, HubConfig, HubHandle, HubObserver,
};
use crate::model::Model;
use crate::profile::ProfileSet;
use crate::registry::ModelRegistry;
use crate::remote::Placement;
use crate::sink::{EventSink, EventStream};
use crate::tool::{Tool, ToolRegistry};

#[path = "builder/check.rs"]
mod check;
use check::FrontEnds;

/// Builds a [`DelegatingAgent`].
pub struct DelegationBuilder {
    model: Arc<dyn Model>,
    system_prompt: String,
    tools: ToolRegistry,
    limits: Limits,
    child_limits: Limits,
    max_live: usize,
    inline_wait: Duration,
    result_budget: usize,
    max_depth: u32,
    parent_stop: ParentStopPolicy,
    woken: bool, // a thread's supervisor delivers its wakes
    instructions: Option<String>,
    clock: Arc<dyn Clock>,
    observers: Vec<Arc<dyn HubObserver>>,
    archive: Option<Arc<dyn EnvelopeArchive>>,
    ids: ChildIds,
    background_approvals: BackgroundApprovals,
    models: ModelRegistry,
    profiles: ProfileSet,
    front_ends: FrontEnds,
    gate: Option<GateHandle>,
    options: RequestOptions,
    child_options: RequestOptions,
    trace: TraceSettings,
    placement: Placement,
}

impl std::fmt::Debug for DelegationBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegationBuilder")
            .field("tools", &self.tools)
            .field("max_live", &self.max_live)
            .finish_non_exhaustive()
    }
}

impl DelegationBuilder {
    /// A parent on `model` with no tools yet; children: 3 live, 45 s
    /// inline wait, depth 1, detached when the parent stops.
    pub fn new(model: Arc<dyn Model>) -> Self {
        Self {
            model,
            system_prompt: String::new(),
            tools: ToolRegistry::new(),
            limits: Limits::default(),
            child_limits: Limits::default(),
            max_live: crate::defaults::MAX_LIVE,
            inline_wait: crate::defaults::INLINE_WAIT,
            result_budget: crate::defaults::RESULT_BUDGET,
            max_depth: crate::defaults::MAX_DEPTH,
            parent_stop: ParentStopPolicy::default(),
            woken: false,
            instructions: None,
            clock: Arc::new(SystemClock),
            observers: Vec::new(),
            archive: None,
            ids: ChildIds::default(),
            background_approvals: BackgroundApprovals::default(),
            models: ModelRegistry::new(),
            profiles: ProfileSet::default(),
            front_ends: FrontEnds::default(),
            gate: None,
            options: RequestOptions::default(),
            child_options: RequestOptions::default(),
            trace: TraceSettings::default(),
            placement: Placement::default(),
        }
    }

    /// The parent's system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// The parent's tools (children may be given any of them).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Limits on the parent's turns.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Options sent with each of the parent's model calls (default: none;
    /// a forced `tool_choice` until the turn has tool results, as
    /// [`AgentBuilder::request_options`](crate::AgentBuilder::request_options)
    /// says).
    pub fn request_options(mut self, options: RequestOptions) -> Self {
        self.options = options;
        self
    }

    /// Options sent with each child's model calls (default: none); a
    /// profile's own options override them field by field.
    pub fn child_request_options(mut self, options: RequestOptions) -> Self {
        self.child_options = options;
        self
    }

    /// Limits on each child's turn (model calls: at least 1, at most its parent's).
    pub fn child_limits(mut self, limits: Limits) -> Self {
        self.child_limits = limits;
        self
    }

    /// Live children at once per requester, at least 1 (0 is read as 1):
    /// the parent's children share it, and each child's own children
    /// another (see the hub's note on choosing it).
    pub fn max_live(mut self, max_live: usize) -> Self {
        self.max_live = max_live;
        self
    }

    /// How long `run` and `result` wait inline.
    ///
    /// # Choosing a value
    /// Long enough for a typical child to finish (Loopl's 45 s suits a
    /// local model); a child still running after it goes on in the
    /// background and wakes the parent later (in a thread; alone, `use_agent
    /// result` reads it), so a short wait is never wrong, only chattier.
    pub fn inline_wait(mut self, wait: Duration) -> Self {
        self.inline_wait = wait;
        self
    }

    /// How many characters of a child's answer reach the parent's context
    /// in one piece — a `use_agent` / `delegate_task` / `agent` result, or
    /// a wake (default 8,000, about 2,000 tokens; at least 100). A longer
    /// answer comes as its head (two thirds of the budget) and its tail,
    /// with a marker between them saying how many characters were left
    /// out and how to read them: `use_agent` action `result` with `id`
    /// and `offset` (and `limit`, at most the budget) reads any range. The
    /// envelope (and the store) keep the whole answer.
    pub fn result_budget(mut self, chars: usize) -> Self {
        self.result_budget = chars;
        self
    }

    /// How deep children may nest (1: children cannot spawn; 0: no
    /// delegation at all — no delegation tool is offered); at most 16
    /// ([`DelegationBuilder::check`] refuses a deeper tree).
    pub fn max_depth(mut self, depth: u32) -> Self {
        self.max_depth = depth;
        self
    }

    /// What stopping the parent mid-wait does to the child; for a child
    /// on another node, also what losing the parent's node does to it
    /// (`Detach`: it goes on and its result is kept on its node;
    /// `Cascade`: it is stopped). The parent's children only: a
    /// grandchild's cut wait, or a grandchild on a node the parent's node
    /// lost, is stopped under either.
    pub fn parent_stop(mut self, policy: ParentStopPolicy) -> Self {
        self.parent_stop = policy;
        self
    }

    /// Workflow instructions appended to every child's system prompt
    /// (ghyll: the global instructions, then the project's). Each call
    /// appends a block.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        let block = instructions.into();
        self.instructions = Some(match self.instructions.take() {
            Some(before) => format!("{before}\n\n{block}"),
            None => block,
        });
        self
    }

    /// Named sub-agents the front-ends offer (see `docs/profiles.md`).
    pub fn profiles(mut self, profiles: ProfileSet) -> Self {
        self.profiles = profiles;
        self
    }

    /// Whether the parent's model sees Loopl's `use_agent` tool (run /
    /// status / result / send / interrupt / stop / agents, inline or
    /// background). On by default. The three delegation tools share one
    /// engine (hub, queue, envelopes, events).
    pub fn use_agent_tool(mut self, offered: bool) -> Self {
        self.front_ends.use_agent = offered;
        self
    }

    /// Whether the parent's model sees openheim's `delegate_task` tool
    /// (named or inline, synchronous, final answer only). Off by default.
    pub fn delegate_task_tool(mut self, offered: bool) -> Self {
        self.front_ends.delegate_task = offered;
        self
    }

    /// Whether the parent's model sees ghyll's `agent` tool (a task only,
    /// synchronous). Off by default.
    pub fn agent_tool(mut self, offered: bool) -> Self {
        self.front_ends.agent = offered;
        self
    }

    /// The wall clock for envelope stamps (one that panics: its last good reading).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = crate::clock::guarded(clock);
        self
    }

    /// Now, by the clock envelopes are stamped with.
    #[doc(hidden)] // read by subagents-supervisor against its store's clock
    pub fn stamps_now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Told when each child is requested, finishes a step and finishes,
    /// and when a finished envelope changes ([`HubObserver`]).
    ///
    /// Observers compose: each call adds one, and every observer is told,
    /// in the order added (a thread adds its own after the host's).
    pub fn observer(mut self, observer: Arc<dyn HubObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// The observers given so far (read by subagents-supervisor, which
    /// tells them of a stop after the hub's death).
    #[doc(hidden)]
    pub fn observers_given(&self) -> Vec<Arc<dyn crate::hub::HubObserver>> {
        self.observers.clone()
    }

    /// Its wakes are delivered: the delegation tools say results arrive
    /// as messages (alone, nothing wakes it: they say to ask).
    #[doc(hidden)] // set by subagents-supervisor (a thread delivers wakes)
    pub fn wakes_parent(mut self) -> Self {
        self.woken = true;
        self
    }

    /// Answers ids of earlier sessions from `archive`.
    #[doc(hidden)] // set by subagents-supervisor (`ThreadConfig::store`)
    pub fn archive(mut self, archive: Arc<dyn EnvelopeArchive>) -> Self {
        self.archive = Some(archive);
        self
    }

    /// Where child ids come from (default: a counter of this parent's
    /// own from `agent_1`). Give every parent whose envelopes share one
    /// store the store's counter, so no two children share an id.
    #[doc(hidden)] // set by subagents-supervisor (`ThreadConfig::store`)
    pub fn child_ids(mut self, ids: ChildIds) -> Self {
        self.ids = ids;
        self
    }

    /// What a background child's approval request does (default: ask).
    pub fn background_approvals(mut self, policy: BackgroundApprovals) -> Self {
        self.background_approvals = policy;
        self
    }

    /// Models children may name (`model` / `provider` overrides); a child
    /// that names none runs on the parent's model (a sub-agent's own
    /// sub-agent, on its requester's).
    pub fn models(mut self, models: ModelRegistry) -> Self {
        self.models = models;
        self
    }

    /// Shares an existing gate (default: the registry's gate of the
    /// parent's model when [`models`](Self::models) registers that very
    /// model, else a new one of capacity 1). Children naming the parent's
    /// model (registered) queue at it too.
    pub fn gate(mut self, gate: GateHandle) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Where each child runs (default: [`Placement::Local`], this node).
    /// A child on another node runs on that node's model of the same name
    /// and its tools of the same names; docs/cluster.md.
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// The conversation the spans of the parent and every child belong
    /// to: `gen_ai.conversation.id` on each (default: none; `Threads::open`
    /// sets the thread's id).
    pub fn conversation_id(mut self, id: impl Into<String>) -> Self {
        self.trace.conversation = Some(id.into().into());
        self
    }

    /// Records message content on the spans of the parent and every child
    /// (system prompts, model input and output, tool arguments and
    /// results; default: off). See `AgentBuilder::record_content`.
    pub fn record_content(mut self, record: bool) -> Self {
        self.trace.content = record;
        self
    }

    /// Spawns everything with a new event stream.
    pub async fn spawn(self) -> Result<(DelegatingAgent, EventStream), AgentError> {
        let (events, stream) = EventSink::channel();
        Ok((self.spawn_into(events, None).await?, stream))
    }

    /// Spawns everything writing to `events`; parent, hub and owned gate linked
    /// under `supervisor` if given (which must override `handle_supervisor_evt`).
    pub async fn spawn_into(
        mut self,
        events: EventSink,
        supervisor: Option<ActorCell>,
    ) -> Result<DelegatingAgent, AgentError> {
        self.check()?;
        // Offered at depth 0, every call was refused as a sub-agent's.
        if self.max_depth == 0 {
            self.front_ends = FrontEnds {
                use_agent: false,
                delegate_task: false,
                agent: false,
            };
        }
        let spawn_error = |e: ractor::SpawnErr| AgentError::from_spawn(&e);
        // The parent's model registered for children too: its gate — and a
        // gate given for it — the gate of every name of its model object
        // and of the names behind that object's gates (the same weights:
        // a second queue let two of its calls out at once).
        let gate = (self.gate.take()).or_else(|| self.models.gate_of(&self.model).cloned());
        if let Some(gate) = &gate {
            self.models.share_gate(&self.model, gate);
        }
        let owns_gate = gate.is_none();
        let gate = match (gate, &supervisor) {
            (Some(gate), _) => gate,
            (None, Some(supervisor)) => GateHandle::spawn_linked(1, supervisor.clone())
                .await
                .map_err(spawn_error)?,
            (None, None) => GateHandle::spawn(1).await.map_err(spawn_error)?,
        };
        // Said at start, not at the first delegation that would fail.
        for warning in self.models.check_profiles(&self.profiles) {
            tracing::warn!(%warning, "profile model");
        }
        for warning in self.profiles.narrow_to(&self.tools.names()) {
            tracing::warn!(%warning, "profile tools");
        }
        let parent = AgentId::new("parent");
        let delegation_tools = Arc::new(std::sync::OnceLock::new());
        // A host tool named like a delegation tool this builder offers is
        // replaced by it for the parent; children never get the host's
        // either (they inherited it: a child at the depth limit could call
        // it, and it was not the delegation its name says).
        let mut child_tools = self.tools.clone();
        for (offered, name) in [
            (self.front_ends.use_agent, USE_AGENT),
            (self.front_ends.delegate_task, DELEGATE_TASK),
            (self.front_ends.agent, AGENT),
        ] {
            if offered && child_tools.contains(name) {
                tracing::warn!(
                    tool = name,
                    "a host tool has the name of a delegation tool; the delegation tool replaces it"
                );
                child_tools = child_tools.without(name);
            }
        }
        // One block for the thread: its parent's approvals and every
        // child's are numbered in it.
        let approvals_after = self.archive.as_ref().map_or(0, |a| a.approvals_after());
        let config = HubConfig {
            approvals_after,
            max_live: self.max_live,
            model: self.model.clone(),
            gate: gate.clone(),
            tools: child_tools,
            child_limits: self.child_limits,
            max_depth: self.max_depth,
            instructions: self.instructions,
            clock: self.clock,
            observers: self.observers,
            archive: self.archive.clone(),
            ids: self.ids,
            background_approvals: self.background_approvals,
            models: self.models,
            parent_max_model_calls: self.limits.max_model_calls,
            delegation_tools: delegation_tools.clone(),
            child_options: self.child_options,
            trace: self.trace.clone(),
            placement: self.placement,
            keep_orphans: self.parent_stop == ParentStopPolicy::Detach,
        };
        let (hub, kill_hook) =
            HubHandle::spawn(config, parent.clone(), events.clone(), supervisor.clone())
                .await
                .map_err(spawn_error)?;
        let hub = hub
            .with_inline_wait(self.inline_wait)
            .with_result_budget(self.result_budget);
        // In the order of `DELEGATION_TOOLS`.
        let offered = [
            self.front_ends.use_agent,
            self.front_ends.delegate_task,
            self.front_ends.agent,
        ];
        let delegator = Delegator::new(hub.clone(), Arc::new(self.profiles))
            .max_depth(self.max_depth)
            .parent_stop(self.parent_stop)
            .offered(offered)
            .woken(self.woken);
        let mut delegating: Vec<Arc<dyn Tool>> = Vec::new();
        if self.front_ends.use_agent {
            delegating.push(Arc::new(UseAgent::with_delegator(delegator.clone())));
        }
        if self.front_ends.delegate_task {
            delegating.push(Arc::new(DelegateTask::new(delegator.clone())));
        }
        if self.front_ends.agent {
            delegating.push(Arc::new(AgentTool::new(delegator)));
        }
        let tools = delegating
            .iter()
            .fold(self.tools, |tools, tool| tools.with_shared(tool.clone()));
        // Set before the parent exists, so before any request: children
        // below max_depth delegate through the same hub.
        let _ = delegation_tools.set(delegating);
        let agent = AgentBuilder::new(self.model)
            .id(parent)
            .system_prompt(self.system_prompt)
            .tools(tools)
            .limits(self.limits)
            .request_options(self.options)
            .gate(gate.clone())
            .trace_settings(self.trace)
            .on_killed(kill_hook)
            .approvals_after(approvals_after)
            .spawn_into(events, supervisor)
            .await?;
        Ok(DelegatingAgent {
            agent,
            hub,
            gate,
            owns_gate: owns_gate.then(tokio::runtime::Handle::current),
            use_agent: self.front_ends.use_agent,
        })
    }
}
