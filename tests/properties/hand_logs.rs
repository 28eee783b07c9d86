//! Hand-written logs, to show that the property test's checks reject what
//! they exist to reject (a check that accepts everything passes every
//! case): small builders for log entries and events, and a helper that
//! runs a check and returns its panic message.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use subagents::messages::{
    AgentEvent, AgentId, AgentResult, ApprovalId, ApprovalOutcome, ApprovalRequest, Outcome,
    SubAgentInfo, SubAgentStatus, ToolResult, ToolStarted, ToolUseId,
};
use subagents::simulation::{HostAction, LogEntry};

/// An event line.
pub(crate) fn ev(event: AgentEvent) -> LogEntry {
    LogEntry::Event {
        at: Duration::ZERO,
        event,
    }
}

/// A host line.
pub(crate) fn host(action: HostAction) -> LogEntry {
    LogEntry::Host {
        at: Duration::ZERO,
        action,
    }
}

/// `ChildStarted` of `id`, requested by the call `call`.
pub(crate) fn started(id: &str, call: &str, background: bool, from: Option<&str>) -> AgentEvent {
    AgentEvent::ChildStarted(Box::new(SubAgentInfo {
        id: AgentId::new(id),
        parent_tool_use_id: ToolUseId::new(call),
        name: "Worker".into(),
        tools: Vec::new(),
        background,
        resumed_from: from.map(AgentId::new),
    }))
}

/// `ChildStatus(id, status)`.
pub(crate) fn status(id: &str, status: SubAgentStatus) -> AgentEvent {
    AgentEvent::ChildStatus(AgentId::new(id), status)
}

/// One of `id`'s own events.
pub(crate) fn child(id: &str, event: AgentEvent) -> AgentEvent {
    AgentEvent::Child(AgentId::new(id), Box::new(event))
}

/// `ToolStarted` of the call `call` to `name`.
pub(crate) fn tool_started(call: &str, name: &str) -> AgentEvent {
    AgentEvent::ToolStarted(ToolStarted {
        tool_use_id: ToolUseId::new(call),
        name: name.into(),
        arguments: "{}".into(),
    })
}

/// `ToolResult` of the call `call` to `name`.
pub(crate) fn tool_result(call: &str, name: &str, output: serde_json::Value) -> AgentEvent {
    AgentEvent::ToolResult(ToolResult {
        tool_use_id: ToolUseId::new(call),
        name: name.into(),
        output: output.to_string(),
        is_error: false,
    })
}

/// A background child's `use_agent run` answer, as the delegation tool
/// gives it.
pub(crate) fn pending(call: &str, id: &str) -> AgentEvent {
    tool_result(
        call,
        "use_agent",
        serde_json::json!({
            "pending": true,
            "id": id,
            "note": "the sub-agent runs in the background; its result will arrive as a message, or ask with action result",
        }),
    )
}

/// A turn's completed `Result`.
pub(crate) fn result() -> AgentEvent {
    AgentEvent::Result(Box::new(AgentResult {
        text: "ok".into(),
        outcome: Outcome::Completed,
        model_calls: 1,
        tool_calls: 0,
        usage: Default::default(),
        children_usage: Default::default(),
        elapsed: Duration::ZERO,
    }))
}

/// `ApprovalRequested` of `id` for the call `call`.
pub(crate) fn approval_requested(id: &str, call: &str) -> AgentEvent {
    AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
        id: ApprovalId::new(id),
        tool_use_id: ToolUseId::new(call),
        tool_name: "http_post".into(),
        arguments: "{}".into(),
    }))
}

/// `ApprovalResolved` (approved) of `id` for the call `call`.
pub(crate) fn approval_resolved(id: &str, call: &str) -> AgentEvent {
    AgentEvent::ApprovalResolved {
        id: ApprovalId::new(id),
        tool_use_id: ToolUseId::new(call),
        outcome: ApprovalOutcome::Approved,
    }
}

/// A wake for `id`, as the thread words it.
pub(crate) fn wake(id: &str) -> AgentEvent {
    AgentEvent::Wake {
        child: AgentId::new(id),
        line: format!("[use_agent {id} finished] done"),
    }
}

/// Runs `check`; its panic message, or `None` when it passed.
pub(crate) fn panic_of<T>(check: impl FnOnce() -> T) -> Option<String> {
    let caught = catch_unwind(AssertUnwindSafe(check)).err()?;
    Some(
        caught
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| caught.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default(),
    )
}

/// Asserts that `check` panics with a message containing `expected`.
#[track_caller]
pub(crate) fn assert_rejects<T>(check: impl FnOnce() -> T, expected: &str) {
    match panic_of(check) {
        Some(message) => assert!(
            message.contains(expected),
            "the check panicked, but not with {expected:?}: {message}"
        ),
        None => panic!("the check accepted a log it must reject ({expected:?})"),
    }
}
