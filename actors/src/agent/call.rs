//! One tool call of a turn: run (with its approval, if the tool asks for
//! one) or refused unrun, its `ToolStarted` and `ToolResult` each emitted
//! under the turn's lock, so a cut turn answers the call exactly once.

use std::sync::atomic::Ordering;

use subagents_messages::{
    AgentEvent, ApprovalDecision, ApprovalId, ApprovalRequest, ChatMessage, ToolCall, ToolResult,
    ToolStarted,
};

use crate::agent::msg::AgentMsg;
use crate::agent::msg::sealed::AgentInternal;
use crate::agent::probe::Activity;
use crate::agent::spans;
use crate::agent::turn::TurnContext;
use crate::agent::turn_state::{CallSlot, OpenCall};
use crate::tool::{ToolCallContext, ToolOutcome, TurnLeft, run_tool};
use tracing::Instrument;

/// Answers a call the model asked for without running it (emitting its
/// `ToolStarted` and an error `ToolResult`, under the turn's lock).
pub(super) fn refuse_call(ctx: &TurnContext, call: &ToolCall, why: String) {
    // Its span is closed after the turn's lock is let go: a close runs
    // every tracing layer (a synchronous exporter's send), and every
    // read of the turn waited behind it.
    let mut span = None;
    let answered = ctx.with(|t| {
        // Its span too only for a turn still open: a task running on
        // after a stop opened spans for calls the close had answered.
        if ctx.cut(t) {
            return false;
        }
        let made = span.insert(spans::execute_tool(&ctx.config, call));
        spans::record_tool_end(&ctx.config, made, &why, Some("not_run"));
        t.unstarted.pop_front();
        ctx.sink.emit(AgentEvent::ToolStarted(ToolStarted {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
        let emitted = ctx.sink.emit(AgentEvent::ToolResult(ToolResult {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            output: why.clone(),
            is_error: true,
        }));
        if emitted {
            t.history.push(ChatMessage::tool(call.id.clone(), why));
        }
        emitted
    });
    drop(span);
    if answered {
        ctx.sink.stepped();
    }
}

/// Runs one tool call, emitting `ToolStarted` and `ToolResult` around it
/// (each under the turn's lock, so a cut turn answers the call exactly
/// once).
pub(super) async fn run_call(ctx: &TurnContext, call: &ToolCall, cut: Option<&str>) {
    // A tool ready at its first poll (a calculator, a lookup) never
    // yields: an answer of thousands of such calls ran to its end on a
    // current-thread runtime before a stop (or, in paused time, the wall
    // clock) could land — as a model's stream spends the budget per
    // chunk, each call spends it (a refused one too). Here, in the call's
    // boxed future: in the turn's own loop it widened every waiting
    // turn's future (7.9 MiB per 10,000 threads).
    tokio::task::consume_budget().await;
    // The answer was cut (`cut`: its finish reason): refused, not run.
    if let Some(reason) = cut {
        refuse_call(
            ctx,
            call,
            format!(
                "not run: your output was cut (finish_reason `{reason}`) before this call was complete; its arguments may be truncated. Call it again with shorter arguments, or answer in fewer words"
            ),
        );
        return;
    }
    let config = &ctx.config;
    let Some((seq, span)) = ctx.with(|t| {
        if ctx.cut(t) {
            // Stopped while its task ran on: the close answered the turn,
            // and none of its calls starts after (nor its span).
            return None;
        }
        let span = spans::execute_tool(config, call);
        t.unstarted.pop_front();
        t.calls_opened += 1;
        let seq = t.calls_opened;
        t.open = Some(Box::new(OpenCall {
            seq,
            id: call.id.clone(),
            name: call.name.clone(),
            on_cut: None,
            on_child: None,
            on_taken: None,
            hand_on: None,
            settled: None,
            span: span.clone(),
            content: config.trace.settings.content,
        }));
        t.doing(Activity::InTool(call.name.clone()));
        ctx.sink.emit(AgentEvent::ToolStarted(ToolStarted {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
        Some((seq, span))
    }) else {
        return;
    };
    // Parsed as the tool's run parses them (a lone surrogate or `1e400` passes
    // a skim but not a parse): a call refused for its arguments is refused
    // before any approval is asked for it.
    let unparsed = not_an_object(&call.arguments);
    let outcome = async { Some(match config.tools.get(&call.name) {
        // A call whose arguments are not JSON (a server may cut a call at
        // its token limit and still say `tool_calls`) never runs; nor one
        // whose JSON is not an object (`null`, `5`: it ran, approved, while
        // the model's history showed it `{}`, as the wire sends it).
        Some(_) if unparsed.is_some() => ToolOutcome {
            output: format!(
                "invalid arguments: not run, {}",
                unparsed.unwrap_or_default()
            ),
            is_error: true,
        },
        // The depth sentence only for a sub-agent given no delegation tool
        // at all: one with another front-end is told what it has.
        None if config.depth > 0
            && crate::delegation::is_delegation_tool(&call.name)
            && !config.tool_names.iter().any(|n| crate::delegation::is_delegation_tool(n)) =>
        {
            ToolOutcome {
                output: match config.delegation_denied {
                    // Below the depth limit: its profile is why (a sibling
                    // delegates at this depth).
                    true => format!(
                        "`{}` is not available to this sub-agent: its profile does not let it start sub-agents; do the work yourself",
                        call.name
                    ),
                    false => format!(
                        "`{}` is not available to this sub-agent: it runs at depth {}, as deep as delegation goes here; do the work yourself",
                        call.name, config.depth
                    ),
                },
                is_error: true,
            }
        }
        // The model's name quoted on one short line: a 64 KiB name is not
        // read back whole.
        None => ToolOutcome {
            output: config
                .tools
                .unknown(&crate::delegation::shown(&call.name))
                .to_string(),
            is_error: true,
        },
        Some(tool) => {
            // A tool that panics deciding is not run: the call fails with a
            // sentence and the turn goes on (never a crashed turn).
            let needs = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tool.requires_approval(&call.arguments)
            }))
            .map_err(crate::panics::panic_text);
            if let Err(panic) = &needs {
                ToolOutcome {
                    output: format!(
                        "the tool `{}` failed before it ran: it panicked deciding whether it needs approval ({panic})",
                        call.name,
                    ),
                    is_error: true,
                }
            } else if needs.unwrap_or(true)
                && let Some(refused) = refused_approval(ctx, call).await
            {
                ToolOutcome {
                    output: refused,
                    is_error: true,
                }
            } else {
                let context = ToolCallContext {
                    tool_use_id: call.id.clone(),
                    arguments: call.arguments.clone(),
                    agent_id: config.id.clone(),
                    depth: config.depth,
                    available_tools: config.tool_names.clone(),
                    slot: CallSlot {
                        turn: Some((std::sync::Arc::downgrade(&ctx.shared), seq)),
                    },
                    left: Some(TurnLeft {
                        deadline: deadline(ctx.started, config.limits.wall_clock),
                        // Less what the turn and the children it took
                        // used: each synchronous child got the whole
                        // remainder again, the turn's work past its
                        // budget.
                        tokens: config.limits.token_budget.saturating_sub(ctx.with(|t| {
                            let used = t.progress.usage.total();
                            used.saturating_add(t.progress.children_usage.total())
                        })),
                    }),
                };
                // The decision may have taken the turn past its wall
                // clock (a host's policy working without waiting, an
                // answer read in the tick the clock ran out): the call
                // stays open, and the turn ends as its timer ends it,
                // the close answering the call — no tool starts past it.
                if ctx.past_wall_clock() {
                    return None;
                }
                run_tool(tool, &call.name, context).await
            }
        }
    }) }
    .instrument(span.clone())
    .await;
    let Some(outcome) = outcome else {
        return;
    };
    let answered = ctx.with(|t| {
        // A call its tool settled is answered with what it settled (the
        // tool was told so), whatever the tool did after: as a cut
        // answers it. Taken under the lock the answer is emitted in.
        let outcome = t
            .open
            .as_mut()
            .and_then(|open| open.settled.take())
            .unwrap_or(outcome);
        let emitted = ctx.sink.emit(AgentEvent::ToolResult(ToolResult {
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            output: outcome.output.clone(),
            is_error: outcome.is_error,
        }));
        if emitted {
            // Cut first, its span says `cancelled` (the close wrote it).
            let error_type = outcome.is_error.then_some("tool_error");
            spans::record_tool_end(config, &span, &outcome.output, error_type);
            t.open = None;
            t.history
                .push(ChatMessage::tool(call.id.clone(), outcome.output));
            t.progress.tool_calls += 1;
            t.progress
                .tools_used
                .push(if config.tools.get(&call.name).is_some() {
                    call.name.clone()
                } else {
                    crate::delegation::shown(&call.name)
                });
        }
        t.doing(Activity::Thinking);
        emitted
    });
    if answered {
        ctx.sink.stepped();
    }
}

/// Why a call that needs approval is not run (what the model reads), or
/// `None` when it was approved.
async fn refused_approval(ctx: &TurnContext, call: &ToolCall) -> Option<String> {
    match approval(ctx, call).await {
        Ok(ApprovalDecision::Approve) => None,
        Ok(ApprovalDecision::Deny) => Some(format!(
            "the user denied this call to `{}`; do not retry it, find another way or explain",
            call.name
        )),
        Err(why) => Some(why),
    }
}

/// Asks the host (through the actor) to approve a call; a lost answer is
/// a denial, so no turn waits forever on a stopped agent. A host's policy
/// that panics deciding fails the call with a sentence (`Err`): the turn
/// goes on, as for a tool that panics deciding whether it needs approval.
async fn approval(ctx: &TurnContext, call: &ToolCall) -> Result<ApprovalDecision, String> {
    let config = &ctx.config;
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        config.policy_decides(&call.name, &call.arguments)
    }));
    match decided {
        Ok(Some(decision)) => return Ok(decision),
        Ok(None) => {}
        Err(panic) => {
            return Err(format!(
                "the tool `{}` was not run: the approval policy failed deciding on it (it panicked: {})",
                call.name,
                crate::panics::panic_text(panic)
            ));
        }
    }
    // Numbered only when the host is asked: one the policy answered is
    // never seen, and its number, used up, was an id the host could not
    // tell from one never made.
    // Checked: a count handed in near its end (a peer node's run, whose
    // number it gives) overflowed — a crashed turn, or an id wrapped to
    // one already used.
    let Ok(n) = ctx
        .approvals
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
        .map(|n| n + 1)
    else {
        return Err(format!(
            "the tool `{}` was not run: this agent has no approval numbers left to ask with",
            call.name
        ));
    };
    let id = ApprovalId::for_agent(&config.id, n);
    let asked = config.approvals_recheck.then(|| id.clone());
    let (tx, rx) = tokio::sync::oneshot::channel();
    // Registered and asked under the turn's lock: an answer (the id's form
    // is documented, so one may come at once) that reaches the agent
    // between the two waits for the lock, and finds the turn waiting.
    let registered = ctx.with(|t| {
        let pending = AgentMsg::Internal(AgentInternal::ApprovalPending {
            id: id.clone(),
            responder: tx.into(),
            turn: ctx.shared.clone(),
        });
        if ctx.actor.cast(pending).is_err() {
            return false;
        }
        let asked = ctx
            .sink
            .emit(AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
                id: id.clone(),
                tool_use_id: call.id.clone(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
            })));
        if asked {
            t.approval = Some((id, call.id.clone()));
            t.doing(Activity::AwaitingApproval(call.name.clone()));
        }
        true
    });
    if !registered {
        // Not a denial: nobody was asked (the agent is going away).
        return Err(format!(
            "the tool `{}` was not run: the agent is stopping, and its approval could not be asked",
            call.name
        ));
    }
    if let Some(asked) = asked {
        answer_if_the_policy_now_does(ctx, asked, call);
    }
    let decision = rx.await.unwrap_or(ApprovalDecision::Deny);
    // Answered as the turn was cut (its stop read on another worker while
    // this task ran on): the close answered the call, and its tool does
    // not start after it — it did, a shell or a post run after the stream
    // said the call was stopped.
    let cut = ctx.with(|t| {
        let cut = ctx.cut(t);
        if !cut {
            t.doing(Activity::InTool(call.name.clone()));
        }
        cut
    });
    if cut {
        return Err(format!(
            "the tool `{}` was not run: the turn was stopped as it was answered",
            call.name
        ));
    }
    Ok(decision)
}

