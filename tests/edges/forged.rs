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
