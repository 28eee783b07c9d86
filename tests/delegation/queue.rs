//! The live cap and the FIFO queue: queued children, stops, claims, status.

use super::*;

#[tokio::test(start_paused = true)]
async fn the_fourth_child_is_queued_and_children_start_in_request_order() {
    let (parent, mut events) = delegating(fan_out(5, Duration::from_secs(10)), 3).await;
    parent.agent.send_user("fan out").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let mut peak_live = 0;
    loop {
        let snapshot = parent.hub.snapshot().await.unwrap();
        peak_live = peak_live.max(snapshot.live);
        assert!(snapshot.live <= 3, "guarantee 5: {} live", snapshot.live);
        if snapshot.finished == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(peak_live, 3);
    drain(&mut events, &mut log);
    // From the stream too, not only the hub's own count sampled above.
    check_cap(&log, 3);
    let (order, by_id) = check_log(&log, true);
    let first_status: Vec<SubAgentStatus> =
        order.iter().map(|id| by_id[id].statuses[0].1).collect();
    assert_eq!(
        first_status,
        [
            SubAgentStatus::Running,
            SubAgentStatus::Running,
            SubAgentStatus::Running,
            SubAgentStatus::Queued,
            SubAgentStatus::Queued
        ]
    );
    // Children's first own event comes in request order (FIFO queue and gate).
    let mut by_first: Vec<(usize, AgentId)> = order
        .iter()
        .map(|id| (by_id[id].events[0].0, id.clone()))
        .collect();
    by_first.sort();
    let started: Vec<AgentId> = by_first.into_iter().map(|(_, id)| id).collect();
    assert_eq!(started, order);
    let envelopes = parent.hub.envelopes();
    assert_eq!(envelopes.len(), 5);
    assert!(
        envelopes
            .iter()
            .all(|e| e.status == SubAgentStatus::Done && e.background)
    );
}

#[tokio::test(start_paused = true)]
async fn stopping_a_queued_and_a_running_child() {
    let (parent, mut events) = delegating(fan_out(3, Duration::from_secs(100)), 1).await;
    parent.agent.send_user("fan out").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (a1, a2, a3) = (
        AgentId::new("agent_1"),
        AgentId::new("agent_2"),
        AgentId::new("agent_3"),
    );
    assert_eq!(parent.hub.stop(&a2).await.unwrap(), SubAgentStatus::Stopped);
    assert_eq!(
        parent.hub.status(&a2).unwrap().error.as_deref(),
        Some("stopped before it started")
    );
    assert_eq!(parent.hub.stop(&a1).await.unwrap(), SubAgentStatus::Stopped);
    assert_eq!(
        parent.hub.stop(&a1).await.unwrap(),
        SubAgentStatus::Stopped,
        "idempotent"
    );
    // Stopping the running child started the next queued one (agent_3).
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Done) if id.as_str() == "agent_3")
    })
    .await;
    let (_, by_id) = check_log(&log, true);
    assert!(
        by_id[&a2].events.is_empty(),
        "a queued child stopped never ran"
    );
    assert_eq!(by_id[&a1].terminal().unwrap().1, SubAgentStatus::Stopped);
    assert_eq!(by_id[&a3].terminal().unwrap().1, SubAgentStatus::Done);
    let err = parent.hub.stop(&AgentId::new("agent_9")).await.unwrap_err();
    assert_eq!(
        err,
        subagents::actors::hub::Refused::UnknownChild(AgentId::new("agent_9"))
    );
    assert_eq!(
        err.to_string(),
        "there is no sub-agent with id `agent_9`; ids look like `agent_1`"
    );
    let snapshot = parent.hub.snapshot().await.unwrap();
    assert_eq!((snapshot.live, snapshot.queued), (0, 0));
    assert_eq!(parent.gate.snapshot().await.unwrap().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn result_claims_the_wake_and_status_never_waits() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Slow", "work", &["calculator"], false)),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Got it."),
    ])
    .with_script(
        "Slow",
        vec![
            Reply::new()
                .tool_call("calculator", r#"{"expression":"1+1"}"#)
                .usage(10, 5),
            Reply::new()
                .delay(Duration::from_secs(20))
                .text("slow answer")
                .usage(10, 5),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let results = tool_result(&log, "use_agent");
    let status: serde_json::Value = serde_json::from_str(&results[1].0).unwrap();
    assert_eq!(status["id"], "agent_1");
    assert!(
        status.get("result").is_none(),
        "no result while running: {status}"
    );
    let claimed: serde_json::Value = serde_json::from_str(&results[2].0).unwrap();
    assert_eq!(claimed["result"], "slow answer");
    let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert!(envelope.claimed);
    assert_eq!(envelope.usage.total(), 30);
    check_log(&log, true);
}

struct SlowTool;

impl Tool for SlowTool {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> String {
        "takes 100 s".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(100)).await;
            Ok("slow done".into())
        })
    }
}

#[tokio::test(start_paused = true)]
async fn status_answers_at_once_while_every_child_is_busy() {
    let mut first = Reply::new();
    for i in 1..=3 {
        first = first.use_agent(&run_call(&format!("Busy {i}"), "work", &["slow"], false));
    }
    let mut model = ScriptedModel::new(vec![
        first,
        Reply::new().use_agent(&UseAgentCall::status("agent_2")),
        Reply::answer("ok"),
    ]);
    for i in 1..=3 {
        model = model.with_script(
            format!("Busy {i}"),
            vec![Reply::new().tool_call("slow", "{}"), Reply::answer("done")],
        );
    }
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(SlowTool))
        .spawn()
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "the parent's status call waited on a child"
    );
    let status: serde_json::Value =
        serde_json::from_str(&tool_result(&log, "use_agent")[3].0).unwrap();
    assert_eq!(status["status"], "background");
    assert_eq!(status["last_tool"], "slow");
    let direct = parent.hub.status(&AgentId::new("agent_3")).unwrap();
    assert_eq!(direct.tool_calls, 1);
}

