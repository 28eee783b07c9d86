//! One turn of the agent loop, as a plain async function the actor runs in
//! a task: ask the model (through the gate), run the tools it asked for,
//! repeat until it answers without tool calls or a limit hits.
//!
//! The turn's state — progress, the conversation so far, the tool call in
//! flight and the approval it waits on — lives behind one lock shared with
//! the actor ([`Shared`]), and every event that opens or closes one of
//! them is emitted under that lock. So when the actor stops the turn (or a
//! limit or a panic cuts it), [`close`] sees exactly what is open and
//! answers it: every `ToolStarted` gets one `ToolResult`, every
//! `ApprovalRequested` one `ApprovalResolved`, all before the turn's
//! `Result`, and the conversation keeps a tool message for every call the
//! model asked for.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures_util::StreamExt;
use ractor::ActorRef;
use subagents_messages::{
    AgentEvent, AgentMsg, AgentResult, ApprovalDecision, ApprovalId, ApprovalOutcome,
    ApprovalRequest, ApprovalResolution, ChatMessage, LimitKind, Limits, ModelChunk, ModelRequest,
    Outcome, ToolCall, ToolResult, ToolStarted, ToolUseId, Usage,
};
use tokio::time::Instant;

use crate::agent::AgentConfig;
use crate::sink::EventSink;
use crate::tool::{ToolCallContext, ToolError, ToolOutcome, error_output, run_tool};

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

/// A tool call between its `ToolStarted` and its `ToolResult`.
#[derive(Debug)]
struct OpenCall {
    id: ToolUseId,
    name: String,
    /// What the model reads if the turn is cut before the call returns
    /// (the tool's own note), instead of the generic sentence.
    on_cut: Option<String>,
    /// What the call will return, fixed by the tool: a cut turn still
    /// answers the call with it.
    settled: Option<ToolOutcome>,
}

/// A running turn's state, shared by its task and its actor.
#[derive(Debug, Default)]
pub(crate) struct TurnState {
    pub(crate) progress: Progress,
    /// The conversation: earlier turns, this turn's input, and what it has
    /// done so far.
    pub(crate) history: Vec<ChatMessage>,
    /// Calls of the model's last answer not started yet.
    unstarted: VecDeque<ToolUseId>,
    open: Option<OpenCall>,
    /// The approval the open call waits on.
    approval: Option<(ApprovalId, ToolUseId)>,
}

impl TurnState {
    /// A turn about to start on this conversation.
    pub(crate) fn new(history: Vec<ChatMessage>) -> Self {
        Self {
            history,
            ..Self::default()
        }
    }
}

/// The lock around a running turn's state.
pub(crate) type Shared = Arc<Mutex<TurnState>>;

pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, TurnState> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A tool call's hold on its turn (see [`ToolCallContext::settle`]). Empty
/// outside a turn.
#[derive(Clone, Default)]
pub(crate) struct CallSlot {
    turn: Option<(Shared, ToolUseId)>,
}

impl std::fmt::Debug for CallSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSlot")
            .field("in_turn", &self.turn.is_some())
            .finish()
    }
}

impl CallSlot {
    fn with_open<R>(&self, f: impl FnOnce(&mut TurnState) -> R) -> Option<R> {
        let (shared, id) = self.turn.as_ref()?;
        let mut state = lock(shared);
        let open = state.open.as_ref().is_some_and(|o| o.id == *id);
        open.then(|| f(&mut state))
    }

    pub(crate) fn on_cut(&self, output: String) {
        self.with_open(|state| {
            if let Some(open) = state.open.as_mut() {
                open.on_cut = Some(output);
            }
        });
    }

    /// Fixes the call's output; `false` once the call is no longer open
    /// (its turn was cut and the call answered already).
    pub(crate) fn settle(&self, output: &Result<String, ToolError>) -> bool {
        if self.turn.is_none() {
            return true;
        }
        self.with_open(|state| {
            if let Some(open) = state.open.as_mut() {
                open.settled = Some(match output {
                    Ok(text) => ToolOutcome {
                        output: text.clone(),
                        is_error: false,
                    },
                    Err(e) => ToolOutcome {
                        output: error_output(&open.name, e),
                        is_error: true,
                    },
                });
            }
        })
        .is_some()
    }
}

/// Everything a turn task needs.
pub(crate) struct TurnContext {
    pub(crate) config: Arc<AgentConfig>,
    /// The turn's own (gated) sink.
    pub(crate) sink: EventSink,
    pub(crate) actor: ActorRef<AgentMsg>,
    pub(crate) approvals: Arc<AtomicU64>,
    pub(crate) shared: Shared,
}

