//! A thread being left through `Threads`: off screen from the moment the
//! switch is sent, not once its children have stopped.

use super::*;
use subagents::messages::ThreadId;
use subagents::supervisor::Threads;

/// Same instant (reviews 27, the registry and the wakes): `switch_to`
/// waited for the left thread's children to stop and only then said it
/// was off screen. A child its still-running turn started in that wait
/// (a switch stops the children, not the parent's turn; a remote child's
/// stop can take its 30 s grace) finished and woke the tab the user had
/// left — a wake turn, its model calls, after `SwitchedAway`. The leave
/// here is polled once and then left waiting while the thread runs on, as
/// a host's `select!` or a slow stop leaves it.
#[tokio::test(start_paused = true)]
async fn a_child_started_while_the_switch_waits_wakes_nobody() {
    let mut threads = Threads::new();
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let idle = ScriptedModel::new(vec![Reply::answer("b")]).shared();
    let _events_b = threads
        .open(b.clone(), DelegationBuilder::new(idle))
        .await
        .unwrap();
    let model = ScriptedModel::new(vec![
        Reply::new()
            .delay(Duration::from_secs(5))
            .use_agent(&work_call("Worker", 10, false)),
        Reply::answer("Started."),
        Reply::answer("(a wake would land here)"),
    ])
    .with_script("Worker", worker(10));
    let mut events_a = threads
        .open(
            a.clone(),
            DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(Sleep)),
        )
        .await
        .unwrap();
    threads.get(&a).unwrap().send_user("start").unwrap();
    let mut log_a = Vec::new();
    run_for(&mut events_a, &mut log_a, 1).await;
    {
        let mut leaving = Box::pin(threads.switch_to(&b));
        assert!(futures_util::poll!(&mut leaving).is_pending());
        run_for(&mut events_a, &mut log_a, 120).await;
        leaving.await.unwrap();
    }
    let switched = log_a
        .iter()
        .position(|e| matches!(e, AgentEvent::SwitchedAway))
        .expect("switched away");
    let started = log_a
        .iter()
        .position(|e| matches!(e, AgentEvent::ChildStarted(_)))
        .expect("a child started");
    assert!(switched < started, "started after the switch: {log_a:#?}");
    assert!(
        log_a
            .iter()
            .any(|e| matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done))),
        "{log_a:#?}"
    );
    assert!(wakes(&log_a).is_empty(), "{log_a:#?}");
    threads.delete(&a).await.unwrap();
    threads.delete(&b).await.unwrap();
}
