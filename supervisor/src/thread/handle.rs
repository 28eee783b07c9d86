//! The host's handle on one thread.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ractor::{Actor, ActorCell, ActorRef};
use subagents_actors::{DelegatingAgent, EventSink, EventStream, GateHandle, HubHandle};
use subagents_messages::{
    AgentId, AgentSnapshot, ApprovalDecision, ApprovalId, Envelope, SubAgentStatus, Usage,
};

use subagents_actors::hub::Refused;

use crate::thread::actor::ThreadSupervisor;
use crate::thread::config::ThreadConfig;
use crate::thread::error::ThreadError;
use crate::thread::msg::ThreadMsg;
use crate::thread::shared::PersistErrors;
use crate::thread::state::ThreadArguments;

/// The host's handle on one thread. Cheap to clone. Dropping every clone
/// does not close the thread (its actors run on): close it
/// ([`ThreadHandle::close_and_wait`]) when done.
#[derive(Debug, Clone)]
pub struct ThreadHandle {
    pub(super) actor: ActorRef<ThreadMsg>,
    pub(super) parts: DelegatingAgent,
    /// Set by [`ThreadHandle::close`] (shared by clones): a user turn sent
    /// after it is given back at once. The actor itself takes messages
    /// until its loop reads the stop, then drops them. A lock, not a flag:
    /// a turn's check and its send are one step against a close's set and
    /// its `Close`, so no turn lands behind the `Close` unanswered.
    closing: Arc<Mutex<bool>>,
    /// The thread's failed writes (shared with it and its clones).
    errors: PersistErrors,
    /// Its store's counter of child ids (`Threads` numbers a thread
    /// opened again under an id past it).
    pub(crate) child_ids: Option<subagents_actors::hub::ChildIds>,
    /// Its store, not held (a closed thread's handle keeps no directory
    /// locked): a delete after its close forgets its children there.
    store: Option<std::sync::Weak<crate::store::EnvelopeStore>>,
}

impl ThreadHandle {
    /// Starts a thread: the parent built by `parent`, its hub and gate,
    /// supervised; returns the handle and the thread's event stream. Pass
    /// `supervisor` to link it under an actor of the host, which must
    /// override `handle_supervisor_evt` (ractor's default stops it when
    /// the thread closes; docs/supervisor.md). With a store and an id
    /// ([`ThreadConfig::id`]), refused [`ThreadError::AlreadyOpen`] while a
    /// thread of that id is live on the store; one closing is waited for.
    pub async fn spawn(
        config: impl Into<ThreadConfig>,
        supervisor: Option<ActorCell>,
    ) -> Result<(ThreadHandle, EventStream), ThreadError> {
        Self::spawn_with(config.into(), supervisor, None).await
    }

    /// [`ThreadHandle::spawn`]; `registry`, for a thread `Threads::open`
    /// opens: its wakes wait until it is shown (the registry shows it once
    /// it kept it), and its parent numbers its approvals in a block past
    /// this floor (the next block the registry's threads may take).
    pub(crate) async fn spawn_with(
        config: ThreadConfig,
        supervisor: Option<ActorCell>,
        registry: Option<Arc<std::sync::atomic::AtomicU64>>,
    ) -> Result<(ThreadHandle, EventStream), ThreadError> {
        let closing = Arc::new(Mutex::new(false));
        let live = config.admit(&closing).await?;
        let (events, stream) = EventSink::channel();
        let (parts_tx, mut parts_rx) = tokio::sync::oneshot::channel();
        let errors = PersistErrors::default();
        let child_ids = config.store.as_ref().map(|store| store.child_ids());
        let store = config.store.as_ref().map(Arc::downgrade);
        let args = ThreadArguments {
            config,
            events,
            parts: Some(parts_tx),
            held: registry.is_some(),
            approvals_floor: registry,
            errors: errors.clone(),
            live,
        };
        let spawned = match supervisor {
            Some(supervisor) => Actor::spawn_linked(None, ThreadSupervisor, args, supervisor).await,
            None => Actor::spawn(None, ThreadSupervisor, args).await,
        };
        let (actor, _) = spawned.map_err(|e| {
            if subagents_actors::agent::supervisor_stopping(&e) {
                ThreadError::SupervisorStopping
            } else {
                ThreadError::Spawn(e.to_string())
            }
        })?;
        // Sent by its `pre_start`, run by the spawn: taken, not awaited (an
        // open given up there left a running thread nobody held).
        let Ok(parts) = parts_rx.try_recv() else {
            actor.stop(None);
            let why = "the thread did not start its parent";
            return Err(ThreadError::Spawn(why.into()));
        };
        Ok((
            ThreadHandle {
                actor,
                parts,
                closing,
                errors,
                child_ids,
                store,
            },
            stream,
        ))
    }

