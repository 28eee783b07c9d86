//! The **Hub** actor: a thread's children.
//!
//! ```text
//! use_agent (parent's turn task) ──Spawn/Subscribe/Detach/Stop──► Hub
//!                                                                  ├─ Slots (pure): ≤ max_live live, FIFO queue
//!                                                                  ├─ Agent (child, linked) …
//!                                                                  └─ envelopes (DashMap, read without messages)
//! child turn result ──(waiter task)── ChildFinished ──► Hub ──► ChildStatus(done) ──► subscribers
//! ```
//!
//! **Owns:** the slots and queue, one envelope per child for the life of
//! the hub, the children's actors (linked under it) and their event sinks.
//! **Guarantees** (see `docs/event-ordering.md`): `ChildStarted` once per
//! child before anything else of it; statuses only move forward; exactly
//! one terminal status, with nothing of that child after it (its sink is
//! closed in the same step); never more than `max_live` live; queued
//! children start in request order; a slot is released on every path (a
//! reservation not committed releases itself when dropped; a child that
//! fails or dies frees its slot). `status` reads the envelope map and never
//! waits on the hub or a child.
//!
//! The child's result is taken from its own reply (the turn's
//! `AgentResult`), never from its termination: ractor's supervision events
//! can overtake ordinary messages.
//!
//! # A note on choosing `max_live`
//! Three (Loopl's value) keeps a capacity-1 gate busy without starving the
//! parent: every live child queues at the gate for each model call, so more
//! live children only lengthen every call's wait. Raise it with the gate's
//! capacity, not beyond.

mod ids;
mod slots;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
pub use ids::{ChildIds, IdsExhausted, MAX_CHILD_NUMBER, child_number, is_out_of_range};
use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SpawnErr,
    SupervisionEvent,
};
pub use slots::{Admission, Slots};
use subagents_messages::text::one_line;
use subagents_messages::{
    AgentEvent, AgentId, AgentMsg, ApprovalDecision, ChildRequest, DetachOutcome, Envelope, HubMsg,
    HubSnapshot, Limits, Outcome, SubAgentInfo, SubAgentStatus, TurnOrigin, UserTurn,
};
use tokio::time::Instant;

use crate::agent::{AgentConfig, AgentHandle, ApprovalPolicy, spawn_agent};
use crate::clock::Clock;
use crate::gate::GateHandle;
use crate::model::Model;
use crate::registry::ModelRegistry;
use crate::sink::EventSink;
use crate::tool::ToolRegistry;

/// Told about every child that reaches a terminal status (the supervisor
/// turns background ones into wakes and persists envelopes).
pub trait HubObserver: Send + Sync + 'static {
    /// A child finished; `envelope` is final.
    fn finished(&self, envelope: &Envelope);
}

/// Finished envelopes of earlier sessions (the supervisor's store), so
/// `status` and `result` answer ids the hub itself never ran.
pub trait EnvelopeArchive: Send + Sync + 'static {
    /// The archived envelope with this id.
    fn get(&self, id: &AgentId) -> Option<Envelope>;
}

/// What a background child's approval request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundApprovals {
    /// Ask the host, as for any agent.
    #[default]
    Ask,
    /// Deny at once; the child reads that it was denied.
    Deny,
    /// Approve at once.
    Approve,
}

/// How the hub makes children.
pub struct HubConfig {
    /// Live children at once (Loopl: 3).
    pub max_live: usize,
    /// The model children run on.
    pub model: Arc<dyn Model>,
    /// The gate they share with the parent.
    pub gate: GateHandle,
    /// The tools a child may be given (never `use_agent` itself).
    pub tools: ToolRegistry,
    /// Limits on a child's turn.
    pub child_limits: Limits,
    /// Children deeper than this are refused (1: children cannot spawn).
    pub max_depth: u32,
    /// Appended to every child's system prompt (inherited workflow
    /// instructions), if set.
    pub instructions: Option<String>,
    /// Wall-clock stamps.
    pub clock: Arc<dyn Clock>,
    /// Told when a child finishes, in this order.
    pub observers: Vec<Arc<dyn HubObserver>>,
    /// Answers ids of earlier sessions.
    pub archive: Option<Arc<dyn EnvelopeArchive>>,
    /// Where child ids come from; share one counter between hubs whose
    /// envelopes meet (one store), and start it past the archived ids.
    pub ids: ChildIds,
    /// What a background child's approval request does.
    pub background_approvals: BackgroundApprovals,
    /// Models a child may ask for by name (falls back to `model`).
    pub models: ModelRegistry,
    /// The parent's own turn cap: a child's `max_iterations` is clamped to
    /// it.
    pub parent_max_turns: u32,
}

