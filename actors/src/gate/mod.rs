//! The **ModelGate** actor: a FIFO lock around every model call.
//!
//! ```text
//!  Agent task ── Lane (pure, one lock): a unit free, nobody queued ──► Permit
//!       │ otherwise
//!       └──Acquire{ticket}──► ModelGate ──Permit──► Agent task
//!                             │ GateQueue (pure)  ◄──Release── Permit::drop
//!  acquire future dropped ──Cancel{ticket}──►      (while anyone is queued)
//! ```
//!
//! **Owns:** the queue of waiters, the units released to it, and the
//! grant statistics. An uncontended acquire — a unit free and nobody
//! queued — is granted by the lane it shares with its handles and
//! permits (`lane.rs`), without a message: a model call then costs no
//! actor round trip. As soon as anyone waits, every acquire and every
//! release goes through the actor until its queue has drained, so the
//! order is the actor's.
//!
//! **Guarantees:** at most `capacity` permits held at once; permits granted
//! in the order `acquire` was called (the lane decides, under its lock,
//! whether a call is granted at once or queued, and a queued call's
//! message is sent under that lock); a permit is released when dropped —
//! including by a panic unwinding or a task being aborted; a waiter whose
//! `acquire` future is dropped is removed and never granted (dropped in
//! the tick its grant is sent, the permit comes straight back — counted
//! in the snapshot's `granted_total` and waits, which count grants sent).
//!
//! The shape follows tower's `Buffer`, with tokio's `Semaphore`'s fast
//! path: a private worker (the actor) and a cheap handle ([`GateHandle`])
//! that spawns it for you. Its protocol is crate-private (`msg.rs`): a
//! host acquires and snapshots through the handle, nothing more.
//!
//! # A note on choosing a capacity
//! One set of weights serves one call at a time: keep the default of 1 for
//! a local model (llama.cpp without parallel slots, a phone). A server that
//! batches (vLLM, llama.cpp with `--parallel N`) can take N: set the
//! capacity to the server's parallel slots, not more, or calls queue inside
//! the server where the gate can no longer order them.

mod actor;
mod handle;
mod lane;
mod msg;
mod queue;

pub use handle::GateHandle;
pub use msg::Permit;

/// A waiter's place in the gate's queue, unique per gate.
pub(crate) type Ticket = u64;

/// The lane a gate shares with its handles and permits.
pub(crate) type SharedLane = std::sync::Arc<std::sync::Mutex<lane::Lane>>;

/// Locks a gate's lane (a panic while it was held left it consistent:
/// every step is one assignment or two).
pub(crate) fn lock(lane: &SharedLane) -> std::sync::MutexGuard<'_, lane::Lane> {
    lane.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
