//! One turn of the agent loop, as a plain async function the actor runs in
//! a task: ask the model (through the gate), run the tools it asked for,
//! repeat until it answers without tool calls or a limit hits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt;
use ractor::ActorRef;
use subagents_messages::{
    AgentEvent, AgentMsg, AgentResult, ApprovalDecision, ApprovalId, ApprovalRequest, ChatMessage,
    LimitKind, Limits, ModelChunk, ModelRequest, Outcome, ToolCall, ToolResult, ToolStarted, Usage,
};
use tokio::time::Instant;

use crate::agent::AgentConfig;
use crate::sink::EventSink;
use crate::tool::{ToolCallContext, ToolOutcome, run_tool};

/// What a turn has done so far; read when a limit or a stop cuts it short.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Model calls finished.
    pub turns: u32,
    /// Tool calls finished.
    pub tool_calls: u32,
    /// Tokens used.
    pub usage: Usage,
    /// Tool names called, in order.
    pub tools_used: Vec<String>,
    /// The last non-empty text the model wrote.
    pub last_text: String,
}

/// Shared progress of a running turn.
pub(crate) type SharedProgress = Arc<Mutex<Progress>>;

pub(crate) fn read(progress: &SharedProgress) -> Progress {
    progress
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

fn update(progress: &SharedProgress, f: impl FnOnce(&mut Progress)) {
    f(&mut progress.lock().unwrap_or_else(PoisonError::into_inner));
}

/// Everything a turn task needs.
pub(crate) struct TurnContext {
    pub(crate) config: Arc<AgentConfig>,
    /// The turn's own (gated) sink.
    pub(crate) sink: EventSink,
    pub(crate) actor: ActorRef<AgentMsg>,
    pub(crate) approvals: Arc<AtomicU64>,
    pub(crate) progress: SharedProgress,
}

/// Runs a turn to its end under the wall clock. Returns the result (not yet
/// emitted) and the conversation after it.
pub(crate) async fn run_turn(
    ctx: &TurnContext,
    mut history: Vec<ChatMessage>,
    input: String,
) -> (AgentResult, Vec<ChatMessage>) {
    let started = Instant::now();
    history.push(ChatMessage::user(input));
    let limits = ctx.config.limits;
    let ended = tokio::time::timeout(limits.wall_clock, turn_loop(ctx, &mut history)).await;
    let (text, outcome) = match ended {
        Ok(done) => done,
        Err(_) => (
            partial_result(LimitKind::WallClock, &limits, &read(&ctx.progress)),
            Outcome::LimitReached(LimitKind::WallClock),
        ),
    };
    if !outcome.is_completed() {
        history.push(ChatMessage::assistant(text.clone(), Vec::new()));
    }
    (
        result(text, outcome, &read(&ctx.progress), started),
        history,
    )
}

pub(crate) fn result(
    text: String,
    outcome: Outcome,
    progress: &Progress,
    started: Instant,
) -> AgentResult {
    AgentResult {
        text,
        outcome,
        turns: progress.turns,
        tool_calls: progress.tool_calls,
        usage: progress.usage,
        elapsed: started.elapsed(),
    }
}

async fn turn_loop(ctx: &TurnContext, history: &mut Vec<ChatMessage>) -> (String, Outcome) {
    let config = &ctx.config;
    let limits = config.limits;
    loop {
        let progress = read(&ctx.progress);
        if progress.turns >= limits.max_turns {
            let text = partial_result(LimitKind::Turns, &limits, &progress);
            return (text, Outcome::LimitReached(LimitKind::Turns));
        }
        if progress.usage.total() >= limits.token_budget {
            let text = partial_result(LimitKind::Tokens, &limits, &progress);
            return (text, Outcome::LimitReached(LimitKind::Tokens));
        }
        let (text, calls) = match ask_model(ctx, history).await {
            Ok(answer) => answer,
            Err(error) => return (error.clone(), Outcome::Failed(error)),
        };
        update(&ctx.progress, |p| {
            p.turns += 1;
            if !text.trim().is_empty() {
                p.last_text = text.clone();
            }
        });
        history.push(ChatMessage::assistant(text.clone(), calls.clone()));
        if calls.is_empty() {
            return (text, Outcome::Completed);
        }
        for call in calls {
            let outcome = run_call(ctx, &call).await;
            update(&ctx.progress, |p| {
                p.tool_calls += 1;
                p.tools_used.push(call.name.clone());
            });
            history.push(ChatMessage::tool(call.id, outcome.output));
        }
    }
}

/// One model call, holding the gate only for its duration.
async fn ask_model(
    ctx: &TurnContext,
    history: &[ChatMessage],
) -> Result<(String, Vec<ToolCall>), String> {
    let config = &ctx.config;
    let mut messages = Vec::with_capacity(history.len() + 1);
    messages.push(ChatMessage::system(config.system_prompt.clone()));
    messages.extend_from_slice(history);
    let request = ModelRequest {
        messages,
        tools: config.tools.specs(),
    };
    let permit = config
        .gate
        .acquire(config.id.clone())
        .await
        .map_err(|e| format!("the model could not be called: {e}"))?;
    let mut stream = config.model.stream(request);
    let mut text = String::new();
    let mut calls = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(ModelChunk::Text(delta)) => {
                text.push_str(&delta);
                ctx.sink.emit(AgentEvent::Text(delta));
            }
            Ok(ModelChunk::ToolCall(call)) => calls.push(call),
            Ok(ModelChunk::Usage(usage)) => update(&ctx.progress, |p| p.usage.add(usage)),
            Err(e) => {
                return Err(format!("the model `{}` failed: {e}", config.model.name()));
            }
        }
    }
    drop(stream);
    drop(permit);
    Ok((text, calls))
}

