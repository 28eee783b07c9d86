//! The edges: one named test per defect found by driving the public API as
//! an independent host would (same-instant races, stop paths, shared
//! resources, closing, forged input, replay). Each test is named after the
//! behaviour it guarantees; docs/testing.md maps them to the defects.

#![cfg(feature = "test-util")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::json;
use subagents::actors::DelegationBuilder;
use subagents::actors::clock::ManualClock;
use subagents::actors::hub::HubObserver;
use subagents::messages::{AgentEvent, Envelope};
use subagents::prelude::*;
use subagents::simulation::{HostAction, Scenario};
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle};

fn run(name: &str, secs: u64, wait: bool) -> String {
    json!({
        "action": "run",
        "system_prompt": format!("{name}\nYou work."),
        "input": format!("work {secs} s"),
        "tools": ["sleep"],
        "wait": wait,
    })
    .to_string()
}

fn worker(secs: u64) -> Vec<Turn> {
    vec![
        Turn::new().tool_call("sleep", json!({"secs": secs}).to_string()),
        Turn::answer(format!("worked {secs} s")),
    ]
}

/// A parent that starts background workers of these durations, then
/// answers every later turn with "Noted".
fn background_workers(durations: &[u64]) -> ScriptedModel {
    let mut first = Turn::new();
    for (i, secs) in durations.iter().enumerate() {
        first = first.tool_call("use_agent", run(&format!("Worker {}", i + 1), *secs, false));
    }
    let mut turns = vec![first, Turn::answer("Started.")];
    for _ in 0..10 {
        turns.push(Turn::answer("Noted."));
    }
    let mut model = ScriptedModel::new(turns);
    for (i, secs) in durations.iter().enumerate() {
        model = model.with_script(format!("Worker {}\n", i + 1), worker(*secs));
    }
    model
}

fn parent(model: ScriptedModel) -> DelegationBuilder {
    DelegationBuilder::new(model.shared())
        .system_prompt("You are the parent.")
        .tools(ToolRegistry::new().with(Sleep).with(Post))
}

fn store(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    Arc::new(EnvelopeStore::open(dir, clock).unwrap().0)
}

async fn run_for(events: &mut EventStream, log: &mut Vec<AgentEvent>, secs: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        log.push(event);
    }
}

fn started(log: &[AgentEvent]) -> Vec<AgentId> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::ChildStarted(info) => Some(info.id.clone()),
            _ => None,
        })
        .collect()
}

// ---- Replay -------------------------------------------------------------

/// Defect 5: `stop_all` iterated a `HashMap`, so a switch that stopped
/// several children gave a different log for the same seed.
#[test]
fn a_switch_that_stops_several_children_replays_byte_for_byte() {
    let scenario = Scenario::new(vec![
        {
            let mut fan_out = Turn::new();
            for i in 1..=6 {
                fan_out = fan_out.tool_call("use_agent", run(&format!("Worker {i}"), 100, false));
            }
            fan_out
        },
        Turn::answer("Started."),
    ])
    .configure(|b| b.max_live(4))
    .tools(ToolRegistry::new().with(Sleep))
    .jitter(Duration::from_secs(2))
    .at(Duration::ZERO, HostAction::User("Start six.".into()))
    .at(Duration::from_secs(10), HostAction::SwitchAway)
    .run_for(Duration::from_secs(200));
    let scenario = (1..=6).fold(scenario, |s, i| {
        s.child_script(format!("Worker {i}\n"), worker(100))
    });
    for seed in 0..8 {
        let first = scenario.run(seed);
        let second = scenario.run(seed);
        assert_eq!(
            subagents::simulation::render(&first.log),
            subagents::simulation::render(&second.log),
            "seed {seed} replays differently"
        );
        // Asked to stop in child-number order: the queued ones end at
        // once, the running ones as their turns report; each group in
        // child-number order.
        let events = first.events();
        let was_queued = |id: &str| {
            events.iter().any(
                |e| matches!(e, AgentEvent::ChildStatus(c, SubAgentStatus::Queued) if c.as_str() == id),
            ) && !events
                .iter()
                .any(|e| matches!(e, AgentEvent::ChildRunning(c) if c.as_str() == id))
        };
        let stopped: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ChildStatus(id, SubAgentStatus::Stopped) => Some(id.to_string()),
                _ => None,
            })
            .collect();
        let number = |id: &String| id["agent_".len()..].parse::<u64>().unwrap();
        let (queued, running): (Vec<String>, Vec<String>) =
            stopped.iter().cloned().partition(|id| was_queued(id));
        assert!(queued.is_sorted_by_key(number), "seed {seed}: {stopped:?}");
        assert!(running.is_sorted_by_key(number), "seed {seed}: {stopped:?}");
        assert_eq!(stopped, [queued, running].concat(), "seed {seed}");
        assert_eq!(stopped.len(), 6, "{}", first.render());
    }
}

