//! The **ThreadSupervisor** actor: one conversation thread's policy.
//!
//! ```text
//! Host ── ThreadHandle ──► ThreadSupervisor
//!                            ├─ Agent (parent)  ◄── Turn (user / wake)
//!                            ├─ Hub ── observer ──► ChildFinished
//!                            └─ WakeQueue (pure): one in flight, FIFO
//! ```
//!
//! **Owns:** the parent, its hub and gate (spawned linked under it), the
//! wake queue and whether the parent generates, the user types, the thread
//! is on screen. **Guarantees:** a finished background child whose result
//! was not claimed becomes one wake; one wake in flight, the rest FIFO;
//! none delivered while the parent generates or the user types; none after
//! a thread switch or while off screen. A switch stops every child. The
//! handler never awaits a turn: turns run in tasks that report
//! `TurnEnded`.

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use subagents_actors::hub::{EnvelopeArchive, HubObserver};
use subagents_actors::{DelegatingAgent, DelegationBuilder, EventSink, EventStream};
use subagents_messages::{
    AgentEvent, AgentId, AgentMsg, ApprovalDecision, ApprovalId, ApprovalRefusal, Envelope, HubMsg,
    ThreadMsg, TurnOrigin, UserTurn, WakeNotice,
};

use crate::store::EnvelopeStore;
use crate::wake::{WakeQueue, wake_line, wake_text};

/// Why a child the hub took with it failed.
const HUB_GONE: &str = "the sub-agent hub stopped before the sub-agent ended";

/// The supervisor actor.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadSupervisor;

/// How a thread is set up.
pub struct ThreadConfig {
    /// The parent and its children, not yet spawned.
    pub parent: DelegationBuilder,
    /// Where finished envelopes are persisted, if anywhere.
    pub store: Option<Arc<EnvelopeStore>>,
}

impl ThreadConfig {
    /// A thread running `parent`, persisting nothing.
    pub fn new(parent: DelegationBuilder) -> Self {
        Self {
            parent,
            store: None,
        }
    }

    /// Persists finished envelopes in `store` and answers its ids.
    pub fn store(mut self, store: Arc<EnvelopeStore>) -> Self {
        self.store = Some(store);
        self
    }
}

impl From<DelegationBuilder> for ThreadConfig {
    fn from(parent: DelegationBuilder) -> Self {
        Self::new(parent)
    }
}

/// Arguments: the thread's setup and its sink.
pub struct ThreadArguments {
    /// The setup.
    pub config: ThreadConfig,
    /// The thread's event sink.
    pub events: EventSink,
    /// Receives handles to the parent, hub and gate once spawned.
    pub parts: Option<tokio::sync::oneshot::Sender<DelegatingAgent>>,
}

impl std::fmt::Debug for ThreadArguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadArguments").finish_non_exhaustive()
    }
}

/// The supervisor's state.
#[derive(Debug)]
pub struct ThreadState {
    parent: DelegatingAgent,
    events: EventSink,
    wakes: WakeQueue,
    turns_in_flight: usize,
    store: Option<Arc<EnvelopeStore>>,
    persist_errors: Vec<String>,
    writes: Vec<tokio::task::JoinHandle<()>>,
    /// Children requested before the last switch: they never wake.
    switched_off: std::collections::HashSet<subagents_messages::AgentId>,
    /// Children whose result was queued as a wake: at most once each (a
    /// finished child's envelope may be reported again when it changes).
    woken: std::collections::HashSet<subagents_messages::AgentId>,
    /// Approvals answered through this thread, so a late second answer is
    /// refused as already answered even after the child that asked ended.
    answered: Arc<std::sync::Mutex<std::collections::HashMap<ApprovalId, ApprovalDecision>>>,
}

struct Observer(ActorRef<ThreadMsg>);

struct Archive(Arc<EnvelopeStore>);

impl EnvelopeArchive for Archive {
    fn get(&self, id: &AgentId) -> Option<Envelope> {
        self.0.get(id)
    }
}

