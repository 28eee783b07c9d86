//! The host's (and the tools') handle on a hub: requests by message,
//! queries straight from the envelope book.

use std::sync::Arc;
use std::time::Duration;

use crate::hub::msg::HubMsg;
use crate::hub::msg::sealed::HubInternal;
use crate::hub::stop::DetachOutcome;
use ractor::{Actor, ActorCell, ActorRef, SpawnErr};
use subagents_messages::{
    AgentId, ApprovalDecision, ApprovalId, ApprovalRefusal, Envelope, HubSnapshot, SubAgentStatus,
};

use crate::Closed;
use crate::agent::LiveTurn;
use crate::clock::Clock;
use crate::hub::actor::{Hub, HubArguments};
use crate::hub::book::Book;
use crate::hub::config::{ArchiveSlot, EnvelopeArchive, HubConfig};
use crate::hub::error::Refused;
use crate::sink::EventSink;

mod claims;
mod conversations;
mod death;
mod requests;
pub(crate) use claims::Claimed;

/// Why a child its hub took with it failed.
pub(crate) const HUB_GONE: &str = "the sub-agent hub stopped before the sub-agent ended";

/// What waiting on a child found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WaitOutcome {
    /// It finished; its final envelope.
    Finished(Box<Envelope>),
    /// Still going after the wait.
    Pending,
    /// No child has that id.
    Unknown,
}

/// A handle to a hub. Cheap to clone. `status` and `envelopes` read a
/// shared map: they never wait on the hub or on a child.
#[derive(Clone)]
pub struct HubHandle {
    actor: ActorRef<HubMsg>,
    book: Book,
    archive: Option<Arc<ArchiveSlot>>,
    inline_wait: Duration,
    result_budget: usize,
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
    /// linked under `supervisor` if given; with it, what its parent agent
    /// runs if it is killed mid-turn (the hook its children share:
    /// [`crate::hub::actor::kill_hook`]).
    pub(crate) async fn spawn(
        config: HubConfig,
        parent: AgentId,
        parent_sink: EventSink,
        supervisor: Option<ActorCell>,
    ) -> Result<(HubHandle, crate::agent::KillHook), SpawnErr> {
        let book = Book::default();
        book.set_approvals_after(config.approvals_after);
        let archive = config.archive.clone().map(ArchiveSlot::new);
        let clock = config.clock.clone();
        let hook = Arc::new(std::sync::OnceLock::new());
        let args = HubArguments {
            config: Arc::new(config),
            parent,
            parent_sink,
            book: book.clone(),
            supervisor: supervisor.clone(),
            hook: hook.clone(),
            archive: archive.clone(),
        };
        let (actor, _) = match &supervisor {
            Some(cell) => Actor::spawn_linked(None, Hub, args, cell.clone()).await?,
            None => Actor::spawn(None, Hub, args).await?,
        };
        // Set by its `pre_start`, which the spawn awaited.
        let hook = hook.get().cloned().unwrap_or_else(|| {
            crate::hub::actor::kill_hook(actor.get_cell(), book.clone(), supervisor)
        });
        let handle = Self {
            actor,
            book,
            archive,
            inline_wait: crate::defaults::INLINE_WAIT,
            result_budget: crate::defaults::RESULT_BUDGET,
            clock,
        };
        Ok((handle, hook))
    }

    /// The hub actor's cell: to wait for it, or stop it (every child
    /// stops with it). Its messages are this handle's methods.
    pub fn actor(&self) -> &ActorCell {
        &self.actor
    }

    /// Asks the hub to stop every live and queued child, in child-number
    /// order, without waiting: the request takes its place in the hub's
    /// mailbox now (for a caller that must not await, such as an actor's
    /// handler), and `reply`, if given, receives how many children it
    /// stopped (as [`HubHandle::stop_all`] counts) once every one ended.
    pub fn stop_all_replying(
        &self,
        reply: Option<ractor::RpcReplyPort<usize>>,
    ) -> Result<(), Closed> {
        self.actor
            .cast(HubMsg::StopAll { reply })
            .map_err(|_| Closed::Hub)
    }