impl TurnContext {
    fn with<R>(&self, f: impl FnOnce(&mut TurnState) -> R) -> R {
        f(&mut lock(&self.shared))
    }
}

/// Runs a turn to its end under the wall clock; returns its result (not
/// yet emitted: [`close`] emits it). The conversation is in the shared
/// state.
pub(crate) async fn run_turn(ctx: &TurnContext) -> AgentResult {
    let started = Instant::now();
    let limits = ctx.config.limits;
    let ended = tokio::time::timeout(limits.wall_clock, turn_loop(ctx)).await;
    let progress = ctx.with(|t| t.progress.clone());
    let (text, outcome) = match ended {
        Ok(done) => done,
        Err(_) => (
            partial_result(LimitKind::WallClock, &limits, &progress),
            Outcome::LimitReached(LimitKind::WallClock),
        ),
    };
    result(text, outcome, &progress, started)
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

/// What a call cut by a turn ending this way reads.
pub(crate) fn cut_sentence(outcome: &Outcome, limits: &Limits) -> String {
    match outcome {
        Outcome::Stopped => "the turn was stopped before this call finished".to_owned(),
        Outcome::LimitReached(LimitKind::WallClock) => format!(
            "the wall-clock limit ({} s) ended the turn before this call finished",
            limits.wall_clock.as_secs_f64()
        ),
        Outcome::LimitReached(limit) => {
            format!("the {limit} ended the turn before this call finished")
        }
        Outcome::Failed(_) => "the turn failed before this call finished".to_owned(),
        Outcome::Completed => "the turn ended before this call finished".to_owned(),
    }
}

/// Ends a turn once: answers what it left open (the approval it waited on,
/// the call in flight, the calls not started), then emits `result` on
/// `out` — all atomically with closing `turn_sink`, so nothing of the turn
/// follows. Returns the conversation after the turn, or `None` if the turn
/// was already closed (by its task or by a stop).
pub(crate) fn close(
    shared: &Shared,
    turn_sink: &EventSink,
    out: &EventSink,
    result: &AgentResult,
    cut: &str,
) -> Option<Vec<ChatMessage>> {
    let mut state = lock(shared);
    let mut history = None;
    turn_sink.close_with(|| {
        let open = state.open.take();
        if let Some((id, tool_use_id)) = state.approval.take() {
            out.emit(AgentEvent::ApprovalResolved(ApprovalResolution {
                id,
                tool_use_id,
                outcome: ApprovalOutcome::Cancelled(cut.to_owned()),
            }));
        }
        if let Some(call) = open {
            let outcome = call.settled.unwrap_or_else(|| match call.on_cut {
                Some(output) => ToolOutcome {
                    output,
                    is_error: false,
                },
                None => ToolOutcome {
                    output: cut.to_owned(),
                    is_error: true,
                },
            });
            out.emit(AgentEvent::ToolResult(ToolResult {
                tool_use_id: call.id.clone(),
                name: call.name,
                output: outcome.output.clone(),
                is_error: outcome.is_error,
            }));
            state
                .history
                .push(ChatMessage::tool(call.id, outcome.output));
        }
        let unstarted: Vec<ToolUseId> = state.unstarted.drain(..).collect();
        for id in unstarted {
            state
                .history
                .push(ChatMessage::tool(id, format!("not run: {cut}")));
        }
        if !result.outcome.is_completed() {
            state
                .history
                .push(ChatMessage::assistant(result.text.clone(), Vec::new()));
        }
        out.emit(AgentEvent::Result(result.clone()));
        history = Some(std::mem::take(&mut state.history));
    });
    history
}

/// Answers the approval `id` if the turn waits on it: emits
/// `ApprovalResolved` on the turn's stream. `false` if the turn does not
/// wait on it (it was cut meanwhile).
pub(crate) fn resolve_approval(
    shared: &Shared,
    turn_sink: &EventSink,
    id: &ApprovalId,
    decision: ApprovalDecision,
) -> bool {
    let mut state = lock(shared);
    let Some(tool_use_id) = state
        .approval
        .as_ref()
        .filter(|(waiting, _)| waiting == id)
        .map(|(_, call)| call.clone())
    else {
        return false;
    };
    let outcome = match decision {
        ApprovalDecision::Approve => ApprovalOutcome::Approved,
        ApprovalDecision::Deny => ApprovalOutcome::Denied,
    };
    let emitted = turn_sink.emit(AgentEvent::ApprovalResolved(ApprovalResolution {
        id: id.clone(),
        tool_use_id,
        outcome,
    }));
    if emitted {
        state.approval = None;
    }
    emitted
}

async fn turn_loop(ctx: &TurnContext) -> (String, Outcome) {
    let config = &ctx.config;
    let limits = config.limits;
    loop {
        let (progress, history) = ctx.with(|t| (t.progress.clone(), t.history.clone()));
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
        ctx.with(|t| {
            t.progress.turns += 1;
            if !text.trim().is_empty() {
                t.progress.last_text = text.clone();
            }
            t.history
                .push(ChatMessage::assistant(text.clone(), calls.clone()));
            t.unstarted = calls.iter().map(|c| c.id.clone()).collect();
        });
        if calls.is_empty() {
            return (text, Outcome::Completed);
        }
        for call in calls {
            run_call(ctx, &call).await;
        }
    }
}

/// One model call, holding the gate only for its duration.
async fn ask_model(
    ctx: &TurnContext,
    history: Vec<ChatMessage>,
) -> Result<(String, Vec<ToolCall>), String> {
    let config = &ctx.config;
    let mut messages = Vec::with_capacity(history.len() + 1);
    messages.push(ChatMessage::system(config.system_prompt.clone()));
    messages.extend(history);
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
            Ok(ModelChunk::Usage(usage)) => ctx.with(|t| t.progress.usage.add(usage)),
            Err(e) => {
                return Err(format!("the model `{}` failed: {e}", config.model.name()));
            }
        }
    }
    drop(stream);
    drop(permit);
    Ok((text, calls))
}

