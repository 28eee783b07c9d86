//! The host's threads: open, switch, clear, delete — each switch applies
//! the stop-all policy to the thread left behind.

use std::collections::HashMap;

use subagents_actors::EventStream;
use subagents_messages::ThreadId;

use crate::thread::{ThreadConfig, ThreadError, ThreadHandle};
use leave::{IfGivenUp, Leave, done_or_closed};

mod leave;

/// Every open thread, and which one is on screen. Dropped, it closes
/// none of them: [`Threads::delete`] each first. A thread closed through
/// its handle (`ThreadHandle::close`) stays here — with what its handle
/// holds: its hub's book, every child's envelope and conversation —
/// until [`Threads::delete`] (which takes a closed one too) or an `open`
/// of its id: a long-lived host deletes what it closes.
#[derive(Debug, Default)]
pub struct Threads {
    threads: HashMap<ThreadId, ThreadHandle>,
    on_screen: Option<ThreadId>,
    /// How the threads opened here are numbered, each apart from every
    /// one before it ([`Incarnations`]).
    incarnations: Incarnations,
    /// Threads deleted and not stopped yet: an open of one's id waits for
    /// it (as for a thread closed through its handle). Out of the
    /// registry at once, a deleted thread still stopping its children let
    /// the open spawn and show a new one, which took the wakes the old one
    /// had given back to the store. Let go once stopped (checked at each
    /// delete and open).
    leaving: Vec<Leaving>,
}

/// How one registry numbers its threads. Each thread's parent numbers its
/// approvals in a block of its own, and a thread's children draw ids past
/// every id a thread opened here drew before: a thread deleted and opened
/// again under its id numbered from 1 again — `parent-approval-1`,
/// `agent_1-approval-1` — and an answer from the old thread's dialog,
/// late or restored by the app, approved the new thread's first request,
/// a call the user never saw. Whatever numbers the thread — its store, or
/// none — and whatever numbered the one before it. One for the registry,
/// not one per id: an entry per id opened stayed for the registry's life,
/// deleted or not (a server opening a thread per conversation grew by one
/// for each).
#[derive(Debug, Default)]
struct Incarnations {
    /// The next block of approval numbers a thread opened here may take
    /// (a store's thread takes its store's, past this).
    approvals: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The children of the threads without a store.
    child_ids: subagents_actors::hub::ChildIds,
    /// The last child number a thread no longer here drew (from its
    /// store's counter).
    ids_seen: u64,
}

/// A thread without a store, its parent's approvals numbered after
/// `n` blocks (nothing else is archived).
struct Numbered(u64);

impl subagents_actors::hub::EnvelopeArchive for Numbered {
    fn get(&self, _id: &subagents_messages::AgentId) -> Option<subagents_messages::Envelope> {
        None
    }

    fn approvals_after(&self) -> u64 {
        self.0.saturating_mul(crate::store::APPROVALS_PER_BLOCK)
    }
}

