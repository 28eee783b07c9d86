//! Event contract and lifecycle: every call a cut turn asked is answered
//! once, and a child's answer reaches its parent exactly once.

use super::*;

/// A model that records every request it gets (then plays `inner`).
struct Recording {
    inner: Arc<dyn subagents::actors::Model>,
    requests: Arc<Mutex<Vec<subagents::messages::ModelRequest>>>,
}

impl subagents::actors::Model for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream(&self, request: subagents::messages::ModelRequest) -> subagents::actors::ModelStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

/// Every tool call an assistant message asks for is answered by exactly
/// one tool message with its id, in the run of tool messages that follows
/// it, and no tool message answers a call nobody asked for (what an
/// OpenAI-compatible server insists on: DeepSeek refuses a second result
/// under one id with 400 "Duplicate value for tool_call_id").
fn assert_history_answers_every_call(request: &subagents::messages::ModelRequest) {
    use subagents::messages::Role;
    let messages = &request.messages;
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        assert!(
            message.role != Role::Tool,
            "tool message {i} ({:?}) answers no call: {messages:#?}",
            message.tool_call_id
        );
        i += 1;
        if message.role != Role::Assistant {
            continue;
        }
        let mut asked: Vec<_> = message.tool_calls.iter().map(|c| c.id.clone()).collect();
        let mut answered: Vec<_> = messages[i..]
            .iter()
            .take_while(|m| m.role == Role::Tool)
            .map(|m| {
                m.tool_call_id
                    .clone()
                    .expect("a tool message names its call")
            })
            .collect();
        i += answered.len();
        asked.sort();
        answered.sort();
        assert_eq!(
            answered, asked,
            "each call is answered exactly once, and nothing else: {messages:#?}"
        );
    }
}

/// Defect 1: `stop_parent` while the parent's `use_agent` waited inline
/// gave `Result(Stopped)` and no `ToolResult`: the transcript row kept
/// `output: None`. Now the call is answered (the child goes on in the
/// background, by id) before the turn's `Result`, and the conversation
/// carries that answer into the next turn.
#[tokio::test(start_paused = true)]
async fn a_stopped_turn_answers_the_call_it_was_waiting_on() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker 1", 100, true)),
        Reply::answer("Noted."),
        Reply::answer("Noted again."),
    ])
    .with_script("Worker 1\n", worker(100));
    let recording = Recording {
        inner: model.shared(),
        requests: requests.clone(),
    };
    let builder =
        DelegationBuilder::new(Arc::new(recording)).tools(ToolRegistry::new().with(Sleep));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Running))
    })
    .await;
    run_for(&mut events, &mut log, 10).await;
    thread.stop_parent().unwrap();
    run_for(&mut events, &mut log, 300).await;
    check_log(&log, true);
    let answered = tool_results(&log, "call_1_1");
    assert_eq!(answered.len(), 1, "{log:#?}");
    let output: serde_json::Value = serde_json::from_str(&answered[0].output).unwrap();
    assert_eq!(output["pending"], true);
    assert_eq!(output["id"], "agent_1");
    let at = |pred: &dyn Fn(&AgentEvent) -> bool| log.iter().position(pred).unwrap();
    let answer =
        at(&|e| matches!(e, AgentEvent::ToolResult(r) if r.tool_use_id.as_str() == "call_1_1"));
    let stopped = at(&|e| matches!(e, AgentEvent::Result(r) if r.outcome == Outcome::Stopped));
    assert!(
        answer < stopped,
        "the call is answered before the turn's Result"
    );
    let transcript = subagents::messages::Transcript::from_events(&log);
    assert!(
        transcript.items.iter().all(|i| !matches!(
            i,
            subagents::messages::TranscriptItem::Tool { output: None, .. }
        )),
        "{}",
        transcript.render()
    );
    // The child went on and woke the parent once; that turn's request
    // answers every call of the stopped one.
    let wakes: Vec<_> = log.iter().filter(|e| is_wake(e)).collect();
    assert_eq!(wakes.len(), 1);
    let parent_requests: Vec<_> = requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.system_prompt().is_none_or(|p| !p.starts_with("Worker")))
        .cloned()
        .collect();
    assert_eq!(parent_requests.len(), 2, "the first turn, then the wake");
    assert_history_answers_every_call(&parent_requests[1]);
    thread.close_and_wait().await;
}

/// Defect 1, the other cuts: a tool call cut by a stop or by the wall
/// clock is answered before the turn's `Result`, and the next turn's
/// conversation has a tool message for every call asked (also for calls
/// the cut turn never started).
#[tokio::test(start_paused = true)]
async fn a_call_cut_by_a_stop_or_a_limit_is_answered_once() {
    for cut_by_limit in [false, true] {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let model = ScriptedModel::new(vec![
            Reply::new()
                .tool_call("sleep", r#"{"secs": 100}"#)
                .tool_call("sleep", r#"{"secs": 1}"#),
            Reply::answer("after"),
        ]);
        let recording = Recording {
            inner: model.shared(),
            requests: requests.clone(),
        };
        let limits = Limits {
            wall_clock: Duration::from_secs(if cut_by_limit { 5 } else { 300 }),
            ..Limits::default()
        };
        let (agent, mut events) = AgentBuilder::new(Arc::new(recording))
            .tools(ToolRegistry::new().with(Sleep))
            .limits(limits)
            .spawn()
            .await
            .unwrap();
        agent.send_user("sleep").unwrap();
        let mut log = Vec::new();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ToolStarted(_))
        })
        .await;
        if !cut_by_limit {
            tokio::time::sleep(Duration::from_secs(2)).await;
            agent.stop_turn().unwrap();
        }
        let result = until_result(&mut events, &mut log).await;
        let expected = if cut_by_limit {
            Outcome::LimitReached(LimitKind::WallClock)
        } else {
            Outcome::Stopped
        };
        assert_eq!(result.outcome, expected);
        check_pairs("the agent", &log, true);
        let answered = tool_results(&log, "call_1_1");
        assert_eq!(answered.len(), 1);
        assert!(answered[0].is_error);
        let why = if cut_by_limit {
            "wall-clock limit"
        } else {
            "stopped"
        };
        assert!(answered[0].output.contains(why), "{}", answered[0].output);
        assert!(tool_results(&log, "call_1_2").is_empty(), "never started");
        agent.send_user("again").unwrap();
        until_result(&mut events, &mut log).await;
        let requests = requests.lock().unwrap();
        assert_history_answers_every_call(requests.last().unwrap());
    }
}

