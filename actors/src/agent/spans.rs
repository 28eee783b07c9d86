//! `tracing` spans after the OpenTelemetry GenAI conventions: one
//! `invoke_agent` span per agent run (a turn), one `chat` span per model
//! call, one `execute_tool` span per tool call. Span names are static; the
//! dynamic part is in `otel.name` (what tracing-opentelemetry maps). A
//! child's `invoke_agent` sits under the `execute_tool` span of the call
//! that requested it (the hub carries that span to the child), also when
//! the child goes on in the background. No message content is recorded.
//! The full list is docs/observability.md.

use tracing::Span;
use tracing::field::Empty;

use subagents_messages::{AgentResult, Outcome, ToolCall};

use crate::agent::config::AgentConfig;

/// Where an agent's runs sit in a trace.
#[derive(Debug, Clone, Default)]
pub(crate) struct TraceParent {
    /// The span its runs are children of (a child's: the requesting
    /// call's `execute_tool` span); `None`: whatever is current.
    pub(crate) span: Option<Span>,
    /// The agent that requested it.
    pub(crate) parent_agent: Option<subagents_messages::AgentId>,
    /// `inline` or `background` (as requested).
    pub(crate) mode: &'static str,
}

/// The span of one run of `config`'s agent.
pub(crate) fn invoke_agent(config: &AgentConfig) -> Span {
    let parent = config.trace.span.clone().unwrap_or_else(Span::current);
    let span = tracing::info_span!(
        parent: &parent,
        "invoke_agent",
        otel.name = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.id = %config.id,
        gen_ai.agent.name = Empty,
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
        gen_ai.request.model = %config.model.name(),
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        subagents.gate_wait_ms = Empty,
        error.type = Empty,
    )
}

/// The span of one tool call; `error.type` is set when it failed.
pub(crate) fn execute_tool(call: &ToolCall) -> Span {
    tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        error.type = Empty,
    )
}