impl Threads {
    /// No threads.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a new thread and puts it on screen (the one on screen before
    /// is switched away from). Returns its event stream. Its spans carry
    /// `id` as `gen_ai.conversation.id` (over one set on the builder), and
    /// its store records it on each envelope ([`ThreadConfig::id`], over
    /// one set there): after a restart, the thread opened with `id` is the
    /// one woken for its children. An id whose thread was closed through
    /// its handle, or deleted, opens once that thread has stopped.
    ///
    /// Unlike [`Threads::switch_to`], the thread on screen is left only
    /// once the new one has spawned (an open that fails leaves it as it
    /// was, its children running): an answer or a message sent to it
    /// before then is taken before its leave.
    pub async fn open(
        &mut self,
        id: ThreadId,
        config: impl Into<ThreadConfig>,
    ) -> Result<EventStream, ThreadError> {
        // A thread closed through its handle (`close()`) is gone: its id
        // opens again (it said "already open", naming the wrong cause) —
        // once it has closed: still stopping its children, it had not
        // settled the wakes it gave back to the store, and the new one,
        // shown, took them (two live threads under one id on one store).
        // Kept in the registry until it has stopped: an open given up
        // during that wait leaves it there, and the next one waits again
        // (taken out first, the next open found nothing to wait for).
        self.let_go_of_stopped();
        let deleted: Vec<_> = (self.leaving.iter())
            .filter(|leaving| leaving.id == id)
            .map(|leaving| (leaving.actor.clone(), leaving.forgetting.clone()))
            .collect();
        for (actor, forgetting) in deleted {
            actor.wait(None).await.ok();
            if let Some(done) = forgetting {
                drop(done.lock().await);
            }
        }
        if let Some(closing) = self.threads.get(&id).filter(|h| h.is_closing()).cloned() {
            if self.on_screen.as_ref() == Some(&id) {
                self.on_screen = None;
            }
            closing.closed().await;
            if let Some(gone) = self.threads.remove(&id) {
                self.incarnations.forget(gone.child_ids.as_ref());
            }
        }
        if self.threads.contains_key(&id) {
            return Err(ThreadError::AlreadyOpen(id));
        }
        let mut config: ThreadConfig = config.into();
        config.parent = config.parent.conversation_id(id.as_str());
        config.id = Some(id.clone());
        let numbering = &self.incarnations;
        let drawn = (self.threads.values().map(|h| h.child_ids.as_ref()))
            .chain(self.leaving.iter().map(|l| l.child_ids.as_ref()))
            .flatten()
            .map(subagents_actors::hub::ChildIds::last)
            .fold(numbering.child_ids.last().max(numbering.ids_seen), u64::max);
        match &config.store {
            Some(store) => store.child_ids().skip_past(drawn),
            None => {
                use std::sync::atomic::Ordering::SeqCst;
                numbering.child_ids.skip_past(drawn);
                config.parent = config.parent.child_ids(numbering.child_ids.clone());
                let block = numbering.approvals.fetch_add(1, SeqCst);
                if block > 0 {
                    let numbered = std::sync::Arc::new(Numbered(block));
                    config.parent = config.parent.archive(numbered);
                }
            }
        }
        // Its wakes (a restart's, owed ones) wait until it is shown.
        let floor = Some(numbering.approvals.clone());
        let (handle, stream) = ThreadHandle::spawn_with(config, None, floor).await?;
        // Closed if this open is given up (its future dropped while the
        // thread on screen is left) or fails: nobody else holds it, and
        // it would run for ever.
        let mut opening = IfGivenUp(Some(handle.clone()), ThreadHandle::close);
        let left = self.leave_current().await?;
        opening.0 = None;
        let shown = handle.on_screen(true);
        self.done_leaving(left.as_ref());
        shown?;
        self.threads.insert(id.clone(), handle);
        self.on_screen = Some(id);
        Ok(stream)
    }

