//! What a model reads of a run a message resumed.

use super::*;

/// Misleading a model (review: messages to children): after `send` to a
/// finished child (resumed as a new run), `send` to its id reached the
/// new run and said "running", while `status` and `result` of the same
/// id read the old run — "done", with the answer from before the
/// message, which a model took for the reply. They say the run went on,
/// and as which id.
#[tokio::test(start_paused = true)]
async fn an_old_runs_status_and_result_say_a_message_resumed_it() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "now the second part")),
        Reply::new()
            .use_agent(&UseAgentCall::status("agent_1"))
            .use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Waiting."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("worked 1 s"),
            Reply::new().tool_call("sleep", r#"{"secs":5}"#),
            Reply::answer("second part done"),
        ],
    );
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    for answer in [json(&outputs[2].0), json(&outputs[3].0)] {
        assert_eq!(answer["result"], "worked 1 s", "{answer}");
        assert_eq!(answer["continued_as"], "agent_2", "{answer}");
    }
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
}

/// This session's own review of the above: with a second message to the
/// old id (resumed again, from the newest run), `continued_as` named the
/// next run only — the reply to the first message, not to the latest.
/// It names the newest run, the one a message to the id reaches.
#[tokio::test(start_paused = true)]
async fn an_old_runs_status_names_the_newest_run_of_its_chain() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "now the second part")),
        Reply::answer("Waiting."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "and a third")),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::answer("Waiting again."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("worked 1 s"),
            Reply::answer("second part done").delay(Duration::from_secs(5)),
            Reply::answer("third part done").delay(Duration::from_secs(5)),
        ],
    );
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared())).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until_wake(&mut events, &mut log, "agent_2").await;
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    let resumed = json(&outputs[2].0);
    assert_eq!(resumed["id"], "agent_3", "{resumed}");
    let status = json(&outputs[3].0);
    assert_eq!(status["continued_as"], "agent_3", "{status}");
    until_wake(&mut events, &mut log, "agent_3").await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
}