// ---- Data safety ----------------------------------------------------------

/// Defect 6: closing a thread with a background child running left no
/// envelope in the store, and the next session reused `agent_1`.
#[tokio::test(start_paused = true)]
async fn closing_a_thread_leaves_a_final_envelope_for_every_child() {
    let dir = tempfile::tempdir().unwrap();
    {
        let config =
            ThreadConfig::new(parent(background_workers(&[600, 5]))).store(store(dir.path()));
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 30).await;
        assert_eq!(started(&log).len(), 2);
        thread.close_and_wait().await;
    }
    let reopened = store(dir.path());
    let all = reopened.all();
    let statuses: Vec<(String, SubAgentStatus)> =
        all.iter().map(|e| (e.id.to_string(), e.status)).collect();
    assert_eq!(
        statuses,
        [
            ("agent_1".to_owned(), SubAgentStatus::Stopped),
            ("agent_2".to_owned(), SubAgentStatus::Done)
        ]
    );
    let config = ThreadConfig::new(parent(background_workers(&[5]))).store(reopened);
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("again").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 30).await;
    assert_eq!(started(&log), [AgentId::new("agent_3")]);
}

/// Defect 6, the crash path: a hub that dies leaves every child it had
/// with a final envelope in the store.
#[tokio::test(start_paused = true)]
async fn a_crashed_hub_leaves_a_final_envelope_for_every_child() {
    let dir = tempfile::tempdir().unwrap();
    let kept = store(dir.path());
    let config = ThreadConfig::new(parent(background_workers(&[600]))).store(kept.clone());
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    thread.parts().hub.actor().kill();
    thread.parts().hub.actor().wait(None).await.ok();
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    let envelope = kept.get(&AgentId::new("agent_1")).expect("persisted");
    assert_eq!(envelope.status, SubAgentStatus::Failed);
    assert!(
        envelope.error.as_deref().unwrap_or("").contains("hub"),
        "{envelope:?}"
    );
    assert!(envelope.finished_at_ms.is_some());
    thread.close_and_wait().await;
}

/// Defect 7: two threads sharing one store both numbered their first
/// child `agent_1`, and the store kept one envelope.
#[tokio::test(start_paused = true)]
async fn two_threads_on_one_store_never_share_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let shared = store(dir.path());
    let mut threads = Vec::new();
    for _ in 0..2 {
        let config = ThreadConfig::new(parent(background_workers(&[5]))).store(shared.clone());
        threads.push(ThreadHandle::spawn(config, None).await.unwrap());
    }
    let mut ids = Vec::new();
    for (thread, events) in &mut threads {
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(events, &mut log, 30).await;
        ids.extend(started(&log));
        thread.flush_persistence().await.unwrap();
    }
    assert_eq!(ids, [AgentId::new("agent_1"), AgentId::new("agent_2")]);
    assert_eq!(shared.len(), 2);
    for (thread, _) in &threads {
        thread.close_and_wait().await;
    }
}

/// Defect 8: a valid envelope named `agent_18446744073709551615` made
/// `ThreadHandle::spawn` panic, and `…614` killed the hub on the next
/// child. Out of range is a corrupt file; the thread runs.
#[tokio::test(start_paused = true)]
async fn a_huge_stored_id_does_not_crash_the_thread() {
    for huge in ["agent_18446744073709551615", "agent_18446744073709551614"] {
        let dir = tempfile::tempdir().unwrap();
        let envelope = Envelope {
            id: AgentId::new(huge),
            name: "old".into(),
            parent_tool_use_id: ToolUseId::new("c"),
            task: "t".into(),
            tools: vec![],
            status: SubAgentStatus::Done,
            background: true,
            requested_at_ms: 1_700_000_000_000,
            started_at_ms: None,
            finished_at_ms: Some(1_700_000_000_000),
            elapsed: Duration::ZERO,
            tool_calls: 0,
            last_tool: None,
            usage: Default::default(),
            result: Some("r".into()),
            error: None,
            claimed: false,
        };
        std::fs::write(
            dir.path().join(format!("{huge}.json")),
            serde_json::to_vec(&envelope).unwrap(),
        )
        .unwrap();
        let config = ThreadConfig::new(parent(background_workers(&[5]))).store(store(dir.path()));
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("start").unwrap();
        let mut log = Vec::new();
        run_for(&mut events, &mut log, 30).await;
        assert_eq!(started(&log), [AgentId::new("agent_1")], "{huge}");
        check_log(&log, true);
        assert!(thread.parts().hub.snapshot().await.is_ok(), "the hub lives");
        thread.close_and_wait().await;
    }
}

