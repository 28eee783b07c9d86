//! The typed protocol of the subagents runtime: every value that crosses an
//! actor, the wire (bincode, see [`codec`]) or the disk (JSON).
//!
//! Pure data and pure folds only: no I/O, no runtime.

pub mod agent;
pub mod codec;
pub mod envelope;
pub mod event;
pub mod gate;
pub mod hub;
pub mod ids;
pub mod limits;
pub mod model;
pub mod remote;
#[doc(hidden)] // plumbing between this workspace's crates, not API
pub mod text;
pub mod transcript;

pub use agent::AgentSnapshot;
pub use envelope::Envelope;
pub use event::{
    AgentEvent, AgentResult, ApprovalDecision, ApprovalOutcome, ApprovalRefusal, ApprovalRequest,
    Outcome, SubAgentInfo, SubAgentStatus, ToolResult, ToolStarted,
};
pub use gate::GateSnapshot;
pub use hub::{ChildRequest, HubSnapshot};
pub use ids::{AgentId, ApprovalId, ThreadId, ToolUseId};
pub use limits::{LimitKind, Limits};
pub use model::{
    ChatMessage, ModelChunk, ModelRequest, RequestOptions, Role, ToolCall, ToolChoice, ToolSpec,
    Usage,
};
pub use transcript::{SubAgentRun, Transcript, TranscriptItem};
