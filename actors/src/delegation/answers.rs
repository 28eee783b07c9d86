//! What `use_agent` answers a model, as JSON: a finished child (its answer
//! within the result budget, or a range of it), a pending one, a status.

use serde_json::{Value, json};
use subagents_messages::{AgentId, Envelope, SubAgentStatus, text};

use super::ParentStopPolicy;
use super::engine::refuse;
use crate::agent::LiveTurn;
use crate::tool::ToolError;

/// What a child used: tokens in and out (its own model calls; its own
/// children's apart), model and tool calls, running time.
pub(super) fn usage_json(envelope: &Envelope) -> Value {
    json!({
        "tokens_in": envelope.usage.prompt_tokens,
        "tokens_out": envelope.usage.completion_tokens,
        "children_tokens": envelope.children_usage.total(),
        "model_calls": envelope.model_calls,
        "tool_calls": envelope.tool_calls,
        "elapsed_s": (envelope.elapsed.as_millis() as f64) / 1000.0,
    })
}

/// The JSON a model reads for a finished child: its answer and its error
/// within the result budget (`answer` and `error` are what
/// [`Delegator::budgeted`] and [`Delegator::budgeted_error`] made of them).
pub(super) fn finished_json(
    envelope: &Envelope,
    answer: Option<String>,
    error: Option<String>,
) -> String {
    let mut out = json!({
        "id": envelope.id.as_str(),
        "name": envelope.name,
        "status": envelope.status.as_str(),
        "usage": usage_json(envelope),
    });
    if let Some(result) = answer {
        out["result"] = Value::String(result);
    }
    if let Some(error) = error {
        out["error"] = Value::String(error);
    }
    mark_continued(&mut out, envelope);
    out.to_string()
}

/// A run a message resumed (`send`, which reaches the newest run): its
/// answer is from before that message — read alone, it was taken for the
/// reply, while `send` to the same id said the child was running. Named:
/// the newest run (the caller put it in `continued_as`).
fn mark_continued(out: &mut Value, envelope: &Envelope) {
    if let Some(newest) = &envelope.continued_as {
        out["continued_as"] = json!(newest.as_str());
        out["note"] = json!(format!(
            "a message resumed it: it goes on as `{newest}`; this is its answer \
             from before, the reply to the latest message is `{newest}`'s"
        ));
    }
}

/// A range of a finished child's answer: characters `offset..offset +
/// limit`, and how many there are in all; its `error` as
/// [`Delegator::budgeted_error`] made it.
pub(super) fn range_json(
    envelope: &Envelope,
    offset: usize,
    limit: usize,
    error: Option<String>,
) -> String {
    let (part, total) = text::char_range(
        envelope.result.as_deref().unwrap_or_default(),
        offset,
        limit,
    );
    let length = part.chars().count();
    let mut out = json!({
        "id": envelope.id.as_str(),
        "status": envelope.status.as_str(),
        "offset": offset,
        "length": length,
        "total_chars": total,
        "more": offset + length < total,
        "result": part,
    });
    // A failed child's reason, as the whole answer gives it: the range
    // claims the result, so no wake follows to carry it.
    if let Some(error) = error {
        out["error"] = Value::String(error);
    }
    mark_continued(&mut out, envelope);
    out.to_string()
}

/// A child still running, for an agent at `depth` that asked for it: only
/// the parent's own children wake it with their result; a child's
/// children are asked for, and stop when it ends.
pub(super) fn pending_json(id: &AgentId, depth: u32, woken: bool) -> String {
    pending_json_at(id, depth, depth + 1, woken)
}

/// A child at `target` depth still running, as an agent at `depth` reads
/// it: the parent reaches every child of the thread, but a child's child
/// (`target` 2 and deeper) never wakes it — told "as a message", the
/// parent waited for a result that reached nobody.
pub(super) fn pending_json_at(id: &AgentId, depth: u32, target: u32, woken: bool) -> String {
    json!({
        "pending": true,
        "id": id.as_str(),
        "note": format!("the sub-agent runs in the background; {}", how_told(depth, target, woken)),
    })
    .to_string()
}

