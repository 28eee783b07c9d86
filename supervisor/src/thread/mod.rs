//! The **ThreadSupervisor** actor: one conversation thread's policy.
//!
//! ```text
//! Host ── ThreadHandle ──► ThreadSupervisor
//!                            ├─ Agent (parent)  ◄── Turn (user / wake)
//!                            ├─ Hub ── observer ──► ChildFinished
//!                            └─ WakeQueue (pure): one in flight, FIFO
//! ```
//!
//! **Owns:** the parent, its hub and gate (spawned linked under it), the
//! wake queue and whether the parent generates, the user types, the thread
//! is on screen. **Guarantees:** a finished background child whose result
//! was not claimed becomes one wake; one wake in flight, the rest FIFO;
//! none delivered while the parent generates or the user types; none after
//! a thread switch or while off screen. A switch stops every child. The
//! handler never awaits a turn: turns run in tasks that report
//! `TurnEnded`.

//!
//! | file | holds |
//! |---|---|
//! | `config.rs` | [`ThreadConfig`] |
//! | `actor.rs` | the supervisor actor |
//! | `state.rs` | its state: turns, wakes, persistence, approval routing |
//! | `handle.rs` | [`ThreadHandle`], [`ThreadError`] |
//! | `msg.rs` | `ThreadMsg` (crate-private): the handle's requests, and a sealed part |

mod actor;
mod config;
mod error;
mod handle;
mod msg;
mod persist;
mod shared;
mod state;
#[cfg(test)]
mod tests;
mod wakes;

pub use config::ThreadConfig;
pub use error::ThreadError;
pub use handle::ThreadHandle;
