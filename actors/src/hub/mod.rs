//! The **Hub** actor: a thread's children.
//!
//! ```text
//! use_agent (parent's turn task) ──Spawn/Subscribe/Detach/Stop──► Hub
//!                                                                  ├─ Slots (pure): ≤ max_live live per requester, FIFO queues
//!                                                                  ├─ Agent (child, linked) …
//!                                                                  └─ envelopes (DashMap, read without messages)
//! child turn result ──(child's handler)── ChildFinished ──► Hub ──► ChildStatus(done) ──► subscribers
//! ```
//!
//! | file | holds |
//! |---|---|
//! | `config.rs` | the hub's config, the observer and archive hooks, the background approval policy |
//! | `book.rs` | the envelope book: one envelope per child, read without a message |
//! | `slots.rs` | the live cap and the FIFO queue (pure) |
//! | `ids.rs` | `ChildIds`: child ids from a shared, checked counter |
//! | `lifecycle.rs` | children's lifecycle: request, admit or queue, start |
//! | `finish.rs` | how a child ends: its terminal status once, its slot refilled, observers told |
//! | `stop.rs` | stop, interrupt, stop-all, detach, abandon; replies waiting for a stop to complete |
//! | `steer.rs` | messages to children (`use_agent send`): to a running turn, kept for a queued start, or a new run of a finished child |
//! | `runs.rs` | the book's runs: what each run was asked, its conversation, the link to the next run |
//! | `queries.rs` | approvals routed to the child that asked; the counts |
//! | `actor.rs` | the hub actor: messages in, supervision |
//! | `error.rs` | [`Refused`] |
//! | `handle.rs` | [`HubHandle`]: requests by message, queries from the book |
//! | `pending.rs` | a spawn whose answer is awaited: dropped unread, its child is abandoned, not lost |
//! | `msg.rs` | the hub's messages (crate-private) |
//! | `child.rs` | a child as the hub holds it; its limits as it starts |
//! | `names.rs` | a child's shown name |
//!
//! **Owns:** the slots and queue, one envelope per child for the life of
//! the hub, the children's actors (linked under it) and their event sinks.
//! **Guarantees** (see `docs/event-ordering.md`): `ChildStarted` once per
//! child before anything else of it; statuses only move forward; exactly
//! one terminal status, with nothing of that child after it (its sink is
//! closed in the same step); never more than `max_live` live per
//! requester (the parent's children, each child's own); queued
//! children start in request order; a slot is released on every path (a
//! start that fails releases its slot at once and starts whoever it
//! admits, in the same step; a child that fails or dies frees its slot). `status` reads the envelope map and never
//! waits on the hub or a child. Stopping a running child asks its agent to
//! stop its turn: the child's own closing events (a `ToolResult` for the
//! call in flight, an `ApprovalResolved` for a pending approval, its
//! stopped `Result`) come before its terminal status.
//!
//! A child's result is *delivered* only when a receiver took it: a tool
//! call settles it on its turn and claims it, or,
//! when nobody took it inline, it is a background result and wakes the
//! parent. Sending an envelope to a waiter delivers nothing.
//!
//! The child's result is taken from its own reply (the turn's
//! `AgentResult`), never from its termination: ractor's supervision events
//! can overtake ordinary messages.
//!
//! # A note on choosing `max_live`
//! Three (Loopl's value) keeps a capacity-1 gate busy without starving the
//! parent: every live child queues at the gate for each model call, so more
//! live children only lengthen every call's wait. Raise it with the gate's
//! capacity, not beyond.

mod actor;
mod book;
mod child;
mod config;
mod error;
mod finish;
mod handle;
mod ids;
mod lifecycle;
mod msg;
mod names;
mod pending;
mod queries;
mod runs;
mod shutdown;
mod slots;
mod starting;
mod steer;
mod stop;
pub(crate) use stop::DetachOutcome;
#[cfg(test)]
pub(crate) use stop::INTERRUPTED;

#[cfg(test)]
pub(crate) use book::requested;
pub(crate) use config::HubConfig;
pub use config::{BackgroundApprovals, EnvelopeArchive, HubObserver};
pub use error::Refused;
pub(crate) use error::Steered;
pub use handle::HubHandle;
pub(crate) use handle::{Claimed, WaitOutcome};
pub use ids::ChildIds;
pub(crate) use ids::decimal;
