//! The public simulation harness: determinism by seed, an hour of virtual
//! time, and the example test from docs/simulation.md.

#![cfg(feature = "test-util")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
mod runtime;
mod triggers;

use std::time::Duration;

use subagents::actors::DelegationBuilder;
use subagents::prelude::*;
use subagents::simulation::{HostAction, LogEntry, Scenario};
use subagents_demo::PageTitle;

fn run(name: &str, input: &str, wait: bool) -> UseAgentCall {
    UseAgentCall::run(format!("{name}\nYou fetch titles."), input)
        .tools(["fetch_title"])
        .wait(wait)
}

fn busy_scenario() -> Scenario {
    let mut fan_out = Reply::new();
    for i in 1..=5 {
        fan_out = fan_out.use_agent(&run(&format!("Worker {i}"), "https://example.com", false));
    }
    let mut scenario = Scenario::new(vec![
        fan_out,
        Reply::answer("Five workers started."),
        Reply::answer("Noted one."),
        Reply::answer("Noted two."),
        Reply::answer("Noted three."),
        Reply::answer("Noted four."),
        Reply::answer("Noted five."),
    ])
    .tools(ToolRegistry::new().with(PageTitle::default()))
    .jitter(Duration::from_secs(5))
    .at(Duration::ZERO, HostAction::User("Check five sites.".into()))
    .at(Duration::from_secs(3), HostAction::Typing(true))
    .at(Duration::from_secs(9), HostAction::Typing(false))
    .run_for(Duration::from_secs(300));
    for i in 1..=5 {
        scenario = scenario.child_script(
            format!("Worker {i}\n"),
            vec![
                Reply::new()
                    .delay(Duration::from_secs(i))
                    .tool_call("fetch_title", r#"{"url":"https://example.com"}"#),
                Reply::answer(format!("worker {i}: Example Domain")),
            ],
        );
    }
    scenario
}

#[test]
fn the_same_scenario_and_seed_give_the_same_log() {
    let scenario = busy_scenario();
    let mut distinct = std::collections::HashSet::new();
    for seed in 0..8 {
        let first = scenario.run(seed);
        let second = scenario.run(seed);
        assert_eq!(
            first.log,
            second.log,
            "seed {seed} is not deterministic:\n{}",
            first.render()
        );
        assert_eq!(first.envelopes, second.envelopes);
        common::check_log(&first.events(), true);
        assert_eq!(first.wakes().len(), 5, "{}", first.render());
        distinct.insert(first.render());
    }
    assert!(
        distinct.len() > 1,
        "the seed changes nothing: jitter is not applied"
    );
}

/// A jitter under a millisecond varied nothing: tokio's timer rounds a
/// sleep up to its next millisecond, and a delay drawn in nanoseconds
/// under one was 1 ms for every seed. Drawn in whole milliseconds (0 or
/// 1 here), the seed moves the calls again.
#[test]
fn a_sub_millisecond_jitter_still_varies_with_the_seed() {
    let scenario = busy_scenario().jitter(Duration::from_micros(999));
    let distinct: std::collections::HashSet<String> =
        (0..8).map(|seed| scenario.run(seed).render()).collect();
    assert!(distinct.len() > 1, "the seed changes nothing");
    // Nor only its parity: the delays were the hash's low bits, and at
    // 1 ms every even seed drew what seed 0 did.
    let distinct: std::collections::HashSet<String> = (0..16)
        .map(|seed| scenario.run(seed * 2).render())
        .collect();
    assert!(
        distinct.len() > 2,
        "{} runs over 16 even seeds",
        distinct.len()
    );
}

/// Replay, on disk: the same scenario and seed, each run with a store of
/// its own, leaves the same files, byte for byte — envelopes and runs
/// (the log and the envelopes in memory were compared; the files, which
/// a restart reads, were not).
#[test]
fn the_same_scenario_and_seed_leave_the_same_files() {
    use std::sync::Arc;
    use subagents::actors::clock::ManualClock;
    use subagents::supervisor::store::EnvelopeStore;
    fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for sub in ["", "runs"] {
            let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().into_string().unwrap();
                if entry.file_type().unwrap().is_file() && !name.starts_with('.') {
                    out.push((
                        format!("{sub}/{name}"),
                        std::fs::read(entry.path()).unwrap(),
                    ));
                }
            }
        }
        out.sort();
        out
    }
    for seed in 0..3 {
        let mut runs = Vec::new();
        for _ in 0..2 {
            let tmp = tempfile::tempdir().unwrap();
            let clock = Arc::new(ManualClock::new(1_767_225_600_000));
            let store = Arc::new(EnvelopeStore::open(tmp.path(), clock).unwrap().0);
            busy_scenario().store(store).run(seed);
            runs.push((files(tmp.path()), tmp));
        }
        let (first, second) = (&runs[0].0, &runs[1].0);
        assert!(
            first.iter().any(|(n, _)| n.starts_with("runs/")),
            "{first:?}"
        );
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(first), names(second), "seed {seed}");
        for ((name, a), (_, b)) in first.iter().zip(second) {
            assert!(a == b, "seed {seed}: {name} differs");
        }
    }
}