impl HubConfig {
    /// Children on `model` behind `gate`, offered `tools`: 3 live, default
    /// limits, depth 1, the system clock, no observer, archive or extra
    /// models, background approvals asked.
    pub fn new(model: Arc<dyn Model>, gate: GateHandle, tools: ToolRegistry) -> Self {
        let child_limits = Limits::default();
        Self {
            max_live: 3,
            model,
            gate,
            tools,
            child_limits,
            max_depth: 1,
            instructions: None,
            clock: Arc::new(crate::clock::SystemClock),
            observers: Vec::new(),
            archive: None,
            ids: ChildIds::default(),
            background_approvals: BackgroundApprovals::Ask,
            models: ModelRegistry::new(),
            parent_max_turns: child_limits.max_turns,
        }
    }
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubConfig")
            .field("max_live", &self.max_live)
            .field("tools", &self.tools)
            .field("child_limits", &self.child_limits)
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

/// An envelope and the instant its child started running.
#[derive(Debug, Clone)]
struct Entry {
    envelope: Envelope,
    started: Option<Instant>,
}

type Envelopes = Arc<DashMap<AgentId, Entry>>;

/// The hub actor.
#[derive(Debug, Default, Clone, Copy)]
pub struct Hub;

/// Arguments of [`Hub`].
#[derive(Debug)]
pub struct HubArguments {
    /// How children are made.
    pub config: Arc<HubConfig>,
    /// The parent agent's id.
    pub parent: AgentId,
    /// The parent agent's event sink (children's events nest under it).
    pub parent_sink: EventSink,
    envelopes: Envelopes,
}

struct Child {
    request: ChildRequest,
    tools: ToolRegistry,
    model: Arc<dyn Model>,
    gate: GateHandle,
    limits: Limits,
    sink: EventSink,
    requester_sink: EventSink,
    agent: Option<AgentHandle>,
    subscribers: Vec<(RpcReplyPort<Envelope>, bool)>,
}

/// The hub's state.
pub struct HubState {
    config: Arc<HubConfig>,
    slots: Slots,
    children: HashMap<AgentId, Child>,
    actors: HashMap<ActorId, AgentId>,
    sinks: HashMap<AgentId, EventSink>,
    envelopes: Envelopes,
    requested: usize,
    finished: usize,
}

impl std::fmt::Debug for HubState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubState")
            .field("slots", &self.slots)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

/// The longest child name shown.
const NAME_CHARS: usize = 80;

/// The name of a child: the first line of its system prompt with visible
/// text, on one line (control, escape and bidi characters removed; see
/// [`subagents_messages::text::one_line`]), at most 80 characters.
pub fn child_name(system_prompt: &str) -> String {
    system_prompt
        .lines()
        .map(|l| one_line(l, NAME_CHARS))
        .find(|l| !l.is_empty())
        .unwrap_or_else(|| "sub-agent".to_owned())
}

/// A name given with the request, shown by the same rules as
/// [`child_name`]; one with no visible text falls back to the prompt's.
fn display_name(name: Option<&str>, system_prompt: &str) -> String {
    name.map(|n| one_line(n, NAME_CHARS))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| child_name(system_prompt))
}

/// How a child's turn ended, as a status.
pub fn status_for(outcome: &Outcome) -> SubAgentStatus {
    match outcome {
        Outcome::Completed | Outcome::LimitReached(_) => SubAgentStatus::Done,
        Outcome::Failed(_) => SubAgentStatus::Failed,
        Outcome::Stopped => SubAgentStatus::Stopped,
    }
}

impl HubState {
    fn now_ms(&self) -> u64 {
        self.config.clock.now_ms()
    }

    fn is_terminal(&self, id: &AgentId) -> bool {
        self.envelopes
            .get(id)
            .is_none_or(|e| e.envelope.status.is_terminal())
    }

