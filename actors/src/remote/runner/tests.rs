//! The node runner's tests: what a run reports, in what order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use subagents_messages::{AgentId, Limits, Outcome, RequestOptions};

use super::*;
use crate::scripted::{Reply, ScriptedModel};

fn spec() -> RunSpec {
    RunSpec {
        key: 1,
        id: AgentId::new("agent_1"),
        system_prompt: "Worker".into(),
        input: "go".into(),
        followups: Vec::new(),
        conversation: Vec::new(),
        model: "scripted".into(),
        tools: Vec::new(),
        limits: Limits::default(),
        depth: 1,
        options: RequestOptions::default(),
        keep_if_orphaned: true,
        approvals_after: 0,
    }
}

/// A node whose model says "hi" and then hangs.
async fn a_runner() -> NodeRunner {
    let model = ScriptedModel::new(vec![Reply::new().text("hi").hang()]).shared();
    NodeRunner::new(
        vec![model],
        ToolRegistry::new(),
        GateHandle::spawn(1).await.unwrap(),
    )
}

/// The run's `Ended` result, failing if none comes within an hour of
/// virtual time (a lost stop or end) or the reports end without one.
async fn ended_of(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<RunReport>,
) -> subagents_messages::AgentResult {
    tokio::time::timeout(Duration::from_secs(3600), async {
        while let Some(report) = rx.recv().await {
            if let ReportBody::Ended { result, .. } = report.body {
                return Some(result);
            }
        }
        None
    })
    .await
    .expect("the run never ended")
    .expect("its reports ended without an end")
}

/// Same instant: a node told to stop everything right after a start,
/// before that run's agent exists, stops that run too (once spawned).
#[tokio::test(start_paused = true)]
async fn a_run_stopped_before_its_agent_exists_ends_stopped() {
    let runner = a_runner().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    runner.start(spec(), move |report| {
        let _ = tx.send(report);
    });
    runner.stop_all();
    let ended = ended_of(&mut rx).await;
    assert_eq!(ended.outcome, Outcome::Stopped);
    assert_eq!(runner.live(), 0);
}

/// Stopped midway: a run whose agent is killed mid-turn (no stop: a
/// crash) still sends its `Ended`, with the failed result the agent's
/// kill put on the stream. The agent drops its turn's reply then, and
/// the run sent nothing more: the parent's node waited for ever.
#[tokio::test(start_paused = true)]
async fn a_run_whose_agent_is_killed_mid_turn_still_ends() {
    let runner = a_runner().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let slot = runner.start(spec(), move |report| {
        let _ = tx.send(report);
    });
    // Its first event: the agent is in its model call.
    let first = rx.recv().await.expect("a first report");
    assert!(matches!(first.body, ReportBody::Event(_)), "{first:?}");
    let agent = runner.runs().get(&slot).and_then(|run| run.agent.clone());
    agent.expect("spawned").actor_ref().kill();
    let ended = ended_of(&mut rx).await;
    assert!(matches!(ended.outcome, Outcome::Failed(_)), "{ended:?}");
    assert_eq!(runner.live(), 0);
}

/// Host code that panics: a transport whose `out` panicked on a report (an
/// `expect` on a closed link, a `to_wire().unwrap()` past the codec's
/// limit) unwound the run's task: its agent lived on, `live` counted it
/// for good (skewing `LeastLoaded`), and no `Ended` ever went out — the
/// parent's node failed the run only after its wall clock and 30 s more.
/// The report is lost; the run ends, its `Ended` numbered past the gap —
/// a panic's payload whose `Drop` panics too.
#[tokio::test(start_paused = true)]
async fn a_transport_that_panics_on_a_report_still_ends_the_run() {
    for bombs in [false, true] {
        let runner = a_runner().await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let slot = runner.start(spec(), move |report| {
            if matches!(report.body, ReportBody::Event(_)) && report.seq == 0 {
                if bombs {
                    std::panic::panic_any(Bomb);
                }
                panic!("the link is closed");
            }
            let _ = tx.send(report);
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        runner.request(slot, RunRequest::Stop);
        // Numbered past the gap: the lost report's number is spent, the
        // `Ended` comes after it.
        let mut numbers = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(3600), async {
            loop {
                let report = rx.recv().await.expect("its reports ended without an end");
                numbers.push(report.seq);
                if let ReportBody::Ended { result, .. } = report.body {
                    break result;
                }
            }
        })
        .await
        .expect("the run never ended");
        assert_eq!(ended.outcome, Outcome::Stopped);
        assert_eq!(runner.live(), 0);
        assert!(runner.ended(slot));
        assert!(numbers.len() > 1 && numbers[0] == 1, "{numbers:?}");
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    }
}

/// Same instant, two workers (review: shared state): a message sent to
/// a run before its agent existed waited, and was handed on after the
/// agent was set — a stop that came in between was cast at once and
/// overtook it: the message read "finished" though it came first. The
/// agent is set once every earlier request is handed on. Its answer goes
/// before the run's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_as_the_agent_is_set_waits_behind_the_earlier_ones() {
    let runner = a_runner().await;
    for round in 0..2000 {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let slot = runner.start(spec(), move |report| {
            let _ = tx.send(report);
        });
        runner.request(
            slot,
            RunRequest::Steer {
                n: 0,
                text: "also".into(),
            },
        );
        while runner
            .runs()
            .get(&slot)
            .is_none_or(|run| run.agent.is_none())
        {
            std::hint::spin_loop();
        }
        runner.request(slot, RunRequest::Stop);
        // The message's answer, then the run's end (review: cluster edges
        // — in the other order a transport that ends a run's route at its
        // `Ended` dropped the answer, and the parent refused a message the
        // run had taken as "finished", then sent it again).
        let (taken, ended) = tokio::time::timeout(Duration::from_secs(60), async {
            let mut taken = None;
            while let Some(report) = rx.recv().await {
                match report.body {
                    ReportBody::Steered { taken: t, .. } => taken = Some(t),
                    ReportBody::Ended { .. } => return (taken, true),
                    _ => {}
                }
            }
            (taken, false)
        })
        .await
        .expect("no end");
        assert_eq!(
            taken,
            Some(true),
            "round {round}: the stop overtook it, or its answer came after the end"
        );
        assert!(ended, "round {round}: the run never ended");
    }
}

