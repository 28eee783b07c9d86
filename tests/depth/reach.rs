//! What a child may reach and give: only the children it asked for, and
//! to a grandchild never more tools or model calls than it has itself.

use super::*;

/// Forged: a child naming a sibling's id. It could read its status,
/// claim its result (the parent's wake for it then never came: guarantee
/// 9 broken), stop it or send it messages framed as from its requester.
/// A child reaches only the children it asked for; the sibling's id reads
/// as unknown, and the sibling ends and wakes the parent once.
#[tokio::test(start_paused = true)]
async fn a_child_cannot_reach_its_sibling() {
    let sibling = |action: UseAgentCall| Reply::new().use_agent(&action);
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&run("Alpha", "work a while", false))
            .use_agent(&run("Beta", "peek at your sibling", false)),
        Reply::answer("parent: started two"),
        Reply::answer("parent: noted"),
        Reply::answer("parent: noted again"),
    ])
    .with_script(
        "Alpha",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":50}"#),
            Reply::answer("alpha: done"),
        ],
    )
    .with_script(
        "Beta",
        vec![
            sibling(UseAgentCall::result("agent_1")),
            sibling(UseAgentCall::send("agent_1", "stop working")),
            Reply::new().use_agent(&UseAgentCall::stop("agent_1")),
            Reply::answer("beta: could not"),
        ],
    );
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 1_000).await;
    check_log(&log, true);
    let beta: Vec<AgentEvent> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(id, inner) if id.as_str() == "agent_2" => Some((**inner).clone()),
            _ => None,
        })
        .collect();
    let refusals = results_of(&beta, "use_agent");
    assert_eq!(refusals.len(), 3, "{beta:#?}");
    for (output, is_error) in refusals {
        assert!(
            is_error && output.contains("no sub-agent with id `agent_1`"),
            "{output}"
        );
    }
    let mut woken = woken_children(&log);
    woken.sort();
    assert_eq!(woken, ["agent_1", "agent_2"], "each wakes the parent once");
    let alpha = thread
        .envelope(&AgentId::new("agent_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alpha.result.as_deref(), Some("alpha: done"));
    thread.close_and_wait().await;
}

/// Forged or widened: a grandchild asked for with no `tools` got every
/// host tool, whatever its requester had (a child given only `calculator`
/// could hand `sleep` — a shell, on a real host — to a child of its own).
/// No `tools` means the requester's own, as `use_agent`'s schema says.
#[tokio::test(start_paused = true)]
async fn a_grandchild_gets_no_tool_its_requester_lacks() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "ask your own sub-agent", true).tools(["calculator"])),
        Reply::answer("parent: done"),
    ])
    .with_script("Child", asks_grand(true))
    .with_script("Grand", vec![Reply::answer("42")]);
    let (parent, mut events) = builder(model, 2).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let envelopes = parent.hub.envelopes();
    let tools = |id: &str| {
        envelopes
            .iter()
            .find(|e| e.id.as_str() == id)
            .map(|e| e.tools.clone())
            .unwrap()
    };
    assert_eq!(tools("agent_1"), ["calculator", "use_agent"]);
    assert_eq!(tools("agent_2"), ["calculator"], "the grandchild's tools");
    parent.shutdown_and_wait().await;
}

/// The same for a host's request in a child's name: the hub took no
/// `tools` as every host tool and a listed one from the host's list, so
/// the grandchild got `calculator`, which its requester never had.
#[tokio::test(start_paused = true)]
async fn a_host_request_in_a_childs_name_gets_no_tool_the_child_lacks() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "work", false).tools(["sleep"])),
        Reply::answer("parent: started"),
    ])
    .with_script("Child", sleeps())
    .with_script("Grand", sleeps());
    let (parent, mut events) = builder(model, 2).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let child = AgentId::new("agent_1");
    let ask = |tools: Option<&str>| ChildRequest {
        tools: tools.map(|t| vec![t.to_owned()]),
        ..ChildRequest::new(
            child.clone(),
            1,
            ToolUseId::new("host"),
            "Grand\nA sub-agent.",
            "w",
        )
    };
    let grand = parent
        .hub
        .request(ask(None))
        .await
        .expect("the child is live");
    let tools = parent.hub.status(&grand).unwrap().tools;
    assert_eq!(
        tools,
        ["sleep"],
        "the grandchild got a tool its requester lacks"
    );
    let widened = parent.hub.request(ask(Some("calculator"))).await;
    assert!(
        matches!(widened, Err(Refused::UnknownTool(_))),
        "{widened:?}"
    );
    parent.shutdown_and_wait().await;
}