/// Runs one tool call, emitting `ToolStarted` and `ToolResult` around it
/// (each under the turn's lock, so a cut turn answers the call exactly
/// once).
async fn run_call(ctx: &TurnContext, call: &ToolCall) {
    let config = &ctx.config;
    ctx.with(|t| {
        t.unstarted.pop_front();
        t.open = Some(OpenCall {
            id: call.id.clone(),
            name: call.name.clone(),
            on_cut: None,
            settled: None,
        });
        ctx.sink.emit(AgentEvent::ToolStarted(ToolStarted {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
    });
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
                    slot: CallSlot {
                        turn: Some((ctx.shared.clone(), call.id.clone())),
                    },
                };
                run_tool(tool, context).await
            }
        }
    };
    ctx.with(|t| {
        let emitted = ctx.sink.emit(AgentEvent::ToolResult(ToolResult {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            output: outcome.output.clone(),
            is_error: outcome.is_error,
        }));
        if emitted {
            t.open = None;
            t.history
                .push(ChatMessage::tool(call.id.clone(), outcome.output));
            t.progress.tool_calls += 1;
            t.progress.tools_used.push(call.name.clone());
        }
    });
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
    ctx.with(|t| {
        let asked = ctx
            .sink
            .emit(AgentEvent::ApprovalRequested(ApprovalRequest {
                id: id.clone(),
                tool_use_id: call.id.clone(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
            }));
        if asked {
            t.approval = Some((id, call.id.clone()));
        }
    });
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

    fn open_turn() -> (
        Shared,
        CallSlot,
        EventSink,
        EventSink,
        crate::sink::EventStream,
    ) {
        let (out, stream) = EventSink::channel();
        let turn_sink = out.gated();
        let shared: Shared = Arc::new(Mutex::new(TurnState::new(vec![ChatMessage::user("go")])));
        let id = ToolUseId::new("call_1");
        {
            let mut state = lock(&shared);
            state.open = Some(OpenCall {
                id: id.clone(),
                name: "use_agent".into(),
                on_cut: None,
                settled: None,
            });
        }
        let slot = CallSlot {
            turn: Some((shared.clone(), id)),
        };
        (shared, slot, turn_sink, out, stream)
    }

    fn stopped() -> AgentResult {
        result(
            "stopped".into(),
            Outcome::Stopped,
            &Progress::default(),
            Instant::now(),
        )
    }

    /// A call that settles before the cut is answered with its output; one
    /// that tries after the cut is refused (its output never reaches the
    /// model, so it must not count as delivered).
    #[test]
    fn settle_wins_only_before_the_turn_is_cut() {
        let (shared, slot, turn_sink, out, mut stream) = open_turn();
        slot.on_cut("note".into());
        assert!(slot.settle(&Ok("the answer".into())));
        close(&shared, &turn_sink, &out, &stopped(), "cut");
        let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
            panic!("the call is answered first");
        };
        assert_eq!(answered.output, "the answer");
        assert!(!answered.is_error);

        let (shared, slot, turn_sink, out, mut stream) = open_turn();
        slot.on_cut("note".into());
        close(&shared, &turn_sink, &out, &stopped(), "cut");
        assert!(!slot.settle(&Ok("too late".into())), "the turn was cut");
        let Some(AgentEvent::ToolResult(answered)) = stream.try_recv() else {
            panic!("the call is answered first");
        };
        assert_eq!(answered.output, "note");
    }

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
