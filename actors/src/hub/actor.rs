//! The hub actor: children's lifecycle. Every status a child shows is
//! written here, in the handler, together with its event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use subagents_messages::text::one_line;
use subagents_messages::{
    AgentEvent, AgentId, AgentMsg, AgentResult, ApprovalRefusal, ChildRequest, DetachOutcome,
    Envelope, HubMsg, HubSnapshot, Limits, Outcome, SubAgentInfo, SubAgentStatus, TurnOrigin,
    UserTurn,
};

use crate::agent::{AgentConfig, AgentHandle, spawn_agent};
use crate::gate::GateHandle;
use crate::hub::book::{Book, requested};
use crate::hub::config::{HubConfig, approvals_for};
use crate::hub::ids::child_number;
use crate::hub::slots::{Admission, Slots};
use crate::model::Model;
use crate::sink::EventSink;
use crate::tool::ToolRegistry;

/// The longest child name shown.
const NAME_CHARS: usize = 80;

/// Why a child stopped before it started.
const STOPPED_QUEUED: &str = "stopped before it started";
/// Why a running child stopped.
const STOPPED_RUNNING: &str = "stopped while running";

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

/// The hub actor.
#[derive(Debug, Default, Clone, Copy)]
pub struct Hub;

/// Arguments of [`Hub`].
#[derive(Debug)]
pub struct HubArguments {
    pub(crate) config: Arc<HubConfig>,
    pub(crate) parent: AgentId,
    pub(crate) parent_sink: EventSink,
    pub(crate) book: Book,
}

/// A stop-all waiting for every child it stopped: answered when the last
/// of them drops its share (each ended, or the hub went away).
struct AllStopped {
    reply: Mutex<Option<RpcReplyPort<usize>>>,
    count: usize,
}

impl Drop for AllStopped {
    fn drop(&mut self) {
        let reply = self
            .reply
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(reply) = reply {
            let _ = reply.send(self.count);
        }
    }
}

/// Who waits for a child's stop to complete.
enum StopReply {
    /// One `Stop`, answered with the child's status after it ended.
    One(Option<RpcReplyPort<Result<SubAgentStatus, String>>>),
    /// A share of a stop-all, answered when every share is gone.
    All(Arc<AllStopped>),
}

impl StopReply {
    fn answer(self, status: Result<SubAgentStatus, String>) {
        match self {
            StopReply::One(Some(reply)) => {
                let _ = reply.send(status);
            }
            StopReply::One(None) => {}
            StopReply::All(share) => drop(share),
        }
    }
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
    /// The task that waits for the child's turn result (it casts
    /// `ChildFinished`, and returns the result to whoever awaits it).
    waiter: Option<tokio::task::JoinHandle<Option<AgentResult>>>,
    subscribers: Vec<RpcReplyPort<Envelope>>,
    /// Told to stop (why); it ends when its turn reports.
    stopping: Option<&'static str>,
    stop_replies: Vec<StopReply>,
}

/// The hub's state.
pub struct HubState {
    config: Arc<HubConfig>,
    slots: Slots,
    children: HashMap<AgentId, Child>,
    actors: HashMap<ActorId, AgentId>,
    sinks: HashMap<AgentId, EventSink>,
    book: Book,
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

impl HubState {
    fn now_ms(&self) -> u64 {
        self.config.clock.now_ms()
    }

