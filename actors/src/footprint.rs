//! Test helper: the size of an actor handler's future. ractor boxes an
//! actor's message loop once, for the actor's whole life, and the loop
//! holds the handler's future: every actor pays for its handler's largest
//! arm (docs/performance.md).

/// The size of the future `make` would return, without calling it (the
/// closure only names the handler: `|myself, message, state|
/// Actor.handle(myself, message, state)`).
pub(crate) fn handler_future_size<A, B, S: 'static, F: std::future::Future>(
    _make: impl FnOnce(A, B, &'static mut S) -> F,
) -> usize {
    std::mem::size_of::<F>()
}

/// The size of the future `make` would return for a borrowed argument,
/// without calling it (`|ctx| run_turn(ctx)`).
pub(crate) fn borrowing_future_size<A: 'static, F: std::future::Future>(
    _make: impl FnOnce(&'static A) -> F,
) -> usize {
    std::mem::size_of::<F>()
}
