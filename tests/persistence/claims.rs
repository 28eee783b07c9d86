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
