//! The spans at the edges: a run's span says what its `Result` says
//! whoever ended it (a stop in the tick the turn ended, a kill), a cut
//! call says it was cut, and nothing holds a finished run open that no
//! wake will link to.

use super::*;
use subagents::messages::{Outcome, SubAgentStatus};

/// A stop that reached the agent after its turn had closed (the stop sent
/// as the model's answer arrived) wrote `stopped` over the run's span,
/// which the turn had recorded `completed`: the span said one thing, the
/// `Result` another. Each number of turns after the answer's instant.
#[tokio::test(start_paused = true)]
async fn a_stop_that_loses_to_the_turns_end_does_not_rewrite_its_span() {
    let mut reached = std::collections::BTreeSet::new();
    for turns in 0..12 {
        let (capture, _guard) = capture();
        let model = ScriptedModel::new(vec![
            Reply::new()
                .delay(std::time::Duration::from_secs(10))
                .text("A"),
        ]);
        let (agent, _events, _gate) =
            spawn_agent(model.shared(), ToolRegistry::new(), Limits::default()).await;
        let a = agent.queue_turn("a").unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        for _ in 0..turns {
            tokio::task::yield_now().await;
        }
        let _ = agent.stop_turn();
        let a = a.await.unwrap();
        let spans = capture.spans();
        let run = spans.iter().find(|s| s.name == "invoke_agent").unwrap();
        let said = match a.outcome {
            Outcome::Completed => "completed",
            Outcome::Stopped => "stopped",
            ref other => panic!("{other:?}"),
        };
        reached.insert(said);
        assert_eq!(field(run, "subagents.outcome"), said, "after {turns} turns");
        assert_eq!(
            field(run, "subagents.model_calls"),
            a.model_calls.to_string(),
            "after {turns} turns"
        );
    }
    assert!(reached.contains("completed"), "{reached:?}");
}

/// A killed agent's turn ends on the stream with a failed `Result`, but
/// its run span closed with no outcome, usage or counts: nothing recorded
/// it.
#[tokio::test(start_paused = true)]
async fn a_killed_agents_run_says_it_failed() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![Reply::new().hang()]);
    let (agent, _events, _gate) =
        spawn_agent(model.shared(), ToolRegistry::new(), Limits::default()).await;
    let turn = agent.queue_turn("a").unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    agent.actor().kill();
    agent.actor().wait(None).await.ok();
    let _ = turn.await;
    let spans = capture.spans();
    let run = spans.iter().find(|s| s.name == "invoke_agent").unwrap();
    assert!(run.closed, "{run:#?}");
    assert_eq!(field(run, "subagents.outcome"), "failed", "{run:#?}");
    assert_eq!(field(run, "subagents.model_calls"), "1", "{run:#?}");
}

/// A child stopped in the background gets no wake and no claim, yet the
/// hub kept its run span for the wake it keeps spans for — for the
/// thread's life — and with it the call that started it and the parent's
/// whole first turn (a span holds its parent): none of them was exported
/// until the thread closed.
#[tokio::test(start_paused = true)]
async fn a_stopped_childs_run_does_not_hold_the_turn_that_started_it() {
    let spans = a_background_victims_spans(|thread| {
        Box::pin(async move {
            thread.stop_child(&AgentId::new("agent_1")).await.unwrap();
        })
    })
    .await;
    let victim = run_of(&spans, "agent_1");
    assert_eq!(field(victim, "subagents.outcome"), "stopped");
    assert_the_victims_run_holds_nothing_open(&spans);
}

/// The spans of a thread whose parent started a background child
/// (`agent_1`, working 600 s), after `end` did something to it.
async fn a_background_victims_spans(
    end: impl FnOnce(ThreadHandle) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>,
) -> Vec<Captured> {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Victim", 600, false)),
        Reply::answer("Started."),
    ])
    .with_script("Victim", worker(600));
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    end(thread.clone()).await;
    thread.sync().await.unwrap();
    capture.spans()
}

/// The child's run, the call that started it and the parent's turn are
/// closed (a span holds its parent).
pub(super) fn assert_the_victims_run_holds_nothing_open(spans: &[Captured]) {
    let victim = run_of(spans, "agent_1");
    let call = spans
        .iter()
        .find(|s| Some(s.id) == victim.parent)
        .expect("the call that started it");
    for span in [victim, call, run_of(spans, "parent")] {
        assert!(span.closed, "held open: {span:#?}");
    }
}

/// A waited-on `use_agent` call cut by a stop while its child ran is
/// answered with the tool's own note ("stopped with it", or "goes on"),
/// not an error — and its span was not marked `cancelled`, as
/// docs/observability.md says a call cut while it ran is.
#[tokio::test(start_paused = true)]
async fn a_call_cut_while_it_waited_is_marked_cancelled() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 600, true)),
        Reply::answer("(not reached)"),
    ])
    .with_script("Worker", worker(600));
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
    })
    .await;
    thread.stop_parent().unwrap();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let call = children_of(&spans, run_of(&spans, "parent"))
        .into_iter()
        .find(|s| s.name == "execute_tool")
        .expect("the use_agent call");
    assert_eq!(field(call, "error.type"), "cancelled", "{call:#?}");
}

