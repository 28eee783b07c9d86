//! One live thread per id on a store. Which thread a child is, and so
//! who takes its wake, reads and resumes it and whose delete forgets it,
//! is its thread id alone: two live threads of one id on one store (two
//! registries, a user's two windows, `ThreadHandle::spawn` with an id) took
//! each other's wakes after a restart, and one's delete forgot the other's
//! running children. A registry refused a second open of an id it held;
//! the store refuses it across registries — and waits for a thread of the
//! id that is closing (its handle's `close` called, or its actor stopping),
//! as a registry does. A thread whose actor has stopped holds its id no
//! more, whatever still holds its state: killed under a ractor host, the
//! state waits in the host's mailbox until its handler returns, and a
//! host reopening the id in that handler was refused, or waited on itself.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ractor::{ActorCell, ActorStatus};
use subagents_messages::{AgentId, ThreadId};

use crate::store::EnvelopeStore;

/// The threads live on a store, by id.
pub(crate) type Live = Mutex<rustc_hash::FxHashMap<ThreadId, Holder>>;

/// Who holds an id live: a thread (its handles' closing flag, its actor
/// once spawned) or a forget under way.
#[derive(Clone)]
pub(crate) struct Holder {
    closing: Arc<Mutex<bool>>,
    actor: Arc<OnceLock<ActorCell>>,
}

/// What a holder's id is to a new claim.
enum Held {
    Open,
    Closing,
    Free,
}

impl Holder {
    fn held(&self) -> Held {
        let status = self.actor.get().map(ActorCell::get_status);
        if status == Some(ActorStatus::Stopped) {
            Held::Free
        } else if *self.closing.lock().unwrap_or_else(PoisonError::into_inner)
            || status >= Some(ActorStatus::Draining)
        {
            Held::Closing
        } else {
            Held::Open
        }
    }

    fn is(&self, other: &Holder) -> bool {
        Arc::ptr_eq(&self.closing, &other.closing)
    }
}

/// A thread id held live on a store, let go when dropped (the thread
/// stopped, or its spawn failed).
pub(crate) struct LiveThread {
    store: Arc<EnvelopeStore>,
    id: ThreadId,
    holder: Holder,
}

impl LiveThread {
    /// The thread closed, its last writes made: its finished children
    /// (`own`: its hub's) are handed over to the store
    /// ([`EnvelopeStore::hand_over_children`]) while it still holds its
    /// id, then the id is let go.
    pub(crate) fn close(self, own: Vec<AgentId>) {
        self.store.hand_over_children(&self.id, own);
    }

    /// The thread's actor, once spawned: stopped, it holds the id no more.
    pub(crate) fn actor_slot(&self) -> Arc<OnceLock<ActorCell>> {
        self.holder.actor.clone()
    }
}

impl std::fmt::Debug for LiveThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LiveThread").field(&self.id).finish()
    }
}

impl Drop for LiveThread {
    fn drop(&mut self) {
        self.store.release(&self.id, &self.holder);
    }
}

impl EnvelopeStore {
    /// Lets go of `id` if `holder` still holds it, and wakes the claims
    /// waiting.
    fn release(&self, id: &ThreadId, holder: &Holder) {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if live.get(id).is_some_and(|h| h.is(holder)) {
            live.remove(id);
        }
        drop(live);
        self.released.notify_waiters();
    }

    /// The thread `id` closed, its last writes made: its finished
    /// children are the store's now, as an earlier session's are — a
    /// thread opened again under the id, the store open all along (a
    /// long-lived host letting a thread's children go from memory), reads,
    /// claims and resumes them. They were its hub's alone, and with the
    /// hub gone, nobody's: "no sub-agent" for all it had made. A killed
    /// thread's are not (its writer may still be writing a link: a resume
    /// here forked the chain), as after a kill they were not before — nor
    /// by the close of the next thread of its id: only `own`, the closing
    /// hub's children (picked by the id alone, they were).
    fn hand_over_children(&self, id: &ThreadId, own: Vec<AgentId>) {
        let finished: Vec<AgentId> = own
            .into_iter()
            .filter(|child| {
                self.map.get(child).is_some_and(|e| {
                    e.thread.as_ref() == Some(id) && e.status.is_terminal() && !e.forgotten
                })
            })
            .collect();
        if !finished.is_empty() {
            (self.earlier.write().unwrap_or_else(PoisonError::into_inner)).extend(finished);
        }
    }

