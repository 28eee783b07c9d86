//! The supervisor's state and what it does between messages: turns sent
//! to the parent, wakes delivered, envelopes persisted, approvals routed.

use std::sync::Arc;

use ractor::ActorRef;
use subagents_actors::hub::{EnvelopeArchive, HubHandle, HubObserver};
use subagents_actors::{AgentError, DelegatingAgent, EventSink};
use subagents_messages::{
    AgentEvent, AgentId, AgentResult, ApprovalDecision, ApprovalId, ApprovalRefusal, ChildRequest,
    Envelope, Outcome, ThreadId,
};

use crate::store::EnvelopeStore;
use crate::thread::config::ThreadConfig;
use crate::thread::msg::ThreadMsg;
use crate::thread::msg::sealed::ThreadInternal;
use crate::thread::persist::Writer;
use crate::wake::WakeQueue;

/// Arguments: the thread's setup and its sink.
pub(crate) struct ThreadArguments {
    /// The setup.
    pub(crate) config: ThreadConfig,
    /// The thread's event sink.
    pub(crate) events: EventSink,
    /// Receives handles to the parent, hub and gate once spawned.
    pub(crate) parts: Option<tokio::sync::oneshot::Sender<DelegatingAgent>>,
    /// Opened by `Threads::open`: it takes its store's wakes once it is
    /// shown (an open given up before then took none).
    pub(crate) held: bool,
    /// Its failed writes, shared with its handles.
    pub(crate) errors: crate::thread::shared::PersistErrors,
    /// Opened by `Threads::open`: the next block of approval numbers the
    /// registry's threads may take (see [`Archive::approvals_floor`]).
    pub(crate) approvals_floor: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Its id held live on its store, let go as it stops.
    pub(crate) live: Option<crate::store::LiveThread>,
}

impl std::fmt::Debug for ThreadArguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadArguments").finish_non_exhaustive()
    }
}

/// The host's hub observers, as the builder was given them.
#[derive(Clone)]
pub(super) struct HostObservers(pub(super) Vec<Arc<dyn subagents_actors::hub::HubObserver>>);

impl std::fmt::Debug for HostObservers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} observer(s)", self.0.len())
    }
}

/// The supervisor's state.
#[derive(Debug)]
pub(crate) struct ThreadState {
    pub(super) parent: DelegatingAgent,
    pub(super) events: EventSink,
    pub(super) wakes: WakeQueue,
    pub(super) turns_in_flight: usize,
    /// `DeliverWakes` sent to itself and not read yet: no wake goes out
    /// until then (a message read before it released them first).
    pub(super) deferred: u32,
    pub(super) store: Option<Arc<EnvelopeStore>>,
    /// The thread's id in its store ([`ThreadConfig::id`]).
    pub(super) id: Option<ThreadId>,
    /// That id held live on its store, let go at the end of its stop.
    pub(super) live: Option<crate::store::LiveThread>,
    pub(super) persist_errors: crate::thread::shared::PersistErrors,
    /// The store's owed wakes were taken ([`ThreadState::take_store_wakes`]).
    pub(super) store_wakes_taken: bool,
    /// Earlier sessions' wakes went back to the store for the next
    /// showing ([`ThreadState::put_back_or_drop`], or a killed thread's
    /// given back while this one was off screen: `take_given_back`): a
    /// clear, a delete or a close settles them there
    /// ([`ThreadState::settle_given_back`]).
    pub(super) gave_back: bool,
    /// The earlier sessions' wakes this thread gave back itself (since it
    /// last took the store's): a clear, a delete or a close settles these
    /// and its own children's, not another thread's given back.
    pub(super) gave_back_ids: Vec<AgentId>,
    /// A killed thread gave wakes back while this one's restart list was
    /// still to go out: taken once it has gone ([`ThreadState::take_given_back`]
    /// declines until then; nothing asked again, they were never taken).
    pub(super) given_back_waiting: Vec<AgentId>,
    /// The host's hub observers (not the thread's own): told of a stop
    /// after the hub's death, which took the hub's copy with it.
    pub(super) observers: HostObservers,
    /// The store's writes, in order (none without a store).
    pub(super) writer: Option<Writer>,
    /// What each child of this thread was asked, until its final
    /// conversation is written. The thread's maps hash ids with Fx (the
    /// hub makes them; SipHash costs more than the lookup), and none is
    /// iterated onto the stream.
    pub(super) requests: rustc_hash::FxHashMap<AgentId, Arc<ChildRequest>>,
    /// The children a restart interrupted, woken as one: the wake queue
    /// holds the first; delivering it lists them all.
    pub(super) restarted: Vec<AgentId>,
    /// The children the wake turn in flight is about: settled on disk once
    /// that turn has ended (settled as it started, a kill while the parent
    /// read it left nothing owed), or when the thread closes.
    pub(super) settle_at_end: Vec<AgentId>,
    /// Children requested before the last switch: they never wake.
    pub(super) switched_off: rustc_hash::FxHashSet<subagents_messages::AgentId>,
    /// Children whose result was queued as a wake: at most once each (a
    /// finished child's envelope may be reported again when it changes).
    pub(super) woken: rustc_hash::FxHashSet<subagents_messages::AgentId>,
    /// Approvals answered through this thread, so a late second answer is
    /// refused as already answered even after the child that asked ended.
    pub(super) answered: Arc<std::sync::Mutex<rustc_hash::FxHashMap<ApprovalId, ApprovalDecision>>>,
    /// The children the hub's death failed, persisted once: none wakes
    /// the parent when the hub's observers are told of it (the hub that
    /// would run its delegations is gone).
    pub(super) failed_by_death: rustc_hash::FxHashSet<AgentId>,
}