    /// Answers an approval a child asked for; forwarded to that child.
    /// Once the child (or the hub) is gone: `AlreadyAnswered` for one that
    /// was answered (by the host, or the background policy), `Ended` for
    /// one it asked and nobody answered; `Unknown` when no child of this
    /// hub asked it; `Unsettled` when a child on another node ended here
    /// before its node's word on the answer sent. The answer is in the hub's
    /// mailbox when this returns its future (a stop sent after it arrives
    /// after it); the future waits for the verdict.
    pub fn resolve_approval(
        &self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> impl std::future::Future<Output = Result<(), ApprovalRefusal>> + Send + 'static + use<>
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.actor.cast(HubMsg::ResolveApproval {
            id: id.clone(),
            decision,
            reply: tx.into(),
        });
        // Gone with the hub, the book still knows how each was answered.
        let book = self.book.clone();
        let gone = move |id: ApprovalId| match id.parts() {
            Some((owner, n)) => book.approval_refusal(id.clone(), &owner, n),
            None => ApprovalRefusal::Unknown(id),
        };
        async move {
            if sent.is_err() {
                return Err(gone(id));
            }
            rx.await.unwrap_or_else(|_| Err(gone(id)))
        }
    }

    /// Waits up to `within` (`None`: until it ends; not at all for one
    /// finished, which the hub answers next — a zero timer, due at once,
    /// read it as running) for a child to finish. Receiving the envelope
    /// delivers nothing: a tool call that takes the result claims it
    /// ([`HubHandle::claim`]).
    pub(crate) async fn wait(&self, id: &AgentId, within: Option<Duration>) -> WaitOutcome {
        if !self.book.contains(id) {
            return match self.archived(id) {
                Some(envelope) => WaitOutcome::Finished(Box::new(envelope)),
                None => WaitOutcome::Unknown,
            };
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.actor.cast(HubMsg::Subscribe {
            id: id.clone(),
            reply: tx.into(),
        });
        if sent.is_err() {
            return self.ended_with_the_hub(id);
        }
        let within = within.filter(|_| !self.book.is_terminal(id));
        let received = match within {
            Some(within) => match tokio::time::timeout(within, rx).await {
                Ok(received) => received,
                Err(_) => return WaitOutcome::Pending,
            },
            None => rx.await,
        };
        match received {
            Ok(envelope) => WaitOutcome::Finished(Box::new(envelope)),
            Err(_) => self.ended_with_the_hub(id),
        }
    }

    /// A wait the hub could not answer (it is dead, or died with the wait
    /// in its mailbox): the child's end as its death recorded it — a call
    /// read "the sub-agent was lost" where the stream and `status` said
    /// `failed`.
    fn ended_with_the_hub(&self, id: &AgentId) -> WaitOutcome {
        self.fail_unfinished();
        match self.book.envelope(id) {
            Some(envelope) if envelope.status.is_terminal() => {
                WaitOutcome::Finished(Box::new(envelope))
            }
            _ => WaitOutcome::Unknown,
        }
    }

    /// Where a child waits in the queue (1 = next to start); `None` once
    /// it runs or ended. Never waits.
    pub fn queue_position(&self, id: &AgentId) -> Option<usize> {
        self.book.queue_position(id)
    }

    /// Stops waiting inline: the child goes on in the background (if still queued: `if_queued`).
    pub(crate) async fn detach(&self, id: &AgentId, if_queued: bool) -> DetachOutcome {
        ractor::call!(self.actor, |reply| HubMsg::Internal(HubInternal::Detach {
            id: id.clone(),
            if_queued,
            reply: Some(reply)
        }))
        .unwrap_or(DetachOutcome::Unknown)
    }

    /// A turn waiting on `id` was cut under `Cascade`: the child stops,
    /// or, finished first, becomes a background result. Never waits.
    pub(crate) fn cascade_now(&self, id: &AgentId) {
        let _ = self
            .actor
            .cast(HubMsg::Internal(HubInternal::Cascade { id: id.clone() }));
    }

    /// Detaches without waiting for the answer (from a `Drop`).
    pub(crate) fn detach_now(&self, id: &AgentId) {
        let _ = self.actor.cast(HubMsg::Internal(HubInternal::Detach {
            id: id.clone(),
            if_queued: false,
            reply: None,
        }));
    }

    /// Sends a message to a child (`use_agent send`): where it went, or
    /// why not ([`Refused::UnknownChild`], [`Refused::Finished`],
    /// [`Refused::Closed`]).
    pub(crate) async fn send(
        &self,
        id: &AgentId,
        text: String,
        call: &crate::tool::ToolCallContext,
    ) -> Result<crate::hub::Steered, Refused> {
        let span = tracing::Span::current();
        match ractor::call!(self.actor, |reply| HubMsg::Send {
            id: id.clone(),
            text,
            call: call.tool_use_id.clone(),
            asking: Some(Box::new((call.agent_id.clone(), call.slot.clone()))),
            span,
            reply
        }) {
            Ok(went) => went,
            Err(ractor::RactorErr::Messaging(ractor::MessagingErr::SendErr(_))) => {
                Err(Refused::Closed)
            }
            // The hub took it and the child's answer was dropped: the
            // child stopped (finished) with the message in its mailbox.
            Err(_) => Err(Refused::Finished { id: id.clone() }),
        }
    }

    /// Stops a child; its status after it ended, or why not: only
    /// [`Refused::UnknownChild`], [`Refused::ResumedElsewhere`] (an
    /// earlier session's child another thread on the store resumed) or
    /// [`Refused::Closed`]. Sent when called,
    /// not when the future is first polled.
    pub fn stop(
        &self,
        id: &AgentId,
    ) -> impl std::future::Future<Output = Result<SubAgentStatus, Refused>> + Send + 'static + use<>
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.stop_replying(id, reply.into());
        async move {
            sent.map_err(|_| Refused::Closed)?;
            answer.await.map_err(|_| Refused::Closed)?
        }
    }