    /// Holds `id` for a forget (closing: a claim waits for it), unless a
    /// thread holds it: `None` then.
    pub(super) fn hold_for_forget(&self, id: &ThreadId) -> Option<ForgetHold<'_>> {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if live
            .get(id)
            .is_some_and(|h| !matches!(h.held(), Held::Free))
        {
            return None;
        }
        let holder = Holder {
            closing: Arc::new(Mutex::new(true)),
            actor: Arc::default(),
        };
        live.insert(id.clone(), holder.clone());
        Some(ForgetHold {
            store: self,
            id: id.clone(),
            holder,
        })
    }
}

/// An id held while its conversation is forgotten (see
/// [`EnvelopeStore::forget_thread`]).
pub(super) struct ForgetHold<'a> {
    store: &'a EnvelopeStore,
    id: ThreadId,
    holder: Holder,
}

impl Drop for ForgetHold<'_> {
    fn drop(&mut self) {
        self.store.release(&self.id, &self.holder);
    }
}

impl EnvelopeStore {
    /// Holds `id` live on `store`, `closing` its handles' flag; `None`
    /// while another thread of the id is open. One closing (or a forget
    /// under way) is waited for; one whose actor stopped is gone.
    pub(crate) async fn claim_thread(
        store: &Arc<Self>,
        id: &ThreadId,
        closing: &Arc<Mutex<bool>>,
    ) -> Option<LiveThread> {
        loop {
            let released = store.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let closing_actor = {
                let mut live = store.live.lock().unwrap_or_else(PoisonError::into_inner);
                match live.get(id).map(|h| (h.held(), h.actor.get().cloned())) {
                    None | Some((Held::Free, _)) => {
                        let holder = Holder {
                            closing: closing.clone(),
                            actor: Arc::default(),
                        };
                        live.insert(id.clone(), holder.clone());
                        // Opened again: its writes are its own (no longer
                        // the forgotten thread's).
                        store
                            .forgotten_threads
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(id);
                        return Some(LiveThread {
                            store: store.clone(),
                            id: id.clone(),
                            holder,
                        });
                    }
                    Some((Held::Open, _)) => return None,
                    Some((Held::Closing, actor)) => actor,
                }
            };
            // Its state let go (`released`), or its actor stopped: a
            // killed thread's state may never be let go while this waits.
            match closing_actor {
                Some(actor) => {
                    tokio::select! {
                        () = &mut released => {}
                        _ = actor.wait(None) => {}
                    }
                }
                None => released.await,
            }
        }
    }
}

impl EnvelopeStore {
    /// The actors of the threads open on the store that would take a wake
    /// of one of `ids` (see [`EnvelopeStore::belongs`]): told when a
    /// killed thread's state, dropped after they opened, gave the wakes
    /// back — each took the store's wakes when it opened, and found none.
    /// In thread-id order (the first told takes wakes written for no
    /// thread): the live map's hash order chose it, which another
    /// toolchain's or target's table changes.
    pub(crate) fn takers_of(&self, ids: &[AgentId]) -> Vec<ActorCell> {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let mut takers: Vec<(&ThreadId, ActorCell)> = live
            .iter()
            .filter(|(thread, holder)| {
                matches!(holder.held(), Held::Open)
                    && ids.iter().any(|id| self.belongs(id, Some(thread)))
            })
            .filter_map(|(thread, holder)| Some((thread, holder.actor.get()?.clone())))
            .collect();
        takers.sort_unstable_by(|a, b| a.0.cmp(b.0));
        takers.into_iter().map(|(_, actor)| actor).collect()
    }
}

