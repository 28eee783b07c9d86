//! Lifecycle policy of the subagents runtime, per conversation thread.
//!
//! A [`ThreadSupervisor`](thread::ThreadSupervisor) per conversation thread
//! owns the parent agent and its hub, and applies the policy: stop-all on a
//! thread switch, detach (or cascade) when the parent stops mid-wait,
//! ordered wake delivery. Hosts talk to it through a
//! [`ThreadHandle`](thread::ThreadHandle).

pub mod store;
pub mod thread;
pub mod wake;

pub use thread::{ThreadError, ThreadHandle, ThreadSupervisor};
pub use wake::WakeQueue;