    /// Puts another open thread on screen; the one left stops its
    /// children and drops its wakes.
    ///
    /// Sent when called, not when first polled, as [`Threads::clear`]: the
    /// thread on screen is left (its children told to stop, its turn's
    /// approvals cut) in the host's calling order — an approval answer
    /// sent to it after this call comes after the switch (`Ended`), however
    /// the two futures are polled. A switch dropped before its end (unpolled
    /// too) is given up: the thread left is shown again.
    pub fn switch_to<'a>(
        &'a mut self,
        id: &ThreadId,
    ) -> impl std::future::Future<Output = Result<(), ThreadError>> + Send + 'a {
        let id = id.clone();
        let begun = self.begin_switch(&id);
        async move {
            let Some((target, leave)) = begun? else {
                return Ok(());
            };
            let left = self.end_leave(leave).await?;
            // Closed while the one on screen was left (through a clone of
            // its handle): the one left comes back on screen, rather than
            // nothing (or a closed thread) being there.
            let shown = if target.is_closing() {
                Err(ThreadError::Closed)
            } else {
                target.on_screen(true)
            };
            if let Err(e) = shown {
                if let Some(left) = left {
                    if let Some(handle) = self.threads.get(&left) {
                        let _ = handle.on_screen(true);
                    }
                    self.on_screen = Some(left);
                }
                return Err(e);
            }
            self.done_leaving(left.as_ref());
            self.on_screen = Some(id);
            Ok(())
        }
    }

    /// A switch's first step, taken as it is called: its target, and the
    /// leave of the thread on screen begun (`None`: the target is on
    /// screen already).
    fn begin_switch(
        &mut self,
        id: &ThreadId,
    ) -> Result<Option<(ThreadHandle, Leave)>, ThreadError> {
        let target = self.get(id)?.clone();
        // A closed target is refused before the thread on screen is left
        // (its children would be stopped for nothing) — also one closed in
        // this same tick, whose supervisor has not read its stop yet, and
        // the one on screen itself (closed through a clone of its handle).
        if target.is_closing() {
            return Err(ThreadError::Closed);
        }
        if self.on_screen.as_ref() == Some(id) {
            return Ok(None);
        }
        Ok(Some((target, self.begin_leave()?)))
    }

    /// Clears a thread: its children stop, its wakes drop; returns how many
    /// children were stopped.
    ///
    /// Sent when called, not when first polled, as
    /// [`ThreadHandle::switch_away`]: a future dropped unpolled (a
    /// `select!`'s other branch ready first) still cleared.
    pub fn clear(
        &mut self,
        id: &ThreadId,
    ) -> impl std::future::Future<Output = Result<usize, ThreadError>> + Send + 'static + use<>
    {
        let switched = self.get(id).map(ThreadHandle::switch_away_forgetting);
        async move { switched?.await }
    }

    /// Deletes a thread: its children stop and it closes; returns once it
    /// has closed, its children's final envelopes written —
    /// [`ThreadError::NotSaved`] naming the writes that failed (a host that
    /// deleted its threads and exited left them `running`, and the next
    /// process woke a parent for a conversation the user had deleted) —
    /// and marked forgotten ([`subagents_messages::Envelope::forgotten`]): a thread opened
    /// again under the id, now or after a restart, reaches none of them. A
    /// thread that closed before it, or was killed, is deleted too: its
    /// children are forgotten in its store here ([`ThreadError::NotForgotten`]
    /// if nobody holds that store open any more). Given up half-way — or
    /// never polled — the thread still closes and its children are still
    /// forgotten, started when this is called (an open of the id waits for
    /// it) — but for one called outside a tokio runtime, whose forget is
    /// this future's: poll it before opening the id again. What its close
    /// could not write is then said nowhere here —
    /// [`crate::store::EnvelopeStore::retry_unsaved`] still holds and
    /// retries it (a clone of the handle kept answers
    /// [`ThreadHandle::persist_errors`](crate::ThreadHandle::persist_errors)).
    pub fn delete(
        &mut self,
        id: &ThreadId,
    ) -> impl std::future::Future<Output = Result<(), ThreadError>> + Send + 'static + use<> {
        let removed = self.threads.remove(id);
        if removed.is_some() && self.on_screen.as_ref() == Some(id) {
            self.on_screen = None;
        }
        self.let_go_of_stopped();
        let unknown = ThreadError::UnknownThread(id.clone());
        // Out of the registry before the first wait, and closed when this
        // ends however it ends: a delete dropped at that wait (a UI
        // cancelling it) left the thread open, registered, on screen.
        // Closed as the switch is sent, right behind it (the switch is
        // read first): a handle the UI kept took turns, approval answers
        // and typing — `Ok` — until the children had stopped.
        let leaving = &mut self.leaving;
        let started = removed.map(|handle| {
            // Its own writes' failures from here on, not those said before
            // — one that failed before and fails again at the close too
            // (counted by length, a repeat was no new entry: `Ok`, the
            // child `running` on disk). Taken before the forget starts:
            // its failed writes, on another worker at once, are its own.
            let known = handle.failed_writes_mark();
            // Marked deleted as this is called; what its close does not
            // carry out is forgotten here, started now — it runs whether
            // or not this future is polled, and an open of the id waits
            // for it, as for the close.
            let forgetting = Forgetting::start(&handle, id, handle.deleted());
            leaving.push(Leaving {
                id: id.clone(),
                actor: handle.actor().clone(),
                child_ids: handle.child_ids.clone(),
                forgetting: forgetting.done.clone(),
            });
            let switched = handle.switch_away_forgetting();
            handle.close();
            (switched, CloseOnDrop(Some(handle)), known, forgetting)
        });
        async move {
            let (switched, mut closing, known, forgetting) = started.ok_or(unknown)?;
            done_or_closed(switched.await)?;
            if let Some(handle) = closing.0.take() {
                handle.closed().await;
                let forgotten = forgetting.task.await;
                // Said, not dropped with the handle `delete` took: a host
                // deleting on a full disk left its children `running` on
                // disk and heard `Ok`.
                let failed = handle.failed_writes_since(known);
                if !failed.is_empty() {
                    return Err(ThreadError::NotSaved(failed));
                }
                forgotten?;
            }
            Ok(())
        }
    }

    /// Lets go of the deleted threads that have stopped (the child
    /// numbers they drew kept).
    fn let_go_of_stopped(&mut self) {
        let numbering = &mut self.incarnations;
        self.leaving.retain(|leaving| {
            let stopped = leaving.actor.get_status() == ractor::ActorStatus::Stopped
                && (leaving.forgetting.as_ref()).is_none_or(|done| done.try_lock().is_ok());
            if stopped {
                numbering.forget(leaving.child_ids.as_ref());
            }
            !stopped
        });
    }

    /// The thread with this id.
    pub fn get(&self, id: &ThreadId) -> Result<&ThreadHandle, ThreadError> {
        self.threads
            .get(id)
            .ok_or_else(|| ThreadError::UnknownThread(id.clone()))
    }

    /// The thread on screen.
    pub fn on_screen(&self) -> Option<&ThreadId> {
        self.on_screen.as_ref()
    }
}