    fn envelope(&self, id: &AgentId) -> Option<Envelope> {
        self.envelopes.get(id).map(|e| current(&e))
    }

    /// Records and emits a status move; only strictly forward moves
    /// happen (a repeated or backward one is ignored).
    fn set_status(&self, id: &AgentId, child: &Child, status: SubAgentStatus) -> bool {
        match self.envelopes.get_mut(id) {
            Some(mut entry) if status.rank() > entry.envelope.status.rank() => {
                entry.envelope.status = status;
            }
            _ => return false,
        }
        child
            .requester_sink
            .emit(AgentEvent::ChildStatus(id.clone(), status));
        true
    }

    async fn spawn_child(
        &mut self,
        myself: &ActorRef<HubMsg>,
        request: ChildRequest,
    ) -> Result<AgentId, String> {
        let depth = request.requester_depth + 1;
        if depth > self.config.max_depth {
            return Err(format!(
                "a sub-agent cannot start sub-agents: the maximum depth is {}",
                self.config.max_depth
            ));
        }
        let requester_sink =
            self.sinks.get(&request.requester).cloned().ok_or_else(|| {
                format!("the agent `{}` is not known to this hub", request.requester)
            })?;
        let tools = match &request.tools {
            None => self.config.tools.clone(),
            Some(names) => self.config.tools.subset(names).map_err(|e| e.to_string())?,
        };
        let (model, gate) = match self
            .config
            .models
            .resolve(request.provider.as_deref(), request.model.as_deref())
            .map_err(|e| e.to_string())?
        {
            Some(found) => (found.model.clone(), found.gate.clone()),
            None => (self.config.model.clone(), self.config.gate.clone()),
        };
        let mut limits = self.config.child_limits;
        if let Some(cap) = request.max_iterations {
            limits.max_turns = cap;
        }
        // Clamped to the parent's own cap (openheim documents this; we
        // enforce it).
        limits.max_turns = limits.max_turns.min(self.config.parent_max_turns).max(1);
        let id = self.config.ids.next().map_err(|e| e.to_string())?;
        self.requested += 1;
        let info = SubAgentInfo {
            id: id.clone(),
            parent_tool_use_id: request.parent_tool_use_id.clone(),
            name: display_name(request.name.as_deref(), &request.system_prompt),
            tools: tools.names(),
            background: request.background,
        };
        let envelope = Envelope {
            id: id.clone(),
            name: info.name.clone(),
            parent_tool_use_id: request.parent_tool_use_id.clone(),
            task: request.input.clone(),
            tools: info.tools.clone(),
            status: SubAgentStatus::Queued,
            background: request.background,
            requested_at_ms: self.now_ms(),
            started_at_ms: None,
            finished_at_ms: None,
            elapsed: Duration::ZERO,
            tool_calls: 0,
            last_tool: None,
            usage: Default::default(),
            result: None,
            error: None,
            claimed: false,
        };
        self.envelopes.insert(
            id.clone(),
            Entry {
                envelope,
                started: None,
            },
        );
        let sink =
            requester_sink.nested_with_tap(id.clone(), tap(self.envelopes.clone(), id.clone()));
        let child = Child {
            request,
            tools,
            model,
            gate,
            limits,
            sink,
            requester_sink,
            agent: None,
            subscribers: Vec::new(),
        };
        child.requester_sink.emit(AgentEvent::ChildStarted(info));
        let admission = self.slots.admit(id.clone());
        match admission {
            Admission::Start => {
                self.set_status(&id, &child, SubAgentStatus::Running);
            }
            Admission::Queued(_) => {
                // The envelope starts queued; announce it.
                child
                    .requester_sink
                    .emit(AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Queued));
            }
        }
        if child.request.background {
            self.set_status(&id, &child, SubAgentStatus::Background);
        }
        self.children.insert(id.clone(), child);
        if admission == Admission::Start {
            self.start_child(myself, &id).await;
        }
        Ok(id)
    }

    /// Starts a child whose slot is reserved.
    async fn start_child(&mut self, myself: &ActorRef<HubMsg>, id: &AgentId) {
        let reservation = SlotReservation::new(myself.clone(), id.clone());
        let Some(child) = self.children.get(id) else {
            return;
        };
        if !child.request.background {
            self.set_status(id, child, SubAgentStatus::Running);
        }
        let mut system_prompt = child.request.system_prompt.clone();
        if let Some(instructions) = &self.config.instructions {
            system_prompt.push_str("\n\n");
            system_prompt.push_str(instructions);
        }
        let config = AgentConfig {
            id: id.clone(),
            system_prompt,
            model: child.model.clone(),
            gate: child.gate.clone(),
            tool_names: child.tools.names().into(),
            tools: child.tools.clone(),
            limits: child.limits,
            depth: child.request.requester_depth + 1,
            approvals: match self.config.background_approvals {
                BackgroundApprovals::Ask => None,
                BackgroundApprovals::Deny => Some(background_policy(
                    &self.envelopes,
                    id,
                    ApprovalDecision::Deny,
                )),
                BackgroundApprovals::Approve => Some(background_policy(
                    &self.envelopes,
                    id,
                    ApprovalDecision::Approve,
                )),
            },
        };
        let input = child.request.input.clone();
        let sink = child.sink.clone();
        let spawned = spawn_agent(Arc::new(config), sink.clone(), Some(myself.get_cell())).await;
        let agent = match spawned {
            Ok(agent) => agent,
            Err(e) => {
                // Dropping the reservation releases the slot.
                drop(reservation);
                self.finish_child(id, SubAgentStatus::Failed, None, Some(e.to_string()));
                return;
            }
        };
        reservation.commit();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = agent.actor().cast(AgentMsg::Turn {
            turn: UserTurn {
                text: input,
                origin: TurnOrigin::User,
            },
            reply: Some(tx.into()),
        });
        if sent.is_err() {
            self.finish_child(
                id,
                SubAgentStatus::Failed,
                None,
                Some("the sub-agent stopped before it could start".into()),
            );
            return;
        }
        let hub = myself.clone();
        let waited = id.clone();
        tokio::spawn(async move {
            if let Ok(result) = rx.await {
                let _ = hub.cast(HubMsg::ChildFinished { id: waited, result });
            }
        });
        self.actors.insert(agent.actor().get_id(), id.clone());
        if let Some(mut entry) = self.envelopes.get_mut(id) {
            entry.started = Some(Instant::now());
            entry.envelope.started_at_ms = Some(self.config.clock.now_ms());
        }
        self.sinks.insert(id.clone(), sink);
        if let Some(child) = self.children.get_mut(id) {
            child.agent = Some(agent);
        }
    }

    /// Moves a child to a terminal status (once), frees its slot and
    /// starts whoever waits. Returns the children to start.
    fn finish_child(
        &mut self,
        id: &AgentId,
        status: SubAgentStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Vec<AgentId> {
        if self.is_terminal(id) {
            return Vec::new();
        }
        // A finished child leaves the map (its envelope stays): a long
        // session does not keep every child's sink, tools and model.
        let Some(mut child) = self.children.remove(id) else {
            return Vec::new();
        };
        self.actors.retain(|_, child_id| child_id != id);
        let requester_sink = child.requester_sink.clone();
        let terminal = AgentEvent::ChildStatus(id.clone(), status);
        child.sink.close_with(|| {
            requester_sink.emit(terminal);
        });
        let now = self.config.clock.now_ms();
        let mut envelope = match self.envelopes.get_mut(id) {
            Some(mut entry) => {
                if let Some(started) = entry.started {
                    entry.envelope.elapsed = started.elapsed();
                }
                entry.envelope.status = status;
                entry.envelope.finished_at_ms = Some(now);
                entry.envelope.result = result;
                entry.envelope.error = error;
                entry.envelope.clone()
            }
            None => return Vec::new(),
        };
        let mut claimed = false;
        for (reply, claim) in child.subscribers.drain(..) {
            if reply.send(envelope.clone()).is_ok() && claim {
                claimed = true;
            }
        }
        if claimed {
            envelope.claimed = true;
            if let Some(mut entry) = self.envelopes.get_mut(id) {
                entry.envelope.claimed = true;
            }
        }
        // Stopping the actor ends its turn (its `post_stop` stops it, and
        // the turn task is aborted with its state).
        if let Some(agent) = child.agent.take() {
            agent.shutdown();
        }
        self.sinks.remove(id);
        self.finished += 1;
        self.tell_observers(&envelope);
        self.slots.release(id)
    }

    /// Tells every observer; one that panics is logged and the others are
    /// still told (a host's bug must not take the hub down).
    fn tell_observers(&self, envelope: &Envelope) {
        for observer in &self.config.observers {
            let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                observer.finished(envelope);
            }));
            if let Err(panic) = told {
                tracing::error!(
                    child = %envelope.id,
                    panic = crate::tool::panic_message(panic.as_ref()),
                    "a hub observer panicked"
                );
            }
        }
    }

    async fn finish_and_refill(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
        status: SubAgentStatus,
        result: Option<String>,
        error: Option<String>,
    ) {
        let next = self.finish_child(id, status, result, error);
        self.start_all(myself, next).await;
    }

    async fn start_all(&mut self, myself: &ActorRef<HubMsg>, ids: Vec<AgentId>) {
        for next in ids {
            self.start_child(myself, &next).await;
        }
    }

    fn detach(&mut self, id: &AgentId) -> DetachOutcome {
        if !self.envelopes.contains_key(id) {
            return DetachOutcome::Unknown;
        }
        if self.is_terminal(id) {
            return match self.envelopes.get_mut(id) {
                Some(mut entry) => {
                    entry.envelope.claimed = true;
                    DetachOutcome::AlreadyFinished(Box::new(current(&entry)))
                }
                None => DetachOutcome::Unknown,
            };
        }
        let Some(child) = self.children.get(id) else {
            return DetachOutcome::Unknown;
        };
        if let Some(mut entry) = self.envelopes.get_mut(id) {
            entry.envelope.background = true;
        }
        self.set_status(id, child, SubAgentStatus::Background);
        DetachOutcome::Detached
    }

    async fn stop(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
    ) -> Result<SubAgentStatus, String> {
        let Some(envelope) = self.envelope(id) else {
            return Err(unknown_child(id));
        };
        if envelope.status.is_terminal() {
            return Ok(envelope.status);
        }
        let error = if self.slots.is_live(id) {
            "stopped while running"
        } else {
            "stopped before it started"
        };
        self.finish_and_refill(
            myself,
            id,
            SubAgentStatus::Stopped,
            None,
            Some(error.into()),
        )
        .await;
        Ok(SubAgentStatus::Stopped)
    }

    async fn stop_all(&mut self, myself: &ActorRef<HubMsg>) -> usize {
        // The queue is emptied first, so stopping the live ones starts
        // nobody; then every child is stopped in child-number order: the
        // stream (and a replay) must not depend on a map's iteration order.
        let queued = self.slots.drain_queue();
        let mut all: Vec<AgentId> = queued
            .into_iter()
            .chain(self.children.keys().cloned())
            .filter(|id| !self.is_terminal(id))
            .collect();
        all.sort_by_key(|id| (child_number(id), id.clone()));
        all.dedup();
        let mut stopped = 0;
        for id in all {
            let error = if self.slots.is_live(&id) {
                "stopped while running"
            } else {
                "stopped before it started"
            };
            let next = self.finish_child(&id, SubAgentStatus::Stopped, None, Some(error.into()));
            stopped += 1;
            self.start_all(myself, next).await;
        }
        stopped
    }

    fn snapshot(&self) -> HubSnapshot {
        HubSnapshot {
            max_live: self.slots.max_live(),
            live: self.slots.live(),
            queued: self.slots.queued(),
            requested: self.requested,
            finished: self.finished,
        }
    }
}