// ---- Ownership ------------------------------------------------------------

/// Defect 10: a gate nobody refers to any more kept running.
#[tokio::test(start_paused = true)]
async fn a_gate_stops_when_its_last_handle_is_dropped() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let actor = gate.actor().clone();
    let clone = gate.clone();
    drop(gate);
    assert!(clone.snapshot().await.is_ok(), "a clone still holds it");
    drop(clone);
    tokio::time::timeout(Duration::from_secs(1), actor.wait(None))
        .await
        .expect("the gate stops with its last handle")
        .ok();

    // An agent's private gate stops with the agent.
    let config = Agent::builder(ScriptedModel::new(vec![Turn::answer("hi")]).shared())
        .config()
        .await
        .unwrap();
    let gate_actor = config.gate.actor().clone();
    let (events, _stream) = EventSink::channel();
    let agent = subagents::actors::agent::spawn_agent(Arc::new(config), events, None)
        .await
        .unwrap();
    agent.run("hello").await.unwrap();
    agent.shutdown();
    agent.actor().wait(None).await.ok();
    tokio::time::timeout(Duration::from_secs(1), gate_actor.wait(None))
        .await
        .expect("the agent's private gate stops with the agent")
        .ok();

    // A registry's gates stop with the last copy of the registry.
    let mut registry = subagents::actors::registry::ModelRegistry::new();
    registry
        .register("local", "m", ScriptedModel::new(vec![]).shared(), 1)
        .await
        .unwrap();
    let registered = registry.models()[0].gate.actor().clone();
    drop(registry);
    tokio::time::timeout(Duration::from_secs(1), registered.wait(None))
        .await
        .expect("a registry's gate stops with the registry")
        .ok();

    // A handle to a gate the host spawned never stops it.
    let owned = GateHandle::spawn(1).await.unwrap();
    let borrowed = GateHandle::from_actor(owned.actor().clone());
    drop(borrowed);
    assert!(owned.snapshot().await.is_ok());
}

/// Defect 11: the thread replaced a host's observer with its own.
#[tokio::test(start_paused = true)]
async fn a_hosts_observer_is_told_alongside_the_threads_own() {
    #[derive(Default)]
    struct Seen(Mutex<Vec<(String, SubAgentStatus)>>);
    impl HubObserver for Seen {
        fn finished(&self, envelope: &Envelope) {
            self.0
                .lock()
                .unwrap()
                .push((envelope.id.to_string(), envelope.status));
        }
    }
    let seen = Arc::new(Seen::default());
    let builder = parent(background_workers(&[5])).observer(seen.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    assert_eq!(
        *seen.0.lock().unwrap(),
        [("agent_1".to_owned(), SubAgentStatus::Done)]
    );
    // The thread's own observer still works: the child woke the parent.
    assert!(log.iter().any(|e| matches!(e, AgentEvent::Wake(_))));
    thread.close_and_wait().await;
}

/// Defect 12: control and bidi characters in an inline child's name, and
/// newlines in its task, reached `ChildStarted`, `status` and the wake
/// line.
#[tokio::test(start_paused = true)]
async fn names_and_wake_lines_are_one_clean_line() {
    let nasty = "\u{202e}Evil\u{0007} \u{1b}[31mRed\u{1b}[0m";
    let call = json!({
        "action": "run",
        "system_prompt": format!("{nasty}\nYou work."),
        "input": "line one\nline two\nline three",
        "tools": ["sleep"],
        "wait": false,
    })
    .to_string();
    let status = json!({"action": "status", "id": "agent_1"}).to_string();
    let model = ScriptedModel::new(vec![
        Turn::new().tool_call("use_agent", call),
        Turn::new().tool_call("use_agent", status),
        Turn::answer("Started."),
        Turn::answer("Noted."),
    ])
    .with_script("Evil", worker(5));
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    let clean = |s: &str| {
        !s.chars().any(|c| {
            c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
    };
    let info = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::ChildStarted(info) => Some(info.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(info.name, "Evil Red");
    let status_output = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.output.contains("elapsed_s") => Some(r.output.clone()),
            _ => None,
        })
        .next()
        .unwrap();
    let status: serde_json::Value = serde_json::from_str(&status_output).unwrap();
    assert_eq!(status["name"], "Evil Red");
    let wake = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::Wake(w) => Some(w.line.clone()),
            _ => None,
        })
        .unwrap();
    assert!(clean(&wake), "{wake:?}");
    assert!(
        wake.contains("task: \"line one line two line three\""),
        "{wake}"
    );
    thread.close_and_wait().await;
}
