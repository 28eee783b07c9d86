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
use subagents::actors::DelegationBuilder;
use subagents::actors::clock::ManualClock;
use subagents::actors::hub::HubObserver;
use subagents::messages::{AgentEvent, Envelope};
use subagents::prelude::*;
use subagents::simulation::{HostAction, Scenario};
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle};
use subagents_demo::{Post, Sleep};

fn parent(model: ScriptedModel) -> DelegationBuilder {
    DelegationBuilder::new(model.shared())
        .system_prompt("You are the parent.")
        .tools(ToolRegistry::new().with(Sleep).with(Post))
}

fn store(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    Arc::new(EnvelopeStore::open(dir, clock).unwrap().0)
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
            let mut fan_out = Reply::new();
            for i in 1..=6 {
                fan_out = fan_out.use_agent(&work_call(&format!("Worker {i}"), 100, false));
            }
            fan_out
        },
        Reply::answer("Started."),
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
            first.render(),
            second.render(),
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
    thread.hub().actor().kill();
    thread.hub().actor().wait(None).await.ok();
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

/// Shared: two threads on one store. A child one thread made in this
/// session is that thread's alone — the other could read it through the
/// host (`envelope`) and its model could `result`, `status` or `send` to
/// it by guessing `agent_1` (the store served as every hub's archive).
/// Children of an earlier session stay readable by every thread.
#[tokio::test(start_paused = true)]
async fn a_thread_cannot_reach_a_child_another_thread_made() {
    let dir = tempfile::tempdir().unwrap();
    let shared = store(dir.path());
    let config = ThreadConfig::new(parent(background_workers(&[5]))).store(shared.clone());
    let (first, mut first_events) = ThreadHandle::spawn(config, None).await.unwrap();
    first.send_user("start").unwrap();
    run_for(&mut first_events, &mut Vec::new(), 30).await;
    first.flush_persistence().await.unwrap();
    let agent_1 = AgentId::new("agent_1");
    assert!(shared.get(&agent_1).unwrap().status.is_terminal());

    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::result("agent_1"))
            .use_agent(&UseAgentCall::send("agent_1", "go on")),
        Reply::answer("Done."),
    ]);
    let config = ThreadConfig::new(parent(model)).store(shared.clone());
    let (second, mut second_events) = ThreadHandle::spawn(config, None).await.unwrap();
    assert_eq!(second.envelope(&agent_1).await, Ok(None));
    second.send_user("peek").unwrap();
    let mut log = Vec::new();
    until_result(&mut second_events, &mut log).await;
    for (output, is_error) in results_of(&log, "use_agent") {
        assert!(
            is_error && output.contains("no sub-agent with id `agent_1`"),
            "{output}"
        );
    }
    assert!(started(&log).is_empty(), "nothing resumed: {log:?}");
    assert!(first.envelope(&agent_1).await.unwrap().is_some());
    second.close_and_wait().await;
    first.close_and_wait().await;

    // After a restart it is a child of an earlier session: any thread
    // may read it.
    let reopened = store(dir.path());
    let config = ThreadConfig::new(parent(background_workers(&[5]))).store(reopened);
    let (third, _events) = ThreadHandle::spawn(config, None).await.unwrap();
    assert!(third.envelope(&agent_1).await.unwrap().is_some());
    third.close_and_wait().await;
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
            model_calls: 0,
            children_usage: Default::default(),
            result: Some("r".into()),
            error: None,
            claimed: false,
            depth: 1,
            resumed_from: None,
            continued_as: None,
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
        assert!(thread.hub().snapshot().await.is_ok(), "the hub lives");
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

    // An agent's private gate stops with the agent: see the unit test
    // `agent::config::tests::a_private_gate_stops_with_its_agent`.

    // A registry's gates stop with the last copy of the registry.
    let mut registry = subagents::actors::registry::ModelRegistry::new();
    registry
        .register("local", "m", ScriptedModel::new(vec![]).shared(), 1)
        .await
        .unwrap();
    let registered = registry.gate("local", "m").unwrap().actor().clone();
    drop(registry);
    tokio::time::timeout(Duration::from_secs(1), registered.wait(None))
        .await
        .expect("a registry's gate stops with the registry")
        .ok();
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
    assert!(log.iter().any(is_wake));
    thread.close_and_wait().await;
}

