//! Same instant, a message: the sending call cut before the hub read it,
//! or after the hub announced the run the message resumed.

use subagents::actors::ParentStopPolicy;

use super::parent_cut::stopped_as_hold_returns;
use super::requester_ends::Hold;
use super::stopped_task::workers;
use super::*;
use crate::common::held::{Held, HoldStart, HoldStepped, until_held};

/// A parent whose background `Worker` (`agent_1`) works 30 s, asked in
/// its second turn `call` after a `hold` — the host stops the turn as the
/// hold returns, so the hub reads `call` after the cut (see
/// `stopped_as_hold_returns`). The parent, once a minute has passed.
async fn asked_after_the_cut(call: UseAgentCall) -> subagents::actors::DelegatingAgent {
    let hold = Arc::new(tokio::sync::Notify::new());
    let model = Arc::new(
        ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker", 30, false)),
            Reply::answer("parent: started"),
            Reply::new().tool_call("hold", "{}").use_agent(&call),
            Reply::answer("parent: next"),
            Reply::answer("parent: noted"),
        ])
        .with_script("Worker\n", worker(30)),
    );
    let (parent, mut events) = DelegationBuilder::new(model.clone())
        .system_prompt("You are the parent.")
        .tools(ToolRegistry::new().with(Hold(hold.clone())).with(Sleep))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    parent.agent.send_user("more").unwrap();
    stopped_as_hold_returns(&parent, &mut events, &hold).await;
    parent
}

/// Same instant (review 27: steering): the parent's `use_agent send` to
/// its running child, read by the hub after the parent's turn was cut
/// (the host stopped it as the call began): the child took the message —
/// an instruction its sender's model was told had stopped (a retry gave
/// it twice). Nothing is delivered once the sending call was cut, as a
/// resume was refused already.
#[tokio::test(start_paused = true)]
async fn a_message_the_hub_reads_after_the_senders_turn_was_cut_is_not_delivered() {
    let parent = asked_after_the_cut(UseAgentCall::send("agent_1", "also tidy the docs")).await;
    let worker = parent.hub.conversation(&AgentId::new("agent_1")).unwrap();
    assert!(
        worker
            .iter()
            .all(|m| !m.content.contains("also tidy the docs")),
        "the child took it: {worker:#?}"
    );
    parent.shutdown_and_wait().await;
}

/// Once the hub (or a child) is held (`inside`, saying `what`): the
/// parent's turn stopped, its `Result` awaited, the hold let go (`go`) —
/// the one `use_agent` answer the cut turn gave.
async fn stopped_while_held(
    parent: &subagents::actors::DelegatingAgent,
    events: &mut EventStream,
    inside: std::sync::mpsc::Receiver<()>,
    go: std::sync::mpsc::Sender<()>,
    what: &str,
) -> String {
    until_held(inside, what).await;
    parent.agent.stop_turn().unwrap();
    let mut log = Vec::new();
    until_result(events, &mut log).await;
    go.send(()).unwrap();
    let results = results_of(&log, "use_agent");
    assert_eq!(results.len(), 1, "{log:#?}");
    results[0].0.clone()
}

/// Same instant, on two workers (review 27: steering): the parent's
/// message resumed its finished child as `agent_2`; the hub announced the
/// new run and was held before its reply; the parent's turn was stopped
/// meanwhile. The cut call read the generic "stopped" sentence, though
/// `agent_2` went on in the background (its result later woke the parent
/// about an id its model never had; a retry to `agent_1` reached
/// `agent_2` and gave it the message twice). The call names the run.
#[test]
fn a_send_cut_after_its_resumed_run_is_announced_still_names_it() {
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let model = Arc::new(
            ScriptedModel::new(vec![
                Reply::new().use_agent(&UseAgentCall::run("Child\nYou work.", "go")),
                Reply::answer("parent: first"),
                Reply::new().use_agent(&UseAgentCall::send("agent_1", "more")),
                Reply::answer("parent: next"),
            ])
            .with_script(
                "Child\n",
                vec![Reply::answer("child: ran"), Reply::new().hang()],
            ),
        );
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .observer(Arc::new(HoldStart(held.clone())))
            .parent_stop(ParentStopPolicy::Detach)
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        held.arm();
        parent.agent.send_user("more").unwrap();
        let output = &stopped_while_held(
            &parent,
            &mut events,
            inside,
            go,
            "the hub tells its observer the run started",
        )
        .await;
        assert!(
            output.contains("agent_2") && output.contains("\"resumed_from\":\"agent_1\""),
            "the cut call reads {output}"
        );
        parent.hub.sync().await.unwrap();
        let envelope = parent.hub.status(&AgentId::new("agent_2")).unwrap();
        assert!(!envelope.status.is_terminal(), "{envelope:?}");
        parent.shutdown_and_wait().await;
    });
}

