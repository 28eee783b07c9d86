//! What goes wrong starting, joining or asking a cluster node.

use std::time::Duration;

/// What went wrong starting or joining a cluster node.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// An actor of the node could not be spawned.
    #[error("could not start the node's {what}: {why}")]
    Spawn {
        /// Which actor.
        what: &'static str,
        /// Why.
        why: String,
    },
    /// The other node could not be reached.
    #[error("could not connect to {addr}: {why}")]
    Connect {
        /// Its address.
        addr: String,
        /// Why.
        why: String,
    },
    /// A node's host did not answer, or its answer did not decode.
    #[error("node `{node}` did not answer: {why}")]
    NoAnswer {
        /// The node's name.
        node: String,
        /// Why.
        why: String,
    },
    /// The other node speaks another version of the wire (or an earlier
    /// one that does not say: `theirs` is `None`): every start would be
    /// dropped there without a word.
    #[error("node `{node}` speaks {}, this node version {ours}: upgrade both to one version", theirs.map_or_else(|| "an earlier version (it did not answer the hello)".to_owned(), |v| format!("wire version {v}")))]
    Version {
        /// The node's name.
        node: String,
        /// This node's wire version.
        ours: u32,
        /// The other node's, if it said.
        theirs: Option<u32>,
    },
    /// Connected, but the other node's host did not show up in time.
    #[error("node `{node}` at {addr} has no host after {waited:?}")]
    NoHost {
        /// The node's name.
        node: String,
        /// Its address.
        addr: String,
        /// How long this waited.
        waited: Duration,
    },
}
