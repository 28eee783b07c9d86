//! A child whose files never reached the disk: the next session may hand
//! its id out again (nothing on disk names it), but a host's row kept
//! from it answers nothing there.

use subagents::messages::{ApprovalDecision, ApprovalOutcome, ApprovalRefusal};
use subagents::supervisor::ThreadError;

use super::*;

/// A thread on `store` whose parent starts `Poster`, which asks to post.
fn a_poster(store: &Arc<EnvelopeStore>) -> ThreadConfig {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post it")
                .tools(["http_post"])
                .background(),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("http_post", r#"{"url":"https://example.com","body":"x"}"#),
            Reply::answer("posted"),
        ],
    );
    ThreadConfig::new(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(subagents_demo::Post)),
    )
    .store(store.clone())
}

/// Repeated, across restarts (review: the store shared and interrupted):
/// a child started while the store's writes failed (a full disk, a volume
/// gone) left no file naming it, so the next session's counter handed its
/// id out again — and children numbered their approvals from 1 in every
/// session: a host's row kept from the first session
/// (`agent_1-approval-1`, "post X") approved the new `agent_1`'s first
/// request ("post Y"), which the user never saw. A child numbers its
/// approvals in its thread's block, past every earlier session's.
#[tokio::test]
async fn a_row_kept_from_a_child_never_written_answers_nothing_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let aside = tmp.path().join("aside");
    let store = open(&dir);
    let (thread, mut events) = ThreadHandle::spawn(a_poster(&store), None).await.unwrap();
    // Every write fails from here on: the directory is gone, a file in
    // its place.
    std::fs::rename(&dir, &aside).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let first = until_child_approval(&mut events, &mut log).await;
    thread.close_and_wait().await;
    let unsaved = thread.persist_errors().await.unwrap();
    assert!(
        unsaved.iter().any(|e| e.contains("agent_1")),
        "the child's envelope was not written: {unsaved:?}"
    );
    drop((thread, store));
    // The disk is back, as it was before the child.
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&aside, &dir).unwrap();

    let store = open(&dir);
    let (thread, mut events) = ThreadHandle::spawn(a_poster(&store), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let second = until_child_approval(&mut events, &mut log).await;
    assert_ne!(second.id, first.id, "the new request has the old one's id");
    let answered = thread
        .resolve_approval(first.id.clone(), ApprovalDecision::Approve)
        .await;
    // A number under a live child's block is unknown to it.
    assert!(
        matches!(
            answered,
            Err(ThreadError::Approval(ApprovalRefusal::Unknown(_)))
        ),
        "the old row answered the new child's request: {answered:?}"
    );
    // The request is still open: the first answer it takes is this deny
    // (read after the refusal: the log above ends at the request, so a
    // refusal that still resolved it went unseen).
    thread
        .resolve_approval(second.id.clone(), ApprovalDecision::Deny)
        .await
        .unwrap();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner)
            if matches!(&**inner, AgentEvent::ApprovalResolved { .. }))
    })
    .await;
    let resolved: Vec<&AgentEvent> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(_, inner) => Some(&**inner),
            _ => None,
        })
        .filter(|e| matches!(e, AgentEvent::ApprovalResolved { .. }))
        .collect();
    assert!(
        matches!(
            resolved[..],
            [AgentEvent::ApprovalResolved { id, outcome: ApprovalOutcome::Denied, .. }] if *id == second.id
        ),
        "the new child's request was resolved first by the old row: {resolved:#?}"
    );
    thread.close_and_wait().await;
}
