//! The checks of docs/event-ordering.md over a whole log: every child's
//! events paired and in order, inline runs in their fixed order.

use std::collections::HashMap;

use subagents::messages::{AgentEvent, AgentId, SubAgentStatus, ToolUseId};

/// Per child, in log order: everything seen about it.
#[derive(Debug, Default, Clone)]
pub struct ChildLog {
    pub started_at: Option<usize>,
    /// Where its `ChildRunning` came (it waited in the queue).
    pub running_at: Vec<usize>,
    pub statuses: Vec<(usize, SubAgentStatus)>,
    pub events: Vec<(usize, AgentEvent)>,
    pub parent_call: Option<ToolUseId>,
    pub background: bool,
}

impl ChildLog {
    pub fn terminal(&self) -> Option<(usize, SubAgentStatus)> {
        self.statuses.iter().copied().find(|(_, s)| s.is_terminal())
    }

    /// Its own row: the events it emitted, unwrapped, in order (its own
    /// children's events folded in it, as its parent's log holds its).
    pub fn row(&self) -> Vec<AgentEvent> {
        self.events.iter().map(|(_, e)| e.clone()).collect()
    }
}

/// `child`'s row in `log` (empty if it has none).
pub fn row_of(log: &[AgentEvent], child: &str) -> Vec<AgentEvent> {
    children(log)
        .1
        .get(&AgentId::new(child))
        .map(ChildLog::row)
        .unwrap_or_default()
}

/// Groups a top-level log by child.
pub fn children(log: &[AgentEvent]) -> (Vec<AgentId>, HashMap<AgentId, ChildLog>) {
    let mut order = Vec::new();
    let mut by_id: HashMap<AgentId, ChildLog> = HashMap::new();
    for (i, event) in log.iter().enumerate() {
        match event {
            AgentEvent::ChildStarted(info) => {
                if !by_id.contains_key(&info.id) {
                    order.push(info.id.clone());
                }
                let child = by_id.entry(info.id.clone()).or_default();
                assert!(
                    child.started_at.is_none(),
                    "guarantee 1: ChildStarted twice for {}",
                    info.id
                );
                assert!(
                    child.statuses.is_empty() && child.events.is_empty(),
                    "guarantee 1: {} had events before ChildStarted",
                    info.id
                );
                child.started_at = Some(i);
                child.parent_call = Some(info.parent_tool_use_id.clone());
                child.background = info.background;
            }
            AgentEvent::ChildStatus(id, status) => {
                let child = by_id.entry(id.clone()).or_default();
                child.statuses.push((i, *status));
            }
            AgentEvent::Child(id, inner) => {
                let child = by_id.entry(id.clone()).or_default();
                child.events.push((i, (**inner).clone()));
            }
            AgentEvent::ChildRunning(id) => {
                let child = by_id.entry(id.clone()).or_default();
                child.running_at.push(i);
            }
            _ => {}
        }
    }
    (order, by_id)
}