pub(super) struct Observer(pub(super) ActorRef<ThreadMsg>);

pub(super) struct Archive {
    pub(super) store: Arc<EnvelopeStore>,
    pub(super) errors: crate::thread::shared::PersistErrors,
    /// The thread it is the archive of.
    pub(super) thread: Option<ThreadId>,
    /// Opened by a registry (`Threads`): the next block of approval
    /// numbers its threads may take. A block past it, and the floor moved
    /// past that: the registry's threads without a store, or on another,
    /// numbered from the same blocks (`parent-approval-1` in each) — a
    /// thread opened again under an id on another store, or none, took
    /// the old one's numbers, and an answer from the old dialog approved
    /// the new thread's first request.
    pub(super) approvals_floor: Option<Arc<std::sync::atomic::AtomicU64>>,
}

/// The store as a hub's archive: children of earlier sessions that are
/// this thread's — written by it (`Envelope::thread`), or for no thread.
/// A child another thread of this session made (live or ended) is not
/// this thread's to read, claim or resume — with two threads on one
/// store, either one's model could otherwise read the other's sub-agents
/// by guessing `agent_1` — nor, after a restart, is one another thread
/// wrote (its model read the other conversation's answers, and a claim
/// took the wake owed to the other's parent).
impl Archive {
    fn reaches(&self, id: &AgentId) -> bool {
        self.store.reaches(id, self.thread.as_ref())
    }
}

impl EnvelopeArchive for Archive {
    fn get(&self, id: &AgentId) -> Option<Envelope> {
        self.reaches(id).then(|| self.store.get(id)).flatten()
    }

    fn run(&self, id: &AgentId) -> Option<(ChildRequest, Vec<subagents_messages::ChatMessage>)> {
        self.reaches(id).then(|| self.store.run(id)).flatten()
    }

    fn claim(&self, id: &AgentId) {
        if !self.reaches(id) {
            return;
        }
        // An interrupted child has no result to claim: read in the restart
        // wake's turn, it was no longer owed on disk before that turn
        // ended (a kill then, and the next open never listed it).
        let claimed = self.store.update(id, |e| {
            let interrupted = e.status == subagents_messages::SubAgentStatus::Interrupted;
            let first = e.status.is_terminal() && !interrupted && !e.claimed;
            if first {
                e.claimed = true;
                e.wake_owed = false;
            }
            first
        });
        if let Err(error) = claimed {
            self.errors.push(error.to_string());
        }
    }

    fn cancel(&self, id: &AgentId) {
        if !self.reaches(id) {
            return;
        }
        let cancelled = self.store.cancel_unless_resuming(id);
        if let Err(error) = cancelled {
            self.errors.push(error.to_string());
        }
    }

    fn begin_resume(&self, id: &AgentId) -> bool {
        !self.store.is_from_earlier_session(id) || self.store.begin_resume(id)
    }

    /// A wake a thread held for the resume is offered again: owed in the
    /// store's lists, and the threads that may take it told.
    fn resume_failed(&self, id: &AgentId) {
        if !self.store.resume_failed(id) {
            return;
        }
        match self.store.get(id).map(|e| e.status) {
            Some(subagents_messages::SubAgentStatus::Interrupted) => {
                self.store.give_back_interrupted(vec![id.clone()]);
            }
            Some(_) => self.store.give_back_owed(id),
            None => return,
        }
        for taker in self.store.takers_of(std::slice::from_ref(id)) {
            let taker: ractor::ActorRef<ThreadMsg> = taker.into();
            let back = ThreadInternal::StoreWakesBack(vec![id.clone()]);
            let _ = taker.cast(ThreadMsg::Internal(back));
        }
    }