/// A child handed to the background in the instant between its policy's
/// look and its request (on another worker): the hub, handing it over,
/// answered what it found asked — not this, asked after — and the policy
/// that answers a background child's calls had said "ask". Looked at
/// again once the request is in the book: answered as the hub answers, by
/// a message to the agent (one the hub answered too is refused the second
/// time, to nobody). Left, it waited for a host that chose never to be
/// asked, the child's slot held to its wall clock.
fn answer_if_the_policy_now_does(ctx: &TurnContext, id: ApprovalId, call: &ToolCall) {
    if let Some(decision) = ctx.config.policy_decides(&call.name, &call.arguments) {
        let (reply, _) = tokio::sync::oneshot::channel();
        let _ = ctx.actor.cast(AgentMsg::ResolveApproval {
            id,
            decision,
            reply: reply.into(),
        });
    }
}

/// When a turn that started at `started` runs out of wall clock. A limit
/// past what an `Instant` can hold (`Duration::MAX`: "no limit") is thirty
/// years away — adding it panicked, and every tool call of such a turn
/// failed it.
fn deadline(
    started: tokio::time::Instant,
    wall_clock: std::time::Duration,
) -> tokio::time::Instant {
    started
        .checked_add(wall_clock)
        .unwrap_or_else(|| started + std::time::Duration::from_secs(30 * 365 * 24 * 60 * 60))
}

/// Why a call's arguments are no JSON object, as the model reads it: a
/// tool's arguments are one (the wire sends any other back as `{}`).
fn not_an_object(arguments: &str) -> Option<String> {
    use serde_json::Value;
    let what = match serde_json::from_str::<Value>(arguments) {
        Err(e) => {
            return Some(format!(
                "they are not valid JSON ({e}); if your output was cut, call it again with shorter arguments"
            ));
        }
        Ok(Value::Object(_)) => return None,
        Ok(Value::Null) => "null",
        Ok(Value::Bool(_)) => "true or false",
        Ok(Value::Number(_)) => "a number",
        Ok(Value::String(_)) => "a string",
        Ok(Value::Array(_)) => "an array",
    };
    Some(format!(
        "they must be a JSON object (`{{}}` for none), not {what}"
    ))
}

#[cfg(test)]
pub(crate) mod tests;