/// The same for a child on another node: its proxy killed with its hub,
/// the run's turn ended here with a failed `Result` (its closer), but its
/// span recorded nothing.
#[tokio::test(start_paused = true)]
async fn a_killed_remote_childs_run_says_it_failed() {
    use subagents::actors::Placement;
    let (capture, _guard) = capture();
    let model = background_workers(&[600]).shared();
    let node = common::loopback::Loopback::new("b", model.clone()).await;
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model)
            .tools(ToolRegistry::new().with(Sleep))
            .placement(Placement::On(node.clone())),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
    })
    .await;
    kill_the_hub(&thread).await;
    let spans = capture.spans();
    let run = run_of(&spans, "agent_1");
    assert_eq!(field(run, "subagents.outcome"), "failed", "{run:#?}");
}

/// A remote child's run span was never entered (its turn runs on the
/// other node; only its end was recorded here), and tracing-opentelemetry
/// stamps a span's end at its last exit: one never exited ends when it
/// closes — for a background child, when the hub lets go of it for the
/// parent's wake, minutes later with the user typing. Entered as its end
/// is recorded.
#[tokio::test(start_paused = true)]
async fn a_remote_childs_run_span_ends_when_its_run_does() {
    use subagents::actors::Placement;
    let (capture, _guard) = capture();
    let model = background_workers(&[5]).shared();
    let node = common::loopback::Loopback::new("b", model.clone()).await;
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model)
            .tools(ToolRegistry::new().with(Sleep))
            .placement(Placement::On(node.clone())),
        None,
    )
    .await
    .unwrap();
    thread.typing(true).unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done))
    })
    .await;
    let spans = capture.spans();
    let runs: Vec<&Captured> = spans
        .iter()
        .filter(|s| s.name == "invoke_agent" && field(s, "gen_ai.agent.id") == "agent_1")
        .collect();
    assert!(!runs.is_empty(), "{spans:#?}");
    for run in runs {
        assert!(
            run.exits > 0,
            "never exited (its end would be its close): {run:#?}"
        );
        // The node's own run says so (it recorded "").
        let mode = field(run, "subagents.mode");
        assert!(["background", "node"].contains(&mode), "{run:#?}");
    }
    thread.close_and_wait().await;
}

/// A tool that settles its answer as an error, then goes on.
struct SettleThenHang;

impl Tool for SettleThenHang {
    fn name(&self) -> &str {
        "settle_then_hang"
    }
    fn description(&self) -> String {
        "settles an error, then waits".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, call: ToolCallContext) -> ToolFuture {
        Box::pin(async move {
            call.settle(&Err(ToolError::Failed("quota exceeded".into())));
            std::future::pending::<()>().await;
            Ok(String::new())
        })
    }
}

/// A call the turn's close answers — cut, or settled by its tool before
/// a stop — recorded `cancelled` when cut and nothing else: a settled
/// error the model read had no `tool_error`, and with content on neither
/// carried its result (a call that returns records both).
#[tokio::test(start_paused = true)]
async fn a_call_the_close_answers_records_its_result_on_its_span() {
    let (capture, _guard) = capture();
    for tool in ["settle_then_hang", "sleep"] {
        let model = ScriptedModel::new(vec![
            Reply::new().tool_call(
                tool,
                if tool == "sleep" {
                    r#"{"secs":600}"#
                } else {
                    "{}"
                },
            ),
            Reply::answer("x"),
        ]);
        let (thread, mut events) = ThreadHandle::spawn(
            DelegationBuilder::new(model.shared())
                .tools(ToolRegistry::new().with(Sleep).with(SettleThenHang))
                .record_content(true),
            None,
        )
        .await
        .unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ToolStarted(_))
        })
        .await;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        thread.stop_parent().unwrap();
        until_result(&mut events, &mut log).await;
        let answered = log
            .iter()
            .find_map(|e| match e {
                AgentEvent::ToolResult(r) => Some(r.clone()),
                _ => None,
            })
            .unwrap();
        assert!(answered.is_error, "{answered:?}");
        let spans = capture.spans();
        let span = spans
            .iter()
            .rev()
            .find(|s| s.name == "execute_tool" && field(s, "gen_ai.tool.name") == tool)
            .unwrap_or_else(|| panic!("no span for {tool}: {spans:#?}"));
        let expected = if tool == "sleep" {
            "cancelled"
        } else {
            "tool_error"
        };
        assert_eq!(field(span, "error.type"), expected, "{span:#?}");
        assert_eq!(
            field(span, "gen_ai.tool.call.result"),
            answered.output,
            "{span:#?}"
        );
        thread.close_and_wait().await;
    }
}

/// Held (spans) after a hub death: each child the death failed kept its
/// run span for a wake that never comes (a hub-death failure wakes
/// nobody) — held by every handle of the thread, it held the call that
/// started the child and the parent's turn open, unexported.
#[tokio::test(start_paused = true)]
async fn a_child_failed_by_its_hubs_death_does_not_hold_the_turn_that_started_it() {
    let spans = a_background_victims_spans(|thread| {
        Box::pin(async move {
            thread.hub().actor().kill();
            thread.hub().actor().wait(None).await.ok();
        })
    })
    .await;
    assert_the_victims_run_holds_nothing_open(&spans);
}

