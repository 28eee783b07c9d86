//! The fold's edges: what a restore closes below the top level, a wake's
//! turn, call ids an answer reuses, and CRLF in a row.

use super::*;
use crate::ids::ApprovalId;

fn tool_result(id: &str, output: &str) -> AgentEvent {
    AgentEvent::ToolResult(ToolResult {
        tool_use_id: ToolUseId::new(id),
        name: "use_agent".into(),
        output: output.into(),
        is_error: false,
    })
}

/// One row per item, short, children's own rows inside brackets.
fn rows(t: &Transcript) -> Vec<String> {
    t.items
        .iter()
        .map(|item| match item {
            TranscriptItem::User(text) => format!("user:{text}"),
            TranscriptItem::Wake(text) => format!("wake:{text}"),
            TranscriptItem::Assistant(text) => format!("text:{text}"),
            TranscriptItem::Tool { id, output, .. } => format!("tool:{id}:{output:?}"),
            TranscriptItem::Approval { request, resolved } => {
                format!("approval:{}:{resolved:?}", request.id)
            }
            TranscriptItem::Agent(run) => format!(
                "agent:{}:{:?}:queued={}:{:?}",
                run.info.id,
                run.status,
                run.queued,
                rows(&run.transcript)
            ),
            TranscriptItem::Result { text, outcome } => format!("result:{outcome:?}:{text}"),
        })
        .collect()
}

/// A restore after a kill with a child's approval pending (a child asked
/// to `http_post`, and the process died): `end_open_turns` closes the
/// rows left open in every child's rows too — the child's approval
/// cancelled, its open call cut, its own child interrupted — and a child
/// still waiting in the queue is interrupted and no longer queued. The
/// only restore test had no approval, and a running child with no rows
/// of its own: without the approval's arm, or the recursion into a
/// child's rows, a UI kept offering buttons for an approval whose answer
/// reads `Ended`, a `…` call row and a `[running]` grandchild, for good;
/// without the queued mark's reset, a child that will never run read as
/// waiting for its slot.
#[test]
fn a_restore_closes_a_childs_open_approval_call_and_grandchild() {
    let a1 = AgentId::new("agent_1");
    let c = |e: AgentEvent| AgentEvent::Child(a1.clone(), Box::new(e));
    let saved = Transcript::from_events(&[
        AgentEvent::UserMessage("go".into()),
        tool_started("c1", "use_agent"),
        child_started("agent_1", "c1"),
        AgentEvent::ChildStatus(a1.clone(), SubAgentStatus::Running),
        c(tool_started("k1", "http_post")),
        c(AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
            id: ApprovalId::new("agent_1-approval-1"),
            tool_use_id: ToolUseId::new("k1"),
            tool_name: "http_post".into(),
            arguments: "{}".into(),
        }))),
        c(tool_started("k2", "use_agent")),
        c(child_started("agent_2", "k2")),
        tool_started("c2", "use_agent"),
        child_started("agent_3", "c2"),
        AgentEvent::ChildStatus(AgentId::new("agent_3"), SubAgentStatus::Queued),
    ]);
    let json = serde_json::to_string(&saved).unwrap();
    let mut t: Transcript = serde_json::from_str(&json).unwrap();
    t.end_open_turns();
    let cut = Some(INTERRUPTED.to_owned());
    let cancelled = Some(ApprovalOutcome::Cancelled(INTERRUPTED.to_owned()));
    let child = t.child(&a1).unwrap();
    assert_eq!(child.status, Some(SubAgentStatus::Interrupted));
    let approval = child.transcript.items.iter().find_map(|item| match item {
        TranscriptItem::Approval { resolved, .. } => Some(resolved.clone()),
        _ => None,
    });
    assert_eq!(
        approval,
        Some(cancelled),
        "the child's approval is closed: {:?}",
        rows(&t)
    );
    let call = child.transcript.items.iter().find_map(|item| match item {
        TranscriptItem::Tool {
            id,
            output,
            is_error,
            ..
        } if id.as_str() == "k1" => Some((output.clone(), *is_error)),
        _ => None,
    });
    assert_eq!(
        call,
        Some((cut, true)),
        "the child's call is cut: {:?}",
        rows(&t)
    );
    let grandchild = child.transcript.child(&AgentId::new("agent_2")).unwrap();
    assert_eq!(
        grandchild.status,
        Some(SubAgentStatus::Interrupted),
        "the grandchild is interrupted: {:?}",
        rows(&t)
    );
    let queued = t.child(&AgentId::new("agent_3")).unwrap();
    assert_eq!(
        (queued.status, queued.queued),
        (Some(SubAgentStatus::Interrupted), false),
        "the queued child is interrupted, no longer waiting: {:?}",
        rows(&t)
    );
}

