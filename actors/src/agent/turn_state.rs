//! A running turn's state — progress, the conversation so far, the tool
//! call in flight and the approval it waits on — behind one lock shared
//! by the turn's task and its actor. Every event that opens or closes one
//! of them is emitted under that lock, so whoever ends the turn ([`close`]:
//! its task, a stop, a limit, a panic, a kill) sees exactly what is open
//! and answers it once: every `ToolStarted` gets one `ToolResult`, every
//! `ApprovalRequested` one `ApprovalResolved`, all before the turn's
//! `Result`, and the conversation keeps a tool message for every call the
//! model asked for.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use subagents_messages::{
    AgentEvent, AgentResult, ApprovalDecision, ApprovalId, ApprovalOutcome, ChatMessage, LimitKind,
    Limits, Outcome, Role, ToolResult, ToolUseId, Usage,
};
use tokio::time::Instant;

use crate::agent::probe::Activity;
use crate::sink::EventSink;
use crate::tool::ToolOutcome;

pub(crate) use crate::agent::progress::Progress;

/// A tool call between its `ToolStarted` and its `ToolResult`.
#[derive(Debug)]
pub(crate) struct OpenCall {
    /// Which call of the turn (1, 2, …): what a tool's context holds on
    /// to. Not the tool-use id, which a model may repeat within a turn.
    pub(crate) seq: u64,
    pub(crate) id: ToolUseId,
    pub(crate) name: String,
    /// What the model reads if the turn is cut before the call returns
    /// (the tool's own note), instead of the generic sentence.
    pub(crate) on_cut: Option<String>,
    /// The `on_cut` of a delegation call once its child is announced.
    pub(crate) on_child: Option<slot::ChildNote>,
    /// The `on_cut` of a `send` call once a child took its message.
    pub(crate) on_taken: Option<slot::TakenNote>,
    /// What a cut runs as it answers the call (a waiting delegation call
    /// hands its child on), before the turn's result goes out.
    pub(crate) hand_on: Option<slot::HandOn>,
    /// What the call will return, fixed by the tool: a cut turn still
    /// answers the call with it.
    pub(crate) settled: Option<ToolOutcome>,
    /// Its `execute_tool` span: a cut call's ending is recorded on it.
    pub(crate) span: tracing::Span,
    /// The host records content: its result goes on the span too.
    pub(crate) content: bool,
}

impl OpenCall {
    /// Its message was taken (`how`): its cut note, set to say so when it
    /// was sent, is what it reads if cut from now on.
    pub(crate) fn note_taken(&mut self, how: &crate::hub::Steered) {
        if let Some(note) = self.on_taken.take() {
            self.on_cut = Some((note.0)(how));
        }
    }
}

