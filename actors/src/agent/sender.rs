//! The span a user turn runs under: the sender's, never one the library
//! entered around the host's code.

use std::cell::Cell;

use tracing::Span;

thread_local! {
    /// While the library runs a host's callback (an observer): the span
    /// that was current where it was called (`Some(None)`: none).
    static CALLED_UNDER: Cell<Option<Option<u64>>> = const { Cell::new(None) };
}

/// The span a turn sent now runs under: the sender's current span — or
/// none, a trace of its own, when that span is the library's own: ractor's
/// `Actor` span of the actor whose handler runs the host's code (it lives
/// as long as the actor: a trace that never ended), whatever was current
/// where an observer was told (the hub's handler, a sub-agent's run: the
/// parent's next turn nested inside a child's run), or a span of this
/// crate's around a host's tool, approval policy or model (a tool that
/// sends a follow-up turn nested it in the turn that ran the tool, and a
/// tool sending on every turn made the session one trace that never
/// ended). A span the host entered in its callback is its own.
#[doc(hidden)] // read by subagents-supervisor's `send_user`
pub fn sender_span() -> Option<Span> {
    let current = Span::current();
    let id = current.id().map(|id| id.into_u64());
    if CALLED_UNDER.with(Cell::get) == Some(id) {
        return None;
    }
    let ours = current.metadata().is_none_or(|m| {
        (m.name() == "Actor" && m.target().starts_with("ractor"))
            || m.target().starts_with("subagents_actors::")
    });
    (!ours).then_some(current)
}

/// Runs a host's callback: a turn it sends starts a trace of its own.
pub(crate) fn as_callback<R>(callback: impl FnOnce() -> R) -> R {
    struct Reset(Option<Option<u64>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            CALLED_UNDER.with(|c| c.set(self.0));
        }
    }
    let under = Span::current().id().map(|id| id.into_u64());
    let _reset = Reset(CALLED_UNDER.with(|c| c.replace(Some(under))));
    callback()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callback_sends_with_no_span_and_the_mark_is_restored() {
        assert!(sender_span().is_none(), "no span current");
        let _ = std::panic::catch_unwind(|| as_callback(|| panic!("a host's bug")));
        assert_eq!(CALLED_UNDER.with(Cell::get), None, "restored after a panic");
        as_callback(|| {
            as_callback(|| {});
            assert_eq!(
                CALLED_UNDER.with(Cell::get),
                Some(None),
                "nested: still inside"
            );
            assert!(sender_span().is_none());
        });
        assert_eq!(CALLED_UNDER.with(Cell::get), None);
    }
}
