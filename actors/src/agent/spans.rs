//! `tracing` spans after the OpenTelemetry GenAI conventions: one
//! `invoke_agent` span per agent run (a turn), one `chat` span per model
//! call, one `execute_tool` span per tool call (also for a call answered
//! without running). Span names are static; the dynamic part is in
//! `otel.name` (what tracing-opentelemetry maps). A child's `invoke_agent`
//! sits under the `execute_tool` span of the call that requested it (the
//! hub carries that span to the child), also when the child goes on in the
//! background. Message content is recorded only when the host opts in
//! ([`TraceSettings::content`]). The full list is docs/observability.md.

use std::sync::Arc;

use tracing::Span;
use tracing::field::Empty;

use subagents_messages::{AgentResult, ChatMessage, Outcome, Role, ToolCall};

use crate::agent::config::AgentConfig;

/// What a host set for the spans of an agent (and its children).
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceSettings {
    /// `gen_ai.conversation.id` on every span (the thread's id).
    pub(crate) conversation: Option<Arc<str>>,
    /// Record message content (prompts, answers, tool arguments and
    /// results) on the spans; off by default.
    pub(crate) content: bool,
}

/// Where an agent's runs sit in a trace.
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceParent {
    /// The span its runs are children of (a child's: the requesting
    /// call's `execute_tool` span); `None`: whatever is current.
    pub(crate) span: Option<Span>,
    /// The agent that requested it.
    pub(crate) parent_agent: Option<subagents_messages::AgentId>,
    /// `top`, `inline` or `background` (as requested), or `node` (a run
    /// on the node that runs it for a requester on another).
    pub(crate) mode: &'static str,
    /// What the host set.
    pub(crate) settings: TraceSettings,
}