/// Defect 12: control and bidi characters in an inline child's name, and
/// newlines in its task, reached `ChildStarted`, `status` and the wake
/// line.
#[tokio::test(start_paused = true)]
async fn names_and_wake_lines_are_one_clean_line() {
    let nasty = "\u{202e}Evil\u{0007} \u{1b}[31mRed\u{1b}[0m";
    let call = UseAgentCall::run(
        format!("{nasty}\nYou work."),
        "line one\nline two\nline three",
    )
    .tools(["sleep"])
    .background();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&call),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::answer("Started."),
        Reply::answer("Noted."),
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
    let info = first_child_started(&log);
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
            AgentEvent::Wake { line, .. } => Some(line.clone()),
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

// ---- Event contract and lifecycle --------------------------------------------

/// A model that records every request it gets (then plays `inner`).
struct Recording {
    inner: Arc<dyn subagents::actors::Model>,
    requests: Arc<Mutex<Vec<subagents::messages::ModelRequest>>>,
}

impl subagents::actors::Model for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream(&self, request: subagents::messages::ModelRequest) -> subagents::actors::ModelStream {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

/// Every tool call an assistant message asks for is followed by a tool
/// message with its id (what an OpenAI-compatible server insists on).
fn assert_history_answers_every_call(request: &subagents::messages::ModelRequest) {
    use subagents::messages::Role;
    let messages = &request.messages;
    for (i, message) in messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        for call in &message.tool_calls {
            let answered = messages[i + 1..]
                .iter()
                .take_while(|m| m.role == Role::Tool)
                .any(|m| m.tool_call_id.as_ref() == Some(&call.id));
            assert!(
                answered,
                "call {} has no tool message: {messages:#?}",
                call.id
            );
        }
    }
}

fn tool_results<'a>(log: &'a [AgentEvent], call: &str) -> Vec<&'a subagents::messages::ToolResult> {
    log.iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.tool_use_id.as_str() == call => Some(r),
            _ => None,
        })
        .collect()
}

/// Defect 1: `stop_parent` while the parent's `use_agent` waited inline
/// gave `Result(Stopped)` and no `ToolResult`: the transcript row kept
/// `output: None`. Now the call is answered (the child goes on in the
/// background, by id) before the turn's `Result`, and the conversation
/// carries that answer into the next turn.
#[tokio::test(start_paused = true)]
async fn a_stopped_turn_answers_the_call_it_was_waiting_on() {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker 1", 100, true)),
        Reply::answer("Noted."),
        Reply::answer("Noted again."),
    ])
    .with_script("Worker 1\n", worker(100));
    let recording = Recording {
        inner: model.shared(),
        requests: requests.clone(),
    };
    let builder =
        DelegationBuilder::new(Arc::new(recording)).tools(ToolRegistry::new().with(Sleep));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Running))
    })
    .await;
    run_for(&mut events, &mut log, 10).await;
    thread.stop_parent().unwrap();
    run_for(&mut events, &mut log, 300).await;
    check_log(&log, true);
    let answered = tool_results(&log, "call_1_1");
    assert_eq!(answered.len(), 1, "{log:#?}");
    let output: serde_json::Value = serde_json::from_str(&answered[0].output).unwrap();
    assert_eq!(output["pending"], true);
    assert_eq!(output["id"], "agent_1");
    let at = |pred: &dyn Fn(&AgentEvent) -> bool| log.iter().position(pred).unwrap();
    let answer =
        at(&|e| matches!(e, AgentEvent::ToolResult(r) if r.tool_use_id.as_str() == "call_1_1"));
    let stopped = at(&|e| matches!(e, AgentEvent::Result(r) if r.outcome == Outcome::Stopped));
    assert!(
        answer < stopped,
        "the call is answered before the turn's Result"
    );
    let transcript = subagents::messages::Transcript::from_events(&log);
    assert!(
        transcript.items.iter().all(|i| !matches!(
            i,
            subagents::messages::TranscriptItem::Tool { output: None, .. }
        )),
        "{}",
        transcript.render()
    );
    // The child went on and woke the parent once; that turn's request
    // answers every call of the stopped one.
    let wakes: Vec<_> = log.iter().filter(|e| is_wake(e)).collect();
    assert_eq!(wakes.len(), 1);
    let parent_requests: Vec<_> = requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.system_prompt().is_none_or(|p| !p.starts_with("Worker")))
        .cloned()
        .collect();
    assert_eq!(parent_requests.len(), 2, "the first turn, then the wake");
    assert_history_answers_every_call(&parent_requests[1]);
    thread.close_and_wait().await;
}

