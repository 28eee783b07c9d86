//! Lifecycle policy of the subagents runtime, per conversation thread.
//!
//! A thread supervisor actor per conversation thread
//! owns the parent agent and its hub, and applies the policy: stop-all on a
//! thread switch, detach (or cascade) when the parent stops mid-wait,
//! ordered wake delivery. Hosts talk to it through a
//! [`ThreadHandle`]; [`Threads`] keeps a host's threads and applies the
//! switch policy; [`store`] persists envelopes and runs.

pub mod store;
pub mod thread;
pub mod threads;
mod wake;

pub use thread::{ThreadConfig, ThreadError, ThreadHandle};
pub use threads::Threads;
