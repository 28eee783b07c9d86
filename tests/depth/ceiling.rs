//! How deep a tree may go: `max_depth` at most 16, and a tree that deep
//! reads back — every event through the wire and JSON, the transcript
//! through JSON.

use super::*;
use subagents::actors::AgentError;
use subagents::messages::Transcript;
use subagents::messages::codec::Wire;

/// Bad input (review: panics from input): `max_depth` had no ceiling. A
/// host's "no limit" (`max_depth(u32::MAX)`) let a model that kept
/// delegating build a tree whose events no reader took back past 128
/// levels (the wire's limit; serde_json's ~63 for an event, ~31 for a
/// transcript) and which, a few thousand deep, overflowed the stack each
/// event is forwarded on — the process aborted. A depth past 16 is
/// refused at the spawn, naming the field.
#[tokio::test(start_paused = true)]
async fn a_tree_deeper_than_sixteen_levels_is_refused_and_sixteen_read_back() {
    for depth in [17, u32::MAX] {
        let refused = builder(ScriptedModel::new(vec![]), depth).check();
        assert!(
            matches!(&refused, Err(AgentError::Limits { field: "max_depth", why }) if why.contains("16")),
            "{depth}: {refused:?}"
        );
        let spawned = ThreadHandle::spawn(builder(ScriptedModel::new(vec![]), depth), None).await;
        assert!(spawned.is_err(), "{depth}");
    }
    // Sixteen levels, each delegating until the last, which cannot.
    let deeper = || Reply::new().use_agent(&run("Worker", "go deeper", true));
    let model = ScriptedModel::new(vec![deeper(), Reply::answer("parent: done")])
        .with_script("Worker", vec![deeper(), Reply::answer("done")]);
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 16), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let deepest = log.iter().map(nesting).max().unwrap_or(0);
    assert_eq!(deepest, 16, "the tree went 16 deep");
    for event in &log {
        let wire = AgentEvent::from_wire(&event.to_wire().unwrap());
        assert_eq!(wire.as_ref().ok(), Some(event), "{wire:?}");
        let json: Result<AgentEvent, _> =
            serde_json::from_str(&serde_json::to_string(event).unwrap());
        assert_eq!(json.as_ref().ok(), Some(event), "{json:?}");
    }
    let transcript = Transcript::from_events(&log);
    let json: Result<Transcript, _> =
        serde_json::from_str(&serde_json::to_string(&transcript).unwrap());
    assert!(json.is_ok(), "{json:?}");
    thread.close_and_wait().await;
}

/// How many `Child` levels an event is wrapped in.
fn nesting(event: &AgentEvent) -> u32 {
    match event {
        AgentEvent::Child(_, inner) => 1 + nesting(inner),
        _ => 0,
    }
}