/// Extreme settings held by no test: `max_live(0)` is read as 1 (a hub
/// of no live slot queued every child for ever) and a result budget
/// under 100 as 100 (an answer cut to nothing); both are documented on
/// the builder.
#[tokio::test(start_paused = true)]
async fn zero_live_children_reads_as_one_and_the_result_budget_has_a_floor() {
    let (parent, _events) = DelegationBuilder::new(background_workers(&[5, 5]).shared())
        .tools(ToolRegistry::new().with(Sleep))
        .max_live(0)
        .result_budget(10)
        .spawn()
        .await
        .unwrap();
    assert_eq!(parent.hub.result_budget(), 100);
    let snapshot = parent.hub.snapshot().await.unwrap();
    assert_eq!(snapshot.max_live, 1);
    parent.agent.send_user("fan out").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let snapshot = parent.hub.snapshot().await.unwrap();
    assert_eq!((snapshot.live, snapshot.queued), (1, 1), "{snapshot:?}");
    parent.shutdown_and_wait().await;
}

/// An inline child that waited in the queue says `running` as it takes
/// its slot — on the stream, in `use_agent status`, in the hub's status —
/// not `queued` while it runs.
#[tokio::test(start_paused = true)]
async fn a_queued_inline_child_says_running_once_it_starts() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Background", 10, false))
            .use_agent(&work_call("Inline", 5, true)),
        Reply::answer("Both done."),
        Reply::answer("Noted."),
    ])
    .with_script("Background", worker(10))
    .with_script("Inline", worker(5));
    let (parent, mut events) = delegating(model, 1).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 12).await;
    let inline = AgentId::new("agent_2");
    assert_eq!(
        parent.hub.status(&inline).unwrap().status,
        SubAgentStatus::Running
    );
    run_for(&mut events, &mut log, 60).await;
    let (_, by_id) = check_log(&log, true);
    let statuses: Vec<SubAgentStatus> = by_id[&inline].statuses.iter().map(|s| s.1).collect();
    assert_eq!(
        statuses,
        [
            SubAgentStatus::Queued,
            SubAgentStatus::Running,
            SubAgentStatus::Done
        ]
    );
}

/// The defaults a host gets when it sets neither (README: "at most 3
/// live children"; docs/lifecycle.md: the result budget, "default
/// 8,000"): a fourth
/// background child waits in the queue, and the budget is 8,000. Guards
/// against a changed default (`MAX_LIVE`, `RESULT_BUDGET`) that every
/// other test, setting its own, would pass.
#[tokio::test(start_paused = true)]
async fn by_default_three_children_run_at_once_and_the_result_budget_is_8000() {
    let (parent, _events) = DelegationBuilder::new(fan_out(4, Duration::from_secs(10)).shared())
        .tools(ToolRegistry::new().with(Sleep))
        .spawn()
        .await
        .unwrap();
    assert_eq!(parent.hub.result_budget(), 8_000);
    parent.agent.send_user("fan out").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let snapshot = parent.hub.snapshot().await.unwrap();
    assert_eq!(snapshot.max_live, 3, "{snapshot:?}");
    assert_eq!((snapshot.live, snapshot.queued), (3, 1), "{snapshot:?}");
    parent.shutdown_and_wait().await;
}

/// Misleading a model (review: a new user's first hour): a parent built
/// with `DelegationBuilder` alone — the README's quickstart — was told
/// each background child's "result will arrive as a message", but only
/// a thread's supervisor delivers wakes: a host copying the quickstart
/// had a parent waiting for a message nothing sends. Alone, it is told to
/// ask; in a thread, that the result arrives as a message.
#[tokio::test(start_paused = true)]
async fn a_parent_no_thread_wakes_is_told_to_ask_for_its_background_result() {
    let model = || {
        ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker", 1, false)),
            Reply::answer("Started."),
            Reply::answer("Noted."),
        ])
        .with_script(
            "Worker",
            vec![
                Reply::new().tool_call("sleep", r#"{"secs":1}"#),
                Reply::answer("done"),
            ],
        )
    };
    let note = |log: &[AgentEvent]| {
        log.iter()
            .find_map(|e| match e {
                AgentEvent::ToolResult(r) if r.name == "use_agent" => Some(r.output.clone()),
                _ => None,
            })
            .expect("the run was answered")
    };
    let (alone, mut events) = DelegationBuilder::new(model().shared())
        .tools(ToolRegistry::new().with(Sleep))
        .spawn()
        .await
        .unwrap();
    alone.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let said = note(&log);
    assert!(!said.contains("arrive as a message"), "{said}");
    assert!(said.contains("ask with action result"), "{said}");

    let config = subagents::supervisor::ThreadConfig::new(
        DelegationBuilder::new(model().shared()).tools(ToolRegistry::new().with(Sleep)),
    );
    let (thread, mut events) = subagents::supervisor::ThreadHandle::spawn(config, None)
        .await
        .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let said = note(&log);
    assert!(said.contains("will arrive as a message"), "{said}");
    thread.close_and_wait().await;
}
