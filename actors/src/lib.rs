//! Behaviour of the subagents runtime: the Agent and ModelGate actors, the
//! `Model` and `Tool` traits, the scripted model.
//!
//! ```text
//! Agent (turn loop) ── Acquire ──► ModelGate (FIFO, capacity N)
//!   │  task: model stream → Text events → tool calls → ToolStarted/ToolResult
//!   └─ events ──► EventSink ──► EventStream (the host)
//! ```

pub mod agent;
pub mod clock;
mod closed;
pub(crate) mod defaults;
pub mod delegation;
#[cfg(test)]
mod footprint;
pub mod gate;
pub mod hub;
pub mod model;
#[cfg(feature = "openai")]
pub mod openai;
mod panics;
pub mod profile;
pub mod registry;
pub mod remote;
pub mod scripted;
pub mod sink;
pub mod tool;

pub use agent::{AgentBuilder, AgentError, AgentHandle};
pub use closed::Closed;
pub use delegation::{DelegatingAgent, DelegationBuilder, ParentStopPolicy, UseAgentCall};
pub use gate::GateHandle;
pub use hub::HubHandle;
pub use model::{Model, ModelError, ModelStream};
pub use remote::{NodeLink, NodeRunner, Placement, RunReports};
pub use scripted::{Reply, ScriptedModel};
pub use sink::{EventSink, EventStream};
pub use tool::{Tool, ToolCallContext, ToolError, ToolFuture, ToolRegistry};
