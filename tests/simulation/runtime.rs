//! A scenario runs in virtual time: on a runtime whose time is not
//! paused it is refused at once, naming the cure (it ran silently in
//! wall-clock time — `run_for` slept for real, and the same seed gave
//! another log).

use std::time::Duration;

use subagents::prelude::*;
use subagents::simulation::{HostAction, Scenario};

fn hello() -> Scenario {
    Scenario::new(vec![Reply::answer("hi")])
        .at(Duration::ZERO, HostAction::User("hi".into()))
        .run_for(Duration::from_secs(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(
    expected = "a multi-thread runtime, whose time cannot be paused: use #[tokio::test(start_paused = true)]"
)]
async fn a_run_on_a_multi_thread_runtime_is_refused_at_once() {
    hello().run_async(0).await;
}

#[tokio::test]
#[should_panic(
    expected = "a runtime whose time is not paused: use #[tokio::test(start_paused = true)]"
)]
async fn a_run_on_a_runtime_whose_time_is_not_paused_is_refused_at_once() {
    hello().run_async(0).await;
}

#[tokio::test]
#[should_panic(expected = "Scenario::start runs in virtual time")]
async fn a_scenario_started_on_a_runtime_whose_time_is_not_paused_is_refused() {
    drop(hello().start(0).await);
}

/// Paused, the probe lets it run, and leaves the clock paused.
#[tokio::test(start_paused = true)]
async fn a_run_on_a_paused_runtime_goes_on() {
    let report = hello().run_async(0).await;
    assert_eq!(report.elapsed, Duration::from_secs(1));
    let before = tokio::time::Instant::now();
    let real = std::time::Instant::now();
    while std::time::Instant::now() == real {
        std::hint::spin_loop();
    }
    assert_eq!(tokio::time::Instant::now(), before, "time still paused");
}
