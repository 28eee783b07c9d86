//! A child on another node is saved as a local one is.

use super::*;

/// A background `Worker` that sleeps 1 s, then 600 s, then answers; the
/// parent's replies after its first two (`run` it, "Started.").
pub(super) fn a_worker_that_naps(then: Vec<Reply>) -> Arc<dyn subagents::actors::Model> {
    a_worker_that_naps_thinking(then, std::time::Duration::ZERO)
}

/// The same, its second answer `thinking` after its first nap's result
/// (none: at once).
pub(super) fn a_worker_that_naps_thinking(
    then: Vec<Reply>,
    thinking: std::time::Duration,
) -> Arc<dyn subagents::actors::Model> {
    let mut second = Reply::new().tool_call("sleep", r#"{"secs":600}"#);
    if !thinking.is_zero() {
        second = second.delay(thinking);
    }
    let mut replies = vec![starting_the_worker(), Reply::answer("Started.")];
    replies.extend(then);
    ScriptedModel::new(replies)
        .with_script(
            "Worker",
            vec![
                Reply::new()
                    .text("first, a nap")
                    .tool_call("sleep", r#"{"secs":1}"#),
                second,
                Reply::answer("done"),
            ],
        )
        .shared()
}

/// A thread on `store` running `model`, its children here or (`remote`)
/// on a loopback node.
pub(super) async fn a_thread_placing(
    model: Arc<dyn subagents::actors::Model>,
    store: &Arc<EnvelopeStore>,
    remote: bool,
) -> (ThreadHandle, EventStream, Arc<common::loopback::Loopback>) {
    a_thread_placing_with(model, store, remote, 1).await
}

/// The same, the thread's gate of `capacity` (2: a local child's model
/// call does not hold up the parent's, as a node's own gate does not).
pub(super) async fn a_thread_placing_with(
    model: Arc<dyn subagents::actors::Model>,
    store: &Arc<EnvelopeStore>,
    remote: bool,
    capacity: usize,
) -> (ThreadHandle, EventStream, Arc<common::loopback::Loopback>) {
    use subagents::actors::Placement;
    let node = common::loopback::Loopback::new("b", model.clone()).await;
    let placement = if remote {
        Placement::On(node.clone())
    } else {
        Placement::Local
    };
    let gate = subagents::actors::GateHandle::spawn(capacity)
        .await
        .unwrap();
    let config = ThreadConfig::new(
        DelegationBuilder::new(model)
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .gate(gate)
            .placement(placement),
    )
    .store(store.clone());
    let (thread, events) = ThreadHandle::spawn(config, None).await.unwrap();
    (thread, events, node)
}

/// The child's second call (its 600 s nap) started.
pub(super) fn in_the_second_nap(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Child(_, inner)
        if matches!(&**inner, AgentEvent::ToolStarted(s) if s.arguments.contains("600")))
}

/// A thread on `store` whose child (here, or on a node) took "also check
/// X" in its 600 s nap, the parent's turn that sent it over (`then`: the
/// parent's later replies).
pub(super) async fn told_in_the_second_nap(
    store: &Arc<EnvelopeStore>,
    remote: bool,
    then: Vec<Reply>,
) -> (
    ThreadHandle,
    EventStream,
    Vec<AgentEvent>,
    Arc<common::loopback::Loopback>,
) {
    let mut replies = vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check X")),
        Reply::answer("Told it."),
    ];
    replies.extend(then);
    let (thread, mut events, node) =
        a_thread_placing(a_worker_that_naps(replies), store, remote).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_the_second_nap).await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    (thread, events, log, node)
}

/// Stopped midway, across nodes: a thread saves a child's conversation
/// after each of its steps, for a restart to resume from — but a remote
/// child's was its task alone until the run's end (its proxy learned the
/// node's conversation only with `Ended`): after a restart a message
/// resumed it from its task, and every tool call ran again. Its
/// conversation is folded from the node's events as they come: the saved
/// one holds what a local child's holds at that step.
#[tokio::test]
async fn a_remote_childs_conversation_is_saved_after_each_step() {
    use subagents::messages::Role;
    let mut saved = Vec::new();
    for remote in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let model = a_worker_that_naps(vec![Reply::answer("Noted.")]);
        let (thread, mut events, _node) = a_thread_placing(model, &store, remote).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        // Its first call answered: its second under way.
        until(&mut events, &mut log, in_the_second_nap).await;
        thread.sync().await.unwrap();
        thread.flush_persistence().await.unwrap();
        let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
        let upto: Vec<(Role, String, Vec<String>)> = conversation
            .iter()
            .take_while(|m| m.role != Role::Tool)
            .chain(conversation.iter().filter(|m| m.role == Role::Tool).take(1))
            .map(|m| {
                let calls = m.tool_calls.iter().map(|c| c.arguments.clone()).collect();
                (m.role, m.content.clone(), calls)
            })
            .collect();
        saved.push(upto);
        thread.close_and_wait().await;
    }
    assert_eq!(
        saved[1]
            .last()
            .map(|(role, content, _)| (*role, content.as_str())),
        Some((Role::Tool, "slept 1 s")),
        "{:?}",
        saved[1]
    );
    assert_eq!(saved[0], saved[1], "local, then remote");
}

