//! The **Agent** actor: one turn loop, for a parent or a child alike.
//!
//! **Owns:** the conversation history, the queue of turns waiting, the
//! running turn's task and the approvals that task waits on.
//! **Guarantees:** turns run one at a time, in the order sent; every turn
//! ends in exactly one `AgentEvent::Result` (completed, partial, failed or
//! stopped) and nothing of that turn follows it; a stopped turn's model
//! call is cancelled and its gate permit released. The handler never awaits
//! a model call or a tool: the turn runs in a task (`turn.rs`) that reports
//! back with `AgentMsg::TurnFinished`, so `Stop`, approvals and snapshots
//! are answered at once.

mod turn;

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures_util::FutureExt;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};
use subagents_messages::{
    AgentEvent, AgentId, AgentMsg, AgentResult, AgentSnapshot, ApprovalDecision, ApprovalId,
    ApprovalRefusal, ChatMessage, Limits, Outcome, TurnOrigin, UserTurn,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;
pub(crate) use turn::CallSlot;
pub use turn::{Progress, partial_result};

use crate::gate::GateHandle;
use crate::model::Model;
use crate::sink::{EventSink, EventStream};
use crate::tool::{ToolRegistry, panic_message};

/// How an agent is set up. Parent and child differ only here.
pub struct AgentConfig {
    /// Its id (`parent` for a thread's parent, `agent_N` for children).
    pub id: AgentId,
    /// Its system prompt.
    pub system_prompt: String,
    /// The model it calls.
    pub model: Arc<dyn Model>,
    /// The gate its model calls go through.
    pub gate: GateHandle,
    /// The tools it may call.
    pub tools: ToolRegistry,
    /// Names of `tools`, shared with every tool call.
    pub tool_names: Arc<[String]>,
    /// Limits on each turn.
    pub limits: Limits,
    /// 0 for a parent, 1 for its children.
    pub depth: u32,
    /// Consulted before asking the host: a decision here answers the
    /// approval at once, with no `ApprovalRequested` event (the hub's
    /// policy for background children uses it).
    pub approvals: Option<Arc<dyn ApprovalPolicy>>,
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
pub trait ApprovalPolicy: Send + Sync + 'static {
    /// The decision for `tool` called by `agent`, or `None` to ask.
    fn decide(&self, agent: &AgentId, tool: &str, arguments: &str) -> Option<ApprovalDecision>;
}

/// Answers every approval the same way.
#[derive(Debug, Clone, Copy)]
pub struct Always(pub ApprovalDecision);

impl ApprovalPolicy for Always {
    fn decide(&self, _: &AgentId, _: &str, _: &str) -> Option<ApprovalDecision> {
        Some(self.0)
    }
}

/// The agent actor.
#[derive(Debug, Default, Clone, Copy)]
pub struct Agent;

/// Arguments of [`Agent`].
#[derive(Debug)]
pub struct AgentArguments {
    /// Its setup.
    pub config: Arc<AgentConfig>,
    /// Where its events go.
    pub events: EventSink,
}

/// The agent's state.
#[derive(Debug)]
pub struct AgentState {
    config: Arc<AgentConfig>,
    events: EventSink,
    history: Vec<ChatMessage>,
    running: Option<RunningTurn>,
    waiting: VecDeque<(UserTurn, Option<RpcReplyPort<AgentResult>>)>,
    approvals: HashMap<ApprovalId, RpcReplyPort<ApprovalDecision>>,
    /// Approvals no longer pending, and why: answers to them are refused
    /// with that reason.
    closed_approvals: HashMap<ApprovalId, ApprovalRefusal>,
    approval_counter: Arc<AtomicU64>,
    next_run: u64,
    turns_finished: u64,
}

#[derive(Debug)]
struct RunningTurn {
    run: u64,
    task: AbortOnDrop,
    sink: EventSink,
    /// The agent's own sink (the turn's `Result` goes there).
    out: EventSink,
    shared: turn::Shared,
    started: Instant,
    reply: Option<RpcReplyPort<AgentResult>>,
}

impl Drop for RunningTurn {
    /// An actor killed mid-turn (no `post_stop`) still ends its turn on
    /// the stream: the call in flight is answered and the turn's `Result`
    /// says it failed. A turn that ended before is left alone.
    fn drop(&mut self) {
        if !self.sink.is_open() {
            return;
        }
        let progress = turn::lock(&self.shared).progress.clone();
        let text = "the agent stopped without ending its turn".to_owned();
        let result = turn::result(
            text.clone(),
            Outcome::Failed(text.clone()),
            &progress,
            self.started,
        );
        turn::close(&self.shared, &self.sink, &self.out, &result, &text);
    }
}

/// The running turn's task, aborted when dropped: if the actor dies
/// without its `post_stop` (killed), dropping its state still ends the
/// turn, and the gate permit the turn held goes with it.
#[derive(Debug)]
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl AgentState {
    fn start_next(&mut self, myself: &ActorRef<AgentMsg>) {
        if self.running.is_some() {
            return;
        }
        let Some((turn, reply)) = self.waiting.pop_front() else {
            return;
        };
        self.next_run += 1;
        let run = self.next_run;
        let sink = self.events.gated();
        let mut history = self.history.clone();
        history.push(ChatMessage::user(turn.text));
        let shared: turn::Shared = Arc::new(std::sync::Mutex::new(turn::TurnState::new(history)));
        let ctx = turn::TurnContext {
            config: self.config.clone(),
            sink: sink.clone(),
            actor: myself.clone(),
            approvals: self.approval_counter.clone(),
            shared: shared.clone(),
        };
        let events = self.events.clone();
        let actor = myself.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let ran = AssertUnwindSafe(turn::run_turn(&ctx)).catch_unwind().await;
            let result = ran.unwrap_or_else(|panic| {
                let text = format!(
                    "the agent's turn crashed: {}",
                    panic_message(panic.as_ref())
                );
                let progress = turn::lock(&ctx.shared).progress.clone();
                turn::result(text.clone(), Outcome::Failed(text), &progress, started)
            });
            let cut = turn::cut_sentence(&result.outcome, &ctx.config.limits);
            // `None`: a stop closed the turn first and answered it.
            if let Some(history) = turn::close(&ctx.shared, &ctx.sink, &events, &result, &cut) {
                let _ = actor.cast(AgentMsg::TurnFinished {
                    run,
                    result,
                    history,
                });
            }
        });
        self.running = Some(RunningTurn {
            run,
            task: AbortOnDrop(task),
            sink,
            out: self.events.clone(),
            shared,
            started,
            reply,
        });
    }

    fn finish(&mut self, run: u64, result: AgentResult, history: Vec<ChatMessage>) {
        if self.running.as_ref().is_none_or(|r| r.run != run) {
            return;
        }
        if let Some(mut running) = self.running.take() {
            self.history = history;
            self.turns_finished += 1;
            self.close_approvals();
            if let Some(reply) = running.reply.take() {
                let _ = reply.send(result);
            }
        }
    }

    /// Every approval still pending is closed: its turn ended.
    fn close_approvals(&mut self) {
        for (id, _) in self.approvals.drain() {
            self.closed_approvals
                .insert(id.clone(), ApprovalRefusal::Ended(id));
        }
    }

    fn stop(&mut self) {
        self.stop_running();
        // Queued turns end too, each with its own stopped result: every
        // turn sent ends in exactly one `Result`.
        for (turn, reply) in self.waiting.drain(..) {
            let text = "Stopped before it started.".to_owned();
            let result = AgentResult {
                text: text.clone(),
                outcome: Outcome::Stopped,
                turns: 0,
                tool_calls: 0,
                usage: Default::default(),
                elapsed: std::time::Duration::ZERO,
            };
            self.events.emit(AgentEvent::Result(result.clone()));
            self.history.push(ChatMessage::user(turn.text));
            self.history.push(ChatMessage::assistant(text, Vec::new()));
            self.turns_finished += 1;
            if let Some(reply) = reply {
                let _ = reply.send(result);
            }
        }
    }

    fn stop_running(&mut self) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        running.task.0.abort();
        let progress = turn::lock(&running.shared).progress.clone();
        let text = format!(
            "Stopped before finishing, after {} model call(s) and {} tool call(s).",
            progress.turns, progress.tool_calls
        );
        let result = turn::result(text, Outcome::Stopped, &progress, running.started);
        let cut = turn::cut_sentence(&result.outcome, &self.config.limits);
        let Some(history) =
            turn::close(&running.shared, &running.sink, &self.events, &result, &cut)
        else {
            // The turn had already ended: its TurnFinished is in the mailbox.
            self.running = Some(running);
            return;
        };
        self.close_approvals();
        self.history = history;
        self.turns_finished += 1;
        if let Some(reply) = running.reply.take() {
            let _ = reply.send(result);
        }
    }

    /// Answers an approval: emits `ApprovalResolved` on the turn's stream
    /// and hands the decision to the waiting tool call, or says why not.
    fn resolve_approval(
        &mut self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(), ApprovalRefusal> {
        let Some(responder) = self.approvals.remove(&id) else {
            return Err(self
                .closed_approvals
                .get(&id)
                .cloned()
                .unwrap_or(ApprovalRefusal::Unknown(id)));
        };
        let resolved = self
            .running
            .as_ref()
            .is_some_and(|r| turn::resolve_approval(&r.shared, &r.sink, &id, decision));
        if resolved && responder.send(decision).is_ok() {
            self.closed_approvals.insert(
                id.clone(),
                ApprovalRefusal::AlreadyAnswered { id, decision },
            );
            Ok(())
        } else {
            self.closed_approvals
                .insert(id.clone(), ApprovalRefusal::Ended(id.clone()));
            Err(ApprovalRefusal::Ended(id))
        }
    }

    fn snapshot(&self) -> AgentSnapshot {
        AgentSnapshot {
            busy: self.running.is_some(),
            queued_turns: self.waiting.len(),
            pending_approvals: self.approvals.len(),
            turns_finished: self.turns_finished,
        }
    }
}

