//! One turn of the agent loop, as a plain async function the actor runs in
//! a task: ask the model (through the gate), run the tools it asked for,
//! repeat until it answers without tool calls or a limit hits.
//! Its state lives in `turn_state.rs`; each tool call runs in `call.rs`.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures_util::StreamExt;
use ractor::ActorRef;
use subagents_messages::{
    AgentEvent, ChatMessage, LimitKind, ModelChunk, ModelRequest, Outcome, ToolCall,
};

use crate::agent::answer::{honoured_choice_reset, partial_result, unique_ids};
use crate::agent::call;
use crate::agent::config::AgentConfig;
use crate::agent::msg::AgentMsg;
use crate::agent::probe::Activity;
use crate::agent::spans;
use crate::agent::turn_state::{
    AnswerEnd, Shared, TurnState, answer_end, complete_unless_steered, estimated, lock, result,
};
use crate::sink::EventSink;
pub(crate) use ran::Ran;
use tracing::Instrument;

/// Everything a turn task needs.
pub(crate) struct TurnContext {
    pub(crate) config: Arc<AgentConfig>,
    /// The turn's own (gated) sink.
    pub(crate) sink: EventSink,
    pub(crate) actor: ActorRef<AgentMsg>,
    pub(crate) approvals: Arc<AtomicU64>,
    pub(crate) shared: Shared,
    /// When the turn started (its wall clock runs from here).
    pub(crate) started: tokio::time::Instant,
}

impl TurnContext {
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut TurnState) -> R) -> R {
        f(&mut lock(&self.shared))
    }

    /// Whether the turn was closed from outside (a stop, a kill): its task
    /// may still run on another worker until it next waits (`abort` lands
    /// only there), and must start nothing more. Read under the turn's
    /// lock, which the close holds.
    pub(super) fn cut(&self, _held: &TurnState) -> bool {
        !self.sink.is_open()
    }

    /// Before a step starts (a model or tool call): past the wall clock,
    /// the turn ends as its timer would ([`out_of_time`]). The timer fires
    /// only where the turn waits: steps that never waited (sync tools, a
    /// free gate, a ready stream) ran past it and could end `Completed`.
    /// A check, not a wait (one widened each waiting turn's future).
    pub(super) fn past_wall_clock(&self) -> bool {
        let deadline = self.started.checked_add(self.config.limits.wall_clock);
        deadline.is_some_and(|deadline| tokio::time::Instant::now() >= deadline)
    }
}

/// Runs a turn to its end under the wall clock. The conversation is in
/// the shared state.
pub(crate) async fn run_turn(ctx: &TurnContext) -> Ran {
    let started = ctx.started;
    let limits = ctx.config.limits;
    let ended = tokio::time::timeout(limits.wall_clock, turn_loop(ctx)).await;
    match ended {
        Ok((_, Outcome::LimitReached(LimitKind::WallClock))) | Err(_) => Ran::OutOfTime,
        Ok((text, outcome)) => {
            let progress = ctx.with(|t| t.progress.clone());
            Ran::Ended(result(text, outcome, &progress, started))
        }
    }
}

/// What the turn loop returns when a step would start past the wall
/// clock: [`run_turn`] ends it as the clock's timer does.
fn out_of_time() -> (String, Outcome) {
    (String::new(), Outcome::LimitReached(LimitKind::WallClock))
}

