//! The parent-stop policy at the instant an inline wait hands its child
//! to the background: what the `use_agent` call says must be what happens
//! to the child. With `Cascade`, a call that reads "stopped with it; if it
//! had finished, its result arrives as a message" (`"stopping": true`) has
//! a child that ends `stopped` and wakes nobody, or ended `done` and wakes
//! the parent once; a call that reads "runs in the background" has a child
//! that goes on and wakes the parent once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use subagents::actors::ParentStopPolicy;
use subagents::messages::{Limits, SubAgentStatus};
use subagents::prelude::*;
use subagents::simulation::{HostAction, Moment, Scenario, SimulationReport, Trigger};
use subagents_demo::Sleep;

fn scenario(child_secs: u64) -> Scenario {
    scenario_thinking(child_secs, Duration::ZERO)
}

/// `scenario`, the parent's model taking `think` before its answer to the
/// call (a host's stop can then land in that model call).
fn scenario_thinking(child_secs: u64, think: Duration) -> Scenario {
    let noted = if think.is_zero() {
        Reply::answer("Noted.")
    } else {
        Reply::new().delay(think).text("Noted.")
    };
    Scenario::new(vec![
        Reply::new().use_agent(&work_call("Worker", child_secs, true)),
        noted,
        Reply::answer("Noted again."),
    ])
    .child_script("Worker\n", worker(child_secs))
    .tools(ToolRegistry::new().with(Sleep))
    .at(Duration::ZERO, HostAction::User("go".into()))
}

/// The call's words against the child's end; returns (what the call
/// said, the child's status, its wakes).
fn check_the_call_says_what_happened(report: &SimulationReport) -> (String, SubAgentStatus, usize) {
    let log = report.events();
    check_log(&log, true);
    // Guarantees 3 and 4 too: the tie of the inline wait and the turn's
    // limit answers the call `pending` at the cut, the hand-off after the
    // turn's `Result` (a first version of the hand-off check rejected it).
    check_inline_order(&log);
    let (output, _) = results_of(&log, "use_agent")
        .into_iter()
        .next()
        .expect("the call was answered");
    let said = json(&output);
    let child = report
        .envelopes
        .iter()
        .find(|e| e.id.as_str() == "agent_1")
        .expect("agent_1 has an envelope");
    let wakes = log
        .iter()
        .filter(|e| matches!(e, AgentEvent::Wake { child, .. } if child.as_str() == "agent_1"))
        .count();
    if said["status"] == "done" {
        // The answer itself, taken before the cut: no wake follows.
        assert_eq!((child.status, wakes), (SubAgentStatus::Done, 0));
    } else if said["stopping"] == true {
        // Stopped with the turn — or, finished in the same instant, its
        // result a message: the call says both.
        assert!(
            matches!(
                (child.status, wakes),
                (SubAgentStatus::Stopped, 0) | (SubAgentStatus::Done, 1)
            ),
            "the call said the child is stopped with the turn unless it had finished: {:?}, {}",
            (child.status, wakes),
            report.render()
        );
    } else {
        assert_eq!(said["pending"], true, "{output}");
        assert_eq!(
            (child.status, wakes),
            (SubAgentStatus::Done, 1),
            "the call said the child goes on: {}",
            report.render()
        );
    }
    (output, child.status, wakes)
}

/// Same instant, by the clock: the inline wait (30 s) and the parent's
/// wall clock (30 s) run out in one tick. The wait hands the child on
/// (detach), then the turn's limit cuts the call: it read "stopped with
/// it" while the child went on in the background and woke the parent.
#[test]
fn an_inline_wait_and_the_turns_limit_running_out_together() {
    let report = scenario(100)
        .configure(|b| {
            b.parent_stop(ParentStopPolicy::Cascade)
                .inline_wait(Duration::from_secs(30))
                .limits(Limits {
                    wall_clock: Duration::from_secs(30),
                    ..Limits::default()
                })
        })
        .run_for(Duration::from_secs(300))
        .run(0);
    // What docs/event-ordering.md promises at this tie, not only words
    // that match the child's end: the child goes on, the call says so.
    let (output, status, wakes) = check_the_call_says_what_happened(&report);
    assert_eq!(json(&output)["pending"], true, "{output}");
    assert_eq!((status, wakes), (SubAgentStatus::Done, 1));
}

