//! The thread's writes to its store, in the order they were asked for: one
//! writer task takes them from a queue and does each off the runtime
//! (file I/O blocks). Order matters: a child's "started" envelope must not
//! land after its final one, nor an older conversation after a newer one.

use std::sync::{Arc, Mutex, PoisonError};

use subagents_messages::{AgentId, ChatMessage, ChildRequest, Envelope, ThreadId};
use tokio::sync::{mpsc, oneshot};

use crate::store::{EnvelopeStore, child_order};
use crate::thread::msg::ThreadMsg;
use crate::thread::shared::PersistErrors;
use crate::thread::state::ThreadState;
use ractor::ActorRef;

/// One write.
pub(super) enum Write {
    /// An envelope (then a prune: envelopes past the retention leave as the
    /// session goes).
    Envelope(Box<Envelope>),
    /// What a child was asked and its conversation so far — the newest
    /// the thread read before the writer reached it: one queued write per
    /// child ([`Writer::send_run`]) stands for every step taken meanwhile.
    Run { id: AgentId },
    /// An envelope, then its child's run, in one blocking task: a
    /// runtime dropped after the first (tokio finishes a running
    /// blocking task, and drops the writer that would send the second)
    /// left a start listed with no run to resume, or a finish without
    /// its answer in the run.
    EnvelopeThenRun(Box<Envelope>),
    /// The wake for a finished child is no longer owed (delivered or
    /// dropped): cleared on the envelope as the store holds it then.
    Settle(AgentId),
    /// Answered once every write before it is done.
    Flush(oneshot::Sender<()>),
}

/// The queue of a thread's writes; dropping it ends the writer once the
/// queue is empty ([`Writer::finish`] waits for that).
#[derive(Debug)]
pub(super) struct Writer {
    queue: mpsc::UnboundedSender<Write>,
    /// Each child's run as the thread last read it, while its write is
    /// queued and not yet taken: a step meanwhile replaces it and queues
    /// nothing (every step's copy was queued and written with two fsyncs
    /// — an answer of K quick tool calls held K copies and wrote K²
    /// messages). Read by the thread, in its own order, not by the writer
    /// when it gets there: what a flush leaves on disk is the same
    /// whenever the writer ran (a replay compares it).
    runs_queued: RunsQueued,
    /// The writer's task, which holds the store until it ends.
    task: tokio::task::JoinHandle<()>,
}

type RunsQueued = Arc<Mutex<rustc_hash::FxHashMap<AgentId, QueuedRun>>>;

/// A child's run to write: what it was asked, its conversation (only
/// grows while it runs: a step adds to it), and what it took and has not
/// read, written after it (moved when read: replaced at each step).
#[derive(Debug)]
struct QueuedRun {
    request: Arc<ChildRequest>,
    conversation: Vec<ChatMessage>,
    unread: Vec<ChatMessage>,
}

