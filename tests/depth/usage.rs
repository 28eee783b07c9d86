//! What a tree two deep used, rolled up: a child's own children's tokens
//! are its `children_usage`, and its requester's turn takes both.

use super::*;

/// The grandchild's tokens reach the child's envelope, the `use_agent`
/// answer its requester read and the parent's result; the clamp on the
/// next synchronous child reads the same roll-up (a requester whose child
/// used grandchildren handed the next child tokens already spent).
#[tokio::test(start_paused = true)]
async fn a_grandchilds_tokens_roll_up_to_the_parent() {
    let model = tree_with(
        vec![
            // Ten tokens each, its output among them (a usage counting
            // no output leaves it to the estimate).
            Reply::new()
                .use_agent(&run("Grand", "compute 6*7", true))
                .usage(9, 1),
            Reply::answer("child: 42").usage(9, 1),
        ],
        vec![Reply::answer("42").usage(100, 20)],
    );
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let result = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::Result(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(result.children_usage.total(), 140, "{result:?}");
    let child = thread
        .envelope(&AgentId::new("agent_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(child.usage.total(), 20);
    assert_eq!(child.children_usage.total(), 120, "{child:?}");
    let (answer, _) = results_of(&log, "use_agent").remove(0);
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["usage"]["children_tokens"], 120, "{answer}");
    thread.close_and_wait().await;
}

/// A child interrupted in this session, read by its parent (`status`):
/// its tokens are the reading turn's `children_usage`, as a finished
/// child's (the last read of this session's change: the book's claim
/// skipped every interrupted child, an earlier session's only meant, and
/// this one's tokens reached no turn — handed back to the next
/// synchronous child's cap).
#[tokio::test(start_paused = true)]
async fn an_interrupted_childs_tokens_are_the_reading_turns() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Worker\nYou work.", "work")
                .tools(["sleep"])
                .background(),
        ),
        Reply::new().tool_call("sleep", r#"{"secs":5}"#),
        Reply::new().use_agent(&UseAgentCall::interrupt("agent_1")),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::answer("Done."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new()
                .tool_call("sleep", r#"{"secs":600}"#)
                .usage(100, 20),
        ],
    );
    let (thread, mut events) = ThreadHandle::spawn(builder(model, 1), None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.children_usage.total(), 120, "{result:?}");
    thread.close_and_wait().await;
}