    fn resuming(&self, id: &AgentId) -> bool {
        self.store.is_resuming(id)
    }

    /// A block of numbers of its own (see [`EnvelopeStore::approvals_after`]),
    /// past the registry's floor.
    fn approvals_after(&self) -> u64 {
        use crate::store::APPROVALS_PER_BLOCK;
        use std::sync::atomic::Ordering::SeqCst;
        let Some(floor) = &self.approvals_floor else {
            return self.store.approvals_after();
        };
        let least = floor.load(SeqCst).saturating_mul(APPROVALS_PER_BLOCK);
        let after = self.store.approvals_after_at_least(least);
        floor.fetch_max(after / APPROVALS_PER_BLOCK + 1, SeqCst);
        after
    }
}

impl HubObserver for Observer {
    fn finished(&self, envelope: &Envelope) {
        let _ = self
            .0
            .cast(ThreadMsg::Internal(ThreadInternal::ChildFinished(
                Box::new(envelope.clone()),
            )));
    }

    fn started(&self, envelope: &Envelope, request: &ChildRequest) {
        let _ = self
            .0
            .cast(ThreadMsg::Internal(ThreadInternal::ChildStarted(Box::new(
                (envelope.clone(), request.clone()),
            ))));
    }

    fn stepped(&self, id: &AgentId) {
        let _ = self
            .0
            .cast(ThreadMsg::Internal(ThreadInternal::ChildStepped(
                id.clone(),
            )));
    }

    fn stopping(&self, envelope: &Envelope) {
        let _ = self
            .0
            .cast(ThreadMsg::Internal(ThreadInternal::ChildStopping(
                envelope.id.clone(),
            )));
    }
}

/// Where a turn the thread hands its parent came from: the parent runs
/// both alike; the thread gates wakes on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TurnOrigin {
    /// A human typed it.
    User,
    /// A finished background child woke the parent (a synthetic turn).
    Wake,
}

/// What a turn reads when the thread's parent agent is gone.
pub(super) const PARENT_GONE: &str =
    "the thread's parent agent is gone (its actor stopped); no turn can run; close the thread";

/// The failed result of a turn the parent could not take.
fn parent_gone_result() -> AgentResult {
    AgentResult {
        text: PARENT_GONE.to_owned(),
        outcome: Outcome::Failed(PARENT_GONE.to_owned()),
        model_calls: 0,
        tool_calls: 0,
        usage: Default::default(),
        children_usage: Default::default(),
        elapsed: std::time::Duration::ZERO,
    }
}

impl ThreadState {
    pub(super) fn send_turn(
        &mut self,
        myself: &ActorRef<ThreadMsg>,
        text: String,
        origin: TurnOrigin,
        parent: Option<tracing::Span>,
        follows: Option<tracing::Span>,
    ) {
        let Ok(ended) = self
            .parent
            .agent
            .queue_turn_following(text, parent, follows)
        else {
            // The parent agent is gone (its actor died): the turn, already
            // on the stream as a `UserMessage` or a `Wake`, still ends in
            // one `Result` — a stream that never answers it is worse.
            self.events
                .emit(AgentEvent::Result(Box::new(parent_gone_result())));
            // A wake (the parent went in the instant it was sent): no
            // model read it — it stays in flight, owed (on disk too), and
            // no other goes out; a close settles it, a kill gives it back
            // (a restart list with it). Marked done here, a child finishing
            // after was written not owed, and a restart list was lost.
            return;
        };
        self.turns_in_flight += 1;
        self.wakes.set_generating(true);
        let me = myself.clone();
        let wake = origin == TurnOrigin::Wake;
        tokio::spawn(async move {
            // Ok or dropped (a stop cleared the queue): the turn is over.
            let _ = ended.await;
            let _ = me.cast(ThreadMsg::Internal(ThreadInternal::TurnEnded { wake }));
        });
    }

    /// The hub is gone (crashed, killed) or going (stopping): every child
    /// a dead hub had not ended is failed and persisted, once (a child
    /// ended stays ended; a stopping hub ends its children itself), and
    /// `true`. A stop asked of it then is answered once it has stopped
    /// ([`Self::answer_once_the_hub_stopped`]).
    pub(super) fn hub_gone(&mut self, myself: &ActorRef<ThreadMsg>) -> bool {
        self.hub_gone_as(myself, false)
    }