impl Writer {
    /// Starts the writer of `store`; failures go to `errors`.
    pub(super) fn start(store: Arc<EnvelopeStore>, errors: PersistErrors) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Write>();
        let runs_queued = RunsQueued::default();
        let taken = runs_queued.clone();
        let task = tokio::spawn(async move {
            while let Some(write) = rx.recv().await {
                if let Write::Flush(done) = write {
                    let _ = done.send(());
                    continue;
                }
                let (errors, taken) = (errors.clone(), taken.clone());
                let write = move |store: &EnvelopeStore| do_write(store, write, &errors, &taken);
                store.off_the_runtime(write).await;
            }
        });
        Self {
            queue: tx,
            runs_queued,
            task,
        }
    }

    /// Queues `write` (dropped if the writer is gone).
    pub(super) fn send(&self, write: Write) {
        let _ = self.queue.send(write);
    }

    /// Queues a write of child `id`'s run, unless one is queued and not
    /// yet taken: that one writes this conversation instead of its own.
    pub(super) fn send_run(
        &self,
        id: &AgentId,
        request: &Arc<ChildRequest>,
        conversation: Vec<ChatMessage>,
        unread: Vec<ChatMessage>,
    ) {
        if self.newest_run(id, request, conversation, unread) {
            self.send(Write::Run { id: id.clone() });
        }
    }

    /// Keeps `conversation` as `id`'s run to write; true when no write of
    /// it was queued (one must be sent), false when the queued one takes
    /// it.
    fn newest_run(
        &self,
        id: &AgentId,
        request: &Arc<ChildRequest>,
        conversation: Vec<ChatMessage>,
        unread: Vec<ChatMessage>,
    ) -> bool {
        let run = QueuedRun {
            request: request.clone(),
            conversation,
            unread,
        };
        self.runs_queued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), run)
            .is_none()
    }

    /// Grows the conversation of `id`'s queued, not yet taken, run write
    /// by what `since` reads after its last message but one (that one
    /// read again, and matched: the conversation goes on from it) — `true`
    /// when it did; `false` (nothing changed) when no write is queued or
    /// the conversation does not go on from the queued one (its turn
    /// ended: read it whole), with the unread messages `since` read in
    /// the same read of the child's turn.
    pub(super) fn extend_queued_run(
        &self,
        id: &AgentId,
        since: impl FnOnce(usize) -> Option<(Vec<ChatMessage>, Vec<ChatMessage>)>,
    ) -> bool {
        let mut queued = self
            .runs_queued
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(QueuedRun {
            conversation: held,
            unread: held_unread,
            ..
        }) = queued.get_mut(id)
        else {
            return false;
        };
        let Some(from) = held.len().checked_sub(1) else {
            return false;
        };
        let Some((read, unread)) = since(from) else {
            return false;
        };
        let mut read = read.into_iter();
        if read.next().as_ref() != held.last() {
            return false;
        }
        held.extend(read);
        *held_unread = unread;
        true
    }

    /// Queues `envelope`, and with it (in the same blocking task) a write
    /// of its child's run, unless one is queued and not yet taken: that
    /// one, before it, writes this conversation instead.
    pub(super) fn send_envelope_and_run(
        &self,
        envelope: Envelope,
        request: &Arc<ChildRequest>,
        conversation: Vec<ChatMessage>,
        unread: Vec<ChatMessage>,
    ) {
        let first = self.newest_run(&envelope.id, request, conversation, unread);
        self.send(match first {
            true => Write::EnvelopeThenRun(Box::new(envelope)),
            false => Write::Envelope(Box::new(envelope)),
        });
    }

    /// Ends the writer once every write queued is done, and waits for it:
    /// its store goes with it.
    pub(super) async fn finish(self) {
        drop(self.queue);
        let _ = self.task.await;
    }

    /// Resolves once every write queued before it is done.
    pub(super) fn flushed(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Write::Flush(tx));
        rx
    }

    /// A host's flush ([`crate::ThreadHandle::flush_persistence`]),
    /// through the hub first: a host that read a child's start or end on
    /// the stream asks before the hub's notice of it reached the thread
    /// (the hub tells the thread after the event), and the flush answered
    /// before that write was queued. Any answer of the hub comes after its
    /// earlier handlers' notices; then the thread queues the flush behind
    /// the writes they asked for. A thread closing meanwhile ends its
    /// writer once the queue is done: the flush waits for that instead.
    pub(super) fn flush_through_hub(
        &self,
        hub: subagents_actors::hub::HubHandle,
        thread: ActorRef<ThreadMsg>,
        reply: ractor::RpcReplyPort<()>,
    ) {
        // Weak: a close read before the flush ends the writer once its
        // queue is done, and its `post_stop` waits for that — a strong
        // copy here held the writer, the close and the flush for ever.
        let queue = self.queue.downgrade();
        tokio::spawn(async move {
            let _ = hub.sync().await;
            let (done, flushed) = oneshot::channel();
            let asked =
                ThreadMsg::Internal(crate::thread::msg::sealed::ThreadInternal::FlushNow(done));
            if thread.cast(asked).is_err() || flushed.await.is_err() {
                let (done, flushed) = oneshot::channel();
                if let Some(queue) = queue.upgrade()
                    && queue.send(Write::Flush(done)).is_ok()
                {
                    let _ = flushed.await;
                }
            }
            let _ = reply.send(());
        });
    }
}