fn current(entry: &Entry) -> Envelope {
    let mut envelope = entry.envelope.clone();
    if !envelope.status.is_terminal()
        && let Some(started) = entry.started
    {
        envelope.elapsed = started.elapsed();
    }
    envelope
}

fn unknown_child(id: &AgentId) -> String {
    format!("there is no sub-agent with id `{id}`; ids look like `agent_1`")
}

struct BackgroundPolicy {
    envelopes: Envelopes,
    id: AgentId,
    decision: ApprovalDecision,
}

impl ApprovalPolicy for BackgroundPolicy {
    fn decide(&self, _: &AgentId, _: &str, _: &str) -> Option<ApprovalDecision> {
        let background = self
            .envelopes
            .get(&self.id)
            .is_some_and(|e| e.envelope.background);
        background.then_some(self.decision)
    }
}

fn background_policy(
    envelopes: &Envelopes,
    id: &AgentId,
    decision: ApprovalDecision,
) -> Arc<dyn ApprovalPolicy> {
    Arc::new(BackgroundPolicy {
        envelopes: envelopes.clone(),
        id: id.clone(),
        decision,
    })
}

/// Keeps a child's envelope current from its own events.
fn tap(envelopes: Envelopes, id: AgentId) -> crate::sink::Tap {
    Arc::new(move |event: &AgentEvent| match event {
        AgentEvent::ToolStarted(call) => {
            if let Some(mut entry) = envelopes.get_mut(&id) {
                entry.envelope.tool_calls += 1;
                entry.envelope.last_tool = Some(one_line(&call.name, NAME_CHARS));
            }
        }
        AgentEvent::Result(result) => {
            if let Some(mut entry) = envelopes.get_mut(&id) {
                entry.envelope.usage = result.usage;
            }
        }
        _ => {}
    })
}