/// A model's made-up tool name and call id went into the `execute_tool`
/// span whole: a 64 KiB name was a 64 KiB span name and attribute, with
/// its line breaks, recorded with no opt-in. An unknown name is quoted cut
/// short on one line, as the model reads it; an id is cut too.
#[tokio::test(start_paused = true)]
async fn a_made_up_tool_name_and_id_are_cut_short_in_the_span() {
    let (capture, _guard) = capture();
    let huge = format!("x\n{}", "x".repeat(1 << 16));
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call(huge.as_str(), "{}"),
        Reply::answer("done"),
    ]);
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let tool = spans
        .iter()
        .find(|s| field(s, "otel.name").starts_with("execute_tool"))
        .expect("the call's span");
    for name in ["otel.name", "gen_ai.tool.name", "gen_ai.tool.call.id"] {
        let value = field(tool, name);
        assert!(value.len() < 200, "{name}: {} bytes", value.len());
        assert!(!value.contains('\n'), "{name}");
    }
}

/// Stopped midway, two workers: a turn task running on after a stop (in a
/// tool that never waits) opened an `execute_tool` span for the next call
/// — which the close had answered "not run", with no `ToolStarted` — and
/// wrote `tool_error` over the cut call's `cancelled`. Nothing of the
/// turn's spans changes after its close.
#[test]
fn a_task_running_on_after_a_stop_opens_no_span_and_rewrites_none() {
    use common::blocking::stopped_while_blocked;
    let capture = Capture::default();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(capture.clone()));
    let on_workers = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            std::mem::forget(tracing::dispatcher::set_default(&on_workers));
        })
        .build()
        .unwrap();
    let _guard = tracing::dispatcher::set_default(&dispatch);
    runtime.block_on(async {
        let model = ScriptedModel::new(vec![
            Reply::new()
                .tool_call("block", "{}")
                .tool_call("count", "{}"),
            Reply::answer("done"),
        ]);
        stopped_while_blocked(model.shared()).await;
    });
    let spans = capture.spans();
    let tools: Vec<(&str, &str)> = spans
        .iter()
        .filter(|s| s.name == "execute_tool")
        .map(|s| (field(s, "otel.name"), field(s, "error.type")))
        .collect();
    assert_eq!(tools, [("execute_tool block", "cancelled")]);
}

/// Keeps every context it is called with (a tool may keep its context
/// after its call returned: `tests/call_slot.rs`).
#[derive(Default, Clone)]
struct Keeps(Arc<std::sync::Mutex<Vec<ToolCallContext>>>);

impl Tool for Keeps {
    fn name(&self) -> &str {
        "keeps"
    }
    fn description(&self) -> String {
        "Keeps its context.".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, call: ToolCallContext) -> ToolFuture {
        self.0.lock().unwrap().push(call);
        Box::pin(async { Ok("kept".into()) })
    }
}

/// A tool that kept its context (as the docs allow) held the finished
/// turn's whole state through it: a top-level agent's `invoke_agent` span
/// stayed open — never exported — and its conversation in memory, for as
/// long as the tool held it. The context holds its turn weakly.
#[tokio::test(start_paused = true)]
async fn a_context_a_tool_keeps_holds_no_finished_turn_open() {
    let (capture, _guard) = capture();
    let keeps = Keeps::default();
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("keeps", "{}"),
        Reply::answer("done"),
    ]);
    let (agent, _events, _gate) = spawn_agent(
        model.shared(),
        ToolRegistry::new().with(keeps.clone()),
        Limits::default(),
    )
    .await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.text, "done");
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
    let spans = capture.spans();
    let run = spans.iter().find(|s| s.name == "invoke_agent").unwrap();
    assert!(run.closed, "held open by the kept context: {run:#?}");
    // Still usable as documented: settling a call that is over says so.
    let kept = keeps.0.lock().unwrap().pop().unwrap();
    assert!(!kept.settle(&Ok("late".into())));
    assert_eq!(keeps.0.lock().unwrap().len(), 0);
}

/// A message sent to a running child is read once its next call is let
/// in by the gate; the call's span recorded its input before that, so
/// the span's `gen_ai.input.messages` lacked the message the model read.
#[tokio::test(start_paused = true)]
async fn a_message_read_at_the_gate_is_in_the_calls_recorded_input() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 5, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "one more thing")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(5));
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep))
            .record_content(true),
        None,
    )
    .await
    .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell it").unwrap();
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let child = run_of(&spans, "agent_1");
    let chats: Vec<&Captured> = children_of(&spans, child)
        .into_iter()
        .filter(|s| s.name == "chat")
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    let input: serde_json::Value =
        serde_json::from_str(field(chats[1], "gen_ai.input.messages")).unwrap();
    let last = input.as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user", "{input:#}");
    let text = last["parts"][0]["content"].as_str().unwrap();
    assert!(text.ends_with("one more thing"), "{input:#}");
    thread.close_and_wait().await;
}