fn do_write(store: &EnvelopeStore, write: Write, errors: &PersistErrors, taken: &RunsQueued) {
    let failed = |error: String| errors.push(error);
    match write {
        // One the store pruned (expired, no longer held): a notice of it
        // since — a stop after its end, a claim, a resume's link — wrote
        // it back without its run, and no prune came after to take it
        // again (the writes prune once a minute), as the close does not.
        Write::Envelope(envelope) | Write::EnvelopeThenRun(envelope)
            if store.expired(&envelope) && store.get(&envelope.id).is_none() => {}
        Write::Envelope(envelope) => {
            if let Err(error) = store.save(&envelope) {
                failed(error.to_string());
            }
            // Not this thread's writes: an expired file of any thread the
            // prune could not remove (kept, tried again at the next one).
            // Said as this thread's, a delete heard `NotSaved` naming
            // another conversation's child.
            for error in store.prune_if_due().map(|r| r.failed).unwrap_or_default() {
                tracing::warn!(%error, "an expired file could not be pruned");
            }
        }
        Write::Run { id } => {
            // Taken: a step after it queues a write of its own.
            let newest = taken
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            if let Some(mut run) = newest {
                // What it took, after what it has: where it reads them.
                run.conversation.append(&mut run.unread);
                if let Err(error) = store.save_run(&id, &run.request, &run.conversation) {
                    failed(error.to_string());
                }
            }
        }
        Write::EnvelopeThenRun(envelope) => {
            let id = envelope.id.clone();
            do_write(store, Write::Envelope(envelope), errors, taken);
            do_write(store, Write::Run { id }, errors, taken);
        }
        Write::Settle(id) => {
            // Settled in memory when asked for: written as it is now.
            let settled = store.update(&id, |e| {
                e.wake_owed = false;
                true
            });
            if let Err(error) = settled {
                failed(error.to_string());
            }
        }
        Write::Flush(done) => {
            let _ = done.send(());
        }
    }
}

/// `envelope` as the thread `thread` writes it: its own, unless it names
/// a thread already (an earlier session's child keeps its owner).
pub(super) fn owned_by(mut envelope: Envelope, thread: Option<&ThreadId>) -> Envelope {
    if envelope.thread.is_none() {
        envelope.thread = thread.cloned();
    }
    envelope
}

impl ThreadState {
    /// Writes an envelope (in order, off the actor).
    pub(super) fn persist(&mut self, _myself: &ActorRef<ThreadMsg>, envelope: &Envelope) {
        if let Some(writer) = &self.writer {
            let envelope = owned_by(envelope.clone(), self.id.as_ref());
            writer.send(Write::Envelope(Box::new(envelope)));
        }
    }

    /// Writes a child's envelope and, with it, its run (what it was asked
    /// and its conversation as it is now): one event's two files in one
    /// blocking task. `last`: it ended, so this is its final conversation.
    pub(super) fn persist_with_run(&mut self, envelope: &Envelope, last: bool) {
        let Some(writer) = &self.writer else {
            return;
        };
        let id = &envelope.id;
        let owned = owned_by(envelope.clone(), self.id.as_ref());
        match self.requests.get(id) {
            Some(request) => {
                let hub = &self.parent.hub;
                let (conversation, unread) =
                    hub.conversation_and_unread(id, None).unwrap_or_default();
                writer.send_envelope_and_run(owned, request, conversation, unread);
            }
            None => writer.send(Write::Envelope(Box::new(owned))),
        }
        if last {
            self.requests.remove(id);
        }
    }

    /// Writes what a child was asked and its conversation as it is now
    /// (in order, off the actor); `last`: it ended, so this is its final
    /// conversation.
    pub(super) fn persist_run(&mut self, id: &AgentId, last: bool) {
        let (Some(writer), Some(request)) = (&self.writer, self.requests.get(id)) else {
            return;
        };
        // A step of a running child, its write still queued: what it
        // added since that copy, not the whole conversation again (each of
        // K quick calls copied all of it, under its turn lock: K²/2). What
        // it took and has not read: apart (it moves as it is read; read in
        // it, a queued copy went on from a wrong place), in the same read.
        let hub = &self.parent.hub;
        if !last && writer.extend_queued_run(id, |from| hub.conversation_and_unread(id, Some(from)))
        {
            return;
        }
        let (conversation, unread) = hub.conversation_and_unread(id, None).unwrap_or_default();
        writer.send_run(id, request, conversation, unread);
        if last {
            self.requests.remove(id);
        }
    }