fn wake(child: &str) -> AgentEvent {
    AgentEvent::Wake {
        child: AgentId::new(child),
        line: format!("[use_agent {child} finished] ok"),
    }
}

/// A wake starts a turn as a user message does: a message typed while
/// the wake's answer streams is a row after that turn's `Result`, not
/// between the two halves of the answer; and a restore after a kill
/// during a wake's turn ends that turn with a stopped `Result`. The wake
/// counted no open turn and no test typed during one, so the split fixed
/// for user turns came back for wakes unseen.
#[test]
fn a_wakes_turn_queues_a_typed_message_and_is_ended_by_a_restore() {
    let t = Transcript::from_events(&[
        wake("agent_3"),
        AgentEvent::Text("first ".into()),
        AgentEvent::UserMessage("typed".into()),
        AgentEvent::Text("second".into()),
        result("first second"),
        AgentEvent::Text("reply".into()),
        result("reply"),
    ]);
    assert_eq!(
        rows(&t),
        [
            "wake:[use_agent agent_3 finished] ok",
            "text:first second",
            "result:Completed:first second",
            "user:typed",
            "text:reply",
            "result:Completed:reply",
        ]
    );
    let saved = Transcript::from_events(&[wake("agent_3"), AgentEvent::Text("half".into())]);
    let mut t: Transcript = serde_json::from_str(&serde_json::to_string(&saved).unwrap()).unwrap();
    t.end_open_turns();
    let stopped = format!("result:Stopped:{INTERRUPTED}");
    assert_eq!(
        rows(&t),
        [
            "wake:[use_agent agent_3 finished] ok",
            "text:half",
            stopped.as_str(),
        ]
    );
}

/// A server that omits call ids gets `call_<index>` from the adapter, so
/// every answer of a turn has a `call_0`: each result and each child
/// belongs to the latest row of that id. Found from the first, the
/// second answer's result overwrote the first row's output (the second
/// row stayed `…` for good) and its child was drawn under the first
/// answer's call. The scripted model's ids are unique across a turn, so
/// no test reused one.
#[test]
fn a_call_id_reused_by_a_later_answer_gets_its_own_result_and_child() {
    let t = Transcript::from_events(&[
        AgentEvent::UserMessage("go".into()),
        tool_started("call_0", "use_agent"),
        child_started("a1", "call_0"),
        tool_result("call_0", "first"),
        tool_started("call_0", "use_agent"),
        child_started("a2", "call_0"),
        tool_result("call_0", "second"),
    ]);
    assert_eq!(
        rows(&t),
        [
            "user:go",
            "tool:call_0:Some(\"first\")",
            "agent:a1:None:queued=false:[]",
            "tool:call_0:Some(\"second\")",
            "agent:a2:None:queued=false:[]",
        ]
    );
}

/// A CRLF line end is one line end: `a\r\nb` renders as two lines, the
/// second hanging in its row. Read as CR then LF, each CRLF in a model's
/// text or a tool's output drew an empty hanging line between its two
/// lines; the only CRLF render test checked each line was there, not
/// that nothing came between them.
#[test]
fn a_crlf_line_end_renders_as_one_line_break() {
    let drawn = Transcript::from_events(&[
        AgentEvent::UserMessage("go".into()),
        AgentEvent::Text("a\r\nb".into()),
    ])
    .render();
    assert_eq!(drawn, "user: go\nassistant: a\n  b\n");
}