impl HubObserver for Observer {
    fn finished(&self, envelope: &Envelope) {
        let _ = self
            .0
            .cast(ThreadMsg::ChildFinished(Box::new(envelope.clone())));
    }
}

impl ThreadState {
    fn send_turn(&mut self, myself: &ActorRef<ThreadMsg>, text: String, origin: TurnOrigin) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.parent.agent.actor().cast(AgentMsg::Turn {
            turn: UserTurn { text, origin },
            reply: Some(tx.into()),
        });
        if sent.is_err() {
            return;
        }
        self.turns_in_flight += 1;
        self.wakes.set_generating(true);
        let me = myself.clone();
        let wake = origin == TurnOrigin::Wake;
        tokio::spawn(async move {
            // Ok or dropped (a stop cleared the queue): the turn is over.
            let _ = rx.await;
            let _ = me.cast(ThreadMsg::TurnEnded { wake });
        });
    }

    /// Writes a finished envelope off the actor (file I/O blocks).
    fn persist(&mut self, myself: &ActorRef<ThreadMsg>, envelope: &Envelope) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let envelope = envelope.clone();
        let me = myself.clone();
        self.writes.retain(|w| !w.is_finished());
        self.writes.push(tokio::task::spawn_blocking(move || {
            if let Err(error) = store.save(&envelope) {
                let _ = me.cast(ThreadMsg::PersistFailed(error.to_string()));
            }
            // Pruned as the session goes, not only on open: envelopes past
            // the retention (24 h by the store's clock) leave memory and disk.
            for error in store.prune().failed {
                let _ = me.cast(ThreadMsg::PersistFailed(error.to_string()));
            }
        }));
    }

    /// Writes, and waits for, every envelope of the hub the store does not
    /// hold as it is now (used when the thread closes).
    async fn persist_remaining(&mut self) {
        for write in std::mem::take(&mut self.writes) {
            let _ = write.await;
        }
        let Some(store) = self.store.clone() else {
            return;
        };
        let mut envelopes = self.parent.hub.envelopes();
        envelopes.extend(self.parent.hub.fail_unfinished(HUB_GONE));
        let changed: Vec<Envelope> = envelopes
            .into_iter()
            .filter(|e| e.status.is_terminal() && store.get(&e.id).as_ref() != Some(e))
            .collect();
        if changed.is_empty() {
            return;
        }
        let written = tokio::task::spawn_blocking(move || {
            changed
                .iter()
                .filter_map(|e| store.save(e).err())
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        })
        .await;
        for error in written.unwrap_or_default() {
            tracing::error!(%error, "an envelope could not be persisted as the thread closed");
        }
    }

    fn deliver_wakes(&mut self, myself: &ActorRef<ThreadMsg>) {
        while let Some(child) = self.wakes.release_next() {
            let envelope = self.parent.hub.status(&child);
            match envelope {
                Some(envelope) if !envelope.claimed => {
                    self.events.emit(AgentEvent::Wake(WakeNotice {
                        child: child.clone(),
                        line: wake_line(&envelope),
                    }));
                    self.send_turn(myself, wake_text(&envelope), TurnOrigin::Wake);
                    return;
                }
                // Claimed through `result` meanwhile: no wake.
                _ => self.wakes.finished(),
            }
        }
    }
}

impl Actor for ThreadSupervisor {
    type Msg = ThreadMsg;
    type State = ThreadState;
    type Arguments = ThreadArguments;