    /// The supervisor actor, to wait for, link or kill (its messages are
    /// this handle's methods). Close a thread with
    /// [`ThreadHandle::close`]: ractor's stop through this cell is read
    /// before the messages waiting in the mailbox and drops them, a user
    /// turn the handle took among them.
    pub fn actor(&self) -> &ActorCell {
        &self.actor
    }

    /// The thread's hub: its children's envelopes, counts and queue
    /// positions, and a child's stop. Every change it makes reaches the
    /// supervisor, whose wake and persistence policy still applies.
    pub fn hub(&self) -> &HubHandle {
        &self.parts.hub
    }

    /// The gate the thread's parent and children call the model through.
    /// One the thread made (no gate given to its builder, and its parent's
    /// model not registered with one: that gate is the registry's, and
    /// runs on) stops when the thread closes, whoever holds a clone: a
    /// thread that should share it fails every model call after that. To
    /// share a gate, spawn it and give it to each thread's builder.
    pub fn gate(&self) -> &GateHandle {
        &self.parts.gate
    }

    /// The parent's id (its approvals' ids start with it).
    pub fn parent_id(&self) -> &AgentId {
        self.parts.agent.id()
    }

    /// The parent's state now (busy, turns queued). Read-only: turns go
    /// through [`ThreadHandle::send_user`], so wakes stay ordered.
    pub async fn parent_snapshot(&self) -> Result<AgentSnapshot, ThreadError> {
        let snapshot = self.parts.agent.snapshot().await;
        snapshot.map_err(|_| match self.is_closing() {
            true => ThreadError::Closed,
            false => ThreadError::ParentGone,
        })
    }

    /// Every token the thread used: the parent's finished turns and every
    /// child of it at any depth — running ones as of now, background,
    /// detached and stopped ones included. Each agent's own model calls
    /// count once (a child's tokens are not counted again through the
    /// `children_usage` of the turn that took its result). The parts:
    /// [`ThreadHandle::parent_snapshot`]`.usage` and the hub's
    /// [`usage`](HubHandle::usage) (read from its book, so a thread whose
    /// hub crashed still answers: it is open, not `Closed`).
    pub async fn usage(&self) -> Result<Usage, ThreadError> {
        let mut usage = self.parent_snapshot().await?.usage;
        usage.add(self.parts.hub.usage());
        Ok(usage)
    }

    /// Deleted: once closed, its children are forgotten (`Threads::delete`).
    /// Marked where the close reads it, not sent: a message behind a close
    /// in flight was dropped (`Ok`, nothing forgotten). `false`: the close
    /// read it already — [`Self::forget_after_close`] is the delete's.
    pub(crate) fn deleted(&self) -> bool {
        self.errors.mark_deleted()
    }

    /// Its close looked at the delete mark and carried it out (not a
    /// thread killed, or whose handler panicked: ractor skips its
    /// `post_stop`, or drops it at an await).
    pub(crate) fn close_settled(&self) -> bool {
        self.errors.is_settled()
    }