/// Foreign (review: panics from input): the count of open turns restored
/// from a file was bounded where open turns end, but a turn opening on
/// it — a message, a wake — added to it unchecked: "attempt to add with
/// overflow" in a debug build (a wrap to 0 in release).
#[test]
fn a_restored_count_of_open_turns_takes_another_turn_without_overflow() {
    let opening = [
        AgentEvent::UserMessage("two".into()),
        AgentEvent::Wake {
            child: AgentId::new("agent_1"),
            line: "agent_1 finished".into(),
        },
    ];
    for event in opening {
        let mut saved = serde_json::to_value(Transcript::from_events(&[AgentEvent::UserMessage(
            "one".into(),
        )]))
        .unwrap();
        saved["open_turns"] = serde_json::json!(u64::MAX);
        let mut t: Transcript = serde_json::from_value(saved).unwrap();
        t.apply(&event);
        t.end_open_turns();
        assert!(!t.items.is_empty(), "{event:?}");
    }
}

/// A child whose requesting call is not at this level (a host's own
/// request under an id of its own; a run resumed from another level)
/// was pushed at the end: a reply still streaming was split around it,
/// the rest of it a row of its own. It goes before that reply, which
/// stays one row.
#[test]
fn a_child_from_elsewhere_does_not_split_a_streaming_reply() {
    let t = Transcript::from_events(&[
        AgentEvent::UserMessage("go".into()),
        AgentEvent::Text("Hel".into()),
        child_started("agent_1", "host-1"),
        AgentEvent::Text("lo".into()),
        result("Hello"),
    ]);
    let replies: Vec<&String> = t
        .items
        .iter()
        .filter_map(|item| match item {
            TranscriptItem::Assistant(text) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(replies, ["Hello"], "{:?}", t.items);
    assert!(t.child(&AgentId::new("agent_1")).is_some());
}

/// The same one level down (review: the transcript): a child's rows
/// counted no turn open, so a child of its own from elsewhere (a host's
/// request in its name) split its reply still streaming in two.
#[test]
fn a_child_from_elsewhere_does_not_split_a_childs_streaming_reply() {
    let agent_1 = AgentId::new("agent_1");
    let nested = |e| AgentEvent::Child(agent_1.clone(), Box::new(e));
    let t = Transcript::from_events(&[
        AgentEvent::UserMessage("go".into()),
        tool_started("c1", "use_agent"),
        child_started("agent_1", "c1"),
        nested(AgentEvent::Text("Hel".into())),
        nested(child_started("agent_2", "host-1")),
        nested(AgentEvent::Text("lo".into())),
    ]);
    let rows = &t.child(&agent_1).unwrap().transcript.items;
    let replies: Vec<&String> = rows
        .iter()
        .filter_map(|item| match item {
            TranscriptItem::Assistant(text) => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(replies, ["Hello"], "{rows:?}");
}

/// A bare parent (no thread) emits no `UserMessage`: its host recorded
/// the turn with `push_user`, which opens none — as the quickstart did —
/// and a reply streaming around a child a host requested (no call row to
/// follow) split into two rows. Applied as the event a thread would
/// emit, the turn is open and the reply one row (push_user's docs say so
/// now; review: the transcript a host builds).
#[test]
fn a_bare_parents_turn_applied_as_its_event_keeps_the_reply_one_row() {
    let events = [
        AgentEvent::Text("Hel".into()),
        super::child_started("agent_1", "host-1"),
        AgentEvent::Text("lo".into()),
    ];
    let mut applied = Transcript::new();
    applied.apply(&AgentEvent::UserMessage("go".into()));
    let mut pushed = Transcript::new();
    pushed.push_user("go");
    for event in &events {
        applied.apply(event);
        pushed.apply(event);
    }
    let replies = |t: &Transcript| {
        t.items
            .iter()
            .filter(|i| matches!(i, TranscriptItem::Assistant(_)))
            .count()
    };
    assert_eq!(replies(&applied), 1, "{}", applied.render());
    assert_eq!(replies(&pushed), 2, "push_user opens no turn");
}
