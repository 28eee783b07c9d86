//! Children on other nodes. The hub places each child ([`Placement`]);
//! one placed elsewhere is stood for on this node by a proxy that speaks
//! the agent's own protocol, so the hub, the stream and the contract are
//! the same for it as for a local child. The transport is a [`NodeLink`]
//! (the `subagents-cluster` crate has one over ractor_cluster); the node
//! that runs the child runs it with a [`NodeRunner`]. docs/cluster.md
//! has the design.
//!
//! | file | what |
//! |---|---|
//! | `link.rs` | [`NodeLink`], [`RunReports`] |
//! | `placement.rs` | [`Placement`] |
//! | `proxy.rs` | the proxy actor (crate-private) |
//! | `mirror.rs` | what the proxy knows of a remote turn (pure) |
//! | `runner.rs` | [`NodeRunner`]: the node side |

mod link;
mod mirror;
mod placement;
mod proxy;
mod runner;

pub use link::{NodeLink, RunReports};
pub use placement::Placement;
pub(crate) use proxy::{Remote, spawn_remote};
pub use runner::NodeRunner;