    /// [`Self::hub_gone`] when ractor's termination event for the hub
    /// came (`exited`: sent while it still reads `Stopping`).
    pub(super) fn hub_gone_as(&mut self, myself: &ActorRef<ThreadMsg>, exited: bool) -> bool {
        if self.parent.hub.actor().get_status() < ractor::ActorStatus::Stopping {
            return false;
        }
        // Every child the death failed, whoever asked first (nothing
        // before the hub is `Stopped`, or has exited: a hub stopping
        // ends them itself).
        let failed = match exited {
            true => self.parent.hub.fail_unfinished_exited(),
            false => self.parent.hub.fail_unfinished(),
        };
        if !failed.is_empty() && self.failed_by_death.is_empty() {
            for envelope in failed {
                self.failed_by_death.insert(envelope.id.clone());
                self.persist(myself, &envelope);
            }
        }
        true
    }

    /// Asks the hub through `ask` (a message with a reply port) and answers
    /// `reply` with what it says — or, once the hub has stopped, with
    /// `gone(hub)`: when it is gone or stopping now (not asked: a hub in
    /// its `post_stop` ends its children itself), and when it stopped
    /// before reading the message (a host's stop is read before the
    /// mailbox, whose messages are dropped with their ports). A stopping
    /// hub is not a dead one, and the thread is not closed.
    pub(super) fn ask_hub<T: Send + 'static>(
        &mut self,
        myself: &ActorRef<ThreadMsg>,
        reply: ractor::RpcReplyPort<T>,
        ask: impl FnOnce(&HubHandle, ractor::RpcReplyPort<T>),
        gone: impl FnOnce(&HubHandle) -> T + Send + 'static,
    ) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.hub_gone(myself) {
            ask(&self.parent.hub, tx.into());
        }
        let hub = self.parent.hub.clone();
        tokio::spawn(async move {
            let answer = match rx.await {
                Ok(answer) => answer,
                Err(_) => {
                    let _ = hub.actor().wait(None).await;
                    // A crashed hub's children are failed by whoever
                    // reads first.
                    let _ = hub.fail_unfinished();
                    gone(&hub)
                }
            };
            let _ = reply.send(answer);
        });
    }
}

impl ThreadState {
    /// `id`'s resume is begun, its link not landed: its wake is held for
    /// it, owed still ([`crate::store::EnvelopeStore::hold_for_resume`]) —
    /// the writer on the blocking pool decided, by its speed, whether a
    /// wake went out for a run another thread's parent goes on with.
    pub(super) fn held_for_resume(&self, id: &AgentId) -> bool {
        (self.store.as_ref()).is_some_and(|s| s.hold_for_resume(id))
    }

    /// A child's envelope: the hub's (its book, or its archive), else —
    /// once the hub is gone (it crashed, and its archive went with it) —
    /// the store's, for a child of an earlier session this thread
    /// reaches.
    pub(super) fn envelope(&self, id: &AgentId) -> Option<Envelope> {
        self.parent.hub.status(id).or_else(|| {
            let store = self.store.as_ref()?;
            store
                .reaches(id, self.id.as_ref())
                .then(|| store.get(id))
                .flatten()
        })
    }
}

/// Approval ids start with the asking agent's id (`parent-approval-1`,
/// `agent_3-approval-2`): the answer goes to the parent or to the hub (and
/// the child named). An answer whose target went away before replying —
/// a child stopped by a switch at that instant — is `Ended`, never a
/// closed thread: the thread still answers.
pub(super) fn route_approval(
    state: &ThreadState,
    id: ApprovalId,
    decision: ApprovalDecision,
    reply: ractor::RpcReplyPort<Result<(), ApprovalRefusal>>,
) {
    let to_parent = id
        .parts()
        .is_some_and(|(owner, _)| owner == *state.parent.agent.id());
    let answered = state.answered.clone();
    // Sent now, in the handler: a stop the host sends after the answer
    // reaches the agent after it. Only the verdict is awaited apart.
    let verdict: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>> = if to_parent {
        let sent = state.parent.agent.resolve_approval(id.clone(), decision);
        let asked = id.clone();
        Box::pin(async move {
            match sent.await {
                Ok(()) => Ok(()),
                Err(AgentError::Approval(refusal)) => Err(refusal),
                Err(_) => Err(ApprovalRefusal::Ended(asked)),
            }
        })
    } else {
        // An earlier session's child this thread reaches: its request
        // closed with its process, `Ended` — said by the hub from its
        // archive, and by the store once the hub is gone with it (it read
        // `Unknown`, "no agent of the thread asked for it").
        let earlier = id.parts().is_some_and(|(owner, _)| {
            (state.store.as_ref()).is_some_and(|s| s.reaches(&owner, state.id.as_ref()))
        });
        let sent = state.parent.hub.resolve_approval(id.clone(), decision);
        Box::pin(async move {
            match sent.await {
                Err(ApprovalRefusal::Unknown(id)) if earlier => Err(ApprovalRefusal::Ended(id)),
                other => other,
            }
        })
    };
    tokio::spawn(async move {
        let answer = verdict.await;
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