/// A running turn's state, shared by its task and its actor.
#[derive(Debug, Default)]
pub(crate) struct TurnState {
    pub(crate) progress: Progress,
    /// The conversation: earlier turns, this turn's input, and what it has
    /// done so far.
    pub(crate) history: Vec<ChatMessage>,
    /// Calls of the model's last answer not started yet.
    pub(crate) unstarted: VecDeque<ToolUseId>,
    /// The call running now. Boxed: a turn waiting on the model holds
    /// none, and every child's turn state is kept for its whole run.
    pub(crate) open: Option<Box<OpenCall>>,
    /// The approval the open call waits on.
    pub(crate) approval: Option<(ApprovalId, ToolUseId)>,
    /// What it does now, and since when.
    pub(crate) activity: Activity,
    pub(crate) activity_since: Option<Instant>,
    /// Messages sent to it while it runs (`use_agent send`), read at its
    /// next model call, in order.
    pub(crate) steering: VecDeque<String>,
    /// It takes no more messages: its last answer was final, or it ended.
    pub(crate) closing: bool,
    /// Its conversation was put in place of the one it grew (a remote
    /// run's end: its node's): no longer read by index.
    pub(crate) replaced: bool,
    /// Its `invoke_agent` span (a wake turn that follows this run links
    /// to it).
    pub(crate) span: Option<tracing::Span>,
    /// The conversation once the turn ended, shared with the agent (one
    /// copy for both; the hub takes it through the probe).
    pub(crate) ended: Option<Arc<Vec<ChatMessage>>>,
    /// Calls opened so far (the last one's `OpenCall::seq`).
    pub(crate) calls_opened: u64,
    /// The text of the model call in flight, as it streams.
    pub(crate) streaming: String,
    /// Characters of its output not shown ([`ModelChunk::Hidden`]:
    /// reasoning, arguments being written).
    ///
    /// [`ModelChunk::Hidden`]: subagents_messages::ModelChunk::Hidden
    pub(crate) hidden_chars: u32,
    /// Characters of its whole tool calls (names, arguments). Each a `u32`
    /// (saturating): the two in the eight bytes one took.
    pub(crate) call_chars: u32,
    /// The model call in flight has counted its tokens (the server's
    /// usage, or the budget's estimate) — of its output, the first
    /// [`TurnState::counted_chars`] characters: a cut adds an estimate of
    /// what it wrote after them only.
    pub(crate) call_counted: bool,
    /// Characters of the call's output when it last counted (saturating):
    /// what it wrote after a count (a usage that came first, the prompt's)
    /// counted nowhere — on a cut, a failure or its end.
    pub(crate) counted_chars: u32,
    /// Characters every request of the turn sends besides the
    /// conversation (the system prompt, the tools' specs): in an estimate.
    pub(crate) prompt_fixed: u64,
    /// A child's turn: what ending it from outside its actor needs (its
    /// hub ends it when the hub dies; see [`crate::agent::running`]).
    /// Dropped when the turn closes.
    pub(crate) ends: Option<crate::agent::running::TurnEnds>,
    /// The turn's result and conversation, kept here by its task before
    /// the `TurnFinished` notice: taken by whichever reads it first — the
    /// notice, the agent's `post_stop`, or its state's drop (a kill).
    pub(crate) kept_end: Option<Box<(AgentResult, Arc<Vec<ChatMessage>>)>>,
}

impl TurnState {
    /// A turn about to start on this conversation.
    pub(crate) fn new(history: Vec<ChatMessage>) -> Self {
        Self {
            history,
            activity_since: Some(Instant::now()),
            ..Self::default()
        }
    }

    /// Moves the messages sent to it into the conversation, in order.
    pub(crate) fn read_steering(&mut self) {
        while let Some(text) = self.steering.pop_front() {
            self.history.push(ChatMessage::user(steering_text(&text)));
        }
    }

    /// The same as a model call is made (the gate let it in), each message
    /// shown on the turn's stream as it is read ([`AgentEvent::Steered`]),
    /// under this lock as the deltas are: the answer after it is a row of
    /// its own. A limit that ends the turn before that call ends it before
    /// this read (the loop checks first): no call reads them, and the
    /// close puts them after its end — shown read, they said a call that
    /// never came had read them.
    pub(crate) fn read_steering_shown(&mut self, sink: &crate::sink::EventSink) {
        while let Some(text) = self.steering.pop_front() {
            self.history.push(ChatMessage::user(steering_text(&text)));
            sink.emit(AgentEvent::Steered(text));
        }
    }

    /// What the turn has done, for a result that cuts it now: a model
    /// call in flight counts (it was made, as a failed one counts), and
    /// what it streamed so far is the last thing written (the host saw
    /// it; the result said "no answer was written yet").
    ///
    /// Its tokens count as well, as an estimate when the server reported
    /// none yet: once it streamed, the server read the prompt and wrote
    /// that much ([`TurnState::call_estimate`]).
    pub(crate) fn progress_at_cut(&self) -> Progress {
        let mut progress = self.progress.clone();
        if self.activity == Activity::InModelCall {
            progress.model_calls = progress.model_calls.saturating_add(1);
            if !self.streaming.trim().is_empty() {
                progress.last_text = self.streaming.clone();
            }
            if let Some(estimate) = self.call_estimate(self.output_chars()) {
                progress.add_estimate(estimate);
            }
        }
        // A call its tool settled is answered with that output by the cut
        // (not "stopped"): it counts as the calls answered before it do.
        if let Some(open) = self.open.as_ref().filter(|o| o.settled.is_some()) {
            progress.tool_calls = progress.tool_calls.saturating_add(1);
            progress.tools_used.push(open.name.clone());
        }
        progress
    }

    /// It does `activity` from now on.
    pub(crate) fn doing(&mut self, activity: Activity) {
        self.activity = activity;
        self.activity_since = Some(Instant::now());
    }
}

