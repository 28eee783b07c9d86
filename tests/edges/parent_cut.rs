//! Same instant, the thread's parent: its turn cut while its delegation
//! request still waits in the hub's mailbox. No child is made: the hub
//! reads whether the asking call is open, and announces a child only
//! while it is, under its turn's lock.

use subagents::actors::ParentStopPolicy;
use subagents::messages::Outcome;

use super::requester_ends::{HeldClock, Hold};
use super::stopped_task::workers;
use super::*;
use crate::common::held::{Held, HoldStart, until_held};

/// A parent that holds in a host tool, then asks for a child.
fn holds_then_delegates() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new(vec![
            Reply::new()
                .tool_call("hold", "{}")
                .use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
            Reply::answer("parent: next"),
        ])
        .with_script("Child\n", vec![Reply::answer("child: ran")]),
    )
}

/// The parent stopped as its `hold` call returns (let go, then the stop,
/// in one tick): the turn task runs first, opens the delegation call and
/// sends its request; the stop closes the turn; the hub reads the request
/// after. The log from the hold on, a minute past the `Result`; checked
/// to be reached: the call opened and cut before it had an id.
pub(super) async fn stopped_as_hold_returns(
    parent: &subagents::actors::DelegatingAgent,
    events: &mut EventStream,
    hold: &tokio::sync::Notify,
) -> Vec<AgentEvent> {
    let mut log = Vec::new();
    until(
        events,
        &mut log,
        |e| matches!(e, AgentEvent::ToolStarted(c) if c.name == "hold"),
    )
    .await;
    hold.notify_one();
    parent.agent.stop_turn().unwrap();
    let result = until_result(events, &mut log).await;
    assert_eq!(result.outcome, Outcome::Stopped);
    parent.hub.sync().await.unwrap();
    run_for(events, &mut log, 60).await;
    assert_eq!(
        results_of(&log, "use_agent"),
        vec![(
            "the turn was stopped before this call finished".to_owned(),
            true
        )]
    );
    log
}

/// After the parent's `Result`: nothing of any child, no child at all,
/// and one model call (the parent's).
async fn assert_no_child(
    parent: &subagents::actors::DelegatingAgent,
    model: &ScriptedModel,
    log: &[AgentEvent],
    what: &str,
) {
    let end = log
        .iter()
        .position(|e| matches!(e, AgentEvent::Result(_)))
        .unwrap();
    let late: Vec<_> = log[end + 1..]
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::ChildStarted(_) | AgentEvent::ChildStatus(..) | AgentEvent::Child(..)
            )
        })
        .collect();
    assert!(
        late.is_empty(),
        "{what}: after the parent's Result: {late:#?}"
    );
    assert!(started(log).is_empty(), "{what}: {log:#?}");
    assert!(
        parent.hub.status(&AgentId::new("agent_1")).is_none(),
        "{what}"
    );
    assert_eq!(parent.hub.snapshot().await.unwrap().requested, 0, "{what}");
    assert_eq!(
        model.calls(),
        1,
        "{what}: a model call for a child nobody has"
    );
}

/// Same instant (review: the parent's cut spawn): the host stops the
/// parent as its `hold` tool returns — the turn task runs first, opens
/// `use_agent`, sends the request, and waits; the stop then closes the
/// turn; the hub reads the request after. It made the child all the
/// same: `ChildStarted` in the parent's row after its `Result` (the cut
/// call read the generic sentence, no id), a child run for nobody — put
/// in the background under `Detach`, started and stopped under `Cascade`.
#[tokio::test(start_paused = true)]
async fn a_run_the_hub_reads_after_the_parents_turn_was_stopped_makes_no_child() {
    for policy in [ParentStopPolicy::Detach, ParentStopPolicy::Cascade] {
        let hold = Arc::new(tokio::sync::Notify::new());
        let model = holds_then_delegates();
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Hold(hold.clone())))
            .parent_stop(policy)
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let log = stopped_as_hold_returns(&parent, &mut events, &hold).await;
        assert_no_child(&parent, &model, &log, &format!("{policy:?}")).await;
        parent.shutdown_and_wait().await;
    }
}

