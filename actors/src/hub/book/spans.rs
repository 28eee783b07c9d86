//! A finished child's run span, kept for the wake that links to it:
//! taken by that wake, or let go — closed outside the map's guards (its
//! close runs every tracing layer, a synchronous exporter's send too).

use subagents_messages::AgentId;

use super::Book;
use crate::hub::ids::child_number;

impl Book {
    /// A finished child's last run span, taken (for the wake that links
    /// to it; after that it closes).
    pub(crate) fn take_run_span(&self, id: &AgentId) -> Option<tracing::Span> {
        self.entries.get_mut(id)?.run_span.take()
    }

    /// Lets go of every kept run span: no wake will link to them. They
    /// close after the map's guards, in child-number order (not the
    /// map's). For good: a child finishing after keeps none (a parent
    /// shut down as a child's end was in its hub's mailbox kept that
    /// child's span, the call and turn that started it with it, open).
    pub(crate) fn drop_run_spans(&self) {
        // Before the walk: a finish that checks under its entry's guard
        // after the walk passed its shard sees it.
        (self.counters.no_wakes).store(true, std::sync::atomic::Ordering::SeqCst);
        let mut spans: Vec<(AgentId, tracing::Span)> = self
            .entries
            .iter_mut()
            .filter_map(|mut e| Some((e.key().clone(), e.run_span.take()?)))
            .collect();
        spans.sort_by_key(|(id, _)| (child_number(id), id.clone()));
        drop(spans);
    }
}
