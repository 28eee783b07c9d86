//! A sub-agent runtime for LLM agents: an actor system on `ractor` and
//! `tokio` with a shared model gate, queued children, ordered wakes and a
//! written, property-checked event contract.
//!
//! # Quick start (offline, on the scripted model)
//!
//! `Calculator` is one of the example tools of this repository's
//! `subagents-demo` crate (`demo/`, not published): a host writes its own
//! with [`Tool`](crate::prelude::Tool) (a name, a JSON schema, a call).
//!
//! ```
//! use subagents::prelude::*;
//! use subagents_demo::Calculator;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::new(vec![
//!     Reply::new().tool_call("calculator", r#"{"expression":"6*7"}"#),
//!     Reply::answer("6 × 7 = 42."),
//! ]);
//! let (agent, mut events) = AgentBuilder::new(model.shared())
//!     .system_prompt("You are a careful assistant.")
//!     .tools(ToolRegistry::new().with(Calculator))
//!     .spawn()
//!     .await?;
//! agent.send_user("What is 6 × 7?")?;
//! while let Some(event) = events.recv().await {
//!     if let AgentEvent::Result(result) = event {
//!         assert_eq!(result.text, "6 × 7 = 42.");
//!         break;
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Where to go next
//!
//! - A parent that delegates: [`actors::DelegationBuilder`] (gate, hub,
//!   `use_agent` / `delegate_task` / `agent`, profiles, model registry).
//! - A conversation thread with its lifecycle policy (stop-all, detach,
//!   wakes, approvals, persistence): [`supervisor::ThreadHandle`] and
//!   [`supervisor::Threads`].
//! - Testing your agents in virtual time: `simulation` (feature
//!   `test-util`).
//! - `examples/quickstart.rs` and `examples/chat_host.rs` run offline.
//!
//! # Layout
//!
//! | crate | re-exported as | holds |
//! |---|---|---|
//! | `subagents-messages` | [`messages`] | the typed protocol: events, envelopes, model types, the wire types and codec |
//! | `subagents-actors` | [`actors`] | behaviour: Agent, ModelGate, the Model and Tool traits, adapters |
//! | `subagents-supervisor` | [`supervisor`] | lifecycle policy per thread; the host-facing handle |
//!
//! `docs/architecture.md` draws the actors and who owns whom;
//! `docs/event-ordering.md` is the contract a UI draws from.
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `test-util` | `simulation`: the harness for hosts' own tests (scenarios in paused time) |
//! | `openai` | the OpenAI-compatible chat-completions adapter (`actors::openai`), plain HTTP |
//! | `openai-rustls` | the same with TLS (rustls) for `https://` |
//! | `otel` | only this repository's `otel` example and its test (spans exported through OpenTelemetry); the library's code uses none of it |
//!
//! The scripted model ([`actors::scripted`]) is always available: it is the
//! embedded default of the examples.

#[cfg(feature = "test-util")]
pub mod simulation;

pub use subagents_actors as actors;
pub use subagents_messages as messages;
pub use subagents_supervisor as supervisor;

/// The names most hosts need.
pub mod prelude {
    pub use subagents_actors::scripted::{Reply, ScriptedModel};
    pub use subagents_actors::{
        AgentBuilder, AgentError, AgentHandle, DelegationBuilder, EventSink, EventStream,
        GateHandle, Model, ModelError, Tool, ToolCallContext, ToolError, ToolFuture, ToolRegistry,
        UseAgentCall,
    };
    pub use subagents_messages::{
        AgentEvent, AgentId, AgentResult, ApprovalDecision, ApprovalId, LimitKind, Limits, Outcome,
        SubAgentInfo, SubAgentStatus, ToolUseId,
    };
}

/// The Rust examples of `docs/` compiled as doctests, so a renamed or
/// removed item cannot leave a page's example stale (`docs/simulation.md`'s
/// runs as `tests/simulation/main.rs`).
#[cfg(doctest)]
mod docs_examples {
    #[cfg(feature = "openai")]
    #[doc = include_str!("../docs/openai.md")]
    struct OpenAi;
    #[doc = include_str!("../docs/persistence.md")]
    struct Persistence;
    #[doc = include_str!("../docs/profiles.md")]
    struct Profiles;
}
