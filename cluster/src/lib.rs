//! Children of a subagents hub on other nodes, over `ractor_cluster`.
//!
//! Each node runs a [`ClusterNode`]: ractor_cluster's `NodeServer` on
//! loopback or a network address, a **node host** (an actor in a `pg`
//! group named after the node, spawning children locally on request with
//! the node's [`NodeRunner`](subagents_actors::NodeRunner)) and an
//! **inbox** (where other nodes' hosts send the reports of the children
//! they run for this node). [`ClusterNode::connect`] reaches another node
//! and gives a [`ClusterLink`]: a [`NodeLink`](subagents_actors::NodeLink)
//! to put in a hub's [`Placement`](subagents_actors::Placement).
//!
//! Everything crossing the wire is our own payload as opaque bytes
//! (bincode through `subagents_messages::codec`), decoded into a `Result`:
//! bad bytes are logged and dropped, never a panic; a start or report
//! whose header was read ends its run refused, saying why. A lost node — its
//! session closed (a killed process is seen at once on its TCP
//! connection) or three heartbeats unanswered — ends its children failed
//! (`node lost`) with one wake each. docs/cluster.md has the design.
//!
//! This crate is its own workspace: it builds ractor with the `cluster`
//! feature, which changes ractor's `Message` impl for the whole graph and
//! so stays out of the core crates' build.
//!
//! | file | what |
//! |---|---|
//! | `node.rs` | [`ClusterNode`]: the server, host and inbox of one node |
//! | `error.rs` | [`ClusterError`] |
//! | `host.rs` | the node host actor (runs children for other nodes) |
//! | `link.rs` | [`ClusterLink`], the inbox actor, heartbeats, loss |
//! | `wire.rs` | the payloads and their decoding |

mod error;
mod host;
mod link;
mod node;
mod wire;

pub use error::ClusterError;
pub use link::ClusterLink;
pub use node::ClusterNode;
pub use wire::KeptRun;