/// Shared: reports sent from two threads at once leave in the order of
/// their numbers (a transport may end a run's route at its `Ended`, so
/// a lower number behind it would be lost).
#[test]
fn reports_from_two_threads_leave_in_number_order() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let out: Out = {
        let seen = seen.clone();
        Arc::new(move |report: RunReport| seen.lock().unwrap().push(report.seq))
    };
    let seq = Seq::default();
    let senders: Vec<_> = (0..2)
        .map(|_| {
            let (out, seq) = (out.clone(), seq.clone());
            std::thread::spawn(move || {
                for n in 0..20_000 {
                    send(&out, &seq, 1, ReportBody::Steered { n, taken: true });
                }
            })
        })
        .collect();
    for sender in senders {
        sender.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 40_000);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "out of order");
}

/// A transport whose receive path is a plain thread (a blocking socket
/// reader, a messaging client's callback) handing the runner a start and
/// a message panicked: "there is no reactor running" — a stop worked, so
/// the first approval answer or message took the node down. The runner
/// spawns on the runtime it was made on.
#[test]
fn a_start_and_a_message_from_a_thread_outside_the_runtime_run() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runner = runtime.block_on(a_runner());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    // This thread is in no runtime.
    let slot = runner.start(spec(), move |report| {
        let _ = tx.send(report);
    });
    assert_eq!(
        steered_from_outside(&runtime, &runner, slot, rx),
        Some(true)
    );
}

/// Once run `slot`'s agent is set, a message from this thread (in no
/// runtime), and whether the run took it (`None`: no `Steered` came);
/// then a stop, which must end it stopped.
fn steered_from_outside(
    runtime: &tokio::runtime::Runtime,
    runner: &NodeRunner,
    slot: u64,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<RunReport>,
) -> Option<bool> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while runner
        .runs()
        .get(&slot)
        .is_none_or(|run| run.agent.is_none())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the run's agent never started (refused?)"
        );
        std::thread::yield_now();
    }
    let text = "also".to_owned();
    runner.request(slot, RunRequest::Steer { n: 0, text });
    runtime.block_on(async {
        let taken = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(report) = rx.recv().await {
                if let ReportBody::Steered { taken, .. } = report.body {
                    return Some(taken);
                }
            }
            None
        })
        .await
        .expect("no answer to the message");
        runner.request(slot, RunRequest::Stop);
        assert_eq!(ended_of(&mut rx).await.outcome, Outcome::Stopped);
        taken
    })
}

/// A panic payload whose `Drop` panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's drop panicked");
    }
}

/// A tool that asks for approval.
struct Guarded;

impl crate::tool::Tool for Guarded {
    fn name(&self) -> &str {
        "guarded"
    }
    fn description(&self) -> String {
        "asks first".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn requires_approval(&self, _arguments: &str) -> bool {
        true
    }
    fn call(&self, _call: crate::tool::ToolCallContext) -> crate::tool::ToolFuture {
        Box::pin(async { Ok("ran".to_owned()) })
    }
}

/// Forged (review: surprise panics): a peer's start numbering its run's
/// approvals after `u64::MAX` (any holder of the cookie writes one)
/// overflowed the agent's counter at its first approval — a crashed turn
/// in a debug build, an id wrapped to `-approval-0` in a release one. The
/// call is refused, saying why, and the run goes on.
#[tokio::test(start_paused = true)]
async fn a_run_numbering_its_approvals_at_the_end_refuses_the_call_not_the_turn() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("guarded", "{}"),
        Reply::answer("done"),
    ])
    .shared();
    let runner = NodeRunner::new(
        vec![model],
        ToolRegistry::new().with(Guarded),
        GateHandle::spawn(1).await.unwrap(),
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut at_the_end = spec();
    at_the_end.tools = vec!["guarded".into()];
    at_the_end.approvals_after = u64::MAX;
    runner.start(at_the_end, move |report| {
        let _ = tx.send(report);
    });
    let ended = ended_of(&mut rx).await;
    assert_eq!(ended.outcome, Outcome::Completed, "{ended:?}");
    assert_eq!(ended.text, "done");
}

