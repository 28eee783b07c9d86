//! The **ModelGate** actor: a FIFO lock around every model call.
//!
//! ```text
//!  Agent task ──Acquire{ticket}──► ModelGate ──Permit──► Agent task
//!                                  │ GateQueue (pure)  ◄──Release── Permit::drop
//!  acquire future dropped ──Cancel{ticket}──►
//! ```
//!
//! **Owns:** the queue of waiters and the set of held tickets.
//! **Guarantees:** at most `capacity` permits held at once; permits granted
//! in the order `Acquire` messages arrived (one task's `acquire` calls are
//! FIFO per sender, as ractor delivers); a permit is released when dropped —
//! including by a panic unwinding or a task being aborted; a waiter whose
//! `acquire` future is dropped is removed and never granted.
//!
//! The shape follows tower's `Buffer`: a private worker (the actor) and a
//! cheap handle ([`GateHandle`]) that spawns it for you. Its protocol is
//! crate-private (`msg.rs`): a host acquires and snapshots through the handle, nothing more.
//!
//! # A note on choosing a capacity
//! One set of weights serves one call at a time: keep the default of 1 for
//! a local model (llama.cpp without parallel slots, a phone). A server that
//! batches (vLLM, llama.cpp with `--parallel N`) can take N: set the
//! capacity to the server's parallel slots, not more, or calls queue inside
//! the server where the gate can no longer order them.

mod actor;
mod handle;
mod msg;
mod queue;

pub use handle::GateHandle;
pub use msg::Permit;

/// A waiter's place in the gate's queue, unique per gate.
pub(crate) type Ticket = u64;