async fn turn_loop(ctx: &TurnContext) -> (String, Outcome) {
    let config = &ctx.config;
    let limits = config.limits;
    loop {
        if ctx.past_wall_clock() {
            return out_of_time();
        }
        // In a block of its own: a local of this loop lives across the
        // model call below until its scope ends, moved or not, widening
        // every waiting turn's future (the progress copy, 120 bytes).
        let messages = {
            let Some((progress, messages)) = ctx.with(|t| {
                if ctx.cut(t) {
                    // Closed from outside while this task ran on: it asks
                    // nothing more (its result is not read).
                    return None;
                }
                // The call about to be made is the last one allowed: a message
                // taken from now on could never be read by this run. It takes
                // none (`steer` refuses; the sender waits for the end and a new
                // run reads it), and its answer stays final.
                if t.progress.model_calls.saturating_add(1) >= limits.max_model_calls {
                    t.closing = true;
                }
                // The request's messages, copied from the conversation once:
                // the system prompt, then every message so far.
                let mut messages = Vec::with_capacity(t.history.len() + 1);
                messages.push(ChatMessage::system(config.system_prompt.clone()));
                messages.extend_from_slice(&t.history);
                Some((t.progress.clone(), messages))
            }) else {
                return (String::new(), Outcome::Stopped);
            };
            if progress.model_calls >= limits.max_model_calls {
                let text = partial_result(LimitKind::ModelCalls, &limits, &progress);
                return (text, Outcome::LimitReached(LimitKind::ModelCalls));
            }
            if progress.usage.total() >= limits.token_budget {
                let text = partial_result(LimitKind::Tokens, &limits, &progress);
                return (text, Outcome::LimitReached(LimitKind::Tokens));
            }
            messages
        };
        let (text, calls, truncated) = match ask_model(ctx, messages)
            .instrument(spans::chat(&ctx.config))
            .await
        {
            Ok(answer) => answer,
            Err(ModelEnd::Failed(error)) => {
                // The call was made: it counts, and so do its tokens if it
                // streamed before it failed (an estimate, unless counted).
                ctx.with(|t| {
                    t.progress.model_calls += 1;
                    if let Some(estimate) = t.call_estimate(t.output_chars()) {
                        t.progress.add_estimate(estimate);
                    }
                    // Counted: a stop from here on counts it no more.
                    t.doing(Activity::Thinking);
                });
                return (error.clone(), Outcome::Failed(error));
            }
            Err(ModelEnd::NotSent(error)) => {
                ctx.with(|t| t.doing(Activity::Thinking));
                return (error.clone(), Outcome::Failed(error));
            }
            Err(ModelEnd::OutOfTime) => return out_of_time(),
            Err(ModelEnd::OverBudget) => {
                // Cut mid-stream (counted, its text kept, as it was cut):
                // no tool it asked for runs.
                let progress = ctx.with(|t| t.progress.clone());
                let text = partial_result(LimitKind::Tokens, &limits, &progress);
                return (text, Outcome::LimitReached(LimitKind::Tokens));
            }
        };
        // A cut answer's calls may have incomplete arguments: none runs;
        // the model reads why and may try again.
        let cut = match truncated {
            Some(reason) if calls.is_empty() => {
                // A message taken during it is read by a next call, as
                // after an answer that looked final (the cut one stays).
                // Final with one unread, the cut answer is not written as
                // a step: the close puts the partial result in its place.
                if !complete_unless_steered(&ctx.shared, &limits, || ctx.past_wall_clock()) {
                    ctx.sink.stepped();
                    continue;
                }
                let progress = ctx.with(|t| {
                    t.progress.cut = Some(reason.clone());
                    t.progress.clone()
                });
                let text = partial_result(LimitKind::Output, &limits, &progress);
                return (text, Outcome::LimitReached(LimitKind::Output));
            }
            Some(reason) => Some(reason),
            None if calls.is_empty() => {
                match answer_end(&ctx.shared, &limits, || ctx.past_wall_clock()) {
                    // A message arrived while it answered: it reads it and
                    // goes on, its answer written (a kill in the next call
                    // lost it).
                    AnswerEnd::GoesOn => {
                        ctx.sink.stepped();
                        continue;
                    }
                    // No call is left to read one that came: the answer
                    // is written before it (its end writes the envelope,
                    // then the run: a kill between the two left a run whose
                    // last words were the unread message, and the answer,
                    // put back as the run was read, went after it).
                    AnswerEnd::Final { unread } => {
                        if unread {
                            ctx.sink.stepped();
                        }
                        return (text, Outcome::Completed);
                    }
                }
            }
            None => None,
        };
        // Its answer written as given (a kill in a call resumed without it).
        ctx.sink.stepped();
        for call in calls {
            if ctx.past_wall_clock() {
                return out_of_time();
            }
            // Boxed: a tool call's future (approval, the tool) is larger
            // than a model call's, and would widen every waiting turn; a
            // refused call goes through it too (one await here: a second
            // widened every turn's future, 2.3 MiB per 10,000 threads).
            Box::pin(call::run_call(ctx, &call, cut.as_deref())).await;
        }
    }
}

/// How a model call ended early.
enum ModelEnd {
    /// The model failed: a sentence saying so.
    Failed(String),
    /// The call was never sent (the gate closed, or the turn was cut as
    /// the gate let it in): a sentence saying so. Not a model call — it
    /// counted as one ("after 1 model call(s)", none made).
    NotSent(String),
    /// The usage it reported (or, before any, its streamed text at about
    /// four characters a token) went past the token budget; the text it
    /// had written by then.
    OverBudget,
    /// The gate let it in past the wall clock: not sent, the turn ends as
    /// the clock's timer ends it.
    OutOfTime,
}

/// What one model call gave: its text, its tool calls, and why it was
/// cut if it was (`finish_reason`).
type Answer = (String, Vec<ToolCall>, Option<String>);

