//! What `status` says of a child around an approval, on both placements.

use super::approvals::SlowPost;
use super::*;

/// A running child's `status` says what it does now: `awaiting_approval`
/// of its tool while the user has not answered (`for_s` from the
/// request), then `in_tool` once the approval is answered (`for_s` from
/// the answer, not the request) — for a local child as for a remote one.
/// Guards against a local child's activity not being set to
/// `AwaitingApproval` as it asks (it read `in_tool` while it waited on the
/// user), and not going back to `InTool` once answered (it read
/// `awaiting_approval` for the whole approved run, the defect fixed for
/// the remote mirror in
/// `a_remote_child_is_in_its_tool_once_its_approval_is_answered`).
#[tokio::test(start_paused = true)]
async fn status_says_awaiting_approval_then_in_tool_on_either_placement() {
    use subagents::messages::ApprovalDecision;
    for remote in [false, true] {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(
                &UseAgentCall::run("Poster\nYou post.", "post it")
                    .tools(["slow_post"])
                    .wait(false),
            ),
            Reply::answer("Started."),
            Reply::new().use_agent(&UseAgentCall::status("agent_1")),
            Reply::answer("It waits for you."),
            Reply::new().use_agent(&UseAgentCall::status("agent_1")),
            Reply::answer("It posts."),
        ])
        .with_script(
            "Poster",
            vec![
                Reply::new().tool_call("slow_post", "{}"),
                Reply::answer("posted"),
            ],
        )
        .shared();
        let mut builder =
            DelegationBuilder::new(model.clone()).tools(ToolRegistry::new().with(SlowPost));
        if remote {
            let gate = GateHandle::spawn(1).await.unwrap();
            let node = Loopback::with_tools("b", model, ToolRegistry::new().with(SlowPost), gate);
            builder = builder.placement(Placement::On(node));
        }
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let request = until_child_approval(&mut events, &mut log).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        thread.send_user("how is it going?").unwrap();
        until_result(&mut events, &mut log).await;
        let status = json(&results_of(&log, "use_agent").pop().unwrap().0);
        assert_eq!(
            status["now"]["doing"], "awaiting_approval",
            "remote {remote}: {status}"
        );
        assert_eq!(
            status["now"]["tool"], "slow_post",
            "remote {remote}: {status}"
        );
        assert_eq!(status["now"]["for_s"], 2.0, "remote {remote}: {status}");
        thread
            .resolve_approval(request.id, ApprovalDecision::Approve)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        thread.send_user("and now?").unwrap();
        until_result(&mut events, &mut log).await;
        let status = json(&results_of(&log, "use_agent").pop().unwrap().0);
        assert_eq!(
            status["now"]["doing"], "in_tool",
            "remote {remote}: {status}"
        );
        assert_eq!(
            status["now"]["tool"], "slow_post",
            "remote {remote}: {status}"
        );
        assert_eq!(status["now"]["for_s"], 5.0, "remote {remote}: {status}");
        thread.close_and_wait().await;
    }
}
