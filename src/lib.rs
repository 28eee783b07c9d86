//! A sub-agent runtime for LLM agents, built as an actor system on `ractor`
//! and `tokio`.

pub use subagents_actors as actors;
pub use subagents_messages as messages;
pub use subagents_supervisor as supervisor;
