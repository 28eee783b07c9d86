//! Shared resources: the gate, a dying child's slot and permit, host tools.

use super::*;

/// Wraps a model and counts calls in flight.
struct Counting {
    inner: ScriptedModel,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

struct Guard(Arc<AtomicUsize>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Model for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let guard = Guard(self.in_flight.clone());
        let inner = self.inner.stream(request);
        Box::pin(futures_util::StreamExt::map(inner, move |chunk| {
            let _ = &guard;
            chunk
        }))
    }
}

/// Every call streams for 100 ms before its first chunk, so a call stays
/// open across an await and seven could overlap if the gate let them (a
/// scripted call with no delay is read to its end in one poll: `peak`
/// would be 1 with no gate at all).
#[tokio::test(start_paused = true)]
async fn a_capacity_one_gate_never_has_two_model_calls_in_flight() {
    let peak = Arc::new(AtomicUsize::new(0));
    let model = Counting {
        inner: fan_out_with(6, Duration::from_secs(3), Duration::from_millis(100)),
        in_flight: Arc::new(AtomicUsize::new(0)),
        peak: peak.clone(),
    };
    let (parent, mut events) = DelegationBuilder::new(Arc::new(model))
        .tools(ToolRegistry::new().with(Sleep))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    while parent.hub.snapshot().await.unwrap().finished < 6 {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(peak.load(Ordering::SeqCst), 1, "guarantee 6");
    let gate = parent.gate.snapshot().await.unwrap();
    assert_eq!(gate.granted_total, 2 + 6 * 2);
    assert_eq!(gate.in_flight, 0);
}

/// A child actor that dies without reporting (killed here; a panic in its
/// handler takes the same path) fails through the hub's supervision
/// handler: the hub survives, the slot frees and the queued child starts.
#[tokio::test(start_paused = true)]
async fn a_child_actor_that_dies_fails_and_frees_its_slot() {
    let (parent, mut events) = delegating(fan_out(2, Duration::from_secs(100)), 1).await;
    parent.agent.send_user("fan out").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let children = parent.hub.actor().get_children();
    assert_eq!(children.len(), 1, "one live child (the cap is 1)");
    children[0].kill();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Done) if id.as_str() == "agent_2")
    })
    .await;
    let dead = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(dead.status, SubAgentStatus::Failed);
    assert!(
        dead.error
            .as_deref()
            .unwrap()
            .starts_with("the sub-agent stopped before it reported a result"),
        "{dead:?}"
    );
    check_log(&log, true);
    assert_eq!(parent.hub.snapshot().await.unwrap().live, 0);
    assert_eq!(parent.gate.snapshot().await.unwrap().in_flight, 0);
}

/// Killed in the middle of a model call, a child's turn still ends: the
/// gate permit it held comes back and the parent's next call goes through.
#[tokio::test(start_paused = true)]
async fn a_child_killed_mid_model_call_returns_its_permit() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Hanger", "hang", &[], false)),
        Reply::answer("started"),
        Reply::answer("still here"),
    ])
    .with_script("Hanger", vec![Reply::new().text("…").hang()]);
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Text(_))),
    )
    .await;
    // The child holds the gate inside its hanging call.
    assert_eq!(parent.gate.snapshot().await.unwrap().in_flight, 1);
    parent.hub.actor().get_children()[0].kill();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Failed))
    })
    .await;
    assert_eq!(
        parent.gate.snapshot().await.unwrap().in_flight,
        0,
        "the permit came back"
    );
    parent.agent.send_user("are you there?").unwrap();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(
        result.text, "still here",
        "the parent's next call went through"
    );
    check_log(&log, true);
}