/// Review of this session's own change (the fold): a remote child whose
/// turn is ended from outside — its hub killed — has its open call
/// answered on the stream, but the answer was not folded into its saved
/// conversation: it ended on a call with no tool message, and every
/// OpenAI-compatible server refuses a resume from that. Its conversation
/// answers what the close answers, as a local child's does.
#[tokio::test]
async fn a_killed_remote_childs_saved_conversation_answers_its_open_call() {
    use subagents::actors::Placement;
    use subagents::messages::Role;
    let tmp = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new(vec![starting_the_worker(), Reply::answer("Started.")])
        .with_script(
            "Worker",
            vec![Reply::new().tool_call("sleep", r#"{"secs":600}"#)],
        )
        .shared();
    let node = common::loopback::Loopback::new("b", model.clone()).await;
    let store = open(tmp.path());
    let config = ThreadConfig::new(
        DelegationBuilder::new(model)
            .tools(ToolRegistry::new().with(subagents_demo::Sleep))
            .placement(Placement::On(node.clone())),
    )
    .store(store.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
    })
    .await;
    thread.hub().actor().kill();
    thread.close_and_wait().await;
    let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
    for (at, message) in conversation.iter().enumerate() {
        for call in &message.tool_calls {
            assert!(
                conversation[at + 1..]
                    .iter()
                    .any(|m| m.role == Role::Tool && m.tool_call_id.as_ref() == Some(&call.id)),
                "the call `{}` has no tool message: {conversation:#?}",
                call.id
            );
        }
    }
    assert!(
        conversation.iter().any(|m| !m.tool_calls.is_empty()),
        "{conversation:#?}"
    );
}

/// Review of this session's own change (the fold): a message sent to a
/// running remote child (`use_agent send`, taken: the node read it at its
/// next model call) was never in its saved conversation — the proxy kept
/// no text of it — so after a restart the resumed child had lost an
/// instruction its parent was told it had taken. Folded where the node
/// read it, as a local child's conversation has it.
#[tokio::test]
async fn a_message_a_remote_child_took_is_in_its_saved_conversation() {
    let mut saved = Vec::new();
    for remote in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let model = a_worker_that_naps(vec![
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check X")),
            Reply::answer("Told it."),
        ]);
        let (thread, mut events, _node) = a_thread_placing(model, &store, remote).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        thread.send_user("tell it").unwrap();
        until(&mut events, &mut log, in_the_second_nap).await;
        thread.sync().await.unwrap();
        thread.flush_persistence().await.unwrap();
        let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
        let contents: Vec<String> = conversation.iter().map(|m| m.content.clone()).collect();
        saved.push(contents);
        thread.close_and_wait().await;
    }
    let steered = "[message from the agent that started you]\nalso check X";
    assert!(saved[1].iter().any(|c| c == steered), "{:?}", saved[1]);
    assert_eq!(saved[0], saved[1], "local, then remote");
}

