//! A dead hub's children: each turn ended as a killed actor's, then every
//! child not ended failed, once, and the list of them the same to every
//! caller.

use subagents_messages::{AgentId, Envelope, SubAgentStatus};

use crate::agent::Probe;
use crate::hub::book::{Book, Closer};
use crate::hub::ids::child_number;

/// Held by a hub's `post_stop` while it ends its children itself: ractor
/// says `Stopping` from before it, and a hub stopping is not a dead one.
/// Let go when the stop ends — or unwinds from a panic, when what is left
/// is a dead hub's.
pub(crate) struct StoppingItself(Book);

impl Drop for StoppingItself {
    fn drop(&mut self) {
        self.0
            .counters
            .stopping_itself
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

impl Book {
    /// The hub starts ending its children itself (its `post_stop`).
    pub(crate) fn stopping_itself(&self) -> StoppingItself {
        self.counters
            .stopping_itself
            .store(true, std::sync::atomic::Ordering::Release);
        StoppingItself(self.clone())
    }

    /// The hub is in its `post_stop`, ending its children itself.
    pub(crate) fn is_stopping_itself(&self) -> bool {
        self.counters
            .stopping_itself
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The hub whose actor reads `status` is dead — killed or crashed, so
    /// its children are failed by whoever asks — and not stopping itself.
    /// `Stopping` alone is not death: ractor says it from before the
    /// hub's `post_stop` (which ends its children as stopped) begins, and
    /// a thread that read it in that instant on another worker failed
    /// them as killed under the stop, and the stop then waited for ever.
    /// Only `Stopped` is — or `Stopping` when ractor's termination event
    /// for the hub came (`exited`): it is sent just before `Stopped`.
    pub(crate) fn is_dead(&self, status: ractor::ActorStatus, exited: bool) -> bool {
        let over = match status {
            ractor::ActorStatus::Stopped => true,
            ractor::ActorStatus::Stopping => exited,
            ractor::ActorStatus::Unstarted
            | ractor::ActorStatus::Starting
            | ractor::ActorStatus::Running
            | ractor::ActorStatus::Upgrading
            | ractor::ActorStatus::Draining => false,
        };
        over && !self.is_stopping_itself()
    }

    /// Ends every child that has not ended as a killed actor's, deepest
    /// first, then in child-number order (its hub died without its stop:
    /// see [`crate::agent::running::TurnEnds`]): its running turn closed
    /// (the call in flight answered, its `Result`), then `failed` on its
    /// requester's stream — a queued one's only word.
    pub(crate) fn end_turns_as_killed(&self) {
        type Open = (
            std::cmp::Reverse<u32>,
            Option<u64>,
            AgentId,
            Option<Probe>,
            Option<Closer>,
        );
        // One caller at a time — the children's kill hooks, the thread
        // seeing its hub gone and the hub's state dropped may all run at
        // once on several workers: one took a turn's ends and had not
        // emitted them when another, finding them taken, closed the
        // child's sink with its status, and the `Result` and the cut
        // call's answer went nowhere. Taken by no one holding another
        // lock (each caller is a drop or a handler), so it orders first.
        let _one_at_a_time = self
            .counters
            .ending_killed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut open: Vec<Open> = self
            .entries
            .iter()
            .filter(|e| !e.envelope.status.is_terminal())
            .map(|e| {
                (
                    std::cmp::Reverse(e.envelope.depth),
                    child_number(e.key()),
                    e.key().clone(),
                    e.probe.clone(),
                    e.closer.clone(),
                )
            })
            .collect();
        open.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
        // No map guard is held: ending a turn emits and takes its lock.
        for (_, _, id, probe, closer) in open {
            if let Some(probe) = probe {
                probe.end_as_killed();
            }
            if let Some(closer) = closer {
                closer.close(&id, SubAgentStatus::Failed);
            }
        }
    }

    /// Ends the running turn of `id`, whose actor died without reporting
    /// and whose state its hub will not read (a stopping hub reads no
    /// supervision event): its call in flight answered, its `Result`,
    /// before its status closes it. One caller at a time, as
    /// [`Book::end_turns_as_killed`]. True when it ended it (its `Result`
    /// says it failed).
    pub(crate) fn end_turn_as_killed(&self, id: &AgentId) -> bool {
        let _one_at_a_time = self
            .counters
            .ending_killed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let probe = self.entries.get(id).and_then(|e| e.probe.clone());
        probe.is_some_and(|probe| probe.end_as_killed())
    }

    /// The result `id`'s turn ended with, its report unread
    /// ([`crate::agent::Probe::kept_result`]).
    pub(crate) fn kept_result(&self, id: &AgentId) -> Option<subagents_messages::AgentResult> {
        let probe = self.entries.get(id).and_then(|e| e.probe.clone());
        probe.and_then(|probe| probe.kept_result())
    }

    /// Runs `f` (a new child put in the book and announced) while no
    /// kill's [`Book::end_turns_as_killed`] runs: one whose list of
    /// children to end was taken before the child was in the book, and
    /// whose requester's turn it had not ended yet, let the hub announce
    /// it in that row — then closed — and its own `failed` was dropped.
    pub(crate) fn while_no_kill_ends<R>(&self, f: impl FnOnce() -> R) -> R {
        let _no_kill = self
            .counters
            .ending_killed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f()
    }

    /// Every child that had not ended becomes `failed` with `reason`;
    /// returns every child failed so, by this call or an earlier one, in
    /// child-number order: whoever calls first, each caller gets the whole
    /// list.
    pub(crate) fn fail_unfinished(&self, reason: &str, now_ms: u64) -> Vec<Envelope> {
        // On the stream first, in order (the kill hook did it already
        // when a running child was killed; a closed turn or sink is left).
        self.end_turns_as_killed();
        let mut open: Vec<(std::cmp::Reverse<u32>, Option<u64>, AgentId)> = self
            .entries
            .iter()
            .filter(|e| !e.envelope.status.is_terminal())
            .map(|e| {
                let id = e.key().clone();
                (std::cmp::Reverse(e.envelope.depth), child_number(&id), id)
            })
            .collect();
        // Stamped in the order the stream ends them (deepest first, then by
        // number), not the map's.
        open.sort_unstable();
        let open: Vec<AgentId> = open.into_iter().map(|(_, _, id)| id).collect();
        for id in &open {
            self.finish_as(
                id,
                SubAgentStatus::Failed,
                None,
                Some(reason.to_owned()),
                now_ms,
                true,
            );
        }
        let mut failed: Vec<Envelope> = self
            .entries
            .iter()
            .filter(|e| e.failed_by_hub_death)
            .map(|e| e.envelope.clone())
            .collect();
        failed.sort_by_key(|e| (child_number(&e.id).unwrap_or(u64::MAX), e.id.clone()));
        failed
    }
}