/// Same instant, by the scheduler: the parent stopped a seeded number of
/// scheduler turns after its child went to the background, with each
/// policy; every ordering keeps the call's words true. The parent's model
/// takes a second over its next answer: with an instant model the turn
/// had ended before the host read the child's `background` status, and
/// the stop found nothing to stop (the host reacts to the stream, which
/// runs behind the turn).
#[test]
fn a_stop_as_the_child_goes_to_the_background() {
    let mut reached = std::collections::BTreeSet::new();
    for policy in [ParentStopPolicy::Cascade, ParentStopPolicy::Detach] {
        for yields in 0..12 {
            let report = scenario_thinking(20, Duration::from_secs(1))
                .configure(move |b| b.parent_stop(policy).inline_wait(Duration::from_secs(5)))
                .on(
                    Trigger::new(Some(AgentId::new("agent_1")), Moment::Background, |_, _| {
                        Some(HostAction::StopParent)
                    })
                    .after_yields(yields),
                )
                .run_for(Duration::from_secs(120))
                .run(0);
            let (output, status, _) = check_the_call_says_what_happened(&report);
            // Handed on before the stop: it goes on, under either policy.
            assert_eq!(
                json(&output)["pending"],
                true,
                "{policy:?}, {yields}: {output}"
            );
            let first = report
                .events()
                .into_iter()
                .find_map(|e| match e {
                    AgentEvent::Result(r) => Some(r.outcome),
                    _ => None,
                })
                .expect("the parent's turn ended");
            reached.insert((
                format!("{policy:?}"),
                json(&output)["stopping"] == true,
                status.as_str(),
                format!("{first:?}"),
            ));
        }
    }
    eprintln!("reached: {reached:?}");
    // The stop reached the parent's turn under each policy, and the child
    // it had handed on went on.
    for policy in ["Cascade", "Detach"] {
        let key = (policy.to_owned(), false, "done", "Stopped".to_owned());
        assert!(reached.contains(&key), "{reached:?}");
    }
}

/// Same instant, by the scheduler: the parent stopped a seeded number of
/// scheduler turns after its child (waited on inline) gave its `Result`,
/// with `Cascade`. A child that finished before the stop reached it — the
/// hub ended it `done`, the waiting call not yet given its answer when
/// the turn was cut — read "stopped with it" while it ended `done`; its
/// answer taken by nobody, and no wake (it was no background child).
#[test]
fn a_stop_as_the_waited_on_child_finishes() {
    let mut reached = std::collections::BTreeSet::new();
    for moment in [Moment::Result, Moment::Ended] {
        for yields in 0..12 {
            let report = scenario(20)
                .configure(|b| b.parent_stop(ParentStopPolicy::Cascade))
                .on(Trigger::new(Some(AgentId::new("agent_1")), moment, |_, _| {
                    Some(HostAction::StopParent)
                })
                .after_yields(yields))
                .run_for(Duration::from_secs(120))
                .run(0);
            let (output, status, wakes) = check_the_call_says_what_happened(&report);
            let said = json(&output);
            let said = if said["status"] == "done" {
                "answer"
            } else if said["stopping"] == true {
                "stopping"
            } else {
                "pending"
            };
            reached.insert((said, status.as_str(), wakes));
        }
    }
    eprintln!("reached: {reached:?}");
    // The instant was reached: the cut came after the child had finished
    // and before its answer was taken — it wakes the parent once.
    assert!(reached.contains(&("stopping", "done", 1)), "{reached:?}");
}

/// Same instant, a child waiting for its own children: under `Cascade`, a
/// parent stopped after its waited-on child gave its answer but while that
/// child's background grandchild was still being stopped found the child
/// not yet ended, "stopped" it (a stop after its turn ended changes
/// nothing) — and the child ended `done`, never handed to the background:
/// no wake, its answer lost, though the call said "if it had already
/// finished, its result will arrive as a message". A child whose turn is
/// over goes to the background as a finished one does.
#[test]
fn a_stop_while_the_waited_on_child_waits_for_its_own_children() {
    let scenario = |yields| {
        Scenario::new(vec![
            Reply::new().use_agent(&work_call("Worker", 1, true)),
            Reply::answer("Noted."),
            Reply::answer("Noted again."),
            Reply::answer("And again."),
        ])
        .child_script(
            "Worker\n",
            vec![
                Reply::new().use_agent(&work_call("Grand", 100, false)),
                Reply::answer("worker done"),
            ],
        )
        .child_script("Grand\n", worker(100))
        .tools(ToolRegistry::new().with(Sleep))
        .configure(|b| b.parent_stop(ParentStopPolicy::Cascade).max_depth(2))
        .at(Duration::ZERO, HostAction::User("go".into()))
        .on(
            Trigger::new(Some(AgentId::new("agent_1")), Moment::Result, |_, _| {
                Some(HostAction::StopParent)
            })
            .after_yields(yields),
        )
        .run_for(Duration::from_secs(300))
    };
    let mut seen = std::collections::BTreeSet::new();
    for yields in 0..40 {
        let (_, status, wakes) = check_the_call_says_what_happened(&scenario(yields).run(0));
        seen.insert((format!("{status:?}"), wakes));
    }
    eprintln!("outcomes reached: {seen:?}");
    // The instant was reached: the stop found the child's turn over and
    // its grandchild still stopping — to the background, one wake.
    assert!(seen.contains(&("Done".to_owned(), 1)), "{seen:?}");
}