/// A message a remote child read was folded into its saved conversation
/// where the proxy guessed — before the next answer that began — not
/// where its node read it: taken while the child waited on its model, it
/// landed before the answer that never read it; read after a final-looking
/// answer (no call), before that answer, which then joined the next one
/// ("first answer.second answer." as one message of the model's own).
/// The node's `Steered` event says where; the saved conversation is the
/// local child's, message for message (review of this session's own diff).
#[tokio::test(start_paused = true)]
async fn a_message_a_remote_child_read_is_saved_where_it_read_it() {
    let first_replies = [
        // A final-looking answer, still streaming when the message comes.
        Reply::new()
            .text("first answer.")
            .delay(std::time::Duration::from_secs(10)),
        // The message comes before the answer's first delta.
        Reply::new()
            .delay(std::time::Duration::from_secs(10))
            .text("first, a nap")
            .tool_call("sleep", r#"{"secs":1}"#),
    ];
    for first in first_replies {
        let mut saved = Vec::new();
        for remote in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let store = open(tmp.path());
            let model = ScriptedModel::new(vec![
                starting_the_worker(),
                Reply::answer("Started."),
                Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check X")),
                Reply::answer("Told it."),
            ])
            .with_script(
                "Worker",
                vec![
                    first.clone(),
                    Reply::new()
                        .text("second answer.")
                        .tool_call("sleep", r#"{"secs":2}"#),
                    Reply::new().tool_call("sleep", r#"{"secs":600}"#),
                    Reply::answer("done"),
                ],
            )
            .shared();
            let (thread, mut events, _node) = a_thread_placing_with(model, &store, remote, 2).await;
            thread.send_user("go").unwrap();
            let mut log = Vec::new();
            until_result(&mut events, &mut log).await;
            thread.send_user("tell it").unwrap();
            until(&mut events, &mut log, in_the_second_nap).await;
            thread.sync().await.unwrap();
            thread.flush_persistence().await.unwrap();
            let sent = results_of(&log, "use_agent").pop().unwrap();
            assert_eq!(
                json(&sent.0)["status"],
                "running",
                "remote {remote}: {}",
                sent.0
            );
            let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
            let messages: Vec<String> = conversation
                .iter()
                .map(|m| format!("{:?}: {} {:?}", m.role, m.content, m.tool_calls.len()))
                .collect();
            saved.push(messages);
            thread.close_and_wait().await;
        }
        assert_eq!(saved[0], saved[1], "local, then remote");
    }
}

/// The same when the hub is killed (review of this session's own diff):
/// a message a remote child took and never read was folded only by the
/// proxy's `finish`, which a kill never reaches — the killed child's
/// saved conversation lacked it, where a local child's close keeps it
/// after its end.
#[tokio::test]
async fn a_message_a_remote_child_took_survives_its_hub_killed() {
    let mut kept = Vec::new();
    for remote in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let (thread, _events, log, _node) = told_in_the_second_nap(&store, remote, vec![]).await;
        let sent = results_of(&log, "use_agent").pop().unwrap();
        assert_eq!(
            json(&sent.0)["status"],
            "running",
            "remote {remote}: {}",
            sent.0
        );
        thread.hub().actor().kill();
        thread.hub().actor().wait(None).await.unwrap();
        thread.close_and_wait().await;
        let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
        let steered = "[message from the agent that started you]\nalso check X";
        kept.push(conversation.iter().any(|m| m.content == steered));
    }
    assert_eq!(kept, [true, true], "local, then remote");
}

/// Review of the fold (this session's own change): a message a remote
/// child took waits for its node's next model call; its node lost first,
/// the run ended here and the message was in no conversation — the
/// resumed run lacked it. A run that ends here keeps it, as a local
/// close does.
#[tokio::test]
async fn a_message_a_remote_child_took_survives_its_node_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let (thread, mut events, mut log, node) =
        told_in_the_second_nap(&store, true, vec![Reply::answer("Noted.")]).await;
    node.kill();
    until(&mut events, &mut log, is_wake).await;
    thread.close_and_wait().await;
    let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
    let steered = "[message from the agent that started you]\nalso check X";
    // After its end, as a local close keeps one (review of this session's
    // own diff: it went before the partial result, where no call read it).
    assert_eq!(
        conversation.last().map(|m| m.content.as_str()),
        Some(steered),
        "{conversation:#?}"
    );
}

/// Stopped midway, a kill after a stop was accepted (the fortieth
/// session's "noticed"): a stop of a running child was written nowhere
/// until the child ended — a node's child answers a stop in up to 30 s —
/// and a kill in that window left it `interrupted`: the restart's wake
/// offered it, and a message resumed the run the host had stopped. The
/// stop is written as it is accepted; the next open reads it `stopped`.
#[tokio::test(start_paused = true)]
async fn a_child_whose_stop_was_accepted_is_stopped_after_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let store = open(&live);
    let (thread, mut events, node) =
        a_thread_placing(a_worker_that_naps(Vec::new()), &store, true).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, in_the_second_nap).await;
    // The node does not hear it: the child runs on, its stop accepted.
    node.lose_stops
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let child = AgentId::new("agent_1");
    let stop = tokio::spawn(thread.stop_child(&child));
    thread.sync().await.unwrap();
    thread.hub().sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    let saved = store.get(&child).unwrap();
    assert!(saved.stopping && !saved.status.is_terminal(), "{saved:?}");
    let killed = tmp.path().join("killed");
    copy_dir(&live, &killed);
    assert_eq!(stop.await.unwrap().unwrap(), SubAgentStatus::Stopped);
    thread.close_and_wait().await;
    drop((thread, store));

    let store = open(&killed);
    let read = store.get(&child).unwrap();
    assert_eq!(read.status, SubAgentStatus::Stopped, "{read:?}");
    assert!(!read.wake_owed, "{read:?}");
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
}