/// A reserved slot. Dropped without [`SlotReservation::commit`], it asks
/// the hub to release the slot (codex's reserve-then-commit guard).
#[derive(Debug)]
pub struct SlotReservation {
    hub: ActorRef<HubMsg>,
    id: AgentId,
    committed: bool,
}

impl SlotReservation {
    fn new(hub: ActorRef<HubMsg>, id: AgentId) -> Self {
        Self {
            hub,
            id,
            committed: false,
        }
    }

    /// The child is running: its slot is released when it finishes.
    pub fn commit(mut self) {
        self.committed = true;
    }
}

impl Drop for SlotReservation {
    fn drop(&mut self) {
        if !self.committed {
            let _ = self.hub.cast(HubMsg::ReleaseSlot {
                id: self.id.clone(),
                reason: "the sub-agent could not be started".into(),
            });
        }
    }
}

impl Actor for Hub {
    type Msg = HubMsg;
    type State = HubState;
    type Arguments = HubArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<HubMsg>,
        args: HubArguments,
    ) -> Result<HubState, ActorProcessingErr> {
        let mut sinks = HashMap::new();
        sinks.insert(args.parent, args.parent_sink);
        Ok(HubState {
            slots: Slots::new(args.config.max_live),
            config: args.config,
            children: HashMap::new(),
            actors: HashMap::new(),
            sinks,
            envelopes: args.envelopes,
            requested: 0,
            finished: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<HubMsg>,
        message: HubMsg,
        state: &mut HubState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HubMsg::Spawn { request, reply } => {
                let spawned = state.spawn_child(&myself, request).await;
                let _ = reply.send(spawned);
            }
            HubMsg::Subscribe { id, claim, reply } => {
                if let Some(envelope) = state.envelope(&id) {
                    if envelope.status.is_terminal() {
                        if reply.send(envelope).is_ok()
                            && claim
                            && let Some(mut entry) = state.envelopes.get_mut(&id)
                        {
                            entry.envelope.claimed = true;
                        }
                    } else if let Some(child) = state.children.get_mut(&id) {
                        child.subscribers.push((reply, claim));
                    }
                }
            }
            HubMsg::Detach { id, reply } => {
                let outcome = state.detach(&id);
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
            HubMsg::Stop { id, reply } => {
                let stopped = state.stop(&myself, &id).await;
                if let Some(reply) = reply {
                    let _ = reply.send(stopped);
                }
            }
            HubMsg::StopAll { reply } => {
                let stopped = state.stop_all(&myself).await;
                if let Some(reply) = reply {
                    let _ = reply.send(stopped);
                }
            }
            HubMsg::ChildFinished { id, result } => {
                let status = status_for(&result.outcome);
                let error = match &result.outcome {
                    Outcome::Failed(e) => Some(e.clone()),
                    _ => None,
                };
                state
                    .finish_and_refill(&myself, &id, status, Some(result.text), error)
                    .await;
            }
            HubMsg::ReleaseSlot { id, reason } => {
                // Fails the child if nothing else ended it, and frees the
                // slot either way (releasing twice changes nothing).
                state
                    .finish_and_refill(&myself, &id, SubAgentStatus::Failed, None, Some(reason))
                    .await;
                let next = state.slots.release(&id);
                state.start_all(&myself, next).await;
            }
            HubMsg::ResolveApproval {
                id,
                decision,
                reply,
            } => {
                let owner = AgentId::new(id.as_str().split("-approval-").next().unwrap_or(""));
                match state.children.get(&owner).and_then(|c| c.agent.as_ref()) {
                    Some(agent) => {
                        let _ = agent.actor().cast(AgentMsg::ResolveApproval {
                            id,
                            decision,
                            reply,
                        });
                    }
                    None => {
                        let _ = reply.send(false);
                    }
                }
            }
            HubMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            _ => {}
        }
        Ok(())
    }

    /// Overrides ractor's default, which would stop the hub when any child
    /// stops. A child that dies before reporting its result fails; its
    /// slot frees and the next queued child starts.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<HubMsg>,
        event: SupervisionEvent,
        state: &mut HubState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell_id, error) = match &event {
            SupervisionEvent::ActorFailed(cell, error) => {
                (cell.get_id(), format!("the sub-agent crashed: {error}"))
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => (
                cell.get_id(),
                format!(
                    "the sub-agent stopped before it reported a result{}",
                    reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
            ),
            _ => return Ok(()),
        };
        if let Some(id) = state.actors.remove(&cell_id) {
            // Only a child still running fails here: a finished child's
            // result came first, by its own message.
            state
                .finish_and_refill(&myself, &id, SubAgentStatus::Failed, None, Some(error))
                .await;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<HubMsg>,
        state: &mut HubState,
    ) -> Result<(), ActorProcessingErr> {
        state.stop_all(&myself).await;
        Ok(())
    }
}

/// What waiting on a child found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// It finished; its final envelope.
    Finished(Box<Envelope>),
    /// Still going after the wait.
    Pending,
    /// No child has that id.
    Unknown,
}

/// The hub is gone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the sub-agent hub is stopped")]
pub struct HubClosed(());

/// A handle to a hub. Cheap to clone. `status` and `envelopes` read a
/// shared map: they never wait on the hub or on a child.
#[derive(Clone)]
pub struct HubHandle {
    actor: ActorRef<HubMsg>,
    envelopes: Envelopes,
    archive: Option<Arc<dyn EnvelopeArchive>>,
    inline_wait: Duration,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for HubHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubHandle")
            .field("actor", &self.actor.get_id())
            .finish_non_exhaustive()
    }
}