/// Defect 1, the other cuts: a tool call cut by a stop or by the wall
/// clock is answered before the turn's `Result`, and the next turn's
/// conversation has a tool message for every call asked (also for calls
/// the cut turn never started).
#[tokio::test(start_paused = true)]
async fn a_call_cut_by_a_stop_or_a_limit_is_answered_once() {
    for cut_by_limit in [false, true] {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let model = ScriptedModel::new(vec![
            Reply::new()
                .tool_call("sleep", r#"{"secs": 100}"#)
                .tool_call("sleep", r#"{"secs": 1}"#),
            Reply::answer("after"),
        ]);
        let recording = Recording {
            inner: model.shared(),
            requests: requests.clone(),
        };
        let limits = Limits {
            wall_clock: Duration::from_secs(if cut_by_limit { 5 } else { 300 }),
            ..Limits::default()
        };
        let (agent, mut events) = AgentBuilder::new(Arc::new(recording))
            .tools(ToolRegistry::new().with(Sleep))
            .limits(limits)
            .spawn()
            .await
            .unwrap();
        agent.send_user("sleep").unwrap();
        let mut log = Vec::new();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ToolStarted(_))
        })
        .await;
        if !cut_by_limit {
            tokio::time::sleep(Duration::from_secs(2)).await;
            agent.stop_turn().unwrap();
        }
        let result = until_result(&mut events, &mut log).await;
        let expected = if cut_by_limit {
            Outcome::LimitReached(LimitKind::WallClock)
        } else {
            Outcome::Stopped
        };
        assert_eq!(result.outcome, expected);
        check_pairs("the agent", &log, true);
        let answered = tool_results(&log, "call_1_1");
        assert_eq!(answered.len(), 1);
        assert!(answered[0].is_error);
        let why = if cut_by_limit {
            "wall-clock limit"
        } else {
            "stopped"
        };
        assert!(answered[0].output.contains(why), "{}", answered[0].output);
        assert!(tool_results(&log, "call_1_2").is_empty(), "never started");
        agent.send_user("again").unwrap();
        until_result(&mut events, &mut log).await;
        let requests = requests.lock().unwrap();
        assert_history_answers_every_call(requests.last().unwrap());
    }
}

fn delivered_inline(log: &[AgentEvent], call: &str) -> usize {
    log.iter()
        .filter(|e| matches!(e, AgentEvent::ToolResult(r) if r.tool_use_id.as_str() == call))
        .filter(|e| finished_result(e).is_some_and(|(_, status)| status == "done"))
        .count()
}

fn woken(log: &[AgentEvent], child: &str) -> usize {
    log.iter()
        .filter(|e| matches!(e, AgentEvent::Wake { child: woke, .. } if woke.as_str() == child))
        .count()
}

/// Runs one parent waiting inline on a child, stops the parent `turns`
/// scheduler turns after the child's `Result` is read, and returns how the
/// child's answer was delivered: (as the call's result, as wakes).
async fn stop_at_completion(turns: usize) -> (usize, usize) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker 1", 5, true)),
        Reply::answer("Noted."),
        Reply::answer("Noted again."),
    ])
    .with_script("Worker 1\n", worker(5));
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Result(_))),
    )
    .await;
    for _ in 0..turns {
        tokio::task::yield_now().await;
    }
    thread.stop_parent().unwrap();
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    let inline = delivered_inline(&log, "call_1_1");
    let wakes = woken(&log, "agent_1");
    assert_eq!(inline + wakes, 1, "after {turns} turns: {log:#?}");
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.claimed, inline == 1, "after {turns} turns");
    thread.close_and_wait().await;
    (inline, wakes)
}

/// Defect 2: the parent stopped (Detach) at the instant its inline child
/// finished lost the child's answer: the hub had handed it to the waiter
/// being aborted. Whatever the interleaving — the stop fired 0 to 40
/// scheduler turns after the child's `Result` is read — the answer reaches
/// the parent exactly once: as the call's result, or as one wake.
#[tokio::test(start_paused = true)]
async fn a_detached_childs_answer_reaches_the_parent_once_at_its_completion_instant() {
    let mut ways = std::collections::BTreeMap::new();
    for turns in 0..40 {
        // The host runs as a task of its own, so the scheduler interleaves
        // it with the actors (the test body itself is polled only between
        // their bursts).
        let (inline, wakes) = tokio::spawn(stop_at_completion(turns)).await.unwrap();
        *ways.entry((inline, wakes)).or_insert(0) += 1;
    }
    assert!(
        ways.len() > 1,
        "only one interleaving was reached: {ways:?}"
    );
}

