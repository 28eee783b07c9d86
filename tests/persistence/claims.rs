//! A result a tool call claimed is written claimed at once: a kill before
//! the claiming turn ends leaves no wake owed for it.

use super::*;

/// A background child finished while its parent's turn ran (its wake
/// waits, owed on disk); a `use_agent result` in that turn claimed it.
/// The claim is written at once, not when the turn ends: a process
/// killed in between woke the next one's parent with a result its call
/// had already read.
#[tokio::test(start_paused = true)]
async fn a_claim_is_on_disk_before_the_claiming_turn_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 10, false)),
        Reply::new()
            .delay(std::time::Duration::from_secs(20))
            .use_agent(&UseAgentCall::result("agent_1")),
        Reply::new().tool_call("sleep", r#"{"secs":600}"#),
        Reply::answer("Done."),
    ])
    .with_script("Worker", worker(10));
    let (thread, mut events) = thread_on(model.shared(), store.clone(), 3).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    assert!(
        !log.iter().any(|e| matches!(e, AgentEvent::Result(_))),
        "the claiming turn is still in its sleep"
    );
    thread.flush_persistence().await.unwrap();
    let worker = store.get(&AgentId::new("agent_1")).unwrap();
    assert!(worker.claimed, "{worker:?}");
    assert!(!worker.wake_owed, "{worker:?}");
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    thread.close_and_wait().await;
    drop(store);
    assert!(open(&killed).owed_wakes().is_empty());
}

/// Accounting, across a restart (review: accounting): an earlier
/// session's child is not counted again here — but one a message had
/// resumed (imported into the book to be resumed from) was: a `use_agent
/// result` of it then took it as this session's, and its old tokens were
/// added to the turn's children (shrinking what a synchronous child of
/// that turn could spend). Without the message, the same result counted
/// nothing. Either way now, nothing.
#[tokio::test]
async fn an_earlier_sessions_result_taken_after_a_message_is_not_counted_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    // Its child used 100 tokens there.
    an_earlier_session_with_one_finished_child(&dir).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Read."),
        Reply::answer("Noted again."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::answer("(the first run's)"),
            Reply::answer("second part done").usage(5, 0),
        ],
    );
    let (thread, mut events) = thread_on(model.shared(), open(&dir), 3).await;
    thread.send_user("more").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    let took: Vec<&String> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.output.contains("first part done") => Some(&r.output),
            _ => None,
        })
        .collect();
    assert_eq!(took.len(), 1, "the result was taken: {log:?}");
    assert_eq!(
        result.children_usage.total(),
        0,
        "{:?}",
        result.children_usage
    );
    thread.close_and_wait().await;
}