/// The same for the model-call cap: a child held to 2 model calls could
/// give its own child 20 (the cap was clamped to the parent's only).
#[tokio::test(start_paused = true)]
async fn a_grandchild_gets_no_more_model_calls_than_its_requester() {
    let calc = || Reply::new().tool_call("calculator", r#"{"expression":"1+1"}"#);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "ask your own sub-agent", true).max_iterations(2)),
        Reply::answer("parent: done"),
    ])
    .with_script(
        "Child",
        vec![
            Reply::new().use_agent(&run("Grand", "add", true).max_iterations(20)),
            Reply::answer("child: done"),
        ],
    )
    .with_script("Grand", vec![calc(), calc(), calc(), Reply::answer("2")]);
    let (parent, mut events) = builder(model, 2).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let grand = parent.hub.status(&AgentId::new("agent_2")).unwrap();
    assert_eq!(grand.model_calls, 2, "{grand:?}");
    parent.shutdown_and_wait().await;
}

/// A run resumed by a message (`agent_1` going on as `agent_3`) reads the
/// whole conversation of the run before — with the id of the child that
/// run started and the advice to read its result — but could not reach
/// it: the child's requester is the earlier run's id, so `result` said
/// "there is no sub-agent with id `agent_2`", and that answer, at depth 2,
/// reached nobody. A run reaches the children of every earlier run of its
/// chain.
#[tokio::test(start_paused = true)]
async fn a_resumed_run_reaches_the_children_its_earlier_run_started() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Alpha", "start your own", false)),
        Reply::answer("parent: started"),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "read what yours found")),
        Reply::answer("parent: sent"),
        Reply::answer("parent: noted"),
        Reply::answer("parent: noted again"),
    ])
    .with_script(
        "Alpha",
        vec![
            Reply::new().use_agent(&run("Grand", "compute", true)),
            Reply::answer("alpha: started grand"),
            Reply::new().use_agent(&UseAgentCall::result("agent_2")),
            Reply::answer("alpha: read it"),
        ],
    )
    .with_script(
        "Grand",
        vec![
            Reply::new().tool_call("calculator", r#"{"a":40,"b":2}"#),
            Reply::answer("42"),
        ],
    );
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 1_000).await;
    check_log(&log, true);
    let read: Vec<(String, bool)> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(id, inner) if id.as_str() == "agent_3" => match &**inner {
                AgentEvent::ToolResult(r) if r.name == "use_agent" => {
                    Some((r.output.clone(), r.is_error))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(read.len(), 1, "{log:#?}");
    assert!(!read[0].1, "{read:?}");
    assert!(read[0].0.contains("42"), "{read:?}");
    thread.close_and_wait().await;
}

/// A resumed run messaging a child its earlier run started, which has
/// ended: the resume kept the earlier run's request, whose requester —
/// the run before (`agent_1`) — had ended, and the message read "it worked
/// for `agent_1`, which has ended" though the caller is `agent_1`'s own
/// continuation. The resumed child reports to the latest run of its
/// requester.
#[tokio::test(start_paused = true)]
async fn a_resumed_run_resumes_a_child_its_earlier_run_started() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Alpha", "start your own", false)),
        Reply::answer("parent: started"),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "ask yours again")),
        Reply::answer("parent: sent"),
        Reply::answer("parent: noted"),
        Reply::answer("parent: noted again"),
    ])
    .with_script(
        "Alpha",
        vec![
            Reply::new().use_agent(&run("Grand", "compute", true)),
            Reply::answer("alpha: grand said 42"),
            Reply::new().use_agent(&UseAgentCall::send("agent_2", "double it")),
            Reply::answer("alpha: sent"),
        ],
    )
    .with_script("Grand", vec![Reply::answer("42"), Reply::answer("84")]);
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 1_000).await;
    let sent: Vec<(String, bool)> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(id, inner) if id.as_str() == "agent_3" => match &**inner {
                AgentEvent::ToolResult(r) if r.name == "use_agent" => {
                    Some((r.output.clone(), r.is_error))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1, "{log:#?}");
    assert!(!sent[0].1, "{sent:?}");
    assert!(sent[0].0.contains("agent_4"), "{sent:?}");
    let resumed = thread.hub().status(&AgentId::new("agent_4")).unwrap();
    assert_eq!(resumed.resumed_from, Some(AgentId::new("agent_2")));
    thread.close_and_wait().await;
}