/// Runs one tool call, emitting `ToolStarted` and `ToolResult` around it.
async fn run_call(ctx: &TurnContext, call: &ToolCall) -> ToolOutcome {
    let config = &ctx.config;
    ctx.sink.emit(AgentEvent::ToolStarted(ToolStarted {
        tool_use_id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
    }));
    let outcome = match config.tools.get(&call.name) {
        None => ToolOutcome {
            output: config.tools.unknown(&call.name).to_string(),
            is_error: true,
        },
        Some(tool) => {
            if tool.requires_approval(&call.arguments)
                && approval(ctx, call).await == ApprovalDecision::Deny
            {
                ToolOutcome {
                    output: format!(
                        "the user denied this call to `{}`; do not retry it, find another way or explain",
                        call.name
                    ),
                    is_error: true,
                }
            } else {
                let context = ToolCallContext {
                    tool_use_id: call.id.clone(),
                    arguments: call.arguments.clone(),
                    agent_id: config.id.clone(),
                    depth: config.depth,
                    events: ctx.sink.clone(),
                    available_tools: config.tool_names.clone(),
                };
                run_tool(tool, context).await
            }
        }
    };
    ctx.sink.emit(AgentEvent::ToolResult(ToolResult {
        tool_use_id: call.id.clone(),
        name: call.name.clone(),
        output: outcome.output.clone(),
        is_error: outcome.is_error,
    }));
    outcome
}

/// Asks the host (through the actor) to approve a call; a lost answer is
/// a denial, so no turn waits forever on a stopped agent.
async fn approval(ctx: &TurnContext, call: &ToolCall) -> ApprovalDecision {
    let config = &ctx.config;
    let n = ctx.approvals.fetch_add(1, Ordering::Relaxed) + 1;
    let id = ApprovalId::new(format!("{}-approval-{n}", config.id));
    if let Some(decision) = config
        .approvals
        .as_ref()
        .and_then(|p| p.decide(&config.id, &call.name, &call.arguments))
    {
        return decision;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    if ctx
        .actor
        .cast(AgentMsg::ApprovalPending {
            id: id.clone(),
            responder: tx.into(),
        })
        .is_err()
    {
        return ApprovalDecision::Deny;
    }
    ctx.sink
        .emit(AgentEvent::ApprovalRequested(ApprovalRequest {
            id,
            tool_use_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
    rx.await.unwrap_or(ApprovalDecision::Deny)
}

/// The text of a partial result: what was done, and which limit hit.
pub fn partial_result(limit: LimitKind, limits: &Limits, progress: &Progress) -> String {
    let detail = match limit {
        LimitKind::Turns => format!("{} model calls", limits.max_turns),
        LimitKind::Tokens => format!(
            "{} tokens; {} used",
            limits.token_budget,
            progress.usage.total()
        ),
        LimitKind::WallClock => format!("{} s", limits.wall_clock.as_secs_f64()),
    };
    let tools = if progress.tools_used.is_empty() {
        String::new()
    } else {
        format!(" ({})", progress.tools_used.join(", "))
    };
    let last = if progress.last_text.trim().is_empty() {
        "no answer was written yet".to_owned()
    } else {
        format!("the last thing written was: {}", progress.last_text.trim())
    };
    format!(
        "Partial result: stopped by the {limit} ({detail}) after {} model call(s) and {} tool call(s){tools}; {last}",
        progress.turns, progress.tool_calls
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn partial_result_names_the_limit_and_the_work_done() {
        let progress = Progress {
            turns: 3,
            tool_calls: 2,
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            tools_used: vec!["calculator".into(), "fetch_title".into()],
            last_text: "Half way there.".into(),
        };
        let limits = Limits {
            max_turns: 3,
            token_budget: 100,
            wall_clock: Duration::from_secs(30),
        };
        let text = partial_result(LimitKind::Turns, &limits, &progress);
        assert_eq!(
            text,
            "Partial result: stopped by the turn limit (3 model calls) after 3 model call(s) and 2 tool call(s) (calculator, fetch_title); the last thing written was: Half way there."
        );
        let text = partial_result(LimitKind::WallClock, &limits, &Progress::default());
        assert!(text.contains("wall-clock limit (30 s)"), "{text}");
        assert!(text.contains("no answer was written yet"), "{text}");
        let text = partial_result(LimitKind::Tokens, &limits, &progress);
        assert!(
            text.contains("token budget (100 tokens; 15 used)"),
            "{text}"
        );
    }
}