impl Actor for Agent {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = AgentArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        args: AgentArguments,
    ) -> Result<AgentState, ActorProcessingErr> {
        Ok(AgentState {
            config: args.config,
            events: args.events,
            history: Vec::new(),
            running: None,
            waiting: VecDeque::new(),
            approvals: HashMap::new(),
            closed_approvals: HashMap::new(),
            approval_counter: Arc::new(AtomicU64::new(0)),
            next_run: 0,
            turns_finished: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<AgentMsg>,
        message: AgentMsg,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AgentMsg::Turn { turn, reply } => state.waiting.push_back((turn, reply)),
            AgentMsg::TurnFinished {
                run,
                result,
                history,
            } => state.finish(run, result, history),
            AgentMsg::Stop => state.stop(),
            AgentMsg::ApprovalPending { id, responder } => {
                state.approvals.insert(id, responder);
            }
            AgentMsg::ResolveApproval {
                id,
                decision,
                reply,
            } => {
                let _ = reply.send(state.resolve_approval(id, decision));
            }
            AgentMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            _ => {}
        }
        state.start_next(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AgentMsg>,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        // An agent that goes away ends its turn: nothing runs unowned.
        state.stop();
        Ok(())
    }
}

/// Why a call on an agent failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent could not be started.
    #[error("the agent could not be started: {0}")]
    Spawn(String),
    /// The agent is stopped; the message was not delivered.
    #[error("the agent `{0}` is stopped")]
    Closed(AgentId),
    /// The turn was dropped before it ran (a stop cleared the queue).
    #[error("the turn sent to agent `{0}` was dropped before it ran")]
    Dropped(AgentId),
    /// An answer to an approval was not taken.
    #[error(transparent)]
    Approval(ApprovalRefusal),
}