/// Forged (the review above): a peer's start with limits or options no
/// agent here is spawned with (0 model calls, a NaN temperature) ran
/// unchecked. Refused, naming the field.
#[tokio::test(start_paused = true)]
async fn a_run_with_limits_or_options_no_agent_takes_is_refused() {
    let runner = a_runner().await;
    let mut idle = spec();
    idle.limits.max_model_calls = 0;
    let mut hot = spec();
    hot.options.temperature = Some(f64::NAN);
    for (spec, field) in [(idle, "max_model_calls"), (hot, "temperature")] {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        runner.start(spec, move |report| {
            let _ = tx.send(report);
        });
        let report = rx.recv().await.expect("a report");
        match report.body {
            ReportBody::Refused(why) => assert!(why.contains(field), "{why}"),
            other => panic!("{field}: not refused: {other:?}"),
        }
    }
    assert_eq!(runner.live(), 0);
    // A spent token budget is no such thing (review: usage accounting): a
    // waiting requester's cap ran out, and the run ends at once with its
    // partial result, as a child started locally does.
    let mut spent = spec();
    spent.limits.token_budget = 0;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    runner.start(spent, move |report| {
        let _ = tx.send(report);
    });
    let ended = ended_of(&mut rx).await;
    assert!(
        matches!(ended.outcome, Outcome::LimitReached(_)),
        "{ended:?}"
    );
}

/// Host code outside a runtime (review: surprise panics): a runner made
/// outside one (its gate spawned in one, then handed out) and started
/// from a plain thread panicked in `tokio::spawn` ("no reactor
/// running"), its run's slot left counted live. The start is refused,
/// saying why, and nothing stays counted.
#[test]
fn a_runner_made_and_started_outside_a_runtime_refuses_the_start() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let gate = runtime.block_on(GateHandle::spawn(1)).unwrap();
    let model = ScriptedModel::new(vec![Reply::answer("hi")]).shared();
    let runner = NodeRunner::new(vec![model], ToolRegistry::new(), gate);
    let (tx, rx) = std::sync::mpsc::channel();
    runner.start(spec(), move |report| {
        let _ = tx.send(report);
    });
    let report = rx.try_recv().expect("answered at once");
    match report.body {
        ReportBody::Refused(why) => assert!(why.contains("outside a tokio runtime"), "{why}"),
        other => panic!("not refused: {other:?}"),
    }
    assert_eq!(runner.live(), 0);
}

/// This session's own review of the above: a runner made outside a
/// runtime and started inside one ran there, but a message from a plain
/// thread after it spawned its `Steered` report on no runtime — lost, the
/// parent's node never told whether the run took it. The first start's
/// runtime is kept.
#[test]
fn a_runner_made_outside_a_runtime_keeps_the_first_starts() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let gate = runtime.block_on(GateHandle::spawn(1)).unwrap();
    let model = ScriptedModel::new(vec![Reply::new().text("hi").hang()]).shared();
    let runner = NodeRunner::new(vec![model], ToolRegistry::new(), gate);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let slot = runtime.block_on(async {
        runner.start(spec(), move |report| {
            let _ = tx.send(report);
        })
    });
    // This thread is in no runtime.
    assert_eq!(
        steered_from_outside(&runtime, &runner, slot, rx),
        Some(true)
    );
}

/// The last read of this session's change: the runtime kept was the
/// first start's, for good — a start from a short-lived runtime, then one
/// from the long-lived one after the first was dropped, spawned there,
/// and tokio dropped it unrun: no report, counted live for ever. A call
/// from a runtime runs on that runtime.
#[test]
fn a_start_after_the_first_starts_runtime_is_gone_runs_on_its_own() {
    let lasting = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let gate = lasting.block_on(GateHandle::spawn(2)).unwrap();
    let model = ScriptedModel::new(vec![Reply::answer("one"), Reply::answer("two")]).shared();
    let runner = NodeRunner::new(vec![model], ToolRegistry::new(), gate);
    let brief = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    brief.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        runner.start(spec(), move |report| {
            let _ = tx.send(report);
        });
        ended_of(&mut rx).await;
    });
    drop(brief);
    lasting.block_on(async {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        runner.start(spec(), move |report| {
            let _ = tx.send(report);
        });
        let ended = tokio::time::timeout(Duration::from_secs(60), ended_of(&mut rx)).await;
        assert!(ended.is_ok(), "the second start never ran");
    });
    assert_eq!(runner.live(), 0);
}