/// The same for an interrupt (review 27: steering): read by the hub after
/// the parent's turn was cut, it still interrupted the child — which then
/// waited, `interrupted`, for a message the parent's model never knew to
/// send (it read that its call had stopped). Nothing is done.
#[tokio::test(start_paused = true)]
async fn an_interrupt_the_hub_reads_after_the_senders_turn_was_cut_does_nothing() {
    let parent = asked_after_the_cut(UseAgentCall::interrupt("agent_1")).await;
    let worker = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(worker.status, SubAgentStatus::Done, "{worker:?}");
    parent.shutdown_and_wait().await;
}

/// The same for a stop (review of this session's own diff): read after
/// the parent's turn was cut, `use_agent stop` still stopped the child and
/// cancelled it for good, though its model read that the call had not
/// finished (and under either policy a background child runs on through
/// its parent's cut). Nothing is done; a host's stop is not asked by a
/// call and always acts.
#[tokio::test(start_paused = true)]
async fn a_stop_the_hub_reads_after_the_senders_turn_was_cut_does_nothing() {
    let parent = asked_after_the_cut(UseAgentCall::stop("agent_1")).await;
    let worker = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(worker.status, SubAgentStatus::Done, "{worker:?}");
    assert!(!worker.cancelled, "{worker:?}");
    parent.shutdown_and_wait().await;
}

/// The same for the parent resuming a grandchild (review: the written
/// contract): the new run reports to the grandchild's requester, still
/// running, so the hub announced it under that requester's turn alone —
/// the parent's call, not its requester's, never had its cut note set,
/// and read the generic sentence, though `agent_3` went on (a retry
/// reached it and gave it the message twice). Announced under the
/// sending call's lock too: the call names the run, and says how the
/// parent hears of a grandchild (not by a message).
#[test]
fn a_send_cut_after_it_resumed_a_grandchild_still_names_the_new_run() {
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let model = Arc::new(
            ScriptedModel::new(vec![
                Reply::new().use_agent(&work_call("Child", 0, false).tools(["sleep"])),
                Reply::answer("parent: first"),
                Reply::new().use_agent(&UseAgentCall::send("agent_2", "more")),
                Reply::answer("parent: next"),
            ])
            .with_script(
                "Child\n",
                vec![
                    Reply::new().use_agent(&UseAgentCall::run("Grand\nYou work.", "go")),
                    Reply::new().tool_call("sleep", r#"{"secs":600}"#),
                    Reply::answer("child: done"),
                ],
            )
            .with_script(
                "Grand\n",
                vec![Reply::answer("grand: ran"), Reply::new().hang()],
            ),
        );
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .max_depth(2)
            .observer(Arc::new(HoldStart(held.clone())))
            .parent_stop(ParentStopPolicy::Detach)
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let grand = AgentId::new("agent_2");
        until_logged(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(_, inner)
                if matches!(&**inner, AgentEvent::ChildStatus(id, s) if *id == grand && s.is_terminal()))
        })
        .await;
        held.arm();
        parent.agent.send_user("more").unwrap();
        let output = &stopped_while_held(&parent, &mut events, inside, go, "the hub tells its observer the run started").await;
        assert!(
            output.contains("agent_3")
                && output.contains("\"resumed_from\":\"agent_2\"")
                && output.contains("it works for the sub-agent that started it"),
            "the cut call reads {output}"
        );
        parent.hub.sync().await.unwrap();
        let envelope = parent.hub.status(&AgentId::new("agent_3")).unwrap();
        assert!(!envelope.status.is_terminal(), "{envelope:?}");
        assert_eq!(envelope.depth, 2, "{envelope:?}");
        parent.shutdown_and_wait().await;
    });
}