/// Every `ToolStarted` of one agent's own events is answered by exactly one
/// `ToolResult` before that agent's next `Result`, every
/// `ApprovalRequested` by exactly one `ApprovalResolved` (after it, before
/// the call's `ToolResult`); at rest nothing is left open. `who` names the
/// agent in failures.
pub fn check_pairs<'a>(who: &str, events: impl IntoIterator<Item = &'a AgentEvent>, at_rest: bool) {
    let mut open_calls: Vec<ToolUseId> = Vec::new();
    let mut open_approvals: Vec<(subagents::messages::ApprovalId, ToolUseId)> = Vec::new();
    for event in events {
        match event {
            AgentEvent::ToolStarted(call) => {
                assert!(
                    !open_calls.contains(&call.tool_use_id),
                    "{who}: ToolStarted {} twice before its ToolResult",
                    call.tool_use_id
                );
                open_calls.push(call.tool_use_id.clone());
            }
            AgentEvent::ToolResult(result) => {
                let at = open_calls
                    .iter()
                    .position(|c| *c == result.tool_use_id)
                    .unwrap_or_else(|| {
                        panic!(
                            "{who}: ToolResult {} with no open ToolStarted",
                            result.tool_use_id
                        )
                    });
                open_calls.remove(at);
                assert!(
                    !open_approvals.iter().any(|(_, c)| *c == result.tool_use_id),
                    "{who}: ToolResult {} before its approval was resolved",
                    result.tool_use_id
                );
            }
            AgentEvent::ApprovalRequested(request) => {
                // Guarantee 7: asked by a call in flight (one answered,
                // or never started, has nobody waiting on the answer).
                assert!(
                    open_calls.contains(&request.tool_use_id),
                    "{who}: ApprovalRequested {} for {}, which is not an open call",
                    request.id,
                    request.tool_use_id
                );
                open_approvals.push((request.id.clone(), request.tool_use_id.clone()));
            }
            AgentEvent::ApprovalResolved { id: resolved, .. } => {
                let at = open_approvals
                    .iter()
                    .position(|(id, _)| id == resolved)
                    .unwrap_or_else(|| {
                        panic!("{who}: ApprovalResolved {resolved} with no open request")
                    });
                open_approvals.remove(at);
            }
            AgentEvent::Result(_) => {
                assert!(
                    open_calls.is_empty(),
                    "{who}: the turn's Result came with calls unanswered: {open_calls:?}"
                );
                assert!(
                    open_approvals.is_empty(),
                    "{who}: the turn's Result came with approvals open: {open_approvals:?}"
                );
            }
            _ => {}
        }
    }
    if at_rest {
        assert!(
            open_calls.is_empty(),
            "{who}: at rest, calls unanswered: {open_calls:?}"
        );
        assert!(
            open_approvals.is_empty(),
            "{who}: at rest, approvals open: {open_approvals:?}"
        );
    }
}

/// Checks guarantees 1 and 2 (and, at rest, that every child ended) over
/// a whole log. Returns the per-child view for further checks.
pub fn check_log(log: &[AgentEvent], at_rest: bool) -> (Vec<AgentId>, HashMap<AgentId, ChildLog>) {
    check_log_failing(log, at_rest, &|_| false)
}