/// Closes its thread when dropped (`ThreadHandle::close`: once every
/// message sent before is handled).
struct CloseOnDrop(Option<ThreadHandle>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.close();
        }
    }
}

impl Incarnations {
    /// A thread leaves the registry for good: the child numbers it drew
    /// are kept.
    fn forget(&mut self, child_ids: Option<&subagents_actors::hub::ChildIds>) {
        if let Some(ids) = child_ids {
            self.ids_seen = self.ids_seen.max(ids.last());
        }
    }
}

/// A deleted thread not stopped yet: its supervisor, to wait for, and the
/// child numbers it draws — not its handle, which holds its hub's book
/// and every child's conversation (kept until the next open or delete).
#[derive(Debug)]
struct Leaving {
    id: ThreadId,
    actor: ractor::ActorCell,
    child_ids: Option<subagents_actors::hub::ChildIds>,
    /// Its delete's own forget ([`Forgetting::done`]), if it has one.
    forgetting: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
}

/// A deleted thread's forget where its close does not do it: the close
/// had looked at the mark already (closed before the delete), or never
/// carried it out (killed: ractor skips `post_stop`, or drops it at an
/// await) — `ThreadHandle::forget_after_close`, once the thread has
/// stopped. Spawned as the delete is called: in its future, it was lost to
/// a future dropped, and an open of the id before it was polled reached
/// the children. Outside a runtime (a host's own thread) it is the
/// future's (which must be polled on one anyway), and an open does not
/// wait for it.
struct Forgetting {
    /// Held until a spawned forget is done: an open of the id waits for it.
    done: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    task: std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ThreadError>> + Send>>,
}

impl Forgetting {
    /// `close_forgets`: the close will read the mark (`mark_deleted`).
    fn start(handle: &ThreadHandle, id: &ThreadId, close_forgets: bool) -> Self {
        let (handle, thread) = (handle.clone(), id.clone());
        let forget = async move {
            handle.closed().await;
            if close_forgets && handle.close_settled() {
                return Ok(());
            }
            handle.forget_after_close(thread).await
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Self {
                done: None,
                task: Box::pin(forget),
            };
        };
        let done = std::sync::Arc::new(tokio::sync::Mutex::new(()));
        let held = done.clone().try_lock_owned().ok();
        let thread = id.clone();
        let task = runtime.spawn(async move {
            let forgotten = forget.await;
            // Said where a dropped delete cannot: a thread of the id open
            // on the store first (another registry's) keeps them.
            if let Err(error) = &forgotten {
                tracing::warn!(thread = %thread, %error, "a deleted thread's children were not forgotten");
            }
            drop(held);
            forgotten
        });
        let id = id.clone();
        Self {
            done: Some(done),
            task: Box::pin(async move { task.await.unwrap_or(Err(ThreadError::NotForgotten(id))) }),
        }
    }
}
