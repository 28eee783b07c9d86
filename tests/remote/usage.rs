//! What a child on another node used, as read while it ends.

use super::*;

/// Accounting, across nodes (review: accounting): a child's `Result`
/// came from its node with its model calls and tokens, and its `Ended`
/// report was late (lost here: the run ends past its wall clock and the
/// grace). Until then the hub read the proxy's live figures over the
/// ones its `Result` gave — none: `status`, the snapshot and the
/// thread's usage said 0 calls and 0 tokens for a child the stream had
/// just reported done, for minutes. The figures a `Result` reported stay.
#[tokio::test(start_paused = true)]
async fn a_remote_childs_usage_reads_as_its_result_said_before_its_end() {
    let (thread, mut events, mut log, _node) =
        super::lifecycle::one_worker_on(&[5], |node| &node.drop_ended).await;
    let agent_1 = AgentId::new("agent_1");
    let reported = until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(id, inner)
            if id == &agent_1 && matches!(&**inner, AgentEvent::Result(_)))
    })
    .await;
    let AgentEvent::Child(_, inner) = reported else {
        unreachable!()
    };
    let AgentEvent::Result(result) = *inner else {
        unreachable!()
    };
    assert!(
        result.model_calls > 0 && result.usage.total() > 0,
        "{result:?}"
    );
    thread.sync().await.unwrap();
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert!(
        !envelope.status.is_terminal(),
        "its end not in yet: {envelope:?}"
    );
    assert_eq!(
        (envelope.model_calls, envelope.usage),
        (result.model_calls, result.usage),
        "{envelope:?}"
    );
    let children = thread.hub().usage();
    assert!(
        children.total() >= result.usage.total(),
        "{children:?} left out {:?}",
        result.usage
    );
    thread.close_and_wait().await;
}
