//! A message a running child reads, on its stream: the answers either
//! side of it stay apart, in the stream and in a host's transcript.

use subagents::messages::AgentId;
use subagents::messages::transcript::{Transcript, TranscriptItem};

use super::*;

/// A message read after a final-looking answer (the child's model had
/// answered with no tool call when it came) made the child call again,
/// and nothing on the stream marked it: the two answers' deltas came one
/// after the other, and a host's transcript drew "first answer.second
/// answer." as one row, the message that caused the second nowhere. The
/// read is an event (`Steered`), a row of its own between the answers.
#[tokio::test(start_paused = true)]
async fn a_message_read_after_a_childs_final_answer_is_its_own_row() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Worker\nYou work.", "work").wait(false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more thing")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::answer("first answer.").delay(Duration::from_secs(10)),
            Reply::answer("second answer."),
        ],
    );
    let gate = GateHandle::spawn(2).await.unwrap();
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared()).gate(gate)).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    let sent = results_of(&log, "use_agent").pop().unwrap();
    assert_eq!(json(&sent.0)["status"], "running", "{}", sent.0);
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let transcript = Transcript::from_events(&log);
    let rows = &transcript
        .child(&AgentId::new("agent_1"))
        .unwrap()
        .transcript
        .items;
    let drawn: Vec<String> = rows
        .iter()
        .filter_map(|row| match row {
            TranscriptItem::Assistant(text) => Some(format!("model: {text}")),
            TranscriptItem::User(text) => Some(format!("sent: {text}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        drawn,
        [
            "model: first answer.",
            "sent: one more thing",
            "model: second answer."
        ],
        "{rows:#?}"
    );
    thread.close_and_wait().await;
}

/// Review of an earlier session's change: the message was shown read
/// (`Steered`) before the loop's limit checks, so a child whose tokens
/// ran out exactly at its budget (its next call never made) showed a
/// message read that no call read. Since (review: steering against
/// limits, forty-first session) a child whose answer spent its budget
/// with calls to run takes no message at all: not shown read in its row,
/// the send waits for its end, and a new run reads it.
#[tokio::test(start_paused = true)]
async fn a_message_no_call_reads_is_not_shown_read() {
    use subagents::messages::Limits;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 5, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more thing")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            // Exactly the budget, its output counted (with
            // `completion_tokens: 0` its output is left to the estimate,
            // and the call itself goes past the budget).
            Reply::new()
                .tool_call("sleep", r#"{"secs":5}"#)
                .usage(999, 1),
            Reply::answer("never asked"),
            Reply::answer("read it"),
        ],
    );
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .child_limits(Limits {
                token_budget: 1000,
                ..Limits::default()
            }),
    )
    .await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let sent = results_of(&log, "use_agent").pop().unwrap();
    assert_eq!(json(&sent.0)["resumed_from"], "agent_1", "{}", sent.0);
    let shown = log.iter().any(|e| {
        matches!(e, AgentEvent::Child(id, inner)
            if id.as_str() == "agent_1" && matches!(**inner, AgentEvent::Steered(_)))
    });
    assert!(!shown, "shown read by no call: {log:#?}");
    thread.close_and_wait().await;
}

/// The same for a cut while the next call waits at the gate (review of
/// this session's own diff): the message was read — shown `Steered`, put
/// in the conversation — before the turn waited for the gate, and the
/// wall clock cut it there: no call read it, yet it sat before the
/// partial result. Read once the gate lets the call in.
#[tokio::test(start_paused = true)]
async fn a_message_read_before_a_cut_at_the_gate_is_not_shown_read() {
    use subagents::messages::Limits;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 5, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more thing")),
        // Holds the thread's one-call gate past the child's wall clock.
        Reply::new().delay(Duration::from_secs(60)).text("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(5));
    let gate = GateHandle::spawn(1).await.unwrap();
    let (thread, events) = thread_with(
        DelegationBuilder::new(model.shared())
            .gate(gate)
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .child_limits(Limits {
                wall_clock: Duration::from_secs(30),
                ..Limits::default()
            }),
    )
    .await;
    sent_and_never_read(thread, events).await;
}

/// The user starts the worker, then has the parent send it "one more
/// thing", which no call of the worker reads: taken (`running`), never
/// shown read, and kept after the end of its conversation.
async fn sent_and_never_read(thread: ThreadHandle, mut events: EventStream) {
    use subagents::messages::Role;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell it").unwrap();
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let sent = results_of(&log, "use_agent").pop().unwrap();
    assert_eq!(json(&sent.0)["status"], "running", "{}", sent.0);
    let shown = log.iter().any(
        |e| matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Steered(_))),
    );
    assert!(!shown, "shown read by no call: {log:#?}");
    let conversation = thread.hub().conversation(&AgentId::new("agent_1")).unwrap();
    let last = conversation.last().unwrap();
    assert!(
        last.role == Role::User && last.content.ends_with("one more thing"),
        "after the end: {conversation:#?}"
    );
    thread.close_and_wait().await;
}