    async fn pre_start(
        &self,
        myself: ActorRef<ThreadMsg>,
        args: ThreadArguments,
    ) -> Result<ThreadState, ActorProcessingErr> {
        let config = args.config;
        let mut builder = config.parent.observer(Arc::new(Observer(myself.clone())));
        if let Some(store) = &config.store {
            builder = builder
                .archive(Arc::new(Archive(store.clone())))
                .child_ids(store.child_ids());
        }
        let parent = builder
            .spawn_into(args.events.clone(), Some(myself.get_cell()))
            .await?;
        if let Some(parts) = args.parts {
            let _ = parts.send(parent.clone());
        }
        Ok(ThreadState {
            parent,
            events: args.events,
            wakes: WakeQueue::new(),
            turns_in_flight: 0,
            store: config.store,
            persist_errors: Vec::new(),
            writes: Vec::new(),
            switched_off: Default::default(),
            woken: Default::default(),
            answered: Default::default(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ThreadMsg>,
        message: ThreadMsg,
        state: &mut ThreadState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ThreadMsg::UserTurn(text) => {
                state.events.emit(AgentEvent::UserMessage(text.clone()));
                state.send_turn(&myself, text, TurnOrigin::User);
            }
            ThreadMsg::Typing(typing) => state.wakes.set_typing(typing),
            ThreadMsg::OnScreen(on) => state.wakes.set_on_screen(on),
            ThreadMsg::SwitchAway(reply) => {
                state.wakes.clear();
                // Emitted first, then the children are read: every child
                // whose `ChildStarted` precedes this event is in the set,
                // so none of them wakes the parent afterwards — even one
                // that finishes at this instant and reports after.
                state.events.emit(AgentEvent::SwitchedAway);
                state
                    .switched_off
                    .extend(state.parent.hub.envelopes().into_iter().map(|e| e.id));
                // The hub stops children in its own handler; the reply,
                // if asked for, comes from it.
                let _ = state.parent.hub.actor().cast(HubMsg::StopAll { reply });
            }
            ThreadMsg::StopParent => {
                let _ = state.parent.agent.stop_turn();
            }
            ThreadMsg::ResolveApproval {
                id,
                decision,
                reply,
            } => route_approval(state, id, decision, reply),
            ThreadMsg::Envelope { id, reply } => {
                let _ = reply.send(state.parent.hub.status(&id));
            }
            ThreadMsg::PersistErrors(reply) => {
                let _ = reply.send(state.persist_errors.clone());
            }
            ThreadMsg::FlushPersistence(reply) => {
                let writes = std::mem::take(&mut state.writes);
                let me = myself.clone();
                tokio::spawn(async move {
                    for write in writes {
                        let _ = write.await;
                    }
                    // Behind any PersistFailed the writes sent, so errors
                    // are recorded before the flush answers.
                    let _ = me.cast(ThreadMsg::FlushDone(reply));
                });
            }
            ThreadMsg::Ping(reply) => {
                let _ = reply.send(());
            }
            ThreadMsg::FlushDone(reply) => {
                let _ = reply.send(());
            }
            ThreadMsg::PersistFailed(error) => {
                tracing::error!(%error, "an envelope could not be persisted; it stays in memory");
                state.persist_errors.push(error);
            }
            ThreadMsg::ChildFinished(envelope) => {
                state.persist(&myself, &envelope);
                // Only a child that finished (done or failed) wakes the
                // parent; a stopped one was stopped on purpose.
                let finished = matches!(
                    envelope.status,
                    subagents_messages::SubAgentStatus::Done
                        | subagents_messages::SubAgentStatus::Failed
                );
                if finished
                    && envelope.background
                    && !envelope.claimed
                    && !state.switched_off.contains(&envelope.id)
                    && state.woken.insert(envelope.id.clone())
                {
                    state.wakes.push(envelope.id.clone());
                }
            }
            ThreadMsg::TurnEnded { wake } => {
                state.turns_in_flight = state.turns_in_flight.saturating_sub(1);
                if state.turns_in_flight == 0 {
                    state.wakes.set_generating(false);
                }
                if wake {
                    state.wakes.finished();
                }
            }
            _ => {}
        }
        state.deliver_wakes(&myself);
        Ok(())
    }

    /// Overrides ractor's default (which stops the supervisor when any
    /// linked actor stops): children of the hub come and go; a crash of
    /// the parent or hub is logged and the thread stays answerable. A hub
    /// that dies takes its children with it: each one that had not ended
    /// gets a final `failed` envelope, persisted.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<ThreadMsg>,
        event: SupervisionEvent,
        state: &mut ThreadState,
    ) -> Result<(), ActorProcessingErr> {
        let cell = match &event {
            SupervisionEvent::ActorFailed(cell, error) => {
                tracing::error!(actor = %cell.get_id(), %error, "an actor of the thread crashed");
                cell
            }
            SupervisionEvent::ActorTerminated(cell, ..) => cell,
            _ => return Ok(()),
        };
        if cell.get_id() == state.parent.hub.actor().get_id() {
            for envelope in state.parent.hub.fail_unfinished(HUB_GONE) {
                state.persist(&myself, &envelope);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ThreadMsg>,
        state: &mut ThreadState,
    ) -> Result<(), ActorProcessingErr> {
        // The parent, the hub (and so every child) and the gate if the
        // thread made it: nothing of a closed thread keeps running.
        state.parent.shutdown_and_wait().await;
        // Every child ever started leaves a final envelope in the store:
        // the notices the hub sent while stopping never reach this
        // stopped actor, so the envelopes are written from the hub's map.
        state.persist_remaining().await;
        Ok(())
    }
}

/// Approval ids start with the asking agent's id (`parent-approval-1`,
/// `agent_3-approval-2`): the answer goes to the parent or to the hub (and
/// the child named). An answer whose target went away before replying —
/// a child stopped by a switch at that instant — is `Ended`, never a
/// closed thread: the thread still answers.
fn route_approval(
    state: &ThreadState,
    id: ApprovalId,
    decision: ApprovalDecision,
    reply: ractor::RpcReplyPort<Result<(), ApprovalRefusal>>,
) {
    let owner = id.as_str().split("-approval-").next().unwrap_or("");
    let to_parent = owner == state.parent.agent.id().as_str();
    let parent = state.parent.agent.actor().clone();
    let hub = state.parent.hub.actor().clone();
    let answered = state.answered.clone();
    tokio::spawn(async move {
        let asked = id.clone();
        let answer = if to_parent {
            ractor::call!(parent, |r| AgentMsg::ResolveApproval {
                id: asked,
                decision,
                reply: r
            })
            .ok()
        } else {
            ractor::call!(hub, |r| HubMsg::ResolveApproval {
                id: asked,
                decision,
                reply: r
            })
            .ok()
        };
        let answer = answer.unwrap_or_else(|| Err(ApprovalRefusal::Ended(id.clone())));
        let mut answered = answered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let answer = match answer {
            Ok(()) => {
                answered.insert(id, decision);
                Ok(())
            }
            Err(ApprovalRefusal::Ended(_) | ApprovalRefusal::Unknown(_))
                if answered.contains_key(&id) =>
            {
                let decision = answered[&id];
                Err(ApprovalRefusal::AlreadyAnswered { id, decision })
            }
            Err(refusal) => Err(refusal),
        };
        drop(answered);
        let _ = reply.send(answer);
    });
}

/// Why a call on a thread failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadError {
    /// The thread could not be started.
    #[error("the thread could not be started: {0}")]
    Spawn(String),
    /// The thread is closed; the message was not delivered.
    #[error("the thread is closed")]
    Closed,
    /// An answer to an approval was not taken (unknown, already answered,
    /// or the agent that asked ended first).
    #[error(transparent)]
    Approval(#[from] ApprovalRefusal),
}

/// The host's handle on one thread. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ThreadHandle {
    actor: ActorRef<ThreadMsg>,
    parts: DelegatingAgent,
}

impl ThreadHandle {
    /// Starts a thread: the parent built by `parent`, its hub and gate,
    /// supervised; returns the handle and the thread's event stream. Pass
    /// `supervisor` to link it under an actor of the host.
    pub async fn spawn(
        config: impl Into<ThreadConfig>,
        supervisor: Option<ActorCell>,
    ) -> Result<(ThreadHandle, EventStream), ThreadError> {
        let (events, stream) = EventSink::channel();
        let (parts_tx, parts_rx) = tokio::sync::oneshot::channel();
        let args = ThreadArguments {
            config: config.into(),
            events,
            parts: Some(parts_tx),
        };
        let spawned = match supervisor {
            Some(supervisor) => Actor::spawn_linked(None, ThreadSupervisor, args, supervisor).await,
            None => Actor::spawn(None, ThreadSupervisor, args).await,
        };
        let (actor, _) = spawned.map_err(|e| ThreadError::Spawn(e.to_string()))?;
        let parts = parts_rx
            .await
            .map_err(|_| ThreadError::Spawn("the thread did not start its parent".into()))?;
        Ok((ThreadHandle { actor, parts }, stream))
    }

    /// The supervisor actor.
    pub fn actor(&self) -> &ActorRef<ThreadMsg> {
        &self.actor
    }

    /// The thread's parent, hub and gate (for queries such as
    /// `hub().status(id)` or `gate.snapshot()`, and for actor-based hosts).
    pub fn parts(&self) -> &DelegatingAgent {
        &self.parts
    }

    fn cast(&self, message: ThreadMsg) -> Result<(), ThreadError> {
        self.actor.cast(message).map_err(|_| ThreadError::Closed)
    }

    /// Sends a user turn.
    pub fn send_user(&self, text: impl Into<String>) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::UserTurn(text.into()))
    }