/// A turn cut at the loop's top by its model-call limit, after a round of
/// tools that all ran, leaves each of those calls answered once: the
/// next request has one tool message per call, not the tool's answer and
/// then a "not run" under the same id. Guards against a call that ran
/// but stayed among the turn's unstarted calls (`run_call` not popping it),
/// which the close then answered a second time.
#[tokio::test(start_paused = true)]
async fn a_round_of_calls_that_ran_before_a_model_call_limit_is_answered_once() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("calculator", r#"{"expression": "1+1"}"#)
            .tool_call("calculator", r#"{"expression": "2+2"}"#),
        Reply::answer("after"),
    ]);
    let recording = Recording {
        inner: model.shared(),
        requests: requests.clone(),
    };
    let limits = Limits {
        max_model_calls: 1,
        ..Limits::default()
    };
    let (agent, mut events) = AgentBuilder::new(Arc::new(recording))
        .tools(ToolRegistry::new().with(subagents_demo::Calculator))
        .limits(limits)
        .spawn()
        .await
        .unwrap();
    agent.send_user("add").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::ModelCalls));
    assert_eq!(result.tool_calls, 2, "both calls ran");
    check_pairs("the agent", &log, true);
    agent.send_user("again").unwrap();
    until_result(&mut events, &mut log).await;
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert_history_answers_every_call(requests.last().unwrap());
}

/// A call refused unrun (its answer was cut by the output limit) and then
/// a stop during the next model call leave the call answered once: its
/// refusal, not the refusal and then a "not run" under the same id.
/// Guards against `refuse_call` leaving the call among the turn's
/// unstarted calls, which the close then answered a second time.
#[tokio::test(start_paused = true)]
async fn a_refused_call_then_a_stop_is_answered_once() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("calculator", r#"{"expression":"6*"#)
            .truncated("length"),
        Reply::new().hang(),
        Reply::answer("after"),
    ]);
    let recording = Recording {
        inner: model.shared(),
        requests: requests.clone(),
    };
    let (agent, mut events) = AgentBuilder::new(Arc::new(recording))
        .tools(ToolRegistry::new().with(subagents_demo::Calculator))
        .spawn()
        .await
        .unwrap();
    agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ToolResult(_))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(requests.lock().unwrap().len(), 2, "the second call hangs");
    agent.stop_turn().unwrap();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.outcome, Outcome::Stopped);
    check_pairs("the agent", &log, true);
    agent.send_user("again").unwrap();
    until_result(&mut events, &mut log).await;
    let requests = requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    assert_history_answers_every_call(requests.last().unwrap());
}

/// Runs one parent waiting inline on a child, stops the parent `turns`
/// scheduler turns after the child's `Result` is read, and returns how the
/// child's answer was delivered: (as the call's result, as wakes).
async fn stop_at_completion(turns: usize) -> (usize, usize) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker 1", 5, true)),
        Reply::answer("Noted."),
        Reply::answer("Noted again."),
    ])
    .with_script("Worker 1\n", worker(5));
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Result(_))),
    )
    .await;
    for _ in 0..turns {
        tokio::task::yield_now().await;
    }
    thread.stop_parent().unwrap();
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    let inline = delivered_inline(&log, "call_1_1");
    let wakes = woken(&log, "agent_1");
    assert_eq!(inline + wakes, 1, "after {turns} turns: {log:#?}");
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.claimed, inline == 1, "after {turns} turns");
    thread.close_and_wait().await;
    (inline, wakes)
}

/// Defect 2: the parent stopped (Detach) at the instant its inline child
/// finished lost the child's answer: the hub had handed it to the waiter
/// being aborted. Whatever the interleaving — the stop fired 0 to 40
/// scheduler turns after the child's `Result` is read — the answer reaches
/// the parent exactly once: as the call's result, or as one wake.
#[tokio::test(start_paused = true)]
async fn a_detached_childs_answer_reaches_the_parent_once_at_its_completion_instant() {
    let mut ways = std::collections::BTreeMap::new();
    for turns in 0..40 {
        // The host runs as a task of its own, so the scheduler interleaves
        // it with the actors (the test body itself is polled only between
        // their bursts).
        let (inline, wakes) = tokio::spawn(stop_at_completion(turns)).await.unwrap();
        *ways.entry((inline, wakes)).or_insert(0) += 1;
    }
    assert!(
        ways.len() > 1,
        "only one interleaving was reached: {ways:?}"
    );
}
