//! Inline-wait expiry, panics and refusals.

use super::*;

#[tokio::test(start_paused = true)]
async fn inline_wait_expiry_hands_the_child_to_the_background() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Long", "work", &["sleep"], true)),
        Reply::answer("It continues in the background."),
    ])
    .with_script(
        "Long",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":60}"#),
            Reply::answer("late answer"),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    let start = tokio::time::Instant::now();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(start.elapsed(), Duration::from_secs(45));
    let (output, _) = &tool_result(&log, "use_agent")[0];
    assert!(output.contains("\"pending\":true"), "{output}");
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::ChildStatus(_, s) if s.is_terminal()),
    )
    .await;
    let (_, by_id) = check_log(&log, true);
    let child = &by_id[&AgentId::new("agent_1")];
    let statuses: Vec<SubAgentStatus> = child.statuses.iter().map(|(_, s)| *s).collect();
    assert_eq!(
        statuses,
        [
            SubAgentStatus::Running,
            SubAgentStatus::Background,
            SubAgentStatus::Done
        ]
    );
    // Guarantee 4: the parent's ToolResult came early, after the hand-off;
    // the child's events still arrive, in order, and fold into its row.
    let tool_result_at = log
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolResult(_)))
        .unwrap();
    assert!(child.statuses[1].0 < tool_result_at);
    assert!(child.terminal().unwrap().0 > tool_result_at);
    assert!(child.events.iter().any(|(i, _)| *i > tool_result_at));
    let transcript = Transcript::from_events(&log);
    let row = transcript.child(&AgentId::new("agent_1")).unwrap();
    assert_eq!(row.status, Some(SubAgentStatus::Done));
    assert!(transcript.render().contains("assistant: late answer"));
    assert!(!parent.hub.status(&AgentId::new("agent_1")).unwrap().claimed);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_child_fails_alone() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&run_call("Crasher", "crash", &[], true))
            .use_agent(&run_call("Steady", "work", &[], true)),
        Reply::answer("One failed, one worked."),
    ])
    .with_script("Crasher", vec![Reply::new().panic("segfault in adapter")])
    .with_script("Steady", vec![Reply::answer("steady result")]);
    let (parent, mut events) = delegating(model, 1).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "One failed, one worked.");
    let envelopes = parent.hub.envelopes();
    assert_eq!(envelopes[0].status, SubAgentStatus::Failed);
    assert!(
        envelopes[0]
            .error
            .as_deref()
            .unwrap()
            .contains("segfault in adapter")
    );
    assert_eq!(envelopes[1].status, SubAgentStatus::Done);
    let outputs = tool_result(&log, "use_agent");
    assert!(
        outputs[0].0.contains("\"status\":\"failed\""),
        "{}",
        outputs[0].0
    );
    assert!(outputs[1].0.contains("steady result"));
    check_log(&log, true);
    check_inline_order(&log);
    assert_eq!(parent.hub.snapshot().await.unwrap().live, 0);
}

#[tokio::test(start_paused = true)]
async fn unknown_tools_recursion_and_bad_arguments_are_sentences_and_spawn_nothing() {
    let calls = [
        run_call("A", "x", &["shell"], true).to_json(),
        run_call("B", "x", &["use_agent"], true).to_json(),
        // Malformed on purpose: written by hand.
        json!({"action": "run", "system_prompt": "C"}).to_string(),
        json!({"action": "dance"}).to_string(),
        UseAgentCall::status("agent_42").to_json(),
        json!({"action": "result"}).to_string(),
        json!({"input": "no action"}).to_string(),
        "[1,2]".to_owned(),
    ];
    let mut turn = Reply::new();
    for call in &calls {
        turn = turn.tool_call("use_agent", call.clone());
    }
    let model = ScriptedModel::new(vec![turn, Reply::answer("I could not delegate.")]);
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = tool_result(&log, "use_agent");
    let expected = [
        "the tool `shell` is not one of your tools, so a sub-agent cannot get it; your tools are: calculator, fetch_title, sleep",
        "`use_agent` cannot be given to a sub-agent here (the maximum depth is 1): leave it out of `tools`",
        "`input` is required for action run",
        "unknown action `dance`: use run, status, result, send, interrupt, stop or agents",
        "there is no sub-agent with id `agent_42`",
        "`id` is required for action result",
        "`action` is required: run, status, result, send, interrupt, stop or agents",
        "invalid arguments",
    ];
    assert_eq!(outputs.len(), expected.len(), "one answer per call");
    for ((output, is_error), want) in outputs.iter().zip(expected) {
        assert!(is_error, "{output}");
        assert!(output.contains(want), "{output:?} should contain {want:?}");
    }
    assert!(!log.iter().any(|e| matches!(e, AgentEvent::ChildStarted(_))));
    assert_eq!(parent.hub.snapshot().await.unwrap().requested, 0);
}