/// Tokens of a call's output by the estimate, `streamed` characters at
/// about four a token, beyond what the server counted of it so far
/// (`usage`); `None` when it counted as much or more.
pub(crate) fn estimated(usage: Usage, streamed: u64) -> Option<u64> {
    // Past what the server counted of its output so far: a usage that came
    // early (the prompt's, before any text) switched the check off, and
    // the rest of the answer streamed unheld to its natural end.
    let more = streamed.div_ceil(4).saturating_sub(usage.completion_tokens);
    (more > 0).then_some(more)
}

/// How a message sent to a running agent reads in its conversation: from
/// the agent that started it, not from a user.
pub(crate) fn steering_text(text: &str) -> String {
    format!("[message from the agent that started you]\n{text}")
}

mod steering;
pub(crate) use steering::{AnswerEnd, answer_end, complete_unless_steered, steer};

mod estimate;
mod slot;
pub(crate) use slot::{CallSlot, ChildNote, HandOn, TakenNote};

/// The lock around a running turn's state.
pub(crate) type Shared = Arc<Mutex<TurnState>>;

pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, TurnState> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
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
        model_calls: progress.model_calls,
        tool_calls: progress.tool_calls,
        usage: progress.usage,
        children_usage: progress.children_usage,
        elapsed: started.elapsed(),
    }
}