    /// [`HubHandle::stop`], sent now with `reply` for its answer: a caller
    /// that must keep its order with what it sent before (the thread's
    /// supervisor, after an approval answer it forwarded) casts it from
    /// its own handler.
    pub fn stop_replying(
        &self,
        id: &AgentId,
        reply: ractor::RpcReplyPort<Result<SubAgentStatus, Refused>>,
    ) -> Result<(), Closed> {
        self.actor
            .cast(HubMsg::Stop {
                id: id.clone(),
                asking: None,
                reply: Some(reply),
            })
            .map_err(|_| Closed::Hub)
    }

    /// [`HubHandle::stop`] as `use_agent stop` asks it: nothing is done
    /// once `call` was cut.
    pub(crate) async fn stop_asked(
        &self,
        id: &AgentId,
        call: &crate::tool::ToolCallContext,
    ) -> Result<SubAgentStatus, Refused> {
        ractor::call!(self.actor, |reply| HubMsg::Stop {
            id: id.clone(),
            asking: Some(Box::new((call.agent_id.clone(), call.slot.clone()))),
            reply: Some(reply)
        })
        .map_err(|_| Refused::Closed)?
    }

    /// Interrupts a child: its turn ends (the call in flight cut, its
    /// gate permit back) and it ends `interrupted`; a message resumes it.
    /// Its status after it ended, or why not.
    pub(crate) async fn interrupt(
        &self,
        id: &AgentId,
        call: &crate::tool::ToolCallContext,
    ) -> Result<SubAgentStatus, Refused> {
        ractor::call!(self.actor, |reply| HubMsg::Interrupt {
            id: id.clone(),
            asking: Some(Box::new((call.agent_id.clone(), call.slot.clone()))),
            reply: Some(reply)
        })
        .map_err(|_| Refused::Closed)?
    }