#[test]
fn an_hour_of_virtual_time_runs_in_well_under_a_second() {
    let mut turns = Vec::new();
    for minute in 0..60u64 {
        turns.push(Reply::new().use_agent(&run(
            &format!("Minute {minute}"),
            "https://tokio.rs",
            false,
        )));
        turns.push(Reply::answer(format!("Started minute {minute}.")));
        turns.push(Reply::answer(format!("Minute {minute} noted.")));
    }
    let mut scenario = Scenario::new(turns)
        .tools(ToolRegistry::new().with(PageTitle::default()))
        .run_for(Duration::from_secs(3600));
    for minute in 0..60u64 {
        scenario = scenario
            .at(
                Duration::from_secs(minute * 60),
                HostAction::User(format!("minute {minute}")),
            )
            .child_script(
                format!("Minute {minute}\n"),
                vec![
                    Reply::new()
                        .delay(Duration::from_secs(20))
                        .tool_call("fetch_title", r#"{"url":"https://tokio.rs"}"#),
                    Reply::answer("Tokio"),
                ],
            );
    }
    let wall = std::time::Instant::now();
    let report = scenario.run(1);
    let wall = wall.elapsed();
    eprintln!(
        "an hour of virtual time ({} log entries) took {wall:?} of wall time",
        report.log.len()
    );
    assert_eq!(report.elapsed, Duration::from_secs(3600));
    assert_eq!(report.envelopes.len(), 60);
    assert_eq!(report.wakes().len(), 60, "{}", report.render());
    common::check_log(&report.events(), true);
}

/// The example of docs/simulation.md: a host checks that a background
/// child's wake waits while the user types.
#[test]
fn a_wake_waits_for_the_user_to_stop_typing() {
    let report = Scenario::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Researcher", "find three sources").background()),
        Reply::answer("I'll get back to you."),
        Reply::answer("Here are the sources."),
    ])
    .child_script(
        "Researcher",
        vec![
            Reply::new()
                .delay(Duration::from_secs(30))
                .text("three sources"),
        ],
    )
    .at(Duration::ZERO, HostAction::User("Research this.".into()))
    .at(Duration::from_secs(10), HostAction::Typing(true))
    .at(Duration::from_secs(90), HostAction::Typing(false))
    .run_for(Duration::from_secs(120))
    .run(42);

    // The child finished at ~30 s, but the wake came only after typing stopped.
    let typing_stopped = report
        .log
        .iter()
        .position(|l| {
            matches!(
                l,
                LogEntry::Host {
                    action: HostAction::Typing(false),
                    ..
                }
            )
        })
        .unwrap();
    let wake = report
        .log
        .iter()
        .position(|l| matches!(l.event(), Some(AgentEvent::Wake { .. })))
        .unwrap();
    assert!(wake > typing_stopped, "{}", report.render());
    assert_eq!(report.log[wake].at(), Duration::from_secs(90));
    assert_eq!(report.envelopes[0].status, SubAgentStatus::Done);
    assert!(
        report
            .transcript
            .render()
            .contains("· [use_agent agent_1 finished] \"Researcher\"")
    );
}

#[test]
fn options_and_policies_reach_the_parent() {
    let report = Scenario::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Slow", "x")),
        Reply::answer("handed off"),
        Reply::answer("woken"),
    ])
    .child_script(
        "Slow",
        vec![Reply::new().delay(Duration::from_secs(20)).text("slow")],
    )
    .configure(|b: DelegationBuilder| b.inline_wait(Duration::from_secs(5)))
    .at(Duration::ZERO, HostAction::User("go".into()))
    .run_for(Duration::from_secs(60))
    .run(0);
    let (output, _) = report
        .events()
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolResult(r) => Some((r.output.clone(), r.is_error)),
            _ => None,
        })
        .unwrap();
    assert!(
        output.contains("\"pending\":true"),
        "the 5 s inline wait applied: {output}"
    );
    assert_eq!(report.wakes(), ["agent_1"]);
}