/// A message to a grandchild whose requester has ended: it cannot resume
/// (its run would have no requester to report to), and the refusal read
/// "the agent `agent_1` is not known to this hub" — an internal word about
/// a child the model knows. It says why it cannot go on, and what still
/// reads its answer.
#[tokio::test(start_paused = true)]
async fn a_message_to_a_grandchild_whose_requester_ended_says_why_it_cannot_go_on() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "ask your own sub-agent", true)),
        Reply::new().use_agent(&UseAgentCall::send("agent_2", "double it")),
        Reply::answer("parent: done"),
    ])
    .with_script("Child", asks_grand(true))
    .with_script("Grand", vec![Reply::answer("42")]);
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let answers = results_of(&log, "use_agent");
    let (text, is_error) = answers.last().unwrap();
    assert!(*is_error, "{text}");
    assert!(!text.contains("not known to this hub"), "{text}");
    assert!(text.contains("cannot go on here"), "{text}");
    assert!(text.contains("`agent_1`"), "{text}");
}

/// Same instant: a child's wall clock runs out in the poll its answer's
/// `use_agent run` is sent in. The child's `Result` went out, then the
/// hub read the spawn before the child's end notice and started a
/// grandchild under a requester whose turn had ended — `ChildStarted` in
/// the child's row after its `Result`, a grandchild run (and stopped) for
/// nobody. A requester whose turn is over is refused.
#[tokio::test(start_paused = true)]
async fn no_child_starts_under_a_requester_whose_turn_has_ended() {
    let child = vec![
        Reply::new()
            .delay(std::time::Duration::from_secs(10))
            .use_agent(&run("Grand", "compute", false)),
        Reply::answer("child: never"),
    ];
    let grand = vec![Reply::answer("grand: ran")];
    let model = tree_with(child, grand);
    let builder = builder(model.clone(), 2).child_limits(Limits {
        wall_clock: std::time::Duration::from_secs(10),
        ..Limits::default()
    });
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 60).await;
    let row = row_of(&log, "agent_1");
    let end = row
        .iter()
        .position(|e| matches!(e, AgentEvent::Result(_)))
        .unwrap_or_else(|| panic!("no Result: {row:#?}"));
    assert!(
        row[end + 1..]
            .iter()
            .all(|e| !matches!(e, AgentEvent::Child(..) | AgentEvent::ChildStarted(_))),
        "after its Result: {:#?}",
        &row[end..]
    );
    assert!(
        !log.iter().any(|e| format!("{e:?}").contains("grand: ran")),
        "the grandchild ran"
    );
    thread.close_and_wait().await;
}

/// A message to a grandchild whose requester's newest run waits in the
/// queue (resumed, no slot free): it read "it worked for `agent_4`, which
/// has ended" — that run had not started. Refused all the same (a
/// grandchild does not start under a requester that has not), saying so.
#[tokio::test(start_paused = true)]
async fn a_message_to_a_grandchild_whose_requester_is_queued_says_so() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Child", "ask your own sub-agent", true)),
        Reply::new().use_agent(&run("Blocker", "hold the slot", false).tools(["sleep"])),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "again")),
        Reply::new().use_agent(&UseAgentCall::send("agent_2", "double it")),
        Reply::answer("parent: done"),
    ])
    .with_script("Child", asks_grand(true))
    .with_script("Grand", vec![Reply::answer("42")])
    .with_script("Blocker", sleeps());
    let (parent, mut events) = builder(model, 2).max_live(1).spawn().await.unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(
        parent.hub.queue_position(&AgentId::new("agent_4")),
        Some(1),
        "agent_1 resumed as agent_4, queued"
    );
    let (said, refused) = results_of(&log, "use_agent").pop().unwrap();
    assert!(refused, "{said}");
    assert!(
        said.contains("`agent_4`, which waits in the queue and has not started"),
        "{said}"
    );
    assert!(!said.contains("has ended"), "{said}");
    parent.shutdown_and_wait().await;
}