/// The span of one run of `config`'s agent: under the call that requested
/// it (a child), else under `sent_from` (the host's span when it sent the
/// turn), else a trace of its own — never under the actor's own span,
/// which lives as long as the agent.
pub(crate) fn invoke_agent(config: &AgentConfig, sent_from: Option<&Span>) -> Span {
    let parent = config.trace.span.as_ref().or(sent_from).and_then(Span::id);
    let span = tracing::info_span!(
        parent: parent,
        "invoke_agent",
        otel.name = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = %config.id,
        gen_ai.agent.name = Empty,
        gen_ai.conversation.id = conversation(config),
        gen_ai.request.model = %config.model.name(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        subagents.parent_agent.id = config.trace.parent_agent.as_ref().map(|a| a.as_str()),
        subagents.depth = config.depth,
        subagents.mode = config.trace.mode,
        subagents.outcome = Empty,
        subagents.model_calls = Empty,
        subagents.tool_calls = Empty,
    );
    // Named only when someone listens: no string work per turn otherwise.
    if !span.is_disabled() {
        let name = config
            .system_prompt
            .lines()
            .find(|l| !l.trim().is_empty())
            .map(|l| subagents_messages::text::one_line(l, 80))
            .unwrap_or_else(|| config.id.to_string());
        span.record("otel.name", format!("invoke_agent {name}"));
        span.record("gen_ai.agent.name", name);
    }
    span
}

/// Records how a run that ran elsewhere (on another node) ended on its
/// span, entering it for the moment: the run never entered it here, and
/// tracing-opentelemetry stamps a span's end at its last exit — one never
/// exited ended when it closed (for a background child, when the parent's
/// wake let go of it, minutes later).
pub(crate) fn record_remote_end(span: &Span, result: &AgentResult) {
    span.in_scope(|| record_end(span, result));
}

/// Records how a run ended on its span.
pub(crate) fn record_end(span: &Span, result: &AgentResult) {
    let outcome = match &result.outcome {
        Outcome::Completed => "completed",
        Outcome::LimitReached(_) => "limit_reached",
        Outcome::Failed(_) => "failed",
        Outcome::Stopped => "stopped",
    };
    span.record("subagents.outcome", outcome);
    span.record("gen_ai.usage.input_tokens", result.usage.prompt_tokens);
    span.record("gen_ai.usage.output_tokens", result.usage.completion_tokens);
    span.record("subagents.model_calls", result.model_calls);
    span.record("subagents.tool_calls", result.tool_calls);
}

/// The span of one model call (a client call); the time spent waiting
/// for the model gate is `subagents.gate_wait_ms`.
pub(crate) fn chat(config: &AgentConfig) -> Span {
    tracing::info_span!(
        "chat",
        otel.name = %format!("chat {}", config.model.name()),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.conversation.id = conversation(config),
        gen_ai.request.model = %config.model.name(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        subagents.gate_wait_ms = Empty,
        error.type = Empty,
    )
}

/// Records a model call's request on its span, if content is recorded.
pub(crate) fn record_input(config: &AgentConfig, span: &Span, messages: &[ChatMessage]) {
    if !config.trace.settings.content || span.is_disabled() {
        return;
    }
    let (system, rest): (Vec<&ChatMessage>, Vec<&ChatMessage>) =
        messages.iter().partition(|m| m.role == Role::System);
    let system: Vec<serde_json::Value> = system
        .iter()
        .map(|m| serde_json::json!({"type": "text", "content": m.content}))
        .collect();
    span.record(
        "gen_ai.system_instructions",
        serde_json::Value::Array(system).to_string(),
    );
    let input: Vec<serde_json::Value> = rest.into_iter().map(message_json).collect();
    span.record(
        "gen_ai.input.messages",
        serde_json::Value::Array(input).to_string(),
    );
}

/// Records a model call's answer on its span, if content is recorded.
pub(crate) fn record_output(config: &AgentConfig, span: &Span, text: &str, calls: &[ToolCall]) {
    if !config.trace.settings.content || span.is_disabled() {
        return;
    }
    let answer = ChatMessage::assistant(text, calls.to_vec());
    span.record(
        "gen_ai.output.messages",
        serde_json::json!([message_json(&answer)]).to_string(),
    );
}

/// One message in the conventions' shape: a role and its parts.
fn message_json(message: &ChatMessage) -> serde_json::Value {
    let role = match message.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut parts = Vec::new();
    match (&message.role, &message.tool_call_id) {
        (Role::Tool, Some(id)) => parts.push(serde_json::json!({
            "type": "tool_call_response",
            "id": id.as_str(),
            "response": message.content,
        })),
        _ if !message.content.is_empty() => {
            parts.push(serde_json::json!({"type": "text", "content": message.content}));
        }
        _ => {}
    }
    for call in &message.tool_calls {
        parts.push(serde_json::json!({
            "type": "tool_call",
            "id": call.id.as_str(),
            "name": call.name,
            "arguments": call.arguments,
        }));
    }
    serde_json::json!({"role": role, "parts": parts})
}

/// The span of one tool call; `error.type` is set when it failed
/// (`tool_error`), was answered without running (`not_run`) or was cut by
/// the turn's end (`cancelled`).
///
/// A name no tool has (the model made it up) is quoted cut short on one
/// line, as the model reads it, and the call's id cut too: a 64 KiB name
/// was a 64 KiB span name and attribute, line breaks included.
pub(crate) fn execute_tool(config: &AgentConfig, call: &ToolCall) -> Span {
    let name = match config.tools.get(&call.name) {
        Some(_) => std::borrow::Cow::Borrowed(call.name.as_str()),
        None => std::borrow::Cow::Owned(crate::delegation::shown(&call.name)),
    };
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {name}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.conversation.id = conversation(config),
        gen_ai.tool.name = %name,
        gen_ai.tool.call.id = %crate::delegation::shown(call.id.as_str()),
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if config.trace.settings.content && !span.is_disabled() {
        span.record("gen_ai.tool.call.arguments", call.arguments.as_str());
    }
    span
}

/// Records how a tool call ended on its span: its result if content is
/// recorded, `error_type` if it failed.
pub(crate) fn record_tool_end(
    config: &AgentConfig,
    span: &Span,
    output: &str,
    error_type: Option<&'static str>,
) {
    if let Some(error_type) = error_type {
        span.record("error.type", error_type);
    }
    if config.trace.settings.content && !span.is_disabled() {
        span.record("gen_ai.tool.call.result", output);
    }
}

/// The thread's id, if the host named one.
fn conversation(config: &AgentConfig) -> Option<&str> {
    config.trace.settings.conversation.as_deref()
}