fn poster(system_prompt: &str, wait: bool) -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run(system_prompt, "post")
                .tools(["http_post"])
                .wait(wait),
        ),
        Reply::answer("Done."),
        Reply::answer("Noted."),
    ])
    .with_script(
        system_prompt,
        vec![
            Reply::new().tool_call("http_post", "{}"),
            Reply::answer("posted"),
        ],
    )
}

/// Defect 3: a child that asked for approval and then stopped left the
/// request open forever. Whatever ends it (a switch, a stop, the cascade
/// of a stopped parent), `ApprovalResolved(cancelled)` comes before its
/// terminal status, and a late answer is refused as `Ended` — with the
/// thread still open.
#[tokio::test(start_paused = true)]
async fn a_pending_approval_is_closed_before_its_child_ends() {
    use subagents::actors::ParentStopPolicy;
    use subagents::messages::{ApprovalOutcome, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    for ending in ["switch", "stop child", "cascade"] {
        let mut builder = parent(poster("Poster", true));
        if ending == "cascade" {
            builder = builder.parent_stop(ParentStopPolicy::Cascade);
        }
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let request = until_child_approval(&mut events, &mut log).await;
        match ending {
            "switch" => {
                thread.switch_away().await.unwrap();
            }
            "stop child" => {
                thread.hub().stop(&AgentId::new("agent_1")).await.unwrap();
            }
            _ => thread.stop_parent().unwrap(),
        }
        run_for(&mut events, &mut log, 30).await;
        check_log(&log, true);
        let (_, by_id) = check_log(&log, true);
        let child = &by_id[&AgentId::new("agent_1")];
        let (terminal, status) = child.terminal().unwrap();
        assert_eq!(status, SubAgentStatus::Stopped, "{ending}");
        let closed = child
            .events
            .iter()
            .find_map(|(i, e)| match e {
                AgentEvent::ApprovalResolved { id, outcome, .. } if *id == request.id => {
                    Some((*i, outcome.clone()))
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{ending}: the approval was never closed: {log:#?}"));
        assert!(
            closed.0 < terminal,
            "{ending}: closed after the terminal status"
        );
        assert!(
            matches!(closed.1, ApprovalOutcome::Cancelled(_)),
            "{ending}"
        );
        let transcript = subagents::messages::Transcript::from_events(&log);
        let row = transcript.child(&AgentId::new("agent_1")).unwrap();
        assert!(row.transcript.items.iter().any(|i| matches!(
            i,
            subagents::messages::TranscriptItem::Approval {
                resolved: Some(_),
                ..
            }
        )));
        assert_eq!(
            thread
                .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
                .await,
            Err(ThreadError::Approval(ApprovalRefusal::Ended(request.id))),
            "{ending}"
        );
        thread.close_and_wait().await;
    }
}

/// Defect 3, the answered path: an approval answered is closed as
/// approved before the call's result; a second answer is refused with the
/// first one.
#[tokio::test(start_paused = true)]
async fn an_answered_approval_is_closed_once() {
    use subagents::messages::{ApprovalOutcome, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let (thread, mut events) = ThreadHandle::spawn(parent(poster("Poster", true)), None)
        .await
        .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    thread
        .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
        .await
        .unwrap();
    assert_eq!(
        thread
            .resolve_approval(request.id.clone(), ApprovalDecision::Deny)
            .await,
        Err(ThreadError::Approval(ApprovalRefusal::AlreadyAnswered {
            id: request.id.clone(),
            decision: ApprovalDecision::Approve
        }))
    );
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let resolved: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(_, inner) => match &**inner {
                AgentEvent::ApprovalResolved { outcome, .. } => Some(outcome.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(resolved, [ApprovalOutcome::Approved]);
    thread.close_and_wait().await;
}

/// Defect 4: a child handed to the background while queued started later
/// with no event, and `status` said "background", elapsed 0. Its start is
/// now `ChildRunning` on the stream, and `status` says queued, with its
/// place in the queue.
#[tokio::test(start_paused = true)]
async fn a_queued_background_childs_start_is_on_the_stream() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Worker 1", 10, false))
            .use_agent(&work_call("Worker 2", 10, false))
            .use_agent(&UseAgentCall::status("agent_2")),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker 1\n", worker(10))
    .with_script("Worker 2\n", worker(10));
    let (thread, mut events) = ThreadHandle::spawn(parent(model).max_live(1), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    let output = tool_results(&log, "call_1_3")[0].output.clone();
    let status: serde_json::Value = serde_json::from_str(&output).unwrap();
    assert_eq!(status["status"], "queued", "{output}");
    assert_eq!(status["queue_position"], 1);
    assert_eq!(status["background"], true);
    let running: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ChildRunning(id) => Some(id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(running, ["agent_2"]);
    let transcript = subagents::messages::Transcript::from_events(&log);
    assert!(!transcript.child(&AgentId::new("agent_2")).unwrap().queued);
    thread.close_and_wait().await;
}

/// Defect 2 on a multi-threaded runtime, where the parent's turn task can
/// run on one worker while the stop closes the turn on another: for every
/// round, the child's answer reaches the parent exactly once (a tool call
/// that receives the result after its turn was cut must not claim it).
#[test]
fn delivery_is_exactly_once_on_a_multi_threaded_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut ways = std::collections::BTreeMap::new();
    for round in 0..150u32 {
        let way = runtime.block_on(async move {
            let model = ScriptedModel::new(vec![
                Reply::new().use_agent(&work_call("Worker 1", 0, true)),
                Reply::answer("Noted."),
                Reply::answer("Noted again."),
            ])
            .with_script("Worker 1\n", worker(0));
            let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
            thread.send_user("start").unwrap();
            let mut log = Vec::new();
            until(&mut events, &mut log, |e| {
                matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Result(_)))
            })
            .await;
            for _ in 0..(round % 7) {
                tokio::task::yield_now().await;
            }
            thread.stop_parent().unwrap();
            // Until the parent is idle again and the answer has landed (a
            // lost answer never lands: give up after many turns).
            for _ in 0..5_000 {
                let idle = thread.parent_snapshot().await.is_ok_and(|s| !s.busy);
                let ended = thread
                    .hub()
                    .status(&AgentId::new("agent_1"))
                    .is_some_and(|e| e.status.is_terminal());
                thread.sync().await.unwrap();
                while let Some(event) = events.try_recv() {
                    log.push(event);
                }
                let woke_or_took = delivered_inline(&log, "call_1_1") + woken(&log, "agent_1");
                if idle && ended && woke_or_took > 0 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            let inline = delivered_inline(&log, "call_1_1");
            let wakes = woken(&log, "agent_1");
            assert_eq!(inline + wakes, 1, "round {round}: {log:#?}");
            thread.close_and_wait().await;
            (inline, wakes)
        });
        *ways.entry(way).or_insert(0) += 1;
    }
    eprintln!("deliveries over 150 rounds: {ways:?}");
}

/// Found by the property test's soak: the parent stopped while its
/// `use_agent` waited for the hub to make the child (the hub replied, the
/// call was cut before it read the id): nobody waited on the child, it was
/// not in the background, and its answer never reached the parent. Now a
/// child whose requester gives up before learning its id goes to the
/// background (Detach) and wakes the parent; with Cascade it is stopped.
#[test]
fn a_child_requested_as_its_parents_turn_is_cut_is_not_lost() {
    use subagents::actors::ParentStopPolicy;
    use subagents::simulation::{Moment, Trigger};
    let mut reached = std::collections::BTreeSet::new();
    for cascade in [false, true] {
        for yields in 0..12 {
            let policy = if cascade {
                ParentStopPolicy::Cascade
            } else {
                ParentStopPolicy::Detach
            };
            let report = Scenario::new(vec![
                Reply::new()
                    .use_agent(&work_call("Worker 1", 1, true))
                    .use_agent(&work_call("Worker 2", 0, true)),
                Reply::answer("Noted."),
                Reply::answer("Noted again."),
                Reply::answer("Noted once more."),
            ])
            .child_script("Worker 1\n", worker(1))
            .child_script("Worker 2\n", worker(0))
            .tools(ToolRegistry::new().with(Sleep))
            .configure(move |b| b.parent_stop(policy))
            .on(
                Trigger::new(Some(AgentId::new("agent_1")), Moment::Ended, |_, _| {
                    Some(HostAction::StopParent)
                })
                .after_yields(yields),
            )
            .at(Duration::ZERO, HostAction::User("two".into()))
            .run_for(Duration::from_secs(120))
            .run(0);
            let log = report.events();
            check_log(&log, true);
            for (call, child) in [("call_1_1", "agent_1"), ("call_1_2", "agent_2")] {
                let Some(envelope) = report.envelopes.iter().find(|e| e.id.as_str() == child)
                else {
                    continue;
                };
                let deliveries = delivered_inline(&log, call) + woken(&log, child);
                if envelope.status == SubAgentStatus::Done && !cascade {
                    assert_eq!(
                        deliveries,
                        1,
                        "{child} after {yields} turns: {}",
                        report.render()
                    );
                } else {
                    assert!(deliveries <= 1, "{child}: {}", report.render());
                }
                if child == "agent_2" {
                    reached.insert((cascade, envelope.status.as_str(), deliveries));
                }
            }
        }
    }
    assert!(reached.len() > 2, "{reached:?}");
}

/// The host stops one child through its thread: a typed answer — the
/// status after, or `UnknownChild` with the id — never a bare sentence.
#[tokio::test(start_paused = true)]
async fn stopping_one_child_through_the_thread_is_typed() {
    use subagents::supervisor::ThreadError;
    let (thread, mut events) = ThreadHandle::spawn(parent(background_workers(&[600])), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Ok(SubAgentStatus::Stopped)
    );
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Ok(SubAgentStatus::Stopped),
        "a second stop reads the status it ended with"
    );
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_9")).await,
        Err(ThreadError::UnknownChild(AgentId::new("agent_9")))
    );
    run_for(&mut events, &mut log, 10).await;
    check_log(&log, true);
    thread.close_and_wait().await;
    assert_eq!(
        thread.stop_child(&AgentId::new("agent_1")).await,
        Err(ThreadError::Closed)
    );
}

/// A refusal is typed and says what was wrong: a request too deep, a tool
/// the hub does not offer, and — once the hub is gone — `Closed`, not
/// "unknown".
#[tokio::test(start_paused = true)]
async fn the_hub_refuses_with_typed_reasons_and_a_closed_hub_says_closed() {
    use subagents::actors::hub::Refused;
    use subagents::messages::ChildRequest;
    let (parts, mut events) = parent(background_workers(&[100])).spawn().await.unwrap();
    // The parent starts `agent_1` in the background (depth 1, the limit).
    parts.agent.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let request = |requester: &str| {
        ChildRequest::new(
            AgentId::new(requester),
            0,
            ToolUseId::new("c"),
            "Child",
            "task",
        )
    };
    assert_eq!(
        parts.hub.request(request("agent_1")).await,
        Err(Refused::TooDeep { max_depth: 1 })
    );
    let mut with_tool = request("parent");
    with_tool.tools = Some(vec!["shell".into()]);
    let refused = parts.hub.request(with_tool).await.unwrap_err();
    assert!(
        matches!(refused, Refused::UnknownTool(ToolError::Unknown { ref name, .. }) if name == "shell"),
        "{refused:?}"
    );
    let stranger = request("nobody");
    assert_eq!(
        parts.hub.request(stranger).await,
        Err(Refused::UnknownRequester(AgentId::new("nobody")))
    );
    parts.shutdown_and_wait().await;
    assert_eq!(
        parts.hub.request(request("parent")).await,
        Err(Refused::Closed)
    );
    assert_eq!(
        parts.hub.stop(&AgentId::new("agent_1")).await,
        Err(Refused::Closed)
    );
}

/// What was not delivered comes back: a turn sent to a stopped agent.
#[tokio::test(start_paused = true)]
async fn a_turn_sent_to_a_stopped_agent_comes_back() {
    let (agent, _events) = AgentBuilder::new(ScriptedModel::new(vec![]).shared())
        .spawn()
        .await
        .unwrap();
    agent.shutdown();
    agent.actor().wait(None).await.ok();
    assert_eq!(
        agent.send_user("are you there?"),
        Err(AgentError::Undelivered {
            agent: AgentId::new("parent"),
            text: "are you there?".into()
        })
    );
}