/// Whose a child is.
impl EnvelopeStore {
    /// The child `id`'s wakes are `thread`'s to take: its envelope names
    /// that thread, or none (a thread opened without an id wrote it, or a
    /// file from before threads were kept: the first thread shown takes
    /// those, as every thread did before). A deleted thread's child is no
    /// thread's ([`Envelope::forgotten`](subagents_messages::Envelope::forgotten)).
    pub(super) fn belongs(&self, id: &AgentId, thread: Option<&ThreadId>) -> bool {
        // In place: a copy each (its result whole) cost what the store held.
        self.map
            .get(id)
            .is_none_or(|e| !e.forgotten && (e.thread.is_none() || e.thread.as_ref() == thread))
    }

    /// What a thread's clear, delete or close settles of the wakes given
    /// back to the store, taken out of both lists (in order): its own
    /// children's (their envelope names it) and those it gave back itself
    /// (`gave`) — not a child written for no thread that another thread
    /// gave back (settled, that thread found nothing at its next showing,
    /// and the wake was lost on disk too).
    pub(crate) fn take_given_back_by(
        &self,
        thread: Option<&ThreadId>,
        gave: &[AgentId],
    ) -> (Vec<AgentId>, Vec<AgentId>) {
        let named = |id: &AgentId| {
            thread.is_some()
                && self
                    .map
                    .get(id)
                    .is_some_and(|e| e.thread.as_ref() == thread)
        };
        let take = |list: &std::sync::Mutex<Vec<AgentId>>| {
            let mut list = list.lock().unwrap_or_else(PoisonError::into_inner);
            let (own, others): (Vec<AgentId>, Vec<AgentId>) = std::mem::take(&mut *list)
                .into_iter()
                .partition(|id| self.belongs(id, thread) && (gave.contains(id) || named(id)));
            *list = others;
            own
        };
        (take(&self.interrupted), take(&self.owed))
    }

    /// The wakes in the store's lists that are `thread`'s to take (both
    /// lists, in order), left there.
    pub(crate) fn wakes_of(&self, thread: Option<&ThreadId>) -> Vec<AgentId> {
        let listed = |list: &std::sync::Mutex<Vec<AgentId>>| {
            let list = list.lock().unwrap_or_else(PoisonError::into_inner);
            list.iter()
                .filter(|id| self.belongs(id, thread))
                .cloned()
                .collect::<Vec<_>>()
        };
        let mut wakes = listed(&self.interrupted);
        wakes.extend(listed(&self.owed));
        wakes
    }

    /// The child `id` is one of an earlier session that `thread` may read,
    /// claim or resume: its own, or one written for no thread.
    pub(crate) fn reaches(&self, id: &AgentId, thread: Option<&ThreadId>) -> bool {
        self.is_from_earlier_session(id) && self.belongs(id, thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ractor::{Actor, ActorProcessingErr, ActorRef};

    struct Idle;

    impl Actor for Idle {
        type Msg = ();
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<()>, (): ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }

    /// Replay (review: determinism): the threads told that a killed
    /// thread gave its wakes back came in the live map's hash order, and
    /// the first took every wake written for no thread — which thread was
    /// woken changed with the toolchain's hash table. In id order.
    #[tokio::test]
    async fn the_takers_of_given_back_wakes_come_in_thread_id_order() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = Arc::new(subagents_actors::clock::ManualClock::new(0));
        let store = Arc::new(EnvelopeStore::open(tmp.path(), clock).unwrap().0);
        let mut held = Vec::new();
        let mut names = std::collections::HashMap::new();
        for n in (0..24).rev() {
            let id = ThreadId::new(format!("t{n:02}"));
            let live = EnvelopeStore::claim_thread(&store, &id, &Arc::default())
                .await
                .unwrap();
            let (actor, _) = Actor::spawn(None, Idle, ()).await.unwrap();
            names.insert(actor.get_id(), n);
            let _ = live.actor_slot().set(actor.get_cell());
            held.push((live, actor));
        }
        let order: Vec<u32> = store
            .takers_of(&[AgentId::new("agent_1")])
            .iter()
            .map(|a| names[&a.get_id()])
            .collect();
        assert_eq!(order, (0..24).collect::<Vec<_>>());
        for (_, actor) in held {
            actor.stop(None);
        }
    }
}