/// The parent's `use_agent` answer and the wakes, for a 20 s child run
/// inline under `configured`'s options.
fn a_slow_inline_child(configured: impl Fn(Scenario) -> Scenario) -> (String, Vec<String>) {
    let scenario = Scenario::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Slow", "x")),
        Reply::answer("answered"),
        Reply::answer("woken"),
    ])
    .child_script(
        "Slow",
        vec![Reply::new().delay(Duration::from_secs(20)).text("slow")],
    )
    .at(Duration::ZERO, HostAction::User("go".into()))
    .run_for(Duration::from_secs(60));
    let report = configured(scenario).run(0);
    let (output, _) = common::results_of(&report.events(), "use_agent").remove(0);
    (output, report.wakes())
}

/// `configure` calls add up, the earlier first: a helper's settings
/// survive a test's further `configure` (the second replaced the first,
/// and the 5 s inline wait was dropped: the 20 s child answered inline
/// under the default 45 s, no wake).
#[test]
fn configure_calls_add_up_the_earlier_first() {
    let (output, wakes) = a_slow_inline_child(|s| {
        s.configure(|b| b.inline_wait(Duration::from_secs(5)))
            .configure(|b| b.max_live(2))
    });
    assert!(
        output.contains("\"pending\":true"),
        "the first closure's 5 s inline wait applied: {output}"
    );
    assert_eq!(wakes, ["agent_1"]);
    // Where two set one option, the later wins.
    let (output, wakes) = a_slow_inline_child(|s| {
        s.configure(|b| b.inline_wait(Duration::from_secs(60)))
            .configure(|b| b.inline_wait(Duration::from_secs(5)))
    });
    assert!(output.contains("\"pending\":true"), "{output}");
    assert_eq!(wakes, ["agent_1"]);
}

/// A run that ends while a child still works: the thread's close is in
/// the log (the child's `stopped`) and every envelope is final — the
/// report read them before the close, `running`. And a run "until it
/// settles" (`Duration::MAX`) or a jitter past `u64` nanoseconds is no
/// overflow (both panicked).
#[test]
fn a_run_ends_with_every_envelope_final_and_no_overflow() {
    let slow = || {
        Scenario::new(vec![
            Reply::new().use_agent(&UseAgentCall::run("Slow", "work").background()),
            Reply::answer("Started."),
            Reply::answer("Noted."),
        ])
        .child_script(
            "Slow",
            vec![Reply::new().delay(Duration::from_secs(100)).text("done")],
        )
        .at(Duration::ZERO, HostAction::User("go".into()))
    };
    let report = slow().run_for(Duration::from_secs(10)).run(1);
    assert_eq!(report.envelopes.len(), 1, "{}", report.render());
    assert!(
        report.envelopes.iter().all(|e| e.status.is_terminal()),
        "{:?}",
        report.envelopes
    );
    assert!(report.log.iter().any(|l| matches!(l,
        LogEntry::Event { event: AgentEvent::ChildStatus(id, SubAgentStatus::Stopped), .. }
            if id.as_str() == "agent_1")));
    let settled = slow().run_for(Duration::MAX).run(1);
    assert_eq!(settled.envelopes[0].status, SubAgentStatus::Done);
    let jittered = slow()
        .jitter(Duration::new(18_446_744_073, 709_551_616))
        .run_for(Duration::from_secs(10))
        .run(1);
    // Every model call waits up to 584 years: nothing happened in 10 s.
    assert_eq!(jittered.elapsed, Duration::from_secs(10));
}

/// A test's own setting named as the error says it (review: surprise
/// panics, thirty-eighth session): a builder `configure` made that no run
/// could use panicked with "the simulation task: JoinError::Panic(…, \"the
/// simulated thread starts: Refused(Limits { … })\")", the message of a
/// bug in the harness. The run's panic is the refusal, as it says itself.
#[test]
fn a_scenario_whose_builder_is_refused_says_why() {
    let panic = std::panic::catch_unwind(|| {
        busy_scenario()
            .configure(|builder| builder.max_depth(17))
            .run(7)
    })
    .unwrap_err();
    let said = panic.downcast_ref::<String>().expect("a message");
    // The run's own panic, not the task's `JoinError` around it.
    assert!(
        said.starts_with(
            "Scenario::start: the thread could not be started: the limit `max_depth` 17"
        ),
        "{said}"
    );
}