/// [`check_log`] where the children `failed_elsewhere` names were failed
/// after their `Result` by what ended them from outside — a hub that died
/// before it read their finish, a node that stopped their run unasked —
/// so their `failed` end may follow any `Result`. Let through for every
/// child, a relabel to `failed` on a live hub went unseen.
pub fn check_log_failing(
    log: &[AgentEvent],
    at_rest: bool,
    failed_elsewhere: &dyn Fn(&AgentId) -> bool,
) -> (Vec<AgentId>, HashMap<AgentId, ChildLog>) {
    let (order, by_id) = children(log);
    for (id, child) in &by_id {
        let started = child
            .started_at
            .unwrap_or_else(|| panic!("guarantee 1: {id} has events but no ChildStarted"));
        let indices = child
            .statuses
            .iter()
            .map(|(i, _)| *i)
            .chain(child.events.iter().map(|(i, _)| *i));
        for i in indices {
            assert!(i > started, "guarantee 1: {id} event before ChildStarted");
        }
        let ranks: Vec<u8> = child.statuses.iter().map(|(_, s)| s.rank()).collect();
        assert!(
            ranks.windows(2).all(|w| w[0] < w[1]),
            "guarantee 2: statuses of {id} do not move strictly forward: {:?}",
            child.statuses
        );
        let terminals = child
            .statuses
            .iter()
            .filter(|(_, s)| s.is_terminal())
            .count();
        assert!(
            terminals <= 1,
            "guarantee 2: {id} has {terminals} terminal statuses"
        );
        if let Some((t, _)) = child.terminal() {
            assert!(
                child.events.iter().all(|(i, _)| *i < t),
                "guarantee 2: {id} has events after its terminal status"
            );
        }
        if at_rest {
            assert_eq!(terminals, 1, "at rest, {id} has no terminal status");
        }
        // A queued child's start is on the stream: one ChildRunning, after
        // its queued status, before any of its own events.
        let queued_at = child
            .statuses
            .iter()
            .find(|(_, s)| *s == SubAgentStatus::Queued)
            .map(|(i, _)| *i);
        assert!(child.running_at.len() <= 1, "ChildRunning twice for {id}");
        // Guarantee 2: nothing of it after its terminal status, its start
        // included (a queued child stopped as it takes its slot).
        if let Some((t, _)) = child.terminal() {
            assert!(
                child.running_at.iter().all(|running| *running < t),
                "guarantee 2: ChildRunning for {id} after its terminal status"
            );
        }
        if let Some(&running) = child.running_at.first() {
            let queued = queued_at
                .unwrap_or_else(|| panic!("ChildRunning for {id}, which was never queued"));
            assert!(
                running > queued,
                "ChildRunning for {id} before it was queued"
            );
            assert!(
                child.events.iter().all(|(i, _)| *i > running),
                "{id} ran before its ChildRunning"
            );
            // An inline child says `running` as it takes its slot (a
            // background one stays `background`).
            let background_before = child
                .statuses
                .iter()
                .any(|(i, s)| *i < running && *s == SubAgentStatus::Background);
            if !child.background && !background_before {
                assert!(
                    child
                        .statuses
                        .iter()
                        .any(|(i, s)| *i > running && *s == SubAgentStatus::Running),
                    "{id} took its slot inline and never said running"
                );
            }
        } else if queued_at.is_some() {
            assert!(
                child.events.is_empty(),
                "{id} was queued and ran with no ChildRunning"
            );
        }
        check_pairs(id.as_str(), child.events.iter().map(|(_, e)| e), at_rest);
        // One that started (said so: `ChildRunning`, or `running`) has its
        // `Result` too when it emitted nothing else (review: tests that
        // cannot fail — a child stopped at the gate, before its first
        // delta, was never checked); a start that failed has no turn.
        let started = !child.running_at.is_empty()
            || child
                .statuses
                .iter()
                .any(|(_, s)| *s == SubAgentStatus::Running);
        let failed = child
            .terminal()
            .is_some_and(|(_, s)| s == SubAgentStatus::Failed);
        if at_rest && (!child.events.is_empty() || (started && !failed)) {
            let results = child
                .events
                .iter()
                .filter(|(_, e)| matches!(e, AgentEvent::Result(_)))
                .count();
            assert_eq!(
                results, 1,
                "at rest, {id} ran and has {results} Results of its own"
            );
        }
        // What its own `Result` said is what its end says (the hub reads
        // its status from that outcome; a remote end read a later stop) —
        // or `failed`: a hub that died before it read the child's finish
        // fails the child whose turn had ended (docs/event-ordering.md,
        // "Replay").
        let outcome = child.events.iter().find_map(|(_, e)| match e {
            AgentEvent::Result(r) => Some(&r.outcome),
            _ => None,
        });
        if let (Some(outcome), Some((_, status))) = (outcome, child.terminal()) {
            use subagents::messages::Outcome;
            let fits = (status == SubAgentStatus::Failed && failed_elsewhere(id))
                || match outcome {
                    Outcome::Completed | Outcome::LimitReached(_) => status == SubAgentStatus::Done,
                    Outcome::Failed(_) => status == SubAgentStatus::Failed,
                    Outcome::Stopped => {
                        matches!(
                            status,
                            SubAgentStatus::Stopped | SubAgentStatus::Interrupted
                        )
                    }
                };
            assert!(
                fits,
                "{id}: its Result said {outcome:?}, its terminal status is {status:?}"
            );
        }
    }
    check_pairs("the parent", log.iter(), at_rest);
    // A child's own children: the same guarantees inside its row (a
    // grandchild's events are nested in its parent's, which the loop
    // above reads as that child's own).
    for id in &order {
        let row = by_id[id].row();
        if row.iter().any(|e| matches!(e, AgentEvent::ChildStarted(_))) {
            check_log_failing(&row, at_rest, failed_elsewhere);
        }
    }
    (order, by_id)
}

