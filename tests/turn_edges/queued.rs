//! Turns a stop ends before they started.

use super::*;

/// A stop ends the running turn and every queued one, each in its own
/// `Result` — `Outcome::Stopped` — and each queued message keeps its
/// place in the conversation with the answer it got ("Stopped before it
/// started."): two user messages back to back are refused by chat
/// templates that want the roles to alternate.
#[tokio::test(start_paused = true)]
async fn a_turn_stopped_in_the_queue_ends_stopped_and_is_answered_in_the_conversation() {
    let model = ScriptedModel::new(vec![
        Reply::new().delay(Duration::from_secs(10)).text("A"),
        Reply::answer("C"),
    ]);
    let (model, seen) = spy("spy", model);
    let (agent, _events, _gate) =
        common::spawn_agent(model, ToolRegistry::new(), Limits::default()).await;
    let a = agent.queue_turn("a").unwrap();
    let b = agent.queue_turn("b").unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    agent.stop_turn().unwrap();
    assert_eq!(a.await.unwrap().outcome, Outcome::Stopped);
    let b = b.await.unwrap();
    assert_eq!(b.outcome, Outcome::Stopped, "{b:?}");
    agent.run("c").await.unwrap();
    let last = seen.lock().unwrap().last().cloned().unwrap();
    let said: Vec<(Role, String)> = last
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(|m| (m.role, m.content.clone()))
        .collect();
    let at = said
        .iter()
        .position(|(role, text)| *role == Role::User && text == "b")
        .unwrap_or_else(|| panic!("\"b\" is missing: {said:?}"));
    assert_eq!(
        said[at + 1],
        (Role::Assistant, "Stopped before it started.".to_owned()),
        "{said:?}"
    );
}