/// A store opened on the system clock (as docs/persistence.md shows) with
/// a scenario: envelopes are stamped in virtual time from
/// `Scenario::EPOCH_MS` (2026-01-01), so by the system's date each was
/// past the 24 h retention and pruned as it was saved — the files were
/// gone while the report's envelopes looked right, and whether a test
/// passed depended on the calendar. Refused when given, saying how to open
/// it.
#[test]
#[should_panic(expected = "open the store with ManualClock::new(Scenario::EPOCH_MS)")]
fn a_store_on_another_clock_than_the_simulations_is_refused() {
    use std::sync::Arc;
    use subagents::actors::clock::ManualClock;
    use subagents::supervisor::store::EnvelopeStore;
    let tmp = tempfile::tempdir().unwrap();
    // A year after the simulation's epoch, as the system's date may be.
    let clock = Arc::new(ManualClock::new(
        Scenario::EPOCH_MS + 365 * 24 * 3600 * 1000,
    ));
    let store = Arc::new(EnvelopeStore::open(tmp.path(), clock).unwrap().0);
    let _ = busy_scenario().store(store);
}

/// A host action the thread refused (an approval never asked, a child
/// that does not exist) was logged as a plain `HOST` line: a test read a
/// run in which it had worked. The refusal is logged after it, with why.
#[test]
fn a_refused_host_action_is_logged_as_refused() {
    let report = Scenario::new(vec![Reply::answer("Hello.")])
        .at(
            Duration::from_secs(1),
            HostAction::StopChild(AgentId::new("agent_9")),
        )
        .run_for(Duration::from_secs(5))
        .run(0);
    let at = report
        .log
        .iter()
        .position(|l| {
            matches!(
                l,
                LogEntry::Host {
                    action: HostAction::StopChild(_),
                    ..
                }
            )
        })
        .unwrap();
    assert!(
        matches!(&report.log[at + 1], LogEntry::Refused { why, .. } if why.contains("agent_9")),
        "{}",
        report.render()
    );
}

/// The same for actions sent in one tick (review: the docs' truth):
/// `act_together` put every refusal after all its actions' entries, so an
/// approval refused and a switch taken read as the approval taken and the
/// switch refused — and the property test's check of a stopped chain,
/// which reads the entry after a stop, skipped a stop taken beside a
/// refused answer.
#[tokio::test(start_paused = true)]
async fn each_refusal_of_actions_sent_together_follows_its_own_action() {
    let mut live = Scenario::new(vec![Reply::answer("Hello.")]).start(0).await;
    live.act_together(vec![
        HostAction::Approve("parent-approval-99".into()),
        HostAction::SwitchAway,
        HostAction::StopChild(AgentId::new("agent_9")),
    ])
    .await;
    let log: Vec<String> = live
        .log()
        .iter()
        .map(|l| match l {
            LogEntry::Host { action, .. } => format!("host {action:?}"),
            LogEntry::Refused { why, .. } => format!("refused {why}"),
            other => format!("{other:?}"),
        })
        .collect();
    let at = |prefix: &str| log.iter().position(|l| l.starts_with(prefix)).unwrap();
    let approve = at("host Approve");
    assert!(log[approve + 1].contains("approval-99"), "{log:#?}");
    let stop = at("host StopChild");
    assert!(log[stop + 1].contains("agent_9"), "{log:#?}");
    assert!(at("host SwitchAway") < stop, "{log:#?}");
    live.finish().await;
}

/// An action timed after the run's end was dropped without a word (the
/// docs' example without its `run_for` lost its `Typing(false)`).
#[test]
#[should_panic(expected = "is after the run's end")]
fn an_action_after_the_runs_end_is_refused() {
    Scenario::new(vec![Reply::answer("Hello.")])
        .at(Duration::from_secs(90), HostAction::Typing(false))
        .run(0);
}

/// Replay across a simulated restart (review: replay determinism): each
/// session's stamps began at the epoch again, so a child of a later
/// session was stamped before an earlier session's — and owed wakes, which
/// go out in the order their children finished, came backwards. A session
/// on a store goes on from the latest stamp it holds.
#[test]
fn a_later_session_on_a_store_stamps_after_the_earlier_one() {
    use std::sync::Arc;
    use subagents::actors::clock::ManualClock;
    use subagents::messages::ThreadId;
    use subagents::supervisor::store::EnvelopeStore;
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(Scenario::EPOCH_MS));
    let store = Arc::new(EnvelopeStore::open(tmp.path(), clock).unwrap().0);
    let session = |name: &str| {
        Scenario::new(vec![
            Reply::new().use_agent(&run(name, "https://example.com", false)),
            Reply::answer("Started."),
            Reply::answer("Noted."),
        ])
        .tools(ToolRegistry::new().with(PageTitle::default()))
        .child_script(
            format!("{name}\n"),
            vec![
                Reply::new().delay(Duration::from_secs(30)),
                Reply::answer("done"),
            ],
        )
        .at(Duration::ZERO, HostAction::User("go".into()))
        .run_for(Duration::from_secs(60))
        .store(store.clone())
        .thread_id(ThreadId::new("t"))
    };
    session("Alpha").run(0);
    session("Beta").run(0);
    let stamp = |name: &str| {
        store
            .all()
            .into_iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let (alpha, beta) = (stamp("Alpha"), stamp("Beta"));
    assert!(
        beta.requested_at_ms > alpha.finished_at_ms.unwrap(),
        "{beta:?} before {alpha:?}"
    );
}