impl HubHandle {
    /// Spawns a hub for the parent `parent` writing to `parent_sink`,
    /// linked under `supervisor` if given.
    pub async fn spawn(
        config: HubConfig,
        parent: AgentId,
        parent_sink: EventSink,
        supervisor: Option<ActorCell>,
    ) -> Result<HubHandle, SpawnErr> {
        let envelopes: Envelopes = Arc::default();
        let archive = config.archive.clone();
        let clock = config.clock.clone();
        let args = HubArguments {
            config: Arc::new(config),
            parent,
            parent_sink,
            envelopes: envelopes.clone(),
        };
        let (actor, _) = match supervisor {
            Some(supervisor) => Actor::spawn_linked(None, Hub, args, supervisor).await?,
            None => Actor::spawn(None, Hub, args).await?,
        };
        Ok(Self {
            actor,
            envelopes,
            archive,
            inline_wait: Duration::from_secs(45),
            clock,
        })
    }

    /// The hub actor.
    pub fn actor(&self) -> &ActorRef<HubMsg> {
        &self.actor
    }

    /// Requests a child; its id, or a sentence saying why not.
    pub async fn request(&self, request: ChildRequest) -> Result<AgentId, String> {
        ractor::call!(self.actor, |reply| HubMsg::Spawn { request, reply })
            .map_err(|_| HubClosed(()).to_string())?
    }