/// A handle to an agent. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentHandle {
    id: AgentId,
    actor: ActorRef<AgentMsg>,
}

impl AgentHandle {
    /// Wraps a spawned agent actor.
    pub fn new(id: AgentId, actor: ActorRef<AgentMsg>) -> Self {
        Self { id, actor }
    }

    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// The agent actor.
    pub fn actor(&self) -> &ActorRef<AgentMsg> {
        &self.actor
    }

    /// Sends a user turn; its events follow on the stream.
    pub fn send_user(&self, text: impl Into<String>) -> Result<(), AgentError> {
        self.send_turn(text, TurnOrigin::User)
    }

    /// Sends a turn of the given origin.
    pub fn send_turn(&self, text: impl Into<String>, origin: TurnOrigin) -> Result<(), AgentError> {
        self.actor
            .cast(AgentMsg::Turn {
                turn: UserTurn {
                    text: text.into(),
                    origin,
                },
                reply: None,
            })
            .map_err(|_| AgentError::Closed(self.id.clone()))
    }

    /// Sends a user turn and waits for its result (events still follow on
    /// the stream). The turn's limits bound the wait.
    pub async fn run(&self, text: impl Into<String>) -> Result<AgentResult, AgentError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.actor
            .cast(AgentMsg::Turn {
                turn: UserTurn {
                    text: text.into(),
                    origin: TurnOrigin::User,
                },
                reply: Some(tx.into()),
            })
            .map_err(|_| AgentError::Closed(self.id.clone()))?;
        rx.await.map_err(|_| AgentError::Dropped(self.id.clone()))
    }

    /// Stops the running turn (its result is `Outcome::Stopped`) and drops
    /// queued ones.
    pub fn stop_turn(&self) -> Result<(), AgentError> {
        self.actor
            .cast(AgentMsg::Stop)
            .map_err(|_| AgentError::Closed(self.id.clone()))
    }

    /// Answers an approval. An answer not taken says why
    /// ([`AgentError::Approval`]: unknown, already answered, or its turn
    /// ended).
    pub async fn resolve_approval(
        &self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(), AgentError> {
        ractor::call!(self.actor, |reply| AgentMsg::ResolveApproval {
            id,
            decision,
            reply
        })
        .map_err(|_| AgentError::Closed(self.id.clone()))?
        .map_err(AgentError::Approval)
    }

    /// The agent's state now.
    pub async fn snapshot(&self) -> Result<AgentSnapshot, AgentError> {
        ractor::call!(self.actor, AgentMsg::Snapshot)
            .map_err(|_| AgentError::Closed(self.id.clone()))
    }

    /// Stops the actor itself (ending any turn as stopped).
    pub fn shutdown(&self) {
        self.actor.stop(None);
    }
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
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts building an agent on `model`.
    pub fn builder(model: Arc<dyn Model>) -> AgentBuilder {
        AgentBuilder {
            id: AgentId::new("parent"),
            system_prompt: String::new(),
            model,
            gate: None,
            tools: ToolRegistry::new(),
            limits: Limits::default(),
            depth: 0,
            approvals: None,
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

    /// Its limits (default: 20 turns, 50,000 tokens, 300 s).
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

    /// The finished config, spawning a gate if none was given.
    pub async fn config(self) -> Result<AgentConfig, AgentError> {
        let gate = match self.gate {
            Some(gate) => gate,
            None => GateHandle::spawn(1)
                .await
                .map_err(|e| AgentError::Spawn(e.to_string()))?,
        };
        let tool_names: Arc<[String]> = self.tools.names().into();
        Ok(AgentConfig {
            id: self.id,
            system_prompt: self.system_prompt,
            model: self.model,
            gate,
            tools: self.tools,
            tool_names,
            limits: self.limits,
            depth: self.depth,
            approvals: self.approvals,
        })
    }

    /// Spawns the agent with a stream of its own.
    pub async fn spawn(self) -> Result<(AgentHandle, EventStream), AgentError> {
        let (events, stream) = EventSink::channel();
        let handle = self.spawn_into(events, None).await?;
        Ok((handle, stream))
    }

    /// Spawns the agent writing to `events`, linked under `supervisor` if
    /// given.
    pub async fn spawn_into(
        self,
        events: EventSink,
        supervisor: Option<ActorCell>,
    ) -> Result<AgentHandle, AgentError> {
        let config = Arc::new(self.config().await?);
        spawn_agent(config, events, supervisor).await
    }
}

/// Spawns an agent from a finished config.
pub async fn spawn_agent(
    config: Arc<AgentConfig>,
    events: EventSink,
    supervisor: Option<ActorCell>,
) -> Result<AgentHandle, AgentError> {
    let id = config.id.clone();
    let args = AgentArguments { config, events };
    let spawned = match supervisor {
        Some(supervisor) => Actor::spawn_linked(None, Agent, args, supervisor).await,
        None => Actor::spawn(None, Agent, args).await,
    };
    let (actor, _) = spawned.map_err(|e| AgentError::Spawn(e.to_string()))?;
    Ok(AgentHandle::new(id, actor))
}
