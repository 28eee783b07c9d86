//! What a long-lived thread's reads cost: not what it ever ran.

use super::*;

/// A thread whose parent started `n` background workers, each answering
/// with 10 KB, all finished and their wakes read; then the allocations of
/// one read of its usage and of one switch away.
fn reads_over(n: usize) -> (u64, u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let mut first = Reply::new();
    for i in 1..=n {
        first = first.use_agent(&work_call(&format!("Worker {i}"), 1, false));
    }
    let mut turns = vec![first, Reply::answer("Started.")];
    turns.extend((0..n).map(|_| Reply::answer("Noted.")));
    let mut model = ScriptedModel::new(turns);
    for i in 1..=n {
        model = model.with_script(
            format!("Worker {i}\n"),
            vec![Reply::answer("x".repeat(10_000))],
        );
    }
    let thread = runtime.block_on(async {
        let builder = DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new().with(Sleep))
            .max_live(n);
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 600).await;
        let envelopes = thread.hub().envelopes();
        assert_eq!(envelopes.len(), n);
        assert!(envelopes.iter().all(|e| e.status.is_terminal()));
        thread
    });
    let usage = allocation_counter::measure(|| {
        let _ = std::hint::black_box(thread.hub().usage());
    });
    let switch = allocation_counter::measure(|| {
        runtime.block_on(thread.switch_away()).unwrap();
    });
    runtime.block_on(thread.close_and_wait());
    (usage.count_total, switch.count_total)
}

/// Cost that grows with a thread's age (review: growth over a long-lived
/// process): a read of the thread's usage (a UI's token counter after
/// each turn) and a switch away copied every envelope the thread ever had
/// — each child's task, tools and whole result — to read three numbers,
/// or only the ids, the switch under the book's shard locks (a child
/// emitting meanwhile waited, inside its turn's lock). An ended child's
/// counts are read in place, and a switch takes the ids alone.
#[test]
fn a_usage_read_and_a_switch_do_not_copy_every_envelope() {
    let (usage_small, switch_small) = reads_over(10);
    let (usage_large, switch_large) = reads_over(40);
    assert!(
        usage_large <= 2,
        "{usage_large} allocations to read the usage"
    );
    assert!(
        switch_large < switch_small + 2 * 30,
        "a switch: {switch_large} allocations over 40 children, {switch_small} over 10"
    );
    let _ = usage_small;
}