    /// Records and emits a status move; only strictly forward moves
    /// happen (a repeated or backward one is ignored).
    fn set_status(&self, id: &AgentId, child: &Child, status: SubAgentStatus) -> bool {
        if !self.book.advance(id, status) {
            return false;
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
        self.book.insert(requested(
            id.clone(),
            info.name.clone(),
            &request,
            info.tools.clone(),
            self.now_ms(),
        ));
        let sink = requester_sink.nested_with_tap(id.clone(), self.book.tap(id.clone()));
        let child = Child {
            request,
            tools,
            model,
            gate,
            limits,
            sink,
            requester_sink,
            agent: None,
            waiter: None,
            subscribers: Vec::new(),
            stopping: None,
            stop_replies: Vec::new(),
        };
        child.requester_sink.emit(AgentEvent::ChildStarted(info));
        let admission = self.slots.admit(id.clone());
        match admission {
            Admission::Start => {
                self.set_status(&id, &child, SubAgentStatus::Running);
            }
            Admission::Queued(_) => {
                // The envelope starts queued; announce it.
                self.book.mark_queued(&id);
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
        if self.book.mark_started(id, self.config.clock.now_ms()) {
            // It waited in the queue: its start is marked on the stream.
            child
                .requester_sink
                .emit(AgentEvent::ChildRunning(id.clone()));
        }
        self.set_status(id, child, SubAgentStatus::Running);
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
            approvals: approvals_for(self.config.background_approvals, &self.book, id),
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
        let waiter = tokio::spawn(async move {
            let result = rx.await.ok()?;
            let _ = hub.cast(HubMsg::ChildFinished {
                id: waited,
                result: result.clone(),
            });
            Some(result)
        });
        self.actors.insert(agent.actor().get_id(), id.clone());
        self.sinks.insert(id.clone(), sink);
        if let Some(child) = self.children.get_mut(id) {
            child.agent = Some(agent);
            child.waiter = Some(waiter);
        }
    }

    /// Moves a child to a terminal status (once), frees its slot and
    /// answers everyone waiting on it. Returns the children to start.
    fn finish_child(
        &mut self,
        id: &AgentId,
        status: SubAgentStatus,
        result: Option<String>,
        error: Option<String>,
    ) -> Vec<AgentId> {
        if self.book.is_terminal(id) {
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
        let now = self.now_ms();
        let Some(envelope) = self.book.finish(id, status, result, error, now) else {
            return Vec::new();
        };
        // Sending the envelope delivers nothing: a receiver claims the
        // result once its tool call has taken it.
        for reply in child.subscribers.drain(..) {
            let _ = reply.send(envelope.clone());
        }
        for reply in child.stop_replies.drain(..) {
            reply.answer(Ok(status));
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

    /// A child's turn reported its result.
    async fn child_finished(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
        result: AgentResult,
    ) {
        let status = status_for(&result.outcome);
        let (result, error) = match &result.outcome {
            Outcome::Failed(e) => (Some(result.text), Some(e.clone())),
            Outcome::Stopped => {
                let why = self
                    .children
                    .get(id)
                    .and_then(|c| c.stopping)
                    .unwrap_or(STOPPED_RUNNING);
                (None, Some(why.to_owned()))
            }
            _ => (Some(result.text), None),
        };
        self.finish_and_refill(myself, id, status, result, error)
            .await;
    }

    /// Its requester gave up before learning its id: it goes on in the
    /// background (its result wakes the parent), or stops.
    async fn abandon(&mut self, myself: &ActorRef<HubMsg>, id: &AgentId, stop: bool) {
        if stop {
            self.stop(myself, id, StopReply::One(None)).await;
        } else {
            self.detach(id);
        }
    }

    fn detach(&mut self, id: &AgentId) -> DetachOutcome {
        if !self.book.contains(id) {
            return DetachOutcome::Unknown;
        }
        if self.book.is_terminal(id) {
            // Nobody took its result inline: it becomes a background
            // result and wakes the parent (unless a tool claims it).
            if let Some(released) = self.book.release_finished(id) {
                self.tell_observers(&released);
            }
            return match self.book.get(id) {
                Some(envelope) => DetachOutcome::AlreadyFinished(Box::new(envelope)),
                None => DetachOutcome::Unknown,
            };
        }
        let Some(child) = self.children.get(id) else {
            return DetachOutcome::Unknown;
        };
        self.set_status(id, child, SubAgentStatus::Background);
        DetachOutcome::Detached
    }

    /// Asks a child to stop: a queued one ends now; a running one is told
    /// to stop its turn and ends when it reports. `reply` is answered once
    /// it has ended (at once for an unknown or already ended child).
    async fn stop(&mut self, myself: &ActorRef<HubMsg>, id: &AgentId, reply: StopReply) {
        let Some(envelope) = self.book.get(id) else {
            return reply.answer(Err(unknown_child(id)));
        };
        if envelope.status.is_terminal() {
            return reply.answer(Ok(envelope.status));
        }
        let agent = self.children.get(id).and_then(|c| c.agent.clone());
        let Some(agent) = agent else {
            // Queued: it ends now.
            self.finish_and_refill(
                myself,
                id,
                SubAgentStatus::Stopped,
                None,
                Some(STOPPED_QUEUED.into()),
            )
            .await;
            return reply.answer(Ok(SubAgentStatus::Stopped));
        };
        let Some(child) = self.children.get_mut(id) else {
            return reply.answer(Err(unknown_child(id)));
        };
        child.stop_replies.push(reply);
        let first = child.stopping.replace(STOPPED_RUNNING).is_none();
        if first && agent.stop_turn().is_err() {
            // Its agent is already gone: it ends now.
            self.finish_and_refill(
                myself,
                id,
                SubAgentStatus::Stopped,
                None,
                Some(STOPPED_RUNNING.into()),
            )
            .await;
        }
    }

    /// Every live and queued child, in child-number order: the stream (and
    /// a replay) never depends on a map's iteration order.
    fn unfinished(&mut self) -> Vec<AgentId> {
        // The queue is emptied first, so stopping the live ones starts
        // nobody.
        let queued = self.slots.drain_queue();
        let mut all: Vec<AgentId> = queued
            .into_iter()
            .chain(self.children.keys().cloned())
            .filter(|id| !self.book.is_terminal(id))
            .collect();
        all.sort_by_key(|id| (child_number(id), id.clone()));
        all.dedup();
        all
    }

    async fn stop_all(&mut self, myself: &ActorRef<HubMsg>, reply: Option<RpcReplyPort<usize>>) {
        let all = self.unfinished();
        let done = Arc::new(AllStopped {
            reply: Mutex::new(reply),
            count: all.len(),
        });
        for id in all {
            self.stop(myself, &id, StopReply::All(done.clone())).await;
        }
    }

    /// Stops every child and waits for each running one to end its turn
    /// (its closing events come before its terminal status). Only when the
    /// hub itself stops: its mailbox is closed then, so the results are
    /// taken from the waiters directly.
    async fn stop_all_now(&mut self) {
        let all = self.unfinished();
        let mut running = Vec::new();
        for id in &all {
            if let Some(child) = self.children.get_mut(id)
                && let Some(agent) = &child.agent
            {
                child.stopping.get_or_insert(STOPPED_RUNNING);
                let _ = agent.stop_turn();
                running.push((id.clone(), child.waiter.take()));
            } else {
                self.finish_child(
                    id,
                    SubAgentStatus::Stopped,
                    None,
                    Some(STOPPED_QUEUED.into()),
                );
            }
        }
        for (id, waiter) in running {
            let result = match waiter {
                Some(waiter) => waiter.await.ok().flatten(),
                None => None,
            };
            let (status, result, error) = match result {
                Some(r) if !matches!(r.outcome, Outcome::Stopped) => {
                    let error = match &r.outcome {
                        Outcome::Failed(e) => Some(e.clone()),
                        _ => None,
                    };
                    (status_for(&r.outcome), Some(r.text), error)
                }
                _ => (
                    SubAgentStatus::Stopped,
                    None,
                    Some(STOPPED_RUNNING.to_owned()),
                ),
            };
            self.finish_child(&id, status, result, error);
        }
    }

    fn resolve_approval(
        &self,
        id: subagents_messages::ApprovalId,
        decision: subagents_messages::ApprovalDecision,
        reply: RpcReplyPort<Result<(), ApprovalRefusal>>,
    ) {
        let owner = AgentId::new(id.as_str().split("-approval-").next().unwrap_or(""));
        if let Some(agent) = self.children.get(&owner).and_then(|c| c.agent.as_ref()) {
            let _ = agent.actor().cast(AgentMsg::ResolveApproval {
                id,
                decision,
                reply,
            });
            return;
        }
        let refusal = if self.book.is_terminal(&owner) && self.book.contains(&owner) {
            ApprovalRefusal::Ended(id)
        } else {
            ApprovalRefusal::Unknown(id)
        };
        let _ = reply.send(Err(refusal));
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

pub(crate) fn unknown_child(id: &AgentId) -> String {
    format!("there is no sub-agent with id `{id}`; ids look like `agent_1`")
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
            book: args.book,
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
                let stop = request.stop_if_abandoned;
                let spawned = state.spawn_child(&myself, request).await;
                let made = spawned.as_ref().ok().cloned();
                if reply.send(spawned).is_err()
                    && let Some(id) = made
                {
                    // Nobody learnt its id: nobody will wait on it.
                    state.abandon(&myself, &id, stop).await;
                }
            }
            HubMsg::Abandoned { id, stop } => state.abandon(&myself, &id, stop).await,
            HubMsg::Subscribe { id, reply } => match state.book.get(&id) {
                Some(envelope) if envelope.status.is_terminal() => {
                    let _ = reply.send(envelope);
                }
                Some(_) => {
                    if let Some(child) = state.children.get_mut(&id) {
                        child.subscribers.push(reply);
                    }
                }
                None => {}
            },
            HubMsg::Claimed { id } => {
                if let Some(envelope) = state.book.get(&id) {
                    state.tell_observers(&envelope);
                }
            }
            HubMsg::Detach { id, reply } => {
                let outcome = state.detach(&id);
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
            HubMsg::Stop { id, reply } => state.stop(&myself, &id, StopReply::One(reply)).await,
            HubMsg::StopAll { reply } => state.stop_all(&myself, reply).await,
            HubMsg::ChildFinished { id, result } => {
                state.child_finished(&myself, &id, result).await;
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
            } => state.resolve_approval(id, decision, reply),
            HubMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            _ => {}
        }
        Ok(())
    }

    /// Overrides ractor's default, which would stop the hub when any child
    /// stops. A child that dies before reporting its result fails (or, if
    /// it was being stopped, stops); its slot frees and the next queued
    /// child starts.
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
        // The event may carry the dead child's state: dropping it first
        // lets the child end its turn on the stream (its call in flight
        // answered, its `Result`) before its terminal status closes it.
        drop(event);
        if let Some(id) = state.actors.remove(&cell_id) {
            // Only a child still running ends here: a finished child's
            // result came first, by its own message.
            let stopping = state.children.get(&id).and_then(|c| c.stopping);
            let (status, error) = match stopping {
                Some(why) => (SubAgentStatus::Stopped, why.to_owned()),
                None => (SubAgentStatus::Failed, error),
            };
            state
                .finish_and_refill(&myself, &id, status, None, Some(error))
                .await;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<HubMsg>,
        state: &mut HubState,
    ) -> Result<(), ActorProcessingErr> {
        state.stop_all_now().await;
        Ok(())
    }
}