    /// Waits up to `within` (`None`: until it ends) for a child to finish.
    /// With `claim`, a result delivered here claims the wake.
    pub async fn wait(&self, id: &AgentId, claim: bool, within: Option<Duration>) -> WaitOutcome {
        if !self.envelopes.contains_key(id) {
            return match self.archived(id) {
                Some(envelope) => WaitOutcome::Finished(Box::new(envelope)),
                None => WaitOutcome::Unknown,
            };
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.actor.cast(HubMsg::Subscribe {
            id: id.clone(),
            claim,
            reply: tx.into(),
        });
        if sent.is_err() {
            return WaitOutcome::Unknown;
        }
        let received = match within {
            Some(within) => match tokio::time::timeout(within, rx).await {
                Ok(received) => received,
                Err(_) => return WaitOutcome::Pending,
            },
            None => rx.await,
        };
        match received {
            Ok(envelope) => WaitOutcome::Finished(Box::new(envelope)),
            Err(_) => WaitOutcome::Unknown,
        }
    }

    /// Stops waiting inline: the child goes on in the background.
    pub async fn detach(&self, id: &AgentId) -> DetachOutcome {
        ractor::call!(self.actor, |reply| HubMsg::Detach {
            id: id.clone(),
            reply: Some(reply)
        })
        .unwrap_or(DetachOutcome::Unknown)
    }

    /// Detaches without waiting for the answer (from a `Drop`).
    pub fn detach_now(&self, id: &AgentId) {
        let _ = self.actor.cast(HubMsg::Detach {
            id: id.clone(),
            reply: None,
        });
    }

    /// Stops a child; its status after, or a sentence.
    pub async fn stop(&self, id: &AgentId) -> Result<SubAgentStatus, String> {
        ractor::call!(self.actor, |reply| HubMsg::Stop {
            id: id.clone(),
            reply: Some(reply)
        })
        .map_err(|_| HubClosed(()).to_string())?
    }

    /// Stops every live and queued child; how many.
    pub async fn stop_all(&self) -> Result<usize, HubClosed> {
        ractor::call!(self.actor, |reply| HubMsg::StopAll { reply: Some(reply) })
            .map_err(|_| HubClosed(()))
    }

    /// The child's envelope now (or an archived one of an earlier
    /// session). Never waits.
    pub fn status(&self, id: &AgentId) -> Option<Envelope> {
        match self.envelopes.get(id) {
            Some(entry) => Some(current(&entry)),
            None => self.archived(id),
        }
    }

    fn archived(&self, id: &AgentId) -> Option<Envelope> {
        self.archive.as_ref().and_then(|a| a.get(id))
    }

    /// Every envelope, in request order. Never waits.
    pub fn envelopes(&self) -> Vec<Envelope> {
        let mut all: Vec<Envelope> = self.envelopes.iter().map(|e| current(&e)).collect();
        all.sort_by_key(|e| {
            e.id.as_str()
                .trim_start_matches("agent_")
                .parse::<u64>()
                .unwrap_or(u64::MAX)
        });
        all
    }

    /// After the hub actor is gone (it crashed or was killed): every child
    /// that had not ended becomes `failed` with `reason`, stamped `now_ms`;
    /// returns those final envelopes, in request order. Does nothing (and
    /// returns nothing) while the hub runs: a live hub ends its children
    /// itself.
    pub fn fail_unfinished(&self, reason: &str) -> Vec<Envelope> {
        let now_ms = self.clock.now_ms();
        if self.actor.get_status() < ractor::ActorStatus::Stopping {
            return Vec::new();
        }
        let mut failed = Vec::new();
        for mut entry in self.envelopes.iter_mut() {
            let entry = entry.value_mut();
            if entry.envelope.status.is_terminal() {
                continue;
            }
            if let Some(started) = entry.started {
                entry.envelope.elapsed = started.elapsed();
            }
            entry.envelope.status = SubAgentStatus::Failed;
            entry.envelope.error = Some(reason.to_owned());
            entry.envelope.finished_at_ms = Some(now_ms);
            failed.push(entry.envelope.clone());
        }
        failed.sort_by_key(|e| (child_number(&e.id), e.id.clone()));
        failed
    }

    /// The hub's counts.
    pub async fn snapshot(&self) -> Result<HubSnapshot, HubClosed> {
        ractor::call!(self.actor, HubMsg::Snapshot).map_err(|_| HubClosed(()))
    }

    /// How long `use_agent` waits inline (45 s by default).
    pub fn inline_wait(&self) -> Duration {
        self.inline_wait
    }

    /// Sets how long `use_agent` waits inline.
    ///
    /// # Choosing a value
    /// Long enough for a typical child to finish (Loopl's 45 s suits a
    /// local model); a child still running after it goes on in the
    /// background and wakes the parent later, so a short wait is never
    /// wrong, only chattier.
    pub fn with_inline_wait(mut self, wait: Duration) -> Self {
        self.inline_wait = wait;
        self
    }
}