/// Killed midway, then stopped (review 27: the gate shared): a child
/// killed in its model call as the host stops the hub. ractor keeps a
/// killed actor's state — its turn, the sender of the result the hub's
/// stop waits for — in the termination event it sends the hub, which a
/// stopping hub never reads: the hub's stop waited for ever (and a
/// thread's close with it), the killed child's turn ran on, holding its
/// permit, and it never had a terminal status. The hub's stop waits for a
/// child's result or its end, whichever comes first; in either order of
/// the kill and the stop.
#[tokio::test(start_paused = true)]
async fn a_child_killed_as_the_hub_stops_neither_holds_the_stop_nor_the_permit() {
    for (kill_first, in_tool) in [(true, false), (false, false), (true, true), (false, true)] {
        let hanging = match in_tool {
            false => Reply::new().text("…").hang(),
            true => Reply::new().tool_call("sleep", r#"{"secs": 100}"#),
        };
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&run_call("Hanger", "hang", &["sleep"], false)),
            Reply::answer("started"),
        ])
        .with_script("Hanger", vec![hanging]);
        let (parent, mut events) = delegating(model, 3).await;
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(_, inner)
                if matches!(**inner, AgentEvent::Text(_) | AgentEvent::ToolStarted(_)))
        })
        .await;
        assert_eq!(
            parent.gate.snapshot().await.unwrap().in_flight,
            usize::from(!in_tool)
        );
        let child = parent.hub.actor().get_children()[0].clone();
        let hub = parent.hub.actor().clone();
        if kill_first {
            child.kill();
            hub.stop(None);
        } else {
            hub.stop(None);
            child.kill();
        }
        let stopped = tokio::time::timeout(Duration::from_secs(3600), hub.wait(None)).await;
        assert!(
            stopped.is_ok(),
            "kill first: {kill_first}: the hub's stop waited for ever"
        );
        tokio::time::timeout(Duration::from_secs(60), child.wait(None))
            .await
            .expect("the child ended")
            .unwrap();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            parent.gate.snapshot().await.unwrap().in_flight,
            0,
            "kill first: {kill_first}: the killed child's permit came back"
        );
        drain(&mut events, &mut log);
        let ends: Vec<_> = log
            .iter()
            .filter(|e| matches!(e, AgentEvent::ChildStatus(_, s) if s.is_terminal()))
            .collect();
        assert_eq!(ends.len(), 1, "kill first: {kill_first}: {log:#?}");
        // Its call answered and its `Result` before its status (review:
        // the stopped-midway matrix, thirty-ninth session — ended only as
        // its state dropped after the hub's stop, both went into a closed
        // sink: a `ToolStarted` never answered, no `Result`).
        check_log(&log, true);
        parent.shutdown_and_wait().await;
    }
}

/// Foreign input: the host's registry holds a tool named `use_agent`. The
/// delegation tool replaces it for the parent, and children did not get
/// the delegation tool (they sit at the depth limit) but got the host's
/// under that name: "inherits all but the delegation tools" broken, and a
/// child's call ran something else than its name says. Now a child has
/// neither, and its call is the depth refusal.
#[tokio::test(start_paused = true)]
async fn a_host_tool_named_like_a_delegation_tool_reaches_no_child() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "try to delegate")),
        Reply::answer("Done."),
    ])
    .with_script(
        "Child",
        vec![
            Reply::new().tool_call("use_agent", r#"{"action":"agents"}"#),
            Reply::answer("child: done"),
        ],
    );
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(
            ToolRegistry::new()
                .with(HostTool("use_agent"))
                .with(Calculator),
        )
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let started = first_child_started(&log);
    assert_eq!(started.tools, ["calculator"], "{started:?}");
    let child_said: Vec<AgentEvent> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(_, inner) => Some((**inner).clone()),
            _ => None,
        })
        .collect();
    let (output, is_error) = tool_result(&child_said, "use_agent").remove(0);
    assert!(
        is_error && !output.contains("the host's use_agent ran"),
        "{output}"
    );
    check_log(&log, true);
}

/// Foreign input: a host tool named like a delegation front-end this
/// parent does not offer (`agent`, with only `use_agent` on) was treated
/// as delegation anyway: listing it for a child was refused with the depth
/// sentence, a deny list dropped it and "your tools are" left it out. It
/// is an ordinary tool: a child may be given it.
#[tokio::test(start_paused = true)]
async fn a_host_tool_named_like_a_front_end_not_offered_is_an_ordinary_tool() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Helper", "use it", &["agent"], true)),
        Reply::answer("Done."),
    ])
    .with_script(
        "Helper",
        vec![
            Reply::new().tool_call("agent", "{}"),
            Reply::answer("helped"),
        ],
    );
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(HostTool("agent")))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, refused) = &results_of(&log, "use_agent")[0];
    assert!(!refused, "{output}");
    assert!(output.contains("helped"), "{output}");
    let helper = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(helper.tools, ["agent"]);
    parent.shutdown_and_wait().await;
}

/// A model's list of tools with a name repeated (a looping model, 15,000
/// times): each tool is given once, in the order first named — on its
/// `ChildStarted` and its envelope (a guard; the hub built the child's
/// tools one name at a time, copying all so far for each: built once now,
/// review: cost faster than its input).
#[tokio::test(start_paused = true)]
async fn a_tool_named_many_times_is_given_once() {
    let mut tools = vec!["sleep"; 15_000];
    tools.push("calculator");
    tools.push("sleep");
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call("Worker", "add", &tools, true)),
        Reply::answer("Done."),
    ])
    .with_script("Worker\n", vec![Reply::answer("added")]);
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let started: Vec<Vec<String>> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ChildStarted(info) => Some(info.tools.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(started, [vec!["sleep".to_owned(), "calculator".to_owned()]]);
    let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.tools, ["sleep", "calculator"]);
}