/// The same on two workers, inside the window: the hub held in its
/// handling of the parent's request, after its first check and before
/// `ChildStarted`; the parent stopped meanwhile on the other worker. The
/// announcement is made under the asking call's lock, so the check and
/// the cut cannot interleave.
#[test]
fn a_run_announced_as_the_parents_turn_is_stopped_on_another_worker_makes_no_child() {
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let model = Arc::new(
            ScriptedModel::new(vec![
                Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
                Reply::answer("parent: next"),
            ])
            .with_script("Child\n", vec![Reply::answer("child: ran")]),
        );
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .clock(Arc::new(HeldClock(held.clone())))
            .spawn()
            .await
            .unwrap();
        // The hub's next reading is the request's stamp in its handling
        // of the spawn: no other child exists to finish or start.
        held.arm();
        parent.agent.send_user("go").unwrap();
        until_held(inside, "the hub reads the clock in its spawn").await;
        parent.agent.stop_turn().unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        go.send(()).unwrap();
        parent.hub.sync().await.unwrap();
        parent.hub.sync().await.unwrap();
        drain(&mut events, &mut log);
        crate::common::check_log(&log, true);
        assert_no_child(&parent, &model, &log, "two workers").await;
        parent.shutdown_and_wait().await;
    });
}

/// The same, for a resume (review of this session's own diff): the
/// parent's `use_agent send` to its finished child, read by the hub after
/// the parent's turn was cut, resumed it — a new run announced after the
/// parent's `Result`, linked on disk, run for nobody.
#[tokio::test(start_paused = true)]
async fn a_send_the_hub_reads_after_the_parents_turn_was_stopped_resumes_nothing() {
    let hold = Arc::new(tokio::sync::Notify::new());
    let model = Arc::new(
        ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
            Reply::answer("parent: first"),
            Reply::new()
                .tool_call("hold", "{}")
                .use_agent(&UseAgentCall::send("agent_1", "more")),
            Reply::answer("parent: next"),
        ])
        .with_script("Child\n", vec![Reply::answer("child: ran"); 2]),
    );
    let (parent, mut events) = DelegationBuilder::new(model.clone())
        .system_prompt("You are the parent.")
        .tools(ToolRegistry::new().with(Hold(hold.clone())))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    parent.agent.send_user("more").unwrap();
    let log = stopped_as_hold_returns(&parent, &mut events, &hold).await;
    let end = log
        .iter()
        .position(|e| matches!(e, AgentEvent::Result(_)))
        .unwrap();
    assert!(
        log[end + 1..]
            .iter()
            .all(|e| !matches!(e, AgentEvent::ChildStarted(_) | AgentEvent::Child(..))),
        "after the parent's Result: {:#?}",
        &log[end..]
    );
    assert!(parent.hub.status(&AgentId::new("agent_2")).is_none());
    let first = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(first.continued_as, None, "{first:?}");
    parent.shutdown_and_wait().await;
}