/// How an agent at `depth` learns the result of a child at `target` depth
/// that runs on in the background: only the parent's own children wake it
/// — and only a parent in a thread (`woken`: its supervisor delivers the
/// wakes; a parent built alone was told "as a message" and waited for a
/// message nothing sends); a child's children are asked for, and stop
/// with their requester.
pub(super) fn how_told(depth: u32, target: u32, woken: bool) -> &'static str {
    match (depth, target) {
        (0, 1) if woken => "its result will arrive as a message, or ask with action result",
        (0, 1) => "you are not told when it finishes: ask with action result",
        (0, _) => {
            "it works for the sub-agent that started it: you are not told when it finishes; ask with action result (it stops when that sub-agent ends)"
        }
        _ => {
            "you are not told when it finishes: ask with action result before you answer (it stops when you end)"
        }
    }
}

/// A snapshot for `status`. A child that waits for a slot reads
/// `"status": "queued"` with its `queue_position` (1 = next), whether or
/// not the parent still waits on it (`background`). A running child says
/// what it does `now` (`waiting_for_model`, `in_model_call`, `in_tool`,
/// `awaiting_approval` or `thinking`, the tool, for how long) and its
/// usage so far.
pub(super) fn status_json(
    envelope: &Envelope,
    live: Option<&LiveTurn>,
    queue_position: Option<usize>,
    (answer, error): (Option<String>, Option<String>),
) -> String {
    let status = match queue_position {
        Some(_) => "queued",
        None => envelope.status.as_str(),
    };
    let mut out = json!({
        "id": envelope.id.as_str(),
        "name": envelope.name,
        "status": status,
        "background": envelope.background,
        "elapsed_s": (envelope.elapsed.as_millis() as f64) / 1000.0,
        "tool_calls": envelope.tool_calls,
        "model_calls": envelope.model_calls,
        "tokens": envelope.usage.total(),
        "usage": usage_json(envelope),
        "last_tool": envelope.last_tool,
    });
    if let Some(position) = queue_position {
        out["queue_position"] = json!(position);
    }
    // A stop reached it after it ended: a message no longer resumes it.
    if envelope.cancelled {
        out["cancelled"] = json!(true);
    }
    if let Some(live) = live {
        let mut now = json!({
            "doing": live.activity.as_str(),
            "for_s": (live.for_.as_millis() as f64) / 1000.0,
        });
        if let Some(tool) = live.activity.tool() {
            now["tool"] = json!(text::one_line(tool, 80));
        }
        out["now"] = now;
    }
    if envelope.status.is_terminal() {
        if let Some(answer) = answer {
            out["result"] = Value::String(answer);
        }
        if let Some(error) = error {
            out["error"] = Value::String(error);
        }
    }
    mark_continued(&mut out, envelope);
    out.to_string()
}

/// What a call waiting on `id` reads if its turn is cut (stopped, or
/// ended by a limit) while it waits: by the parent-stop policy, the
/// child goes on in the background or is stopped with the turn.
pub(super) fn cut_note(policy: ParentStopPolicy, id: &AgentId, depth: u32, woken: bool) -> String {
    match policy {
        // Nothing wakes a parent built alone: it asks.
        ParentStopPolicy::Detach if depth == 0 && !woken => json!({
            "pending": true,
            "id": id.as_str(),
            "note": "the turn ended while waiting; the sub-agent goes on in the background: you are not told when it finishes, ask with action result",
        }),
        ParentStopPolicy::Cascade if depth == 0 && !woken => json!({
            "id": id.as_str(),
            "stopping": true,
            "note": "the turn ended while waiting, and the sub-agent is stopped with it; if it had already finished, ask with action result for its answer",
        }),
        // A child's turn cut ends the child, and its children with it.
        _ if depth > 0 => json!({
            "id": id.as_str(),
            "status": "stopped",
            "note": "the turn ended while waiting, and the sub-agent stops when you end",
        }),
        ParentStopPolicy::Detach => json!({
            "pending": true,
            "id": id.as_str(),
            "note": "the turn ended while waiting; the sub-agent goes on in the background and its result will arrive as a message",
        }),
        // Stopped by the hub, after this is written: a child that
        // finished first (in the same instant) is not stopped, and its
        // result comes back as a message. The words hold either way.
        ParentStopPolicy::Cascade => json!({
            "id": id.as_str(),
            "stopping": true,
            "note": "the turn ended while waiting, and the sub-agent is stopped with it; if it had already finished, its result will arrive as a message",
        }),
    }
    .to_string()
}

