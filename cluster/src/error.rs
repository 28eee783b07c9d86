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
    #[error("node `{node}` {}, this node speaks wire version {ours}", theirs.map_or_else(|| "did not answer the hello within 5 s: an earlier version (upgrade both to one), or a node too busy to answer".to_owned(), |v| format!("speaks wire version {v} (upgrade both to one version)")))]
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