/// Same instant, on two workers (left alone in the twenty-sixth
/// session): the hub announced the child and is held before its reply;
/// the parent's turn is stopped meanwhile, so the cut call never read
/// the child's id. It read the generic "stopped" sentence, though the
/// child went on in the background (`Detach`: its result later woke the
/// parent about an id it never had) or was stopped for it (`Cascade`).
/// The hub writes the call's note for the child under the announcement's
/// lock; `use_agent` and `delegate_task` alike.
#[test]
fn a_call_cut_after_its_child_is_announced_still_names_it() {
    let cases = [
        ("use_agent", ParentStopPolicy::Detach, r#""pending":true"#),
        ("use_agent", ParentStopPolicy::Cascade, r#""stopping":true"#),
        (
            "delegate_task",
            ParentStopPolicy::Detach,
            r#""pending":true"#,
        ),
    ];
    for (tool, policy, said) in cases {
        let runtime = workers(2);
        runtime.block_on(async {
            let (held, inside, go) = Held::new();
            let asks = match tool {
                "use_agent" => Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
                _ => Reply::new().tool_call(tool, r#"{"task":"go","system_prompt":"Child\nw"}"#),
            };
            let model = Arc::new(
                ScriptedModel::new(vec![asks, Reply::answer("parent: next")])
                    .with_script("Child\n", vec![Reply::new().hang()]),
            );
            let (parent, mut events) = DelegationBuilder::new(model.clone())
                .system_prompt("You are the parent.")
                .observer(Arc::new(HoldStart(held.clone())))
                .delegate_task_tool(true)
                .parent_stop(policy)
                .spawn()
                .await
                .unwrap();
            held.arm();
            parent.agent.send_user("go").unwrap();
            until_held(inside, "the hub tells its observer the child started").await;
            parent.agent.stop_turn().unwrap();
            let mut log = Vec::new();
            until_result(&mut events, &mut log).await;
            go.send(()).unwrap();
            let results = results_of(&log, tool);
            assert_eq!(results.len(), 1, "{tool} {policy:?}: {log:#?}");
            let (output, _) = &results[0];
            assert!(
                output.contains(said) && output.contains("agent_1"),
                "{tool} {policy:?}: the cut call reads {output}"
            );
            assert!(started(&log).contains(&AgentId::new("agent_1")), "{log:#?}");
            // And the note holds: the child (it hangs) is stopped, or
            // runs on in the background.
            let id = AgentId::new("agent_1");
            if policy == ParentStopPolicy::Cascade {
                let end = tokio::time::timeout(std::time::Duration::from_secs(60), async {
                    loop {
                        match events.recv().await {
                            Some(AgentEvent::ChildStatus(at, s)) if at == id && s.is_terminal() => {
                                return s;
                            }
                            Some(_) => {}
                            None => panic!("the stream ended"),
                        }
                    }
                })
                .await
                .expect("the child ends");
                assert_eq!(end, SubAgentStatus::Stopped, "{tool}");
            } else {
                parent.hub.sync().await.unwrap();
                let envelope = parent.hub.status(&id).unwrap();
                assert!(!envelope.status.is_terminal(), "{tool}: {envelope:?}");
            }
            parent.shutdown_and_wait().await;
        });
    }
}

/// Holds the hub as it tells its observer a grandchild (depth 2) started.
struct HoldGrandchildStart(Arc<Held>);

impl subagents::actors::hub::HubObserver for HoldGrandchildStart {
    fn finished(&self, _envelope: &subagents::messages::Envelope) {}

    fn started(
        &self,
        envelope: &subagents::messages::Envelope,
        _request: &subagents::messages::ChildRequest,
    ) {
        if envelope.depth == 2 {
            self.0.pass();
        }
    }
}

/// Whether `event`, nested at any depth, is `id`'s `ChildStatus(status)`.
fn says_status(event: &AgentEvent, id: &AgentId, status: SubAgentStatus) -> bool {
    match event {
        AgentEvent::ChildStatus(at, s) => at == id && *s == status,
        AgentEvent::Child(_, inner) => says_status(inner, id, status),
        _ => false,
    }
}

/// Stopped midway at depth 2 (review: the stopped-midway matrix): a
/// child's own call cut — its wall clock — after the hub announced its
/// grandchild but before the call read the id. The hub's failed reply
/// abandoned the grandchild by the thread's `Detach`, which is for the
/// user's parent alone: it was sent to the background (`ChildStatus
/// (background)` after the child's `Result`, its background policy
/// answering its approvals) while the cut call had told the child's model
/// it "stops when you end" — as an inline wait cut at depth 1 does. A
/// grandchild abandoned so is stopped.
#[test]
fn a_grandchild_abandoned_as_its_requesters_call_is_cut_is_stopped() {
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let model = Arc::new(
            ScriptedModel::new(vec![
                Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
                Reply::answer("parent: next"),
            ])
            .with_script(
                "Child\n",
                vec![
                    Reply::new().use_agent(&UseAgentCall::run("Grand\nYou work.", "deeper")),
                    Reply::answer("child: next"),
                ],
            )
            .with_script("Grand\n", vec![Reply::new().hang()]),
        );
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .observer(Arc::new(HoldGrandchildStart(held.clone())))
            .max_depth(2)
            .child_limits(Limits {
                // Long enough for the hub to announce the grandchild
                // first, on a loaded machine (the hold waits a minute).
                wall_clock: std::time::Duration::from_secs(2),
                ..Limits::default()
            })
            .spawn()
            .await
            .unwrap();
        held.arm();
        parent.agent.send_user("go").unwrap();
        until_held(inside, "the hub tells its observer the grandchild started").await;
        // The child's wall clock cuts its call, the hub still held.
        let child = AgentId::new("agent_1");
        let mut log = Vec::new();
        while !log.iter().any(|e| {
            matches!(e, AgentEvent::Child(at, inner)
                if *at == child && matches!(**inner, AgentEvent::Result(_)))
        }) {
            log.push(events.recv().await.expect("the child's Result"));
        }
        go.send(()).unwrap();
        until_result(&mut events, &mut log).await;
        let grandchild = AgentId::new("agent_2");
        let end = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            loop {
                parent.hub.sync().await.unwrap();
                match parent.hub.status(&grandchild) {
                    Some(e) if e.status.is_terminal() => return e,
                    _ => log.push(events.recv().await.expect("the stream goes on")),
                }
            }
        })
        .await
        .expect("the grandchild ends");
        drain(&mut events, &mut log);
        let background = SubAgentStatus::Background;
        assert!(
            !log.iter().any(|e| says_status(e, &grandchild, background)),
            "{log:#?}"
        );
        // It never ran (its start was refused): no `running` is said for
        // it (said at its request, it ran for nobody, with no `Result`).
        let running = SubAgentStatus::Running;
        assert!(
            !log.iter().any(|e| says_status(e, &grandchild, running)),
            "{log:#?}"
        );
        crate::common::check_log(&log, true);
        assert_eq!(end.status, SubAgentStatus::Stopped, "{end:?}");
        assert!(!end.background, "{end:?}");
        parent.shutdown_and_wait().await;
    });
}