/// `send`'s answer for a message a child took as it runs or waits (a
/// resumed run is [`resumed_json`]).
pub(super) fn taken_json(id: &AgentId, how: &crate::hub::Steered) -> Value {
    match how {
        crate::hub::Steered::Queued => json!({
            "id": id.as_str(),
            "status": "queued",
            "note": "it reads your message after its task, when it starts",
        }),
        crate::hub::Steered::Running => json!({
            "id": id.as_str(),
            "status": "running",
            "note": "it reads your message at its next model call, after what it is doing now",
        }),
        // Not a take: `resumed_json` says it.
        crate::hub::Steered::Resumed(next) => json!({"id": next.as_str(), "status": "background"}),
    }
}

/// A finished child `id` resumed as `next` by a message, as an agent at
/// `depth` reads it (`target`: the new run's depth).
pub(super) fn resumed_json(
    id: &AgentId,
    next: &AgentId,
    (depth, target): (u32, u32),
    woken: bool,
) -> Value {
    json!({
        "id": next.as_str(),
        "resumed_from": id.as_str(),
        "status": "background",
        "note": format!(
            "`{id}` had ended; it goes on from its conversation as `{next}`, reading your message first; {} (its id: `{next}`)",
            how_told(depth, target, woken)
        ),
    })
}

/// A synchronous child still queued at its wall-clock cap: handed to the
/// background (`goes_on`) or dropped.
pub(super) fn not_started(
    id: &AgentId,
    cap: std::time::Duration,
    goes_on: bool,
    woken: bool,
) -> String {
    let then = if goes_on && woken {
        "it goes on in the background, and its result will arrive as a message"
    } else if goes_on {
        "it goes on in the background: you are not told when it finishes, ask with action result"
    } else {
        "it was dropped: answer without it, or ask again once a running sub-agent has finished"
    };
    format!(
        "the sub-agent `{id}` has not started: it waited {} s for a free slot, all the time \
         it could have had before your own runs out; {then}",
        // In milliseconds, as `elapsed_s`: whole seconds read "0 s" for a
        // requester with a second left.
        (cap.as_millis() as f64) / 1000.0
    )
}

/// What a synchronous call answers when its child's end never came.
pub(super) fn lost(id: &AgentId) -> Result<String, ToolError> {
    Err(refuse(format!("the sub-agent `{id}` was lost")))
}

/// A finished child's answer as `delegate_task` and `agent` return it.
pub(crate) fn final_answer(envelope: &Envelope) -> Result<String, ToolError> {
    match envelope.status {
        SubAgentStatus::Done => Ok(envelope.result.clone().unwrap_or_default()),
        SubAgentStatus::Stopped => Err(refuse(format!(
            "the sub-agent `{}` was stopped before it finished",
            envelope.id
        ))),
        SubAgentStatus::Interrupted => Err(refuse(format!(
            "the sub-agent `{}` was interrupted before it finished",
            envelope.id
        ))),
        _ => Err(refuse(format!(
            "the sub-agent `{}` failed: {}",
            envelope.id,
            envelope.error.as_deref().unwrap_or("no reason given")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use subagents_messages::{SubAgentStatus, ToolUseId};

    /// A ranged `result` of a failed child claims it (no wake follows), so
    /// it must carry the reason the whole answer carries: it had none.
    #[test]
    fn a_range_of_a_failed_childs_answer_says_why_it_failed() {
        let request = subagents_messages::ChildRequest::new(
            AgentId::new("parent"),
            0,
            ToolUseId::new("call_1"),
            "Worker",
            "work",
        );
        let mut envelope = crate::hub::requested(
            AgentId::new("agent_1"),
            "Worker".into(),
            &request,
            Vec::new(),
            0,
        );
        envelope.status = SubAgentStatus::Failed;
        envelope.result = Some("half of it".into());
        envelope.error = Some("the model could not be called: refused".into());
        let out: Value =
            serde_json::from_str(&range_json(&envelope, 0, 4, envelope.error.clone())).unwrap();
        assert_eq!(out["result"], "half");
        assert_eq!(out["error"], "the model could not be called: refused");
    }

    /// The wait a queued child's call names is what it was: a cap under a
    /// second read "it waited 0 s".
    #[test]
    fn a_wait_under_a_second_is_not_0_s() {
        let id = AgentId::new("agent_1");
        let said = not_started(&id, std::time::Duration::from_millis(900), false, true);
        assert!(said.contains("waited 0.9 s"), "{said}");
        let said = not_started(&id, std::time::Duration::from_secs(90), true, true);
        assert!(said.contains("waited 90 s"), "{said}");
    }
}