    /// Stops every live and queued child; how many it stopped (not one
    /// that finished in that instant, nor one a stop was ending). Sent
    /// when called, not when the future is first polled.
    pub fn stop_all(
        &self,
    ) -> impl std::future::Future<Output = Result<usize, Closed>> + Send + 'static + use<> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.actor.cast(HubMsg::StopAll {
            reply: Some(reply.into()),
        });
        async move {
            sent.map_err(|_| Closed::Hub)?;
            answer.await.map_err(|_| Closed::Hub)
        }
    }

    /// [`crate::hub::book::Book::turn_over`], for this crate's tests.
    #[cfg(test)]
    pub(crate) fn turn_over(&self, id: &AgentId) -> bool {
        self.book.turn_over(id)
    }

    /// The child's envelope now (or an archived one of an earlier
    /// session): while it runs, its elapsed time, tokens, model calls and
    /// tool calls so far. Never waits.
    pub fn status(&self, id: &AgentId) -> Option<Envelope> {
        self.book.get(id).or_else(|| self.archived(id))
    }

    /// The `invoke_agent` span of a finished child's last run, taken:
    /// held only until the wake that links to it (or a claim of its
    /// result) so it can close and be exported.
    #[doc(hidden)] // used by subagents-supervisor to link a wake to it
    pub fn take_run_span(&self, id: &AgentId) -> Option<tracing::Span> {
        self.book.take_run_span(id)
    }

    /// Lets go of the run span of every finished child kept for a wake
    /// ([`HubHandle::take_run_span`]): none will come (its thread closed).
    /// A span held open holds its parents too, and none is exported.
    #[doc(hidden)] // used by subagents-supervisor as its thread stops
    pub fn drop_run_spans(&self) {
        self.book.drop_run_spans();
    }

    /// [`HubHandle::status`] and what its running turn does now.
    pub(crate) fn status_live(&self, id: &AgentId) -> Option<(Envelope, Option<LiveTurn>)> {
        self.book
            .get_live(id)
            .or_else(|| self.archived(id).map(|e| (e, None)))
    }

    /// The newest run of `id`'s chain, the one a message to `id` reaches
    /// (`id` itself if no message resumed it).
    pub(crate) fn newest_run(&self, id: &AgentId) -> AgentId {
        self.book.newest_run(id, || self.archive())
    }

    /// True when `caller` may reach `id`: its requester is `caller`, or an
    /// earlier run `caller` goes on from (a resumed run reads the earlier
    /// run's conversation, and the children it started are its own).
    pub(crate) fn asked_by(&self, id: &AgentId, caller: &AgentId) -> bool {
        // Through the archive too: after a restart a resumed run reached
        // none of the children its chain's first run asked for.
        self.requester_of(id)
            .is_some_and(|r| r == *caller || self.book.newest_run(&r, || self.archive()) == *caller)
    }

    /// The agent that asked for `id` — in the book, or in the archive's
    /// saved run — if known. Never waits on the hub.
    pub(crate) fn requester_of(&self, id: &AgentId) -> Option<AgentId> {
        self.book.requester_of(id).or_else(|| {
            let archive = self.archive()?;
            archive.run(id).map(|(request, _)| request.requester)
        })
    }

    /// The archive, while the hub runs.
    fn archive(&self) -> Option<Arc<dyn EnvelopeArchive>> {
        self.archive.as_ref().and_then(|slot| slot.get())
    }

    fn archived(&self, id: &AgentId) -> Option<Envelope> {
        self.archive().and_then(|a| a.get(id))
    }

    /// Every envelope, in request order. Never waits.
    pub fn envelopes(&self) -> Vec<Envelope> {
        self.book.all()
    }

    /// The id of every child the hub has, in no order: what a switch
    /// away marks, without a copy of each envelope.
    #[doc(hidden)] // read by subagents-supervisor's switch
    pub fn child_ids(&self) -> Vec<AgentId> {
        self.book.ids()
    }

    /// What every child of the hub used ([`HubSnapshot::usage`]), read
    /// from its book: answered after the hub is gone too (a thread whose
    /// hub crashed stays open, and its usage is still its usage).
    pub fn usage(&self) -> subagents_messages::Usage {
        self.book.totals().0
    }

    /// The hub's counts.
    pub async fn snapshot(&self) -> Result<HubSnapshot, Closed> {
        ractor::call!(self.actor, HubMsg::Snapshot).map_err(|_| Closed::Hub)
    }

    /// Returns once every message sent to the hub before has been handled
    /// (so what its handlers told observers then — a child's start or end
    /// — was told first). Copies nothing, as `snapshot` does.
    pub async fn sync(&self) -> Result<(), Closed> {
        ractor::call!(self.actor, |reply| HubMsg::Internal(
            crate::hub::msg::sealed::HubInternal::Ping(reply)
        ))
        .map_err(|_| Closed::Hub)
    }

    /// How long `use_agent` waits inline (45 s by default; set with
    /// [`DelegationBuilder::inline_wait`](crate::DelegationBuilder::inline_wait)
    /// before the thread spawns — a handle cannot change it, as the
    /// delegation tools hold their own copy):
    ///
    /// ```compile_fail
    /// fn shorten(hub: subagents_actors::HubHandle) {
    ///     let _ = hub.with_inline_wait(std::time::Duration::from_secs(5));
    /// }
    /// ```
    pub fn inline_wait(&self) -> Duration {
        self.inline_wait
    }

    /// How many characters of a child's answer reach the parent in one
    /// piece (8,000 by default; see
    /// [`DelegationBuilder::result_budget`](crate::DelegationBuilder::result_budget)).
    pub fn result_budget(&self) -> usize {
        self.result_budget
    }

    /// Sets the result budget (at least 100 characters).
    pub(crate) fn with_result_budget(mut self, chars: usize) -> Self {
        self.result_budget = chars.max(100);
        self
    }

    /// Sets how long `use_agent` waits inline, on this handle (the
    /// builder's, before its delegation tools take their copy: a host's
    /// call on a spawned thread's hub changed nothing they read, so it is
    /// not a host's to make — set it with
    /// [`DelegationBuilder::inline_wait`](crate::DelegationBuilder::inline_wait)).
    pub(crate) fn with_inline_wait(mut self, wait: Duration) -> Self {
        self.inline_wait = wait;
        self
    }
}