/// The scripted model; the second stream it gives (the child's) spawns,
/// as it ends, a task that yields `turns` times and then kills the hub's
/// child — swept, an instant around the child's turn end — counting in
/// `unread` a kill that found the child not yet finished by the hub.
struct KillAfterItsAnswer {
    inner: ScriptedModel,
    calls: AtomicUsize,
    turns: usize,
    hub: Arc<std::sync::OnceLock<subagents::actors::hub::HubHandle>>,
    unread: Arc<AtomicUsize>,
    /// The hub is stopped first, in the same instant.
    stop_hub: bool,
}

impl Model for KillAfterItsAnswer {
    fn name(&self) -> &str {
        "scripted"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let inner = self.inner.stream(request);
        if self.calls.fetch_add(1, Ordering::SeqCst) != 1 {
            return inner;
        }
        let (hub, turns, unread) = (self.hub.clone(), self.turns, self.unread.clone());
        let stop_hub = self.stop_hub;
        let killer = futures_util::stream::once(async move {
            tokio::spawn(async move {
                for _ in 0..turns {
                    tokio::task::yield_now().await;
                }
                let Some(hub) = hub.get() else { return };
                let finished = hub
                    .status(&AgentId::new("agent_1"))
                    .is_some_and(|e| e.status.is_terminal());
                if let (false, Some(child)) = (finished, hub.actor().get_children().first()) {
                    // Counted apart: 1 a kill alone, 1,000 a kill as the hub stops.
                    unread.fetch_add(if stop_hub { 1_000 } else { 1 }, Ordering::SeqCst);
                    if stop_hub {
                        hub.actor().stop(None);
                    }
                    child.kill();
                }
            });
            None
        });
        let ended = futures_util::StreamExt::filter_map(killer, |none| async move { none });
        Box::pin(futures_util::StreamExt::chain(inner, ended))
    }
}

/// Stopped midway (review: the stopped-midway matrix, thirty-ninth
/// session): a child killed in the instant after its turn ended — its
/// `Result` on the stream, the end's notice not yet read by the hub —
/// ended `failed` ("stopped before it reported a result"), its answer
/// thrown away and its wake a failure: ractor hands the hub the death
/// before any message. It ends with the result it gave, never from its
/// termination (docs/event-ordering.md). The kill is swept over the
/// scheduler turns after the child's model call ends; the window (the
/// kill landing before the hub finished it) is asserted reached. And the
/// same as the hub is stopped in that instant (review of this session's
/// diff): the stopping hub never reads the death, and the child ended
/// `stopped`, no result, after its `Result(completed)`.
#[tokio::test(start_paused = true)]
async fn a_child_killed_just_after_it_answered_ends_with_its_answer() {
    let reached = Arc::new(AtomicUsize::new(0));
    for (turns, stop_hub) in (0..12).flat_map(|t| [(t, false), (t, true)]) {
        let inner = ScriptedModel::new(vec![
            Reply::new().use_agent(&run_call("Worker", "work", &[], false)),
            Reply::answer("started"),
            Reply::answer("noted"),
        ])
        .with_script("Worker", vec![Reply::answer("the answer")]);
        let hub = Arc::new(std::sync::OnceLock::new());
        let model = KillAfterItsAnswer {
            inner,
            calls: AtomicUsize::new(0),
            turns,
            hub: hub.clone(),
            unread: reached.clone(),
            stop_hub,
        };
        let (parent, mut events) = DelegationBuilder::new(Arc::new(model))
            .system_prompt("You are the parent. Delegate.")
            .spawn()
            .await
            .unwrap();
        let _ = hub.set(parent.hub.clone());
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until(
            &mut events,
            &mut log,
            |e| matches!(e, AgentEvent::ChildStatus(_, status) if status.is_terminal()),
        )
        .await;
        let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
        assert_eq!(
            (envelope.status, envelope.result.as_deref()),
            (SubAgentStatus::Done, Some("the answer")),
            "{turns} turns, the hub stopped: {stop_hub}: {envelope:?}"
        );
        check_log(&log, true);
    }
    let reached = reached.load(Ordering::SeqCst);
    assert!(
        !reached.is_multiple_of(1_000) && reached / 1_000 > 0,
        "no kill landed before the hub read the end (either way): {reached}"
    );
}