/// Cancel safety (review: cancel safety at the host boundary, thirty-fourth
/// session): `LiveSimulation::close` sent nothing until first polled, and
/// a `finish` given up before its close (it waits on two snapshots first)
/// left the thread running, its id held on its store — the next scenario
/// on that store and id was refused "already open". The close is sent
/// when `close` is called, and a simulation dropped closes its thread.
#[tokio::test(start_paused = true)]
async fn a_simulation_given_up_still_closes_its_thread() {
    use subagents::supervisor::ThreadError;
    let mut live = Scenario::new(vec![Reply::answer("Hello.")]).start(0).await;
    let thread = live.thread().clone();
    drop(live.close());
    assert!(
        matches!(thread.send_user("hi"), Err(ThreadError::Undelivered(_))),
        "the close was not sent"
    );
    let live = Scenario::new(vec![Reply::answer("Hello.")]).start(0).await;
    let thread = live.thread().clone();
    drop(live.finish());
    assert!(
        matches!(thread.send_user("hi"), Err(ThreadError::Undelivered(_))),
        "a finish given up left the thread open"
    );
}

/// Harness (review: the event stream consumed badly): `advance` and
/// `advance_to` returned at once once the thread's stream had ended (a
/// close, a kill) — no virtual time ran, though their docs say it does:
/// what shares its gate or store got none, and a later action or
/// `finish` read the old instant.
#[tokio::test(start_paused = true)]
async fn a_closed_simulation_still_lets_time_run() {
    let begun = tokio::time::Instant::now();
    let mut live = Scenario::new(vec![Reply::answer("Hello.")]).start(0).await;
    live.close().await;
    let t0 = tokio::time::Instant::now();
    live.advance(Duration::from_secs(60)).await;
    assert_eq!(t0.elapsed(), Duration::from_secs(60));
    live.advance_to(Duration::from_secs(600)).await;
    assert_eq!(begun.elapsed(), Duration::from_secs(600));
}

/// A restart simulated a day later (review: clocks): a first session ran
/// into its eighth hour, then the test set the store's clock to where its
/// stamps end, as a process a day on would read them. The second
/// session's `store` panicked that every envelope "would be pruned as it
/// is saved" — it checked the fixed epoch, not where that session's
/// stamps start (past the store's latest). It checks those.
#[test]
fn a_store_whose_clock_follows_a_long_first_session_is_taken() {
    use std::sync::Arc;
    use subagents::actors::clock::ManualClock;
    use subagents::supervisor::store::EnvelopeStore;
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(Scenario::EPOCH_MS));
    let store = Arc::new(EnvelopeStore::open(tmp.path(), clock.clone()).unwrap().0);
    let late = Duration::from_secs(7 * 3600);
    let first = Scenario::new(vec![
        Reply::new().use_agent(&run("Worker", "https://example.com", true)),
        Reply::answer("Done."),
    ])
    .tools(ToolRegistry::new().with(PageTitle::default()))
    .child_script("Worker\n", vec![Reply::answer("worker: Example Domain")])
    .at(late, HostAction::User("Check it.".into()))
    .run_for(late + Duration::from_secs(60))
    .store(store.clone())
    .run(0);
    assert_eq!(first.envelopes.len(), 1, "{first:?}");
    // A day and more after the epoch; an hour after the last stamp.
    let latest = store
        .all()
        .iter()
        .filter_map(|e| e.finished_at_ms)
        .max()
        .unwrap();
    assert!(latest > Scenario::EPOCH_MS + 6 * 3600 * 1000);
    clock.set(Scenario::EPOCH_MS + 30 * 3600 * 1000);
    assert!(store.retains(latest) && !store.retains(Scenario::EPOCH_MS));
    let second = Scenario::new(vec![Reply::answer("Hello again.")])
        .at(Duration::ZERO, HostAction::User("Hi.".into()))
        .run_for(Duration::from_secs(60))
        .store(store.clone())
        .run(0);
    assert!(store.get(&AgentId::new("agent_1")).is_some(), "{second:?}");
}