/// Checks guarantee 3 for every inline (non-background, never handed off)
/// child: ToolStarted(use_agent) → ChildStarted → status → Child* →
/// terminal → ToolResult(use_agent). Tool-use ids are only unique within
/// a model answer, so the call is the last `ToolStarted` with that id
/// before `ChildStarted`, and its result the first `ToolResult` after.
pub fn check_inline_order(log: &[AgentEvent]) {
    check_inline(log, false);
}

/// Guarantee 3 for the inline children whose parent's `ToolResult` has
/// come (a child still running inline has none yet).
pub fn check_inline_order_settled(log: &[AgentEvent]) {
    check_inline(log, true);
}

fn check_inline(log: &[AgentEvent], skip_unsettled: bool) {
    let (order, by_id) = children(log);
    // Each child's own row too, where it asked for children: the
    // property test's grandchildren (docs/testing.md: "every invariant
    // above covers grandchildren too") were never looked at here.
    for id in &order {
        let row = by_id[id].row();
        if row.iter().any(|e| matches!(e, AgentEvent::ChildStarted(_))) {
            check_inline(&row, skip_unsettled);
        }
    }
    for (id, child) in &by_id {
        let handed_off = child.background
            || child
                .statuses
                .iter()
                .any(|(_, s)| *s == SubAgentStatus::Background);
        if handed_off {
            check_handed_off(log, id, child);
            continue;
        }
        let call = child.parent_call.clone().unwrap();
        let started = child.started_at.unwrap();
        let tool_started = log[..started]
            .iter()
            .rposition(|e| matches!(e, AgentEvent::ToolStarted(t) if t.tool_use_id == call))
            .unwrap_or_else(|| panic!("guarantee 3: no ToolStarted before {id}'s ChildStarted"));
        let tool_result = log[started..]
            .iter()
            .position(|e| matches!(e, AgentEvent::ToolResult(t) if t.tool_use_id == call))
            .map(|p| p + started);
        let Some(tool_result) = tool_result else {
            if skip_unsettled {
                continue;
            }
            panic!("guarantee 3: no ToolResult for {id}'s call");
        };
        if is_a_cut_answer(&log[tool_result]) {
            // The parent's turn was cut while it waited: the call was
            // answered at the cut (the child goes on, or was stopped with
            // it), not after the child's end.
            continue;
        }
        let (terminal, _) = child.terminal().unwrap_or_else(|| {
            panic!("guarantee 3: {id}'s call answered before its terminal status")
        });
        assert!(tool_started < started);
        let first_status = child.statuses.first().unwrap();
        assert!(
            matches!(
                first_status.1,
                SubAgentStatus::Queued | SubAgentStatus::Running
            ),
            "guarantee 3: {id} first status {:?}",
            first_status.1
        );
        assert!(
            child
                .events
                .iter()
                .all(|(i, _)| *i > first_status.0 && *i < terminal)
        );
        assert!(
            terminal < tool_result,
            "guarantee 3: ToolResult before the terminal status of {id}"
        );
    }
}

/// Guarantee 4 for a child handed to the background (`wait: false`, or
/// the inline wait ran out): the answer to the call that started it (the
/// first `ToolResult` of its call after `ChildStarted`) comes after its
/// `ChildStatus(background)` — unless the call was answered at its turn's
/// cut (the hand-off follows that). No answer yet: nothing to check.
fn check_handed_off(log: &[AgentEvent], id: &AgentId, child: &ChildLog) {
    let (Some(call), Some(started)) = (&child.parent_call, child.started_at) else {
        return;
    };
    let answer = log[started..]
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolResult(t) if t.tool_use_id == *call))
        .map(|p| p + started);
    let Some(answer) = answer else {
        return;
    };
    if is_answered_at_the_cut(&log[answer]) || closed_by_a_cut(&log[answer + 1..]) {
        return;
    }
    assert!(
        child
            .statuses
            .iter()
            .any(|(i, s)| *i < answer && *s == SubAgentStatus::Background),
        "guarantee 4: the call that started {id} was answered before its hand-off: {:?}",
        log[answer]
    );
}