/// Foreign (a model's arguments): a refusal quoted what the model sent
/// whole — a long id, field name, action, profile name or tool name came
/// back whole as the error, into the model's context. Each is quoted on
/// one line, cut to 80 characters.
#[tokio::test(start_paused = true)]
async fn a_refusal_quotes_a_huge_value_cut_short() {
    // Within the token budget (its calls are output: 64 KiB each went past
    // it, and none ran).
    let huge = "x".repeat(1 << 13);
    let calls = [
        UseAgentCall::status(&huge).to_json(),
        json!({"action": "status", huge.clone(): 1}).to_string(),
        json!({"action": huge.clone()}).to_string(),
        json!({"action": "run", "agent": huge.clone(), "input": "x"}).to_string(),
        run_call("A", "x", &[huge.as_str()], true).to_json(),
        json!({"action": "run", "system_prompt": "A", "input": "x", "model": huge.clone()})
            .to_string(),
        json!({"action": "run", "system_prompt": "A", "input": "x", "model": "m", "provider": huge.clone()})
            .to_string(),
    ];
    let mut turn = Reply::new();
    for call in &calls {
        turn = turn.tool_call("use_agent", call.clone());
    }
    let model = ScriptedModel::new(vec![turn, Reply::answer("I could not delegate.")]);
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = tool_result(&log, "use_agent");
    assert_eq!(outputs.len(), calls.len());
    for (output, is_error) in &outputs {
        assert!(is_error, "{}", &output[..200.min(output.len())]);
        assert!(
            output.len() < 2_000,
            "{} bytes: {}…",
            output.len(),
            &output[..200]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_child_calling_use_agent_is_refused() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Nester", "try to nest", &[], true)),
        Reply::answer("done"),
    ])
    .with_script(
        "Nester",
        vec![
            Reply::new().use_agent(&run_call("Grandchild", "x", &[], true)),
            Reply::answer("could not nest"),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (_, by_id) = check_log(&log, true);
    let child = &by_id[&AgentId::new("agent_1")];
    assert!(
        child.events.iter().any(|(_, e)| matches!(e,
        AgentEvent::ToolResult(r) if r.is_error && r.output.contains(
            "`use_agent` is not available to this sub-agent: it runs at depth 1, as deep as delegation goes here"
        )))
    );
    assert_eq!(parent.hub.envelopes().len(), 1, "no grandchild was spawned");
}

/// A sub-agent given another front-end (`delegate_task`) that calls
/// `use_agent` is told the tools it has, not that delegation goes no
/// deeper.
#[tokio::test(start_paused = true)]
async fn a_child_calling_a_front_end_it_lacks_is_told_the_one_it_has() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call(
            "delegate_task",
            r#"{"task":"try to nest","system_prompt":"Nester\nn"}"#,
        ),
        Reply::answer("done"),
    ])
    .with_script(
        "Nester",
        vec![
            Reply::new().use_agent(&run_call("Grandchild", "x", &[], true)),
            Reply::answer("could not nest"),
        ],
    );
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .use_agent_tool(false)
        .delegate_task_tool(true)
        .max_depth(2)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (_, by_id) = check_log(&log, true);
    let child = &by_id[&AgentId::new("agent_1")];
    let refused = child
        .events
        .iter()
        .find_map(|(_, e)| match e {
            AgentEvent::ToolResult(r) if r.name == "use_agent" => Some(r.output.clone()),
            _ => None,
        })
        .expect("the call was answered");
    assert!(!refused.contains("as deep as delegation goes"), "{refused}");
    assert!(refused.contains("delegate_task"), "{refused}");
}