    /// The children of a thread deleted after its close had looked (closed
    /// by itself, or its close there first on another worker): forgotten
    /// in its store now, its failed writes noted as the close's are. A
    /// delete of a closed thread answered `Ok` and forgot nothing: a tab
    /// opened again under the id read, claimed and resumed them.
    pub(crate) async fn forget_after_close(
        &self,
        id: subagents_messages::ThreadId,
    ) -> Result<(), ThreadError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let Some(store) = store.upgrade() else {
            return Err(ThreadError::NotForgotten(id));
        };
        let forgotten = store.off_the_runtime(move |s| s.forget_thread(&id)).await;
        match forgotten {
            Some(Ok(failed)) => failed.iter().for_each(|e| self.errors.push(e.to_string())),
            Some(Err(crate::store::StoreError::ThreadOpen { thread, .. })) => {
                return Err(ThreadError::AlreadyOpen(thread));
            }
            Some(Err(other)) => self.errors.push(other.to_string()),
            None => self
                .errors
                .push("the forget of its children did not run".to_owned()),
        }
        Ok(())
    }

    /// Sends `message` unless the thread is closing: one sent after
    /// [`ThreadHandle::close`] (its stop not yet read) was taken, `Ok`,
    /// and dropped with the mailbox. The check and the send are one step
    /// against a close, as a user turn's are.
    fn cast(&self, message: ThreadMsg) -> Result<(), ThreadError> {
        let closing = self.closing();
        if *closing {
            return Err(ThreadError::Closed);
        }
        self.actor.cast(message).map_err(|_| ThreadError::Closed)
    }

    /// Sends a user turn; its run's span sits under the caller's current
    /// span, if any (else it starts a trace of its own) — not one the
    /// library entered around the caller: ractor's `Actor` span of a
    /// handler, or an observer's (docs/observability.md).
    /// On a closed thread the text comes back in
    /// [`ThreadError::Undelivered`]; an empty one in
    /// [`ThreadError::EmptyTurn`].
    pub fn send_user(&self, text: impl Into<String>) -> Result<(), ThreadError> {
        let text = text.into();
        if text.trim().is_empty() {
            return Err(ThreadError::EmptyTurn(text));
        }
        // Read before the lock: a subscriber's code runs here.
        let span = subagents_actors::agent::sender_span();
        let closing = self.closing();
        if *closing {
            return Err(ThreadError::Undelivered(text));
        }
        self.actor
            .cast(ThreadMsg::UserTurn { text, span })
            .map_err(|e| match e {
                ractor::MessagingErr::SendErr(ThreadMsg::UserTurn { text, .. }) => {
                    ThreadError::Undelivered(text)
                }
                _ => ThreadError::Closed,
            })
    }

    /// Reports whether the user is typing.
    pub fn typing(&self, typing: bool) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::Typing(typing))
    }

    /// Reports whether the thread is on screen.
    pub fn on_screen(&self, on_screen: bool) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::OnScreen(on_screen))
    }

    /// Being left by a registry: off screen, a child's wake held until
    /// `on_screen(false)` (the leave done) or `on_screen(true)` (given up).
    pub(crate) fn leaving(&self) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::Internal(
            crate::thread::msg::sealed::ThreadInternal::Leaving,
        ))
    }

    /// A thread switch: stops every child and drops pending wakes; returns
    /// how many children were stopped. An earlier session's wakes go back
    /// to the store for the next showing when `on_screen(false)` is sent
    /// in the same tick, before this is awaited (as `Threads` does, in
    /// its own words: the thread is being left, a child finishing meanwhile
    /// held until the target is shown); with none behind it (a "stop
    /// all"), they go out again.
    ///
    /// Sent when called, not when first polled (as [`Self::stop_child`]
    /// and [`Self::resolve_approval`]): what the host sends after it
    /// arrives after it, and a future dropped unpolled (a `select!`'s
    /// other branch ready first) still switched.
    pub fn switch_away(
        &self,
    ) -> impl std::future::Future<Output = Result<usize, ThreadError>> + Send + 'static + use<>
    {
        self.ask(|reply| ThreadMsg::SwitchAway {
            reply: Some(reply),
            forget: false,
        })
    }

    /// A switch that also drops an earlier session's wakes (a clear, a
    /// delete): given back to the store, they outlived a delete — listed
    /// by every later process — and came back after a clear.
    pub(crate) fn switch_away_forgetting(
        &self,
    ) -> impl std::future::Future<Output = Result<usize, ThreadError>> + Send + 'static + use<>
    {
        self.ask(|reply| ThreadMsg::SwitchAway {
            reply: Some(reply),
            forget: true,
        })
    }

    /// Where the thread's failed writes are now
    /// ([`Self::failed_writes_since`]).
    pub(crate) fn failed_writes_mark(&self) -> u64 {
        self.errors.mark()
    }

    /// The writes of the thread's store that failed (again) after `mark`,
    /// as [`Self::persist_errors`] names them.
    pub(crate) fn failed_writes_since(&self, mark: u64) -> Vec<String> {
        self.errors.since(mark)
    }

    /// Sends the message `make` builds now — not when the future is first
    /// polled — and returns a future of its answer (`Closed` once the
    /// thread is, or if it went away unanswered). The future's type holds
    /// `make`'s, so a caller's closure owns what it takes (`move`).
    fn ask<T: Send + 'static, F: FnOnce(ractor::RpcReplyPort<T>) -> ThreadMsg>(
        &self,
        make: F,
    ) -> impl std::future::Future<Output = Result<T, ThreadError>> + Send + 'static + use<T, F>
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.cast(make(reply.into()));
        async move {
            sent?;
            answer.await.map_err(|_| ThreadError::Closed)
        }
    }

    /// Stops one child: a queued one at once, a running one once its turn
    /// has ended (its closing events come first). Returns its status after
    /// — `stopped`, or the status it reached at that instant. Sent through
    /// the thread, and when called (not when first polled): an approval
    /// answered before it reaches the child first, and a stop the host
    /// sends after it arrives after it.
    pub fn stop_child(
        &self,
        id: &AgentId,
    ) -> impl std::future::Future<Output = Result<SubAgentStatus, ThreadError>> + Send + 'static + use<>
    {
        let id = id.clone();
        let answer = self.ask(move |reply| ThreadMsg::StopChild { id, reply });
        async move {
            answer.await?.map_err(|refused| match refused {
                // Another thread's chain (it resumed an earlier session's
                // child): none of this thread's.
                Refused::UnknownChild(id) | Refused::ResumedElsewhere { id } => {
                    ThreadError::UnknownChild(id)
                }
                // A stop answers only those or Closed (see
                // `HubHandle::stop`).
                _ => ThreadError::Closed,
            })
        }
    }

    /// Stops the parent's running turn and drops its queued ones; each
    /// ends in its own stopped `Result` (every turn sent is answered once).
    pub fn stop_parent(&self) -> Result<(), ThreadError> {
        self.cast(ThreadMsg::StopParent)
    }

    /// Answers an approval, routed to the agent that asked (the parent or
    /// a child). An answer not taken says why:
    /// [`ThreadError::Approval`] with [`ApprovalRefusal::Unknown`],
    /// [`ApprovalRefusal::AlreadyAnswered`], [`ApprovalRefusal::Ended`] or
    /// (a child on another node, whose run ended here before its node's
    /// word on the answer sent) [`ApprovalRefusal::Unsettled`];
    /// [`ThreadError::Closed`] only when the thread itself is closed.
    ///
    /// The answer is sent when this is called, not when the future is
    /// first polled: a stop the host sends after it (`stop_parent`,
    /// `stop_child`) arrives after it, and an answer whose future is
    /// dropped unpolled is still given. The future waits for the verdict.
    ///
    /// [`ApprovalRefusal::Unknown`]: subagents_messages::ApprovalRefusal::Unknown
    /// [`ApprovalRefusal::AlreadyAnswered`]: subagents_messages::ApprovalRefusal::AlreadyAnswered
    /// [`ApprovalRefusal::Ended`]: subagents_messages::ApprovalRefusal::Ended
    /// [`ApprovalRefusal::Unsettled`]: subagents_messages::ApprovalRefusal::Unsettled
    pub fn resolve_approval(
        &self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> impl std::future::Future<Output = Result<(), ThreadError>> + Send + 'static + use<> {
        let answer = self.ask(move |reply| ThreadMsg::ResolveApproval {
            id,
            decision,
            reply,
        });
        async move {
            answer.await??;
            Ok(())
        }
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
    /// handled by the thread: the effects of what the thread does itself
    /// (a user message taken, a wake delivered, a switch) and the events
    /// they emitted come first. What it hands on — a stop of the parent's
    /// turn or of a child, an approval's answer — has reached the parent
    /// or the hub, whose events may come after.
    pub async fn sync(&self) -> Result<(), ThreadError> {
        ractor::call!(self.actor, ThreadMsg::Ping).map_err(|_| ThreadError::Closed)
    }

    /// Waits until every envelope write started so far has finished —
    /// those of every child start or end already on the event stream
    /// included.
    pub async fn flush_persistence(&self) -> Result<(), ThreadError> {
        ractor::call!(self.actor, ThreadMsg::FlushPersistence).map_err(|_| ThreadError::Closed)
    }

    /// Persistence errors seen so far, each named once (it names the
    /// file and what failed): the writes of the thread's life and of its
    /// close — its children's final envelopes and conversations, and
    /// every earlier failed write tried once more. Answers after the close
    /// too (never `Err`): a host that closed the thread on a full disk
    /// learns here what was not saved (`EnvelopeStore::retry_unsaved` tries
    /// again).
    pub async fn persist_errors(&self) -> Result<Vec<String>, ThreadError> {
        Ok(self.errors.list())
    }

    /// Closed, or closing: `close` was called on this handle or a clone
    /// (even if the supervisor has not read its stop yet), or the
    /// supervisor is stopping.
    pub(crate) fn is_closing(&self) -> bool {
        *self.closing() || self.actor.get_status() >= ractor::ActorStatus::Draining
    }

    fn closing(&self) -> MutexGuard<'_, bool> {
        self.closing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the thread: children stop, the parent stops. Not a delete:
    /// its children stay its id's on a store, and a thread opened again
    /// under the id reaches them — delete through
    /// [`Threads::delete`](crate::Threads::delete) (a closed one too), or
    /// [`EnvelopeStore::forget_thread`](crate::store::EnvelopeStore::forget_thread)
    /// once it has closed. A
    /// user turn sent through this handle or a clone afterwards comes back
    /// in [`ThreadError::Undelivered`] (the actor would take it until it
    /// read the stop, then drop it unanswered).
    ///
    /// What was sent before it is handled first: a user turn sent just
    /// before is taken and answered (a `Result` saying it stopped). ractor's
    /// own stop (through [`ThreadHandle::actor`]) is read before the
    /// messages waiting in the mailbox and drops them.
    ///
    /// Marks the thread closing and sends the close, in one step against a
    /// turn's check and send. A thread that refuses it is stopping by
    /// itself — draining (ractor's `drain` through
    /// [`ThreadHandle::actor`]: it stops once it has read its mailbox),
    /// stopping or stopped: it is left to it. It was stopped, which is
    /// read before the mailbox, and dropped the turns waiting there — also
    /// when it checked for a drain, which refuses messages before it says
    /// it is draining.
    pub fn close(&self) {
        let mut closing = self.closing();
        *closing = true;
        let _ = self.actor.cast(ThreadMsg::Close);
    }

    /// Returns once the thread has stopped (closed by whoever closed it).
    pub(crate) fn closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        let actor = self.actor.clone();
        async move {
            actor.wait(None).await.ok();
        }
    }

    /// Closes the thread and returns once everything it made — parent,
    /// hub, children, its own gate — has stopped.
    ///
    /// The close is sent when this is called, not when first polled (as
    /// [`Self::switch_away`]): a future dropped unpolled still closed.
    pub fn close_and_wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        self.close();
        let actor = self.actor.clone();
        async move {
            actor.wait(None).await.ok();
        }
    }
}
