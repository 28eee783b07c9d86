//! The **Agent** actor: one turn loop, for a parent or a child alike.
//!
//! **Owns:** the conversation history, the queue of turns waiting, the
//! running turn's task and the approvals that task waits on.
//! **Guarantees:** turns run one at a time, in the order sent; every turn
//! ends in exactly one `AgentEvent::Result` (completed, partial, failed or
//! stopped) and nothing of that turn follows it; a stopped turn's model
//! call is cancelled and its gate permit released. The handler never awaits
//! a model call or a tool: the turn runs in a task (`turn.rs`) that reports
//! back with a sealed `TurnFinished` message, so `Stop`, approvals and snapshots
//! are answered at once.

//!
//! | file | holds |
//! |---|---|
//! | `config.rs` | the agent's config, approval policies, [`AgentBuilder`], the spawn |
//! | `state.rs` | the agent actor and its state |
//! | `running.rs` | a running turn as the agent holds it, and its end at a kill |
//! | `turn.rs` | one turn of the loop, run in a task |
//! | `call.rs` | one tool call of a turn: approval, run or refusal |
//! | `turn_state.rs` | a running turn's shared state, and how a turn closes |
//! | `handle.rs` | [`AgentHandle`], [`AgentError`] |
//! | `msg.rs` | the agent's messages (crate-private) |
//! | `answer.rs` | an answer's call ids; a partial result's text |
//! | `progress.rs` | what a turn has done so far: the counts a partial result reads |
//! | `probe.rs` | a running turn seen from outside |
//! | `sender.rs` | the span a sent turn runs under |
//! | `spans.rs` | the agent's OpenTelemetry spans |

mod answer;
mod call;
#[cfg(test)]
pub(crate) use call::tests::AsksAtFirst;
mod config;
mod handle;
mod msg;
mod probe;
mod progress;
mod running;
mod sender;
pub(crate) mod spans;
mod state;
mod turn;
mod turn_state;

pub(crate) use answer::unique_ids;
pub use config::{AgentBuilder, ApprovalPolicy};
pub(crate) use config::{
    AgentConfig, KillHook, MAX_SEED, check_limits, check_options, seed_why, spawn_numbered,
};
#[doc(hidden)]
pub use handle::supervisor_stopping;
pub use handle::{AgentError, AgentHandle};
pub(crate) use msg::sealed;
pub(crate) use msg::{AgentMsg, TurnReply, UserTurn};
pub(crate) use probe::{Activity, LiveTurn, Probe};
pub(crate) use running::TurnEnds;
pub(crate) use sender::as_callback;
#[doc(hidden)]
pub use sender::sender_span;
pub(crate) use turn_state::{
    CallSlot, ChildNote, HandOn, Shared, TakenNote, TurnState, lock as turn_state_lock,
    nothing_done, steering_text,
};