    /// Reports whether the user is typing.
    pub fn typing(&self, typing: bool) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::Typing(typing))
    }

    /// Reports whether the thread is on screen.
    pub fn on_screen(&self, on_screen: bool) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::OnScreen(on_screen))
    }

    /// A thread switch: stops every child and drops pending wakes; returns
    /// how many children were stopped.
    pub async fn switch_away(&self) -> Result<usize, ThreadError> {
        ractor::call!(self.actor, |reply| ThreadMsg::SwitchAway(Some(reply)))
            .map_err(|_| ThreadError::Closed)
    }

    /// Stops the parent's running turn.
    pub fn stop_parent(&self) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::StopParent)
    }

    /// Answers an approval, routed to the agent that asked (the parent or
    /// a child). An answer not taken says why:
    /// [`ThreadError::Approval`] with [`ApprovalRefusal::Unknown`],
    /// [`ApprovalRefusal::AlreadyAnswered`] or [`ApprovalRefusal::Ended`];
    /// [`ThreadError::Closed`] only when the thread itself is closed.
    pub async fn resolve_approval(
        &self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(), ThreadError> {
        ractor::call!(self.actor, |reply| ThreadMsg::ResolveApproval {
            id,
            decision,
            reply
        })
        .map_err(|_| ThreadError::Closed)??;
        Ok(())
    }

    /// A child's envelope by id: this session's, or a persisted one of an
    /// earlier session.
    pub async fn envelope(&self, id: &AgentId) -> Result<Option<Envelope>, ThreadError> {
        ractor::call!(self.actor, |reply| ThreadMsg::Envelope {
            id: id.clone(),
            reply
        })
        .map_err(|_| ThreadError::Closed)
    }

    /// Returns once every message sent through this handle before has been
    /// handled (so its effects, and the events they emitted, come first).
    pub async fn sync(&self) -> Result<(), ThreadError> {
        ractor::call!(self.actor, ThreadMsg::Ping).map_err(|_| ThreadError::Closed)
    }

    /// Waits until every envelope write started so far has finished.
    pub async fn flush_persistence(&self) -> Result<(), ThreadError> {
        ractor::call!(self.actor, ThreadMsg::FlushPersistence).map_err(|_| ThreadError::Closed)
    }

    /// Persistence errors seen so far (each names the file).
    pub async fn persist_errors(&self) -> Result<Vec<String>, ThreadError> {
        ractor::call!(self.actor, ThreadMsg::PersistErrors).map_err(|_| ThreadError::Closed)
    }

    /// Closes the thread (a delete): children stop, the parent stops.
    pub fn close(&self) {
        self.actor.stop(None);
    }

    /// Closes the thread and returns once everything it made — parent,
    /// hub, children, its own gate — has stopped.
    pub async fn close_and_wait(&self) {
        self.actor.stop(None);
        self.actor.wait(None).await.ok();
    }
}