/// One model call, holding the gate only for its duration. `messages`
/// is the whole request: the system prompt, then the conversation.
///
/// Every chunk spends from tokio's co-operative budget, so a model whose
/// stream is always ready still hands the scheduler back every few
/// chunks: the wall clock fires and a stop (which aborts this task) lands
/// within a bounded number of chunks, and the permit goes with the task.
/// Usage is checked as it arrives: a call that goes past the token budget
/// ends there.
async fn ask_model(ctx: &TurnContext, mut messages: Vec<ChatMessage>) -> Result<Answer, ModelEnd> {
    let config = &ctx.config;
    let span = tracing::Span::current();
    ctx.with(|t| t.doing(Activity::WaitingForModel));
    // Read only for a span that records (the clock is read twice).
    let waiting = (!span.is_disabled()).then(tokio::time::Instant::now);
    let permit = config.gate.acquire(config.id.clone()).await.map_err(|e| {
        span.record("error.type", "gate_closed");
        ModelEnd::NotSent(format!("the model could not be called: {e}"))
    })?;
    if let Some(waiting) = waiting {
        span.record(
            "subagents.gate_wait_ms",
            u64::try_from(waiting.elapsed().as_millis()).unwrap_or(u64::MAX),
        );
    }
    let mut call_usage = subagents_messages::Usage::default();
    // The request is built here, in a block, once the gate let it in: a
    // local of this function lives across every await until its scope
    // ends, moved or not (152 bytes of every waiting turn's future).
    let mut stream = {
        let tools = config.tools.specs();
        // Sent besides the conversation: in an estimate of the prompt.
        let fixed = tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.len());
        let fixed = fixed.fold(config.system_prompt.len(), usize::saturating_add) as u64;
        let cut = ctx.with(|t| {
            t.doing(Activity::InModelCall);
            t.streaming.clear();
            t.hidden_chars = 0;
            t.call_chars = 0;
            t.call_counted = false;
            t.counted_chars = 0;
            t.prompt_fixed = fixed;
            // Messages sent to it, read once the gate let the call in (a cut
            // there showed them read by no call); in the span's input too.
            let (cut, before) = (ctx.cut(t), t.history.len());
            if cut {
                return Some(ModelEnd::NotSent("the turn was stopped".to_owned()));
            }
            // Let in past the wall clock (in the tick it ran out, its timer
            // not yet fired: tokio polls the wait first): nothing starts
            // past it, no message is read by a call not made.
            if ctx.past_wall_clock() {
                t.doing(Activity::Thinking);
                return Some(ModelEnd::OutOfTime);
            }
            t.read_steering_shown(&ctx.sink);
            messages.extend_from_slice(&t.history[before..]);
            None
        });
        if let Some(end) = cut {
            // The gate was free at once, after a stop this task has not
            // seen, or let it in too late.
            return Err(end);
        }
        spans::record_input(config, &span, &messages);
        let mut request = ModelRequest {
            messages,
            tools,
            options: config.options.clone(),
        };
        // In place: computed from `messages` before the move, the future
        // kept both (+1 MiB per 10,000 threads, measured).
        honoured_choice_reset(&mut request);
        crate::model::Contained::stream(&*config.model, request)
    };
    let mut calls = Vec::new();
    let budget = config.limits.token_budget;
    let mut truncated = None;
    let mut streamed_chars = 0_u64;
    // The chunk matched in place, not bound for the loop's body: a local
    // there lives across the budget's await below (144 bytes of every
    // waiting turn's future).
    loop {
        match stream.next().await {
            None => break,
            // Nothing (a server's keep-alive, passed on by a host's
            // adapter): no event — 100,000 of them were as many events.
            Some(Ok(ModelChunk::Text(delta))) if delta.is_empty() => {}
            Some(Ok(ModelChunk::Text(delta))) => {
                streamed_chars = streamed_chars.saturating_add(delta.chars().count() as u64);
                // A server reports usage at the end, or never: an answer
                // that streams past the budget ends there, not at the
                // wall clock — its output so far, at about four characters
                // a token (below its real cost, which counts its prompt
                // too), against what the turn used before it.
                // Kept and emitted in one step under the turn's lock: a
                // cut mid-call has what the host saw (emitted after it, a
                // stop on another worker quoted a piece never shown). Past
                // the budget, the estimate is counted and the text taken.
                let cut = ctx.with(|t| {
                    t.streaming.push_str(&delta);
                    let output = t.with_calls(streamed_chars);
                    let cut = t.past_budget(estimated(call_usage, output), budget);
                    ctx.sink.emit(AgentEvent::Text(delta));
                    cut
                });
                if cut {
                    return Err(ModelEnd::OverBudget);
                }
            }
            // Output not shown (reasoning, arguments being written): the
            // budget sees it as it sees text — a model looping there ended
            // only at the wall clock, its call counted as nothing.
            Some(Ok(ModelChunk::Hidden(chars))) => {
                streamed_chars = streamed_chars.saturating_add(chars);
                let cut = ctx.with(|t| {
                    let chars = u32::try_from(chars).unwrap_or(u32::MAX);
                    t.hidden_chars = t.hidden_chars.saturating_add(chars);
                    let output = t.with_calls(streamed_chars);
                    t.past_budget(estimated(call_usage, output), budget)
                });
                if cut {
                    return Err(ModelEnd::OverBudget);
                }
            }
            // A whole call is output too, as text is: its name and
            // arguments held against the budget — counted as nothing,
            // 100,000 calls in one answer, or one with megabytes of
            // arguments, all ran. Beyond the hidden output only (see
            // `TurnState::output_chars`): not twice.
            Some(Ok(ModelChunk::ToolCall(call))) => {
                // A token at least: calls of nothing (no name, no
                // arguments) cost nothing, and 100,000 of them ran.
                let chars = (call.name.len() + call.arguments.len()).max(4) as u64;
                calls.push(*call);
                let cut = ctx.with(|t| {
                    let chars = u32::try_from(chars).unwrap_or(u32::MAX);
                    t.call_chars = t.call_chars.saturating_add(chars);
                    let output = t.with_calls(streamed_chars);
                    t.past_budget(estimated(call_usage, output), budget)
                });
                if cut {
                    return Err(ModelEnd::OverBudget);
                }
            }
            Some(Ok(ModelChunk::Truncated(reason))) => truncated = Some(reason),
            Some(Ok(chunk @ (ModelChunk::Usage(_) | ModelChunk::UsageEstimate(_)))) => {
                if let ModelChunk::Usage(usage) | ModelChunk::UsageEstimate(usage) = &chunk {
                    call_usage.add(*usage);
                    span.record("gen_ai.usage.input_tokens", call_usage.prompt_tokens);
                    span.record("gen_ai.usage.output_tokens", call_usage.completion_tokens);
                }
                let cut = ctx.with(|t| {
                    let output = t.with_calls(streamed_chars);
                    t.usage_came(call_usage, output);
                    match chunk {
                        ModelChunk::UsageEstimate(usage) => t.progress.add_estimate(usage),
                        // Counting nothing, it reported nothing.
                        ModelChunk::Usage(usage) if usage.total() > 0 => {
                            t.progress.add_reported(usage);
                        }
                        _ => {}
                    }
                    t.cut_if_past(budget, output)
                });
                if cut {
                    return Err(ModelEnd::OverBudget);
                }
            }
            Some(Err(e)) => {
                span.record("error.type", "model_error");
                return Err(ModelEnd::Failed(format!(
                    "the model `{}` failed: {e}",
                    config.model.name()
                )));
            }
        }
        tokio::task::consume_budget().await;
    }
    drop(stream);
    drop(permit);
    // A call its model reported no usage for (the trait allows none: a
    // host's adapter) counts by the estimate, as a cut one does: finished,
    // it cost nothing — the budget held one call's output, not the turn's,
    // and every usage a host or a clamp read was 0. Past the budget, it
    // ends there, as one whose usage came at the end does.
    let over = ctx.with(|t| {
        // What it wrote after its last count too (a usage that came
        // first: its output counted nowhere, across every call).
        let output = t.with_calls(streamed_chars);
        let estimate = t.call_estimate(output)?;
        t.progress.add_estimate(estimate);
        t.counted(output);
        let over = t.progress.usage.total() > budget;
        if over {
            t.cut_over_budget();
        }
        Some(over)
    });
    if over == Some(true) {
        return Err(ModelEnd::OverBudget);
    }
    let _ = unique_ids(&mut calls);
    // The call's end, in one step under the turn's lock: counted, its
    // answer the last thing written and in the conversation, its calls
    // waiting to start. A stop on another worker reads it all or none of
    // it (apart, a stop between the steps counted the call twice, or not
    // at all with its tokens, and lost the answer the host saw).
    let text = ctx.with(|t| {
        t.doing(Activity::Thinking);
        let text = std::mem::take(&mut t.streaming);
        t.progress.model_calls += 1;
        if !text.trim().is_empty() {
            t.progress.last_text = text.clone();
        }
        t.history
            .push(ChatMessage::assistant(text.clone(), calls.clone()));
        t.unstarted = calls.iter().map(|c| c.id.clone()).collect();
        // Its tokens at the budget, its calls still to run: no next call
        // can read a message, as after the last allowed call — taken
        // during the calls, one was kept after the end, read by no run.
        if !calls.is_empty() && t.progress.usage.total() >= budget {
            t.closing = true;
        }
        text
    });
    spans::record_output(config, &span, &text, &calls);
    Ok((text, calls, truncated))
}

mod ran;
#[cfg(test)]
mod tests;
