//! Forged: what a host can write with the cells its handles give out
//! (`ThreadHandle::hub().actor()`, a child's cell among its children) must
//! not end what only an actor's own end may end.

use ractor::SupervisionEvent;

use super::*;

/// A host wrote a running child's death, and its hub's, with ractor's
/// public `ActorCell::notify_supervisor`: the hub failed the child while it
/// worked (its `ToolStarted` never answered, no `Result` of its own, its
/// slot freed). A death is read only from an actor that is ending. (The
/// hub's own forged death, to the thread, ended nothing already:
/// `HubHandle::fail_unfinished` acts only on a hub that is stopping.)
#[tokio::test(start_paused = true)]
async fn a_forged_death_of_a_live_child_or_hub_ends_nothing() {
    let (thread, mut events) = ThreadHandle::spawn(parent(background_workers(&[30])), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_child(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ToolStarted(_))
    })
    .await;
    let child = thread.hub().actor().get_children().remove(0);
    child.notify_supervisor(SupervisionEvent::ActorTerminated(
        child.clone(),
        None,
        Some("forged".into()),
    ));
    let hub = thread.hub().actor().clone();
    hub.notify_supervisor(SupervisionEvent::ActorFailed(hub.clone(), "forged".into()));
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Done, "{envelope:?}");
    assert_eq!(envelope.result.as_deref(), Some("worked 30 s"));
}

/// A host's request (`ThreadHandle::hub().request`) made with
/// `ChildRequest::new`, whose default is an inline child: waiting on a
/// child is a delegation tool's, which a host cannot do, so the child
/// finished with its result delivered to nobody — no wake, never
/// claimed. A host's child runs in the background and wakes its
/// requester.
#[tokio::test(start_paused = true)]
async fn a_hosts_request_for_a_child_wakes_the_parent_with_its_result() {
    use subagents::messages::{ChildRequest, ToolUseId};
    let model = ScriptedModel::new(vec![Reply::answer("Hello."), Reply::answer("Noted.")])
        .with_script("Worker", vec![Reply::answer("worked")]);
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.on_screen(true).unwrap();
    thread.send_user("hi").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let request = ChildRequest::new(
        thread.parent_id().clone(),
        0,
        ToolUseId::new("host-1"),
        "Worker\nYou work.",
        "work",
    );
    let id = thread.hub().request(request).await.unwrap();
    until_wake(&mut events, &mut log, id.as_str()).await;
    assert!(thread.hub().status(&id).is_some_and(|e| e.background));
    thread.close_and_wait().await;
}

/// Stopped midway (review: the typed host boundary): a host's request was
/// sent at its future's first poll — the one host action still so — and
/// a host asking for a child, then switching the thread away, then
/// awaiting the id had its child started after the switch: running on,
/// past the stop-all the switch promised. Sent when called now, as a
/// stop is: the switch stops it.
#[tokio::test(start_paused = true)]
async fn a_request_made_before_a_switch_away_is_stopped_by_it() {
    use subagents::messages::{ChildRequest, ToolUseId};
    let model = ScriptedModel::new(vec![Reply::answer("Hello.")]).with_script(
        "Worker",
        vec![Reply::new().tool_call("sleep", r#"{"secs":600}"#)],
    );
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.on_screen(true).unwrap();
    thread.send_user("hi").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let request = ChildRequest::new(
        thread.parent_id().clone(),
        0,
        ToolUseId::new("host-1"),
        "Worker\nYou work.",
        "work",
    );
    let asked = thread.hub().request(request);
    let switched = thread.switch_away();
    let stopped = switched.await.unwrap();
    let id = asked.await.unwrap();
    assert_eq!(
        stopped, 1,
        "the switch stopped the child asked for before it"
    );
    let envelope = thread.hub().status(&id).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Stopped, "{envelope:?}");
    thread.close_and_wait().await;
}

/// Forged (a host's request options): `ChildRequest::options` reached the
/// server unchecked — the one level the builders' and the profiles' checks
/// did not cover: `max_tokens: 0` or `top_p: 5` failed every model call of
/// the child, a `temperature` of NaN went to the server as `null`, without
/// a word. Refused at the request, naming the option; nothing is spawned.
#[tokio::test(start_paused = true)]
async fn a_hosts_request_with_options_no_server_takes_is_refused() {
    use subagents::actors::hub::Refused;
    use subagents::messages::{ChildRequest, RequestOptions, ToolUseId};
    let model = ScriptedModel::new(vec![Reply::answer("Hello.")])
        .with_script("Worker", vec![Reply::answer("worked")]);
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.send_user("hi").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let bad = [
        (
            RequestOptions {
                max_tokens: Some(0),
                ..Default::default()
            },
            "max_tokens",
        ),
        (
            RequestOptions {
                top_p: Some(5.0),
                ..Default::default()
            },
            "top_p",
        ),
        (
            RequestOptions {
                temperature: Some(f64::NAN),
                ..Default::default()
            },
            "temperature",
        ),
    ];
    for (options, named) in bad {
        let mut request = ChildRequest::new(
            thread.parent_id().clone(),
            0,
            ToolUseId::new("host-1"),
            "Worker\nYou work.",
            "work",
        );
        request.options = Some(options);
        match thread.hub().request(request).await {
            Err(Refused::Options { field, .. }) => assert_eq!(field, named),
            other => panic!("{named}: {other:?}"),
        }
    }
    assert!(thread.hub().envelopes().is_empty(), "nothing spawned");
    thread.close_and_wait().await;
}

/// Misleading a host (a request's refusal in another action's words): a
/// host's request naming a child whose turn had ended was refused as a
/// send — "is ending and cannot take the message now; send it again once
/// it has ended", which no request can follow — or, once the child had
/// finished, as "not known to this hub"; and with `max_depth(0)` a
/// request for the parent read "a sub-agent cannot start sub-agents", the
/// parent being none. Each says what is so.
#[tokio::test(start_paused = true)]
async fn a_hosts_request_is_refused_in_its_own_words() {
    use subagents::actors::hub::Refused;
    use subagents::messages::{ChildRequest, ToolUseId};
    let (thread, mut events) = ThreadHandle::spawn(parent(background_workers(&[5])), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 30).await;
    let agent_1 = AgentId::new("agent_1");
    assert!(
        thread
            .hub()
            .status(&agent_1)
            .is_some_and(|e| e.status.is_terminal())
    );
    let request = |requester: AgentId, depth| {
        ChildRequest::new(
            requester,
            depth,
            ToolUseId::new("host-1"),
            "Worker\nYou work.",
            "work",
        )
    };
    let refused = thread.hub().request(request(agent_1.clone(), 1)).await;
    assert_eq!(refused, Err(Refused::RequesterEnded { id: agent_1 }));
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("has ended its turn"),
        "a request's words"
    );
    thread.close_and_wait().await;

    // A queued child has not ended (the review of this change: it read
    // "has ended its turn"), nor is it unknown: it has not started (the
    // twentieth session's review: it read "not known to this hub").
    let (thread, mut events) =
        ThreadHandle::spawn(parent(background_workers(&[60, 60])).max_live(1), None)
            .await
            .unwrap();
    thread.send_user("start").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let agent_2 = AgentId::new("agent_2");
    assert_eq!(thread.hub().queue_position(&agent_2), Some(1));
    let refused = thread.hub().request(request(agent_2.clone(), 1)).await;
    assert_eq!(refused, Err(Refused::RequesterNotStarted { id: agent_2 }));
    thread.close_and_wait().await;

    let (thread, _events) = ThreadHandle::spawn(
        DelegationBuilder::new(ScriptedModel::new(vec![]).shared()).max_depth(0),
        None,
    )
    .await
    .unwrap();
    let refused = thread
        .hub()
        .request(request(thread.parent_id().clone(), 0))
        .await
        .unwrap_err();
    assert_eq!(refused, Refused::TooDeep { max_depth: 0 });
    assert!(
        !refused.to_string().contains("a sub-agent cannot"),
        "{refused}"
    );
    thread.close_and_wait().await;
}