/// Same instant, on two workers (review: limits and stops): a running
/// child took the parent's message, and the parent's turn was stopped
/// before its call read the answer. The call read "stopped before this
/// call finished" while the child took the message and acted on it (a
/// retry gave it twice). The take is under the sending call's lock, and
/// the call's cut note says it was taken; a call cut before that takes
/// nothing.
#[test]
fn a_send_cut_after_the_child_took_the_message_says_it_was_taken() {
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let model = Arc::new(
            ScriptedModel::new(vec![
                Reply::new().use_agent(&work_call("Worker", 600, false)),
                Reply::answer("parent: first"),
                Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check X")),
                Reply::answer("parent: next"),
            ])
            .with_script("Worker", worker(600)),
        );
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .observer(Arc::new(HoldStepped(held.clone())))
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        until_logged(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(_, inner) if matches!(&**inner, AgentEvent::ToolStarted(_)))
        })
        .await;
        held.arm();
        parent.agent.send_user("tell it").unwrap();
        let output = &stopped_while_held(&parent, &mut events, inside, go, "the child took the message").await;
        assert!(
            output.contains("\"status\":\"running\"") && output.contains("agent_1"),
            "the cut call reads {output}"
        );
        parent.shutdown_and_wait().await;
    });
}

/// Same instant, on two workers (review: approvals and limits on the new
/// locks): the parent's message resumed a finished grandchild while the
/// grandchild's requester was ending — its final answer given (no more
/// children, no more messages: its turn closing), its close not yet run.
/// The resume was announced (the turn still open), the parent read
/// `resumed`, and the new run ran under a requester that was ending: it
/// was stopped with it, and the chain, its newest run stopped, refused
/// every later message. A run is resumed only under a requester that
/// still takes children; otherwise the message is refused, saying why.
#[test]
fn a_grandchild_resumed_as_its_requester_ends_is_refused_not_stopped() {
    use subagents::messages::Limits;
    let runtime = workers(2);
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        let model = Arc::new(
            ScriptedModel::new(vec![
                Reply::new()
                    .use_agent(&UseAgentCall::run("Middle\nYou work.", "ask yours").background()),
                Reply::answer("parent: started"),
                Reply::new().use_agent(&UseAgentCall::send("agent_1", "more")),
                Reply::answer("parent: sent"),
                Reply::new().use_agent(&UseAgentCall::send("agent_2", "double it")),
                Reply::answer("parent: told"),
                Reply::answer("parent: noted"),
                Reply::answer("parent: noted"),
            ])
            .with_script(
                "Middle\n",
                vec![
                    Reply::new()
                        .use_agent(&UseAgentCall::run("Grand\nYou work.", "42"))
                        .usage(400, 100),
                    // Long enough, in real time, for the parent's turn
                    // to send into it on a loaded machine (1 s was not).
                    Reply::answer("middle: done")
                        .usage(400, 100)
                        .delay(std::time::Duration::from_secs(3)),
                ],
            )
            .with_script("Grand\n", vec![Reply::answer("42"), Reply::answer("84")]),
        );
        // Capacity 2: the parent's calls do not wait on the child's.
        let gate = subagents::actors::GateHandle::spawn(2).await.unwrap();
        let (parent, mut events) = DelegationBuilder::new(model.clone())
            .system_prompt("You are the parent.")
            .gate(gate)
            .max_depth(2)
            .child_limits(Limits {
                token_budget: 1_000,
                ..Limits::default()
            })
            .observer(Arc::new(HoldStepped(held.clone())))
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        // The grandchild answered: the middle child is in its last call.
        until_logged(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(_, inner)
                if matches!(&**inner, AgentEvent::ToolResult(r) if r.name == "use_agent"))
        })
        .await;
        parent.agent.send_user("tell it").unwrap();
        until_result(&mut events, &mut log).await;
        // Taken during its last call, its budget spent at the answer: the
        // answer is final, the message unread — a step, told between the
        // turn's closing and its close.
        held.arm();
        until_held(inside, "the middle child's final answer is told as a step").await;
        parent.agent.send_user("again").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        go.send(()).unwrap();
        let (said, refused) = results_of(&log, "use_agent").pop().unwrap();
        assert!(refused, "{said}");
        assert!(said.contains("`agent_1`"), "{said}");
        parent.hub.sync().await.unwrap();
        assert!(
            parent.hub.status(&AgentId::new("agent_3")).is_none(),
            "{:#?}",
            parent.hub.status(&AgentId::new("agent_3"))
        );
        parent.shutdown_and_wait().await;
    });
}
