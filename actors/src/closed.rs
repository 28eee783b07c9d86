//! The one error a handle answers when its actor is gone.

/// The actor a handle talks to is gone (stopped, or crashed): nothing was
/// done. Says which one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Closed {
    /// The model gate ([`GateHandle`](crate::GateHandle)).
    #[error("the model gate is closed")]
    Gate,
    /// The sub-agent hub ([`HubHandle`](crate::HubHandle)).
    #[error("the sub-agent hub is stopped")]
    Hub,
}