/// True when what follows an answer at its level is the turn's cut
/// `Result` (children's events aside): the turn was closed in the tick
/// the call was answered — the inline wait and the turn's wall clock
/// running out together read `pending` as the close answers it, and the
/// hand-off follows the `Result` (docs/event-ordering.md, guarantee 3).
fn closed_by_a_cut(after: &[AgentEvent]) -> bool {
    let next = after.iter().find(|e| {
        !matches!(
            e,
            AgentEvent::Child(..)
                | AgentEvent::ChildStatus(..)
                | AgentEvent::ChildStarted(_)
                | AgentEvent::ChildRunning(_)
        )
    });
    matches!(next, Some(AgentEvent::Result(r)) if !r.outcome.is_completed())
}

/// True when a `ToolResult` answers its call at the turn's cut (a stop, a
/// limit), not with what the call came to: the delegation tool's cut note
/// (`the turn ended while waiting…`) or a cut call's sentence. Narrower
/// than [`is_a_cut_answer`], which counts a background child's `pending`
/// answer too.
pub fn is_answered_at_the_cut(event: &AgentEvent) -> bool {
    let AgentEvent::ToolResult(result) = event else {
        return false;
    };
    result.output.contains("the turn ended while waiting")
        || result.output.ends_with("before this call finished")
}

/// The child and status a `use_agent` `ToolResult` carries when it holds a
/// finished child's result — not a `pending` or cut note, not a `status`
/// snapshot, not a sentence.
pub fn finished_result(event: &AgentEvent) -> Option<(AgentId, String)> {
    let AgentEvent::ToolResult(result) = event else {
        return None;
    };
    if result.name != "use_agent" || result.is_error {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&result.output).ok()?;
    let status = v["status"].as_str()?;
    let note = ["pending", "note", "elapsed_s"]
        .iter()
        .any(|k| v.get(k).is_some());
    let finished = matches!(status, "done" | "failed" | "stopped");
    (finished && !note).then(|| {
        (
            AgentId::new(v["id"].as_str().unwrap_or("")),
            status.to_owned(),
        )
    })
}

/// True when a `ToolResult` answers a call its turn cut while it waited:
/// a `pending` or stop note, or the sentence of a cut call.
pub fn is_a_cut_answer(event: &AgentEvent) -> bool {
    let AgentEvent::ToolResult(result) = event else {
        return false;
    };
    let note = serde_json::from_str::<serde_json::Value>(&result.output)
        .is_ok_and(|v| v.get("pending").is_some() || v.get("note").is_some());
    note || result.output.ends_with("before this call finished")
}

/// Guarantee 5, per requester: at no point of `log` do more than `cap` of
/// its children hold a slot (from their start, or from `ChildRunning` for
/// one that waited in the queue, to their terminal status), nor, in each
/// child's own row, more than `cap` of that child's children.
pub fn check_cap(log: &[AgentEvent], cap: usize) {
    let (order, by_id) = children(log);
    let mut spans: Vec<(usize, usize, &AgentId)> = Vec::new();
    for id in &order {
        let child = &by_id[id];
        let Some(started) = child.started_at else {
            continue;
        };
        let queued = child
            .statuses
            .iter()
            .any(|(_, s)| *s == SubAgentStatus::Queued);
        let end = child.terminal().map_or(log.len(), |(at, _)| at);
        let from = if queued {
            let running = child
                .statuses
                .iter()
                .filter(|(_, s)| *s == SubAgentStatus::Running)
                .map(|(at, _)| *at)
                .chain(child.running_at.iter().copied())
                .min();
            // Never ran: it held no slot.
            match running {
                Some(at) => at,
                None => continue,
            }
        } else {
            started
        };
        spans.push((from, end, id));
    }
    for i in 0..log.len() {
        let live: Vec<&AgentId> = spans
            .iter()
            .filter(|(from, end, _)| *from <= i && i < *end)
            .map(|(_, _, id)| *id)
            .collect();
        assert!(
            live.len() <= cap,
            "guarantee 5: {} live at once ({live:?}), the cap is {cap}",
            live.len()
        );
    }
    for id in &order {
        check_cap(&by_id[id].row(), cap);
    }
}