/// Same instant, the queue's door: a child's turn ends (the host stops
/// it) in the tick a slot of its group frees (the host stops its running
/// child). The hub read the freed slot first and started the child's
/// queued grandchild — `ChildRunning` in the child's row after its
/// `Result`, a model called for nobody, then stopped "while running".
/// A queued child whose requester's turn is over is stopped before it
/// starts, whichever notice the hub reads first.
#[tokio::test(start_paused = true)]
async fn a_queued_grandchild_never_starts_after_its_requesters_turn_has_ended() {
    for holder_first in [true, false] {
        let child = vec![
            Reply::new().use_agent(&run("Holder", "hold the slot", false).tools(["sleep"])),
            Reply::new().use_agent(&run("Waiter", "wait your turn", false)),
            Reply::new().tool_call("sleep", r#"{"secs":1000}"#),
            Reply::answer("child: never"),
        ];
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&run("Child", "ask your own sub-agents", false)),
            Reply::answer("parent: done"),
        ])
        .with_script("Child", child)
        .with_script("Holder", sleeps())
        .with_script("Waiter", vec![Reply::answer("waiter: ran")]);
        let builder = builder(model, 2).max_live(1);
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        run_for(&mut events, &mut log, 5).await;
        let (child, holder, waiter) = (
            AgentId::new("agent_1"),
            AgentId::new("agent_2"),
            AgentId::new("agent_3"),
        );
        assert_eq!(thread.hub().queue_position(&waiter), Some(1));
        let (first, second) = if holder_first {
            (&holder, &child)
        } else {
            (&child, &holder)
        };
        let (a, b) = (thread.hub().stop(first), thread.hub().stop(second));
        let (_, _) = (a.await, b.await);
        run_for(&mut events, &mut log, 60).await;
        let order = if holder_first {
            "holder first"
        } else {
            "child first"
        };
        assert!(
            !log.iter().any(|e| matches!(e, AgentEvent::Child(id, inner)
                    if *id == child && matches!(**inner, AgentEvent::ChildRunning(_)))),
            "{order}: the grandchild started after its requester's turn: {:#?}",
            row_of(&log, "agent_1")
        );
        let status = thread.hub().status(&waiter).unwrap();
        assert_eq!(
            status.error.as_deref(),
            Some("stopped before it started"),
            "{order}: {status:?}"
        );
        assert!(status.started_at_ms.is_none(), "{order}: {status:?}");
        assert!(
            !log.iter().any(|e| format!("{e:?}").contains("waiter: ran")),
            "{order}: the grandchild ran"
        );
        check_log(&log, true);
        thread.close_and_wait().await;
    }
}

/// A grandchild whose turn ended as its requester's did: the requester's
/// end stops its children still in the hub's book (an orphan stop), and
/// that stop — sent as a host's stop by name is — cancelled the
/// grandchild for good when its own end was read first or was still on
/// its way: a `send` from the requester's resumed run was refused ("was
/// stopped"), though the same grandchild, its end read a tick earlier, was
/// resumable. An orphan stop stops what still runs, and cancels nothing.
#[tokio::test(start_paused = true)]
async fn a_grandchild_ending_as_its_requester_does_is_not_cancelled() {
    let mut reached = Vec::new();
    for alpha_ms in [998, 999, 1000, 1001, 1002] {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&run("Alpha", "start your own", false)),
            Reply::answer("parent: started"),
            Reply::answer("parent: noted"),
        ])
        .with_script(
            "Alpha",
            vec![
                Reply::new().use_agent(&run("Grand", "compute", false)),
                Reply::new()
                    .delay(std::time::Duration::from_millis(alpha_ms))
                    .text("alpha: started"),
            ],
        )
        .with_script(
            "Grand",
            vec![
                Reply::new()
                    .delay(std::time::Duration::from_secs(1))
                    .text("42"),
            ],
        );
        let gate = GateHandle::spawn(4).await.unwrap();
        let (thread, mut events) = ThreadHandle::spawn(builder(model, 2).gate(gate), None)
            .await
            .unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 60).await;
        let grand = thread.hub().status(&AgentId::new("agent_2")).unwrap();
        if grand.status == SubAgentStatus::Done {
            assert!(!grand.cancelled, "{alpha_ms} ms: {grand:#?}");
        }
        // The instant itself is reached (the other offsets are its sides):
        // at 1000 ms both turns end in one tick, the grandchild's first.
        if alpha_ms == 1000 {
            assert_eq!(grand.status, SubAgentStatus::Done, "{grand:#?}");
        }
        reached.push(grand.status);
        thread.close_and_wait().await;
    }
    assert!(reached.contains(&SubAgentStatus::Done), "{reached:?}");
}
