//! Lifecycle policy of the subagents runtime, per conversation thread.
//!
//! (Being built: the `ThreadSupervisor` actor — stop-all on thread switch,
//! detach on parent stop, ordered wake delivery, persisted envelopes.)