/// The result of a turn that did nothing (never started, or its agent
/// went away before it reported anything): no calls, no tokens.
pub(crate) fn nothing_done(text: &str, outcome: Outcome) -> AgentResult {
    AgentResult {
        text: text.to_owned(),
        outcome,
        model_calls: 0,
        tool_calls: 0,
        usage: Usage::default(),
        children_usage: Usage::default(),
        elapsed: std::time::Duration::ZERO,
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
/// the call in flight, the calls not started), then emits its result on
/// `out` — all atomically with closing `turn_sink`, so nothing of the turn
/// follows. `result` builds that result from the turn's state as the close
/// reads it, under the turn's lock (a stop or a kill counts what the turn
/// did up to this instant, not what it had done when the stop began; the
/// turn's own end passes its result through). Returns the conversation
/// after the turn and the result as emitted, or `None` if the turn was
/// already closed (by its task or by a stop). `cut` writes the sentence
/// the open call, approval and unstarted calls are answered with, from
/// the result's outcome (called only when one is open).
///
/// The result's `children_usage` is the turn's as the close reads it: a
/// call that delivered a child's result ([`CallSlot::deliver`]: settled,
/// claimed, its usage added, in one step under this lock) before the
/// close is answered with that result, so its tokens are the turn's too.
pub(crate) fn close(
    shared: &Shared,
    turn_sink: &EventSink,
    out: &EventSink,
    result: impl FnOnce(&TurnState) -> AgentResult,
    cut: &dyn Fn(&Outcome) -> String,
) -> Option<(Arc<Vec<ChatMessage>>, AgentResult)> {
    let mut state = lock(shared);
    state.closing = true;
    state.ends = None;
    let mut ended = None;
    let mut answered = false;
    // The cut call's span, closed once the locks are let go (a close runs
    // every tracing layer; every read of the turn waited behind it).
    let mut cut_span = None;
    turn_sink.close_with(|| {
        let mut result = result(&state);
        result.children_usage = state.progress.children_usage;
        let cut = || cut(&result.outcome);
        // The run's span says what its `Result` says: recorded here, by
        // whoever closes the turn (a stop that lost to the turn's own end
        // wrote `stopped` over it; a kill recorded nothing).
        if let Some(span) = &state.span {
            crate::agent::spans::record_end(span, &result);
        }
        let open = state.open.take();
        if let Some((id, tool_use_id)) = state.approval.take() {
            out.emit(AgentEvent::ApprovalResolved {
                id,
                tool_use_id,
                outcome: ApprovalOutcome::Cancelled(cut()),
            });
        }
        if let Some(mut call) = open.map(|call| *call) {
            // Cut while it ran: `cancelled`, whether it is answered with
            // the tool's own note or the generic sentence (a call whose
            // result had come was not cut).
            let cut_short = call.settled.is_none();
            if cut_short && let Some(hand_on) = call.hand_on.take() {
                (hand_on.0)();
            }
            let outcome = call.settled.unwrap_or_else(|| match call.on_cut {
                Some(output) => ToolOutcome {
                    output,
                    is_error: false,
                },
                None => ToolOutcome {
                    output: cut(),
                    is_error: true,
                },
            });
            // As a call that returns records its end: the close answered
            // a settled error with no `tool_error`, and no result at all.
            let error_type = match (cut_short, outcome.is_error) {
                (true, _) => Some("cancelled"),
                (false, true) => Some("tool_error"),
                (false, false) => None,
            };
            if let Some(error_type) = error_type {
                call.span.record("error.type", error_type);
            }
            if call.content && !call.span.is_disabled() {
                call.span
                    .record("gen_ai.tool.call.result", outcome.output.as_str());
            }
            answered = out.emit(AgentEvent::ToolResult(ToolResult {
                tool_use_id: call.id.clone(),
                name: call.name,
                output: outcome.output.clone(),
                is_error: outcome.is_error,
            }));
            state
                .history
                .push(ChatMessage::tool(call.id, outcome.output));
            cut_span = Some(call.span);
        }
        let unstarted: Vec<ToolUseId> = state.unstarted.drain(..).collect();
        for id in unstarted {
            state
                .history
                .push(ChatMessage::tool(id, format!("not run: {}", cut())));
        }
        if !result.outcome.is_completed() {
            // The turn's last word. Its model's own answer last (cut by
            // the output limit, or a stop before a message sent meanwhile
            // was read): that answer is the last thing the result quotes,
            // so the result takes its place — two assistant messages in a
            // row are refused by chat templates that want roles to
            // alternate.
            let last = ChatMessage::assistant(result.text.clone(), Vec::new());
            match state.history.last_mut() {
                Some(answer) if answer.role == Role::Assistant && answer.tool_calls.is_empty() => {
                    *answer = last;
                }
                _ => state.history.push(last),
            }
        }
        // Taken but never read (a limit or a stop came first): kept in the
        // conversation, after the turn's end.
        state.read_steering();
        out.emit(AgentEvent::Result(Box::new(result.clone())));
        // Shared, not copied: the hub keeps a finished child's
        // conversation (through its probe) to resume it.
        let history = Arc::new(std::mem::take(&mut state.history));
        state.ended = Some(history.clone());
        ended = Some((history, result));
    });
    drop(state);
    drop(cut_span);
    // The cut call was a step too: told once the lock is let go.
    if answered {
        out.stepped();
    }
    ended
}

/// The result of a turn cut from outside (a stop, a kill, a panic): what
/// it did up to the cut, read from `state` as [`close`] holds it.
pub(crate) fn cut_result(
    state: &TurnState,
    text: impl FnOnce(&Progress) -> String,
    outcome: impl FnOnce(&str) -> Outcome,
    started: Instant,
) -> AgentResult {
    let progress = state.progress_at_cut();
    let text = text(&progress);
    let outcome = outcome(&text);
    result(text, outcome, &progress, started)
}

/// Answers the approval `id` if the turn waits on it: hands `decision` to
/// the waiting call through `responder`, then emits `ApprovalResolved` on
/// the turn's stream — both under the turn's lock, so the call reads the
/// decision only after its event, and an event says `Approved` or
/// `Denied` only for a decision the call took. `false` if the turn does
/// not wait on it (it was cut meanwhile), or the call is gone (the turn
/// ended in this instant: its close cancels the request).
pub(crate) fn resolve_approval(
    shared: &Shared,
    turn_sink: &EventSink,
    id: &ApprovalId,
    decision: ApprovalDecision,
    responder: ractor::RpcReplyPort<ApprovalDecision>,
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
    if responder.send(decision).is_err() {
        return false;
    }
    let outcome = match decision {
        ApprovalDecision::Approve => ApprovalOutcome::Approved,
        ApprovalDecision::Deny => ApprovalOutcome::Denied,
    };
    // Open: only a close (under this lock) closes the turn's sink.
    turn_sink.emit(AgentEvent::ApprovalResolved {
        id: id.clone(),
        tool_use_id,
        outcome,
    });
    state.approval = None;
    // In the tool from the answer on, as the stream says (a `status` read
    // before the call's task was polled again said `awaiting_approval`) —
    // denied too, its call answered next, as a remote child's mirror
    // reads any answer (a denied one read `awaiting_approval`, `for_s`
    // counted from the request).
    if let Activity::AwaitingApproval(tool) = &state.activity {
        let tool = tool.clone();
        state.doing(Activity::InTool(tool));
    }
    true
}

#[cfg(test)]
mod tests;
