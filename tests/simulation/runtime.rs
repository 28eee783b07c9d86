//! A scenario runs in virtual time: on a runtime whose time is not
//! paused it is refused at once, naming the cure (it ran silently in
//! wall-clock time — `run_for` slept for real, and the same seed gave
//! another log).

use std::time::Duration;

use subagents::prelude::*;
use subagents::simulation::{HostAction, Scenario};

use crate::common::a_model_registered_as_m;

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

/// A tool doing I/O (here, a socket on the loopback) — a host's real tool
/// under test, or a model adapter against a local mock server on the
/// runtime (one on a thread of its own is work off it: docs/simulation.md).
struct Bind;

impl Tool for Bind {
    fn name(&self) -> &str {
        "bind"
    }
    fn description(&self) -> String {
        "binds a socket".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async move {
            tokio::net::UdpSocket::bind("127.0.0.1:0")
                .await
                .map(|_| "bound".to_owned())
                .map_err(|e| ToolError::Failed(e.to_string()))
        })
    }
}

/// `run` built its runtime with time alone, `#[tokio::test]` (for
/// `run_async`) with every driver: a tool doing I/O failed under `run`
/// ("IO is disabled", caught as the tool's crash) and worked under
/// `run_async` — one scenario, two logs. Both have every driver.
#[test]
fn a_tool_doing_io_runs_the_same_under_run_and_run_async() {
    let scenario = Scenario::new(vec![
        Reply::new().tool_call("bind", "{}"),
        Reply::answer("done"),
    ])
    .tools(ToolRegistry::new().with(Bind))
    .at(Duration::ZERO, HostAction::User("go".into()))
    .run_for(Duration::from_secs(1));
    let outputs = |report: &subagents::simulation::SimulationReport| -> Vec<String> {
        report
            .events()
            .iter()
            .filter_map(|e| match e {
                subagents::messages::AgentEvent::ToolResult(r) => Some(r.output.clone()),
                _ => None,
            })
            .collect()
    };
    let under_run = outputs(&scenario.run(0));
    assert_eq!(under_run, ["bound"]);
    let under_run_async = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(scenario.run_async(0));
    assert_eq!(outputs(&under_run_async), under_run);
}

/// Shared, one model (review: shared resources): the harness wrapped the
/// parent's model in its jitter even at none, a new object the builder
/// could not find in the registry that served the same model to the
/// children — the parent ran behind a gate of its own, and its calls and
/// a child's naming the model went out at once (under `ThreadHandle::
/// spawn` it takes the registry's gate). Unwrapped without a jitter.
#[tokio::test(start_paused = true)]
async fn a_scenarios_parent_on_a_registered_model_shares_its_gate() {
    let (model, registry, gate) = a_model_registered_as_m().await;
    let report = Scenario::new(vec![])
        .with_model(move || model.clone())
        .configure(move |builder| builder.models(registry.clone()))
        .at(Duration::ZERO, HostAction::User("go".into()))
        .run_for(Duration::from_secs(60))
        .run_async(0)
        .await;
    assert_eq!(report.envelopes.len(), 1, "{report:?}");
    // The parent's three calls and the child's one, all through it.
    assert_eq!(gate.snapshot().await.unwrap().granted_total, 4);
}