    /// Writes, and waits for, every envelope of the hub the store does not
    /// hold as it is now (used when the thread closes).
    pub(super) async fn persist_remaining(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.finish().await;
        }
        let Some(store) = self.store.clone() else {
            return;
        };
        // A gone hub's unfinished children failed first (nothing while
        // it runs), then every envelope as it is.
        let _ = self.parent.hub.fail_unfinished();
        let envelopes = self.parent.hub.envelopes();
        // Its own children: another thread's failed writes (one store) are
        // retried here too, but said by that thread, not this one.
        let own: rustc_hash::FxHashSet<AgentId> = envelopes.iter().map(|e| e.id.clone()).collect();
        let changed: Vec<Envelope> = envelopes
            .into_iter()
            .map(|e| owned_by(e, self.id.as_ref()))
            .filter(|e| e.status.is_terminal() && store.get(&e.id).as_ref() != Some(e))
            // An earlier session's child is the store's: this copy is as
            // the thread read it, and what the thread changes on it (a
            // link, a claim, a wake settled) was written as it happened.
            // Saved now, it would undo what another thread wrote since.
            .filter(|e| !store.is_from_earlier_session(&e.id))
            // Pruned meanwhile: not written back, without its run.
            .filter(|e| !store.expired(e))
            .collect();
        // Runs whose last write never came (the child's end notice was
        // still in this actor's mailbox when it stopped): their final
        // conversation, so a later `send` resumes from where it ended.
        let mut runs: Vec<(AgentId, Arc<ChildRequest>)> = self.requests.drain().collect();
        runs.sort_unstable_by(|a, b| child_order(&a.0).cmp(&child_order(&b.0)));
        let runs: Vec<_> = runs
            .into_iter()
            .map(|(id, request)| {
                let conversation = self.parent.hub.conversation(&id).unwrap_or_default();
                (id, request, conversation)
            })
            .collect();
        if changed.is_empty() && runs.is_empty() && !store.has_unsaved() {
            return;
        }
        let written = store
            .off_the_runtime(move |store| {
                let envelopes = changed.iter().filter_map(|e| store.save(e).err());
                let runs = runs
                    .iter()
                    .filter_map(|(id, request, said)| store.save_run(id, request, said).err());
                // And every earlier write that failed (its disk may be back).
                let retried = store
                    .retry_unsaved_each()
                    .into_iter()
                    .filter(|(id, _)| own.contains(id))
                    .map(|(_, error)| error);
                envelopes
                    .chain(runs)
                    .chain(retried)
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
            })
            .await;
        for error in written.unwrap_or_default() {
            self.persist_errors.push(error);
        }
    }

    /// A deleted thread's children are forgotten in its store, their final
    /// envelopes written first (`EnvelopeStore::forget_now`): reachable,
    /// a thread opened again under the id — or, after a restart,
    /// whichever thread had it — read, claimed and resumed the deleted
    /// conversation's children. A write that fails is said.
    pub(super) async fn forget_if_deleted(&mut self) {
        let deleted = self.persist_errors.read_deleted();
        if let (true, Some(store), Some(id)) = (deleted, self.store.clone(), self.id.clone()) {
            let forgotten = store
                .off_the_runtime(move |store| store.forget_now(&id))
                .await;
            // Not run (it panicked): left to the delete, as a kill's is.
            let Some(failed) = forgotten else {
                return;
            };
            for error in failed {
                self.persist_errors.push(error.to_string());
            }
        }
        // Not before: a kill at the wait above (ractor drops `post_stop`
        // there) left the mark read and nothing forgotten.
        self.persist_errors.settle();
    }
}
