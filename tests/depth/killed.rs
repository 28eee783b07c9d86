//! A hub or a whole thread killed with a tree two deep running: each
//! child's turn is ended as a killed actor's, the deepest first.

use super::*;

/// Killed mid-run at depth 2: the grandchild's turn is ended before its
/// child's — its cut call answered and its `failed` in the child's row,
/// before the child's own end. Ended in number order, the child's row
/// closed first and the grandchild's end was dropped: a `ToolStarted`
/// with no answer, a row with no terminal status, for good.
#[tokio::test(start_paused = true)]
async fn a_killed_hub_ends_a_grandchild_inside_its_childs_row() {
    for kill_the_thread in [false, true] {
        let model = tree_with(asks_grand(true), sleeps());
        let (thread, mut events) = ThreadHandle::spawn(builder(model, 2), None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 10).await;
        let inner = row_of(&log, "agent_1");
        let (_, nested) = children(&inner);
        assert!(
            nested.contains_key(&AgentId::new("agent_2")),
            "the grandchild runs: {inner:#?}"
        );
        let killed = match kill_the_thread {
            true => thread.actor().clone(),
            false => thread.hub().actor().clone(),
        };
        killed.kill();
        killed.wait(None).await.ok();
        if !kill_the_thread {
            thread.sync().await.unwrap();
        }
        run_for(&mut events, &mut log, 1).await;
        let inner = row_of(&log, "agent_1");
        let (_, nested) = children(&inner);
        assert_eq!(
            nested[&AgentId::new("agent_2")].terminal().map(|t| t.1),
            Some(SubAgentStatus::Failed),
            "killed the thread: {kill_the_thread}; {inner:#?}"
        );
        check_log(&inner, true);
        if !kill_the_thread {
            thread.close_and_wait().await;
        }
    }
}