/// Same instant, on two workers (review: the front-ends): a
/// `delegate_task` child still queued as its wall-clock cap ran out. The
/// call said "it goes on in the background, its result a message" and
/// asked the hub to detach it if still queued — but a slot freed in that
/// tick and the hub started it first (`Started`: nothing detached), and
/// the parent's turn was cut while the call waited for that answer. The
/// child then ran inline with nobody waiting, and its result reached
/// nobody (no wake: it never went to the background). A call cut in that
/// wait hands the child to the background, as its note says.
#[test]
fn a_queued_synchronous_child_started_as_its_callers_cap_ran_out_is_not_lost() {
    use crate::common::held::HoldFinish;
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let hold = Arc::new(tokio::sync::Notify::new());
        let model = Arc::new(
            ScriptedModel::new(vec![
                Reply::new()
                    .use_agent(
                        &UseAgentCall::run("Blocker\nb", "block")
                            .background()
                            .tools(["hold"]),
                    )
                    .tool_call(
                        "delegate_task",
                        r#"{"task":"x","system_prompt":"Worker\nw"}"#,
                    ),
                Reply::answer("parent: next"),
            ])
            .with_script(
                "Blocker\n",
                vec![
                    Reply::new().tool_call("hold", "{}"),
                    Reply::answer("blocked"),
                ],
            )
            .with_script("Worker\n", vec![Reply::answer("worked")]),
        );
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Hold(hold.clone())))
            .limits(subagents::messages::Limits {
                wall_clock: std::time::Duration::from_secs(2),
                ..Default::default()
            })
            .max_live(1)
            .delegate_task_tool(true)
            .observer(Arc::new(HoldFinish(held.clone())))
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        let worker = AgentId::new("agent_2");
        until(
            &mut events,
            &mut log,
            |e| matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Queued) if *id == worker),
        )
        .await;
        // The blocker ends; the hub is held as it tells its observers,
        // before the slot it freed admits the worker.
        held.arm();
        hold.notify_one();
        until_held(inside, "the hub tells its observer the blocker finished").await;
        // Meanwhile the cap (1.8 s) asks for the detach, and the parent's
        // wall clock (2 s) cuts its turn as it waits for the answer.
        until_result(&mut events, &mut log).await;
        go.send(()).unwrap();
        until(
            &mut events,
            &mut log,
            |e| matches!(e, AgentEvent::ChildStatus(id, s) if *id == worker && s.is_terminal()),
        )
        .await;
        let envelope = parent.hub.status(&worker).unwrap();
        assert_eq!(envelope.status, SubAgentStatus::Done, "{envelope:#?}");
        assert!(
            envelope.background || envelope.claimed,
            "its result reaches nobody: {envelope:#?}"
        );
        parent.shutdown_and_wait().await;
    });
}
