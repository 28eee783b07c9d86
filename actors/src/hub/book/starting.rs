//! A child's start, written to the book in one look-up.

use subagents_messages::{AgentId, SubAgentStatus};
use tokio::time::Instant;

use super::Book;
use crate::agent::Probe;

/// What a child's start changed in the book.
#[derive(Debug, Clone, Default)]
pub(crate) struct Started {
    /// The book has it (nothing else here is true without it).
    pub(crate) known: bool,
    /// It waited in the queue (its start is marked on the stream).
    pub(crate) was_queued: bool,
    /// Its status moved to `Running` (said on the stream).
    pub(crate) now_running: bool,
    /// It runs in the background.
    pub(crate) background: bool,
    /// Where its turn publishes what it does, kept in the book.
    pub(crate) probe: Probe,
}

impl Book {
    /// It starts now: stamped (`now_ms`), out of the queue, `Running`
    /// unless its status is past it, a new probe kept. Nothing changes for
    /// a child the book does not have (its probe is kept nowhere).
    pub(crate) fn start(&self, id: &AgentId, now_ms: u64) -> Started {
        let Some(mut entry) = self.entries.get_mut(id) else {
            return Started::default();
        };
        let probe = Probe::default();
        entry.started = Some(Instant::now());
        entry.envelope.started_at_ms = Some(now_ms);
        let was_queued = entry.queued.take().is_some();
        let now_running = SubAgentStatus::Running.rank() > entry.envelope.status.rank();
        if now_running {
            entry.envelope.status = SubAgentStatus::Running;
        }
        entry.probe = Some(probe.clone());
        Started {
            known: true,
            was_queued,
            now_running,
            background: entry.envelope.background,
            probe,
        }
    }
}