/// With no inline wait (always background), `result` on a child that has
/// finished reads its answer — at every offset — and is not told it still
/// runs: the wait's timer, already due, fired before the hub's answer for
/// a child it had finished long before. Read whole, the 10,000-character
/// answer comes within the default result budget of 8,000 (guards the
/// `RESULT_BUDGET` default, which no other test leaves unset).
#[tokio::test(start_paused = true)]
async fn with_no_inline_wait_a_finished_childs_result_is_read() {
    let answer = "y".repeat(10_000);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Worker", "w", &[], false)),
        Reply::new().tool_call("sleep", r#"{"secs":5}"#),
        Reply::new()
            .use_agent(&UseAgentCall::result("agent_1"))
            .use_agent(&UseAgentCall::result("agent_1").offset(6_000)),
        Reply::answer("read"),
    ])
    .with_script("Worker", vec![Reply::answer(answer)]);
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Sleep))
        .inline_wait(Duration::ZERO)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let results = tool_result(&log, "use_agent");
    assert_eq!(results.len(), 3, "{results:?}");
    for (output, _) in &results[1..] {
        assert!(!output.contains("pending"), "{output}");
        assert!(output.contains(r#""status":"done""#), "{output}");
    }
    // Within the default budget (8,000 characters: two thirds head, one
    // third tail), and a range of all that is left after 6,000.
    let whole = json(&results[1].0);
    let whole = whole["result"].as_str().unwrap();
    assert!(
        whole.contains("[… 2000 of 10000 characters left out here (characters 5334–7334)"),
        "not cut to the default budget: {} characters",
        whole.chars().count()
    );
    assert_eq!(json(&results[2].0)["length"], 4_000);
}

/// Misleading a model: values it sent with a space around them were
/// quoted cleaned — a status of `agent_1 ` (a trailing space) read
/// "there is no sub-agent with id `agent_1`" while `agent_1` ran, and a
/// tool `sleep ` read "the tool `sleep` is not one of your tools …; your
/// tools are: …, sleep". Each is quoted as it was sent.
#[tokio::test(start_paused = true)]
async fn a_refusal_quotes_a_value_as_it_was_sent() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Worker", "work", &[], false)),
        Reply::new()
            .use_agent(&UseAgentCall::status("agent_1 "))
            .use_agent(&run_call("Other", "x", &["sleep "], true)),
        Reply::answer("Done."),
    ])
    .with_script("Worker", vec![Reply::new().hang()]);
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = tool_result(&log, "use_agent");
    assert!(!outputs[0].1, "{outputs:?}");
    let (status, is_error) = &outputs[1];
    assert!(is_error, "{status}");
    assert!(
        status.contains(r#"no sub-agent with id `"agent_1 "`"#),
        "{status}"
    );
    let (tool, is_error) = &outputs[2];
    assert!(is_error, "{tool}");
    assert!(tool.contains(r#"the tool `"sleep "` is not"#), "{tool}");
}

/// Unbounded (a host model's failure): a failed child's `error` — the
/// same text as its result — was given whole beside the budgeted result,
/// again with every ranged `result`, and `delegate_task` returned "the
/// sub-agent … failed: {error}" with no cap: a 20,000-character failure
/// came back whole, into the parent's context. It is within the result
/// budget, as the answer is; the whole reason stays in the envelope. A
/// ranged `result` of the failed child carries that budgeted `error`
/// (guards the range's call site asking for it as beside the whole
/// result, which dropped it: the result *is* the reason).
#[tokio::test(start_paused = true)]
async fn a_failed_childs_reason_is_within_the_result_budget() {
    let huge = "x".repeat(20_000);
    for delegate_task in [false, true] {
        let call = if delegate_task {
            Reply::new().tool_call(
                "delegate_task",
                json!({"system_prompt": "Failing", "task": "go"}).to_string(),
            )
        } else {
            Reply::new()
                .use_agent(&run_call("Failing", "go", &[], true))
                .use_agent(&UseAgentCall::result("agent_1").offset(0).limit(10))
        };
        let model = ScriptedModel::new(vec![call, Reply::answer("It failed.")])
            .with_script("Failing", vec![Reply::new().error(huge.clone())]);
        let (parent, mut events) = DelegationBuilder::new(model.shared())
            .result_budget(1_000)
            .delegate_task_tool(delegate_task)
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let tool = if delegate_task {
            "delegate_task"
        } else {
            "use_agent"
        };
        let outputs = tool_result(&log, tool);
        assert_eq!(outputs.len(), 1 + usize::from(!delegate_task));
        for (output, _) in &outputs {
            assert!(output.chars().count() < 1_500, "{}", output.len());
        }
        if !delegate_task {
            // The inline answer's result is the reason itself: given once,
            // with no `error` beside it.
            let inline = json(&outputs[0].0);
            assert_eq!(inline.get("error"), None, "{inline}");
            // A range claims the result, so no wake carries the reason:
            // the range gives the `error` itself, within the budget (the
            // call site asks for it as not beside the whole result).
            let ranged = json(&outputs[1].0);
            assert_eq!(ranged["result"].as_str().unwrap().chars().count(), 10);
            let error = ranged["error"].as_str().unwrap_or_else(|| {
                panic!("a range of a failed child's answer says why it failed: {ranged}")
            });
            assert!(error.contains("xxxx"), "{error}");
            assert!(
                error.contains("the whole reason is kept in the sub-agent's envelope"),
                "{error}"
            );
        }
        let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
        assert!(envelope.error.unwrap().contains(&huge), "kept whole");
    }
}

/// A `delegate_task` child the host stops while its parent waits on it
/// answers the call with a refusal saying it was stopped before it
/// finished, not "failed: …" as a failure would. Guards against
/// `final_answer` losing its `Stopped` arm (its stopped child then read as
/// one that failed, "stopped while running").
#[tokio::test(start_paused = true)]
async fn a_delegate_task_child_the_host_stops_says_it_was_stopped() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call(
            "delegate_task",
            json!({"system_prompt": "Worker\nYou work.", "task": "work", "tools": ["sleep"]})
                .to_string(),
        ),
        Reply::answer("It was stopped."),
    ])
    .with_script("Worker", worker(60));
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Sleep))
        .delegate_task_tool(true)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_child(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ToolStarted(_))
    })
    .await;
    let agent_1 = AgentId::new("agent_1");
    assert_eq!(
        parent.hub.stop(&agent_1).await.unwrap(),
        SubAgentStatus::Stopped
    );
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let outputs = tool_result(&log, "delegate_task");
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    let (output, is_error) = &outputs[0];
    assert!(is_error, "{output}");
    assert!(
        output.contains("the sub-agent `agent_1` was stopped before it finished"),
        "{output}"
    );
}