/// Forged (review: a host's view): a host's request naming a run to go
/// on from (`resumed_from`, a public field) was spawned as it said — past
/// every check a message to a finished child makes: a stopped child's
/// chain went on, the run it named was never linked (a later `send`
/// resumed it a second time: a fork), and after a restart the store
/// linked the two as a resume. Refused, naming the run; nothing starts.
#[tokio::test(start_paused = true)]
async fn a_hosts_request_naming_a_run_to_go_on_from_is_refused() {
    use subagents::actors::hub::Refused;
    use subagents::messages::{ChildRequest, ToolUseId};
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::answer("Done."),
    ])
    .with_script("Worker", worker(1));
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let agent_1 = AgentId::new("agent_1");
    thread.stop_child(&agent_1).await.unwrap();
    let mut request = ChildRequest::new(
        thread.parent_id().clone(),
        0,
        ToolUseId::new("host-1"),
        "Worker\nYou work.",
        "go on",
    );
    request.resumed_from = Some(agent_1.clone());
    let refused = thread.hub().request(request).await;
    assert!(
        matches!(&refused, Err(Refused::ResumeRequested { id }) if *id == agent_1),
        "{refused:?}"
    );
    assert_eq!(thread.hub().child_ids(), std::slice::from_ref(&agent_1));
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(envelope.continued_as, None);
    thread.close_and_wait().await;
}

/// Bad input (host review, thirty-fourth session): a user turn with no
/// text (`send_user("")`, a chat box submitted empty) was taken, `Ok`:
/// its empty message went into the parent's conversation, and servers
/// that refuse one (LM Studio, Mistral, Anthropic's and Gemini's
/// compatible endpoints) then failed every later call of the thread. A
/// host's child request with an empty task was spawned where a model's
/// is refused. Each is refused, the text given back; the thread goes on.
#[tokio::test(start_paused = true)]
async fn an_empty_user_turn_or_task_is_refused_and_given_back() {
    use subagents::actors::hub::Refused;
    use subagents::messages::{ChildRequest, ToolUseId};
    use subagents::supervisor::ThreadError;
    let model = ScriptedModel::new(vec![Reply::answer("Hello.")]);
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    let (agent, _agent_events) = AgentBuilder::new(ScriptedModel::new(vec![]).shared())
        .spawn()
        .await
        .unwrap();
    for text in ["", "  \n\t"] {
        assert_eq!(
            thread.send_user(text),
            Err(ThreadError::EmptyTurn(text.into()))
        );
        let refused = agent.send_user(text);
        assert!(
            matches!(&refused, Err(AgentError::EmptyTurn { text: t, .. }) if t == text),
            "{refused:?}"
        );
        let request = ChildRequest::new(
            thread.parent_id().clone(),
            0,
            ToolUseId::new("host-1"),
            "Worker\nYou work.",
            text,
        );
        let refused = thread.hub().request(request).await;
        assert!(matches!(refused, Err(Refused::EmptyTask)), "{refused:?}");
    }
    assert!(thread.hub().child_ids().is_empty());
    thread.send_user("hi").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "Hello.");
    thread.close_and_wait().await;
    agent.shutdown();
}
