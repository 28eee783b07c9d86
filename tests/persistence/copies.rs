//! What the thread copies to write a child's run as it goes.

use super::*;

/// Allocations made on the test's thread (the thread actor, the child,
/// the hub — not the writer's blocking pool) while a child answers with
/// `calls` calls to a quick tool, on a store.
fn allocations_for_a_burst_of(calls: usize, last_call: bool) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let burst = (0..calls).fold(Reply::new(), |reply, _| {
        reply.tool_call("calculator", r#"{"expression":"1+1"}"#)
    });
    let mut run = UseAgentCall::run("Adder\nYou add.", "add")
        .tools(["calculator"])
        .wait(true);
    if last_call {
        // The burst in the last call allowed: its turn is closed to
        // messages while its tools run.
        run = run.max_iterations(1);
    }
    let model = ScriptedModel::new(vec![Reply::new().use_agent(&run), Reply::answer("Added.")])
        .with_script("Adder\n", vec![burst, Reply::answer("all added")]);
    let store = open(tmp.path());
    let info = allocation_counter::measure(|| {
        runtime.block_on(async {
            let config = ThreadConfig::new(
                DelegationBuilder::new(model.shared())
                    .tools(ToolRegistry::new().with(subagents_demo::Calculator)),
            )
            .store(store.clone());
            let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
            thread.send_user("go").unwrap();
            until_result(&mut events, &mut Vec::new()).await;
            thread.flush_persistence().await.unwrap();
            let (_, conversation) = store.run(&AgentId::new("agent_1")).unwrap();
            assert_eq!(conversation.len(), calls + 3, "the whole run is on disk");
            thread.close_and_wait().await;
        })
    });
    info.count_total
}

/// Cost that grows faster than its input (review): each step of a child
/// (an answered call) had the thread copy the child's whole conversation
/// — under the child's turn lock — though its write was still queued and
/// would take only the newest: K quick calls copied K²/2 messages (the
/// writes were coalesced, the reads were not; at the default budget's
/// ~6,000 calculator calls, gigabytes). A step adds what came since the
/// queued copy. Four times the calls cost about four times the work.
#[test]
fn a_burst_of_quick_tool_calls_is_copied_once_not_once_a_step() {
    let small = allocations_for_a_burst_of(100, false);
    let large = allocations_for_a_burst_of(400, false);
    assert!(
        large < small * 6,
        "{large} allocations for 400 calls, {small} for 100"
    );
}

/// The same in the child's last allowed model call (review: what is on
/// disk against a resume): that call closes the turn to messages, and a
/// step's read of what came since refused a closing turn (a guard for a
/// remote run's end, which replaces its conversation) — each step copied
/// the whole conversation again, K²/2 under the turn's lock, for every
/// child's last call and all of a `max_iterations: 1` child's work.
#[test]
fn a_burst_in_the_last_allowed_call_is_copied_once_not_once_a_step() {
    let small = allocations_for_a_burst_of(100, true);
    let large = allocations_for_a_burst_of(400, true);
    assert!(
        large < small * 6,
        "{large} allocations for 400 calls, {small} for 100"
    );
}