/// Killed midway (review: the synchronous front-ends): a hub killed while
/// a call waited on its child failed the child — on the stream and in its
/// envelope, "the sub-agent hub stopped" — but dropped the call's wait
/// unanswered, and the model read "the sub-agent `agent_1` was lost". A
/// call waiting on a child the hub's death failed reads that end.
#[tokio::test(start_paused = true)]
async fn a_call_waiting_when_the_hub_dies_reads_its_child_failed() {
    let (parent, mut events) = with_a_long_child(vec![
        Reply::new().use_agent(&run_call("Long", "work", &["sleep"], true)),
        Reply::answer("It failed."),
    ])
    .await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
    })
    .await;
    parent.hub.actor().kill();
    until_result(&mut events, &mut log).await;
    let (output, _) = &tool_result(&log, "use_agent")[0];
    assert!(!output.contains("was lost"), "{output}");
    assert!(
        output.contains("failed") && output.contains("hub"),
        "{output}"
    );
}

/// Review of this session's own change: the fix above answered only the
/// waits the dead hub held — a `result` asked after its death (its wait
/// cast to a dead actor, or queued in its mailbox at the kill) still read
/// "the sub-agent `agent_1` was lost", where `status` and the stream
/// said `failed`. A wait the hub cannot answer reads the child's end as
/// its death recorded it.
#[tokio::test(start_paused = true)]
async fn a_result_asked_after_the_hub_died_reads_its_child_failed() {
    let (parent, mut events) = with_a_long_child(vec![
        Reply::new().use_agent(&run_call("Long", "work", &["sleep"], false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("It failed."),
    ])
    .await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    parent.hub.actor().kill();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Failed))
    })
    .await;
    parent.agent.send_user("how is it?").unwrap();
    until_result(&mut events, &mut log).await;
    let (output, _) = &tool_result(&log, "use_agent")[1];
    assert!(!output.contains("was lost"), "{output}");
    assert!(
        output.contains("failed") && output.contains("hub"),
        "{output}"
    );
}

/// A parent answering `replies`, whose child "Long" sleeps 30 s, then
/// answers.
async fn with_a_long_child(replies: Vec<Reply>) -> (DelegatingAgent, EventStream) {
    let model = ScriptedModel::new(replies).with_script(
        "Long",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":30}"#),
            Reply::answer("late answer"),
        ],
    );
    delegating(model, 3).await
}
