//! Triggers at the harness's own edges: a trigger fires once for the
//! first event that matches it, whatever path the harness read that event
//! on, and its action is asked for once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use subagents::prelude::*;
use subagents::simulation::{HostAction, LogEntry, Moment, Scenario, SimulationReport, Trigger};
use subagents_demo::Sleep;

fn background_worker() -> Scenario {
    Scenario::new(vec![
        Reply::new().use_agent(&work_call("Worker", 60, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .child_script("Worker\n", worker(60))
    .tools(ToolRegistry::new().with(Sleep))
    .at(Duration::ZERO, HostAction::User("go".into()))
}

fn fired(report: &SimulationReport) -> Vec<Moment> {
    report
        .log
        .iter()
        .filter_map(|e| match e {
            LogEntry::Fired { moment, .. } => Some(*moment),
            _ => None,
        })
        .collect()
}

/// A trigger's action was asked for twice per firing (once to find the
/// trigger, once to fire it): a "fire once" guard, or a counter, saw the
/// first call and the trigger was used up with no action.
#[test]
fn a_triggers_action_is_asked_for_once() {
    let first = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let (guard, count) = (first.clone(), calls.clone());
    let report = background_worker()
        .on(Trigger::new(None, Moment::ToolStarted, move |_, _| {
            count.fetch_add(1, Ordering::SeqCst);
            (!guard.swap(true, Ordering::SeqCst)).then_some(HostAction::Typing(true))
        }))
        .run_for(Duration::from_secs(120))
        .run(0);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(fired(&report), [Moment::ToolStarted], "{}", report.render());
}

/// Replay (the same scenario, run twice): a trigger's action is one
/// closure shared by every run, so a fire-once guard that fired in the
/// first run stayed fired in the second — its `Typing` never came, and
/// the same scenario and seed gave another log. `Trigger::per_run` makes
/// the action afresh for each run.
#[test]
fn a_per_run_trigger_replays_byte_for_byte() {
    let scenario = background_worker()
        .on(Trigger::per_run(None, Moment::ToolStarted, || {
            let guard = AtomicBool::new(false);
            move |_: &AgentId, _: &AgentEvent| {
                (!guard.swap(true, Ordering::SeqCst)).then_some(HostAction::Typing(true))
            }
        }))
        .run_for(Duration::from_secs(120));
    let first = scenario.run(0);
    let second = scenario.run(0);
    assert_eq!(fired(&first), [Moment::ToolStarted]);
    assert_eq!(first.render(), second.render());
}

/// A trigger on an event the harness read while it acted (a host stop
/// whose answer comes after the child's terminal status) never fired: the
/// event was logged but not offered to the triggers.
#[test]
fn an_event_read_while_the_host_acts_still_fires_its_trigger() {
    let report = background_worker()
        .at(
            Duration::from_secs(10),
            HostAction::StopChild(AgentId::new("agent_1")),
        )
        .on(Trigger::new(
            Some(AgentId::new("agent_1")),
            Moment::Ended,
            |_, _| Some(HostAction::Typing(true)),
        ))
        .run_for(Duration::from_secs(120))
        .run(0);
    assert_eq!(fired(&report), [Moment::Ended], "{}", report.render());
    check_log(&report.events(), true);
}

/// Two triggers on one moment of one child: only the first fired at it,
/// the second waited for a later such event — for a child's `Ended`,
/// none comes, so it never fired, without a word. Each fires at it, in
/// the order added.
#[test]
fn two_triggers_on_one_event_both_fire_at_it() {
    let agent_1 = || Some(AgentId::new("agent_1"));
    let report = background_worker()
        .at(
            Duration::from_secs(10),
            HostAction::StopChild(AgentId::new("agent_1")),
        )
        .on(Trigger::new(agent_1(), Moment::Ended, |_, _| {
            Some(HostAction::Typing(true))
        }))
        .on(Trigger::new(agent_1(), Moment::Ended, |_, _| {
            Some(HostAction::Typing(false))
        }))
        .run_for(Duration::from_secs(120))
        .run(0);
    assert_eq!(
        fired(&report),
        [Moment::Ended, Moment::Ended],
        "{}",
        report.render()
    );
    check_log(&report.events(), true);
}

/// A trigger that never fires (its child never comes to its moment:
/// `agent_9` is never started) left no trace, and a test asserting what
/// followed its action passed without it. The report lists it, and its
/// text ends with it; one that fired is not listed.
#[test]
fn a_trigger_that_never_fired_is_in_the_report() {
    let report = background_worker()
        .on(Trigger::new(
            Some(AgentId::new("agent_9")),
            Moment::Ended,
            |_, _| Some(HostAction::SwitchAway),
        ))
        .on(Trigger::new(
            Some(AgentId::new("agent_1")),
            Moment::Ended,
            |_, _| Some(HostAction::Typing(true)),
        ))
        .on(Trigger::new(None, Moment::Queued, |_, _| {
            Some(HostAction::StopParent)
        }))
        .run_for(Duration::from_secs(120))
        .run(0);
    assert_eq!(fired(&report), [Moment::Ended], "{}", report.render());
    assert_eq!(
        report.unfired,
        [
            (Some(AgentId::new("agent_9")), Moment::Ended),
            (None, Moment::Queued)
        ]
    );
    let text = report.render();
    assert!(
        text.ends_with("t=  120.000s  UNFIRED agent_9 Ended\nt=  120.000s  UNFIRED any Queued"),
        "{text}"
    );
}

/// Stopped midway, by the harness: a scenario run on a store ended by
/// closing its thread without waiting, so a child still running when the
/// run's time was up was left `running` on disk (read as interrupted by
/// the next open, as after a crash), not stopped.
#[test]
fn a_scenario_on_a_store_leaves_every_child_a_final_envelope() {
    use subagents::actors::clock::ManualClock;
    use subagents::supervisor::store::EnvelopeStore;
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(Scenario::EPOCH_MS));
    let store = Arc::new(EnvelopeStore::open(tmp.path(), clock.clone()).unwrap().0);
    let report = background_worker()
        .store(store.clone())
        .run_for(Duration::from_secs(30))
        .run(0);
    assert!(report.wakes().is_empty(), "{}", report.render());
    drop(store);
    let (store, opened) = EnvelopeStore::open(tmp.path(), clock).unwrap();
    assert!(opened.interrupted.is_empty(), "left unfinished: {opened:?}");
    let worker = store.get(&AgentId::new("agent_1")).unwrap();
    assert_eq!(worker.status, subagents::messages::SubAgentStatus::Stopped);
}

/// `Scenario::start` (driving a scenario step by step) dropped the
/// triggers given with `Scenario::on`: only `run` armed them, so one
/// scenario behaved differently under the two.
#[tokio::test(start_paused = true)]
async fn a_scenario_started_step_by_step_keeps_its_triggers() {
    let scenario = background_worker().on(Trigger::new(None, Moment::ToolStarted, |_, _| {
        Some(HostAction::Typing(true))
    }));
    let mut live = scenario.start(0).await;
    live.act(HostAction::User("go".into())).await;
    live.advance(Duration::from_secs(120)).await;
    let report = live.finish().await;
    assert_eq!(fired(&report), [Moment::ToolStarted], "{}", report.render());
}

/// A background child that asks before its one call (`http_post`), then
/// answers.
fn poster() -> Scenario {
    Scenario::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Poster\nYou post.", "post it")
                .tools(["http_post"])
                .background(),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .child_script(
        "Poster\n",
        vec![
            Reply::new().tool_call("http_post", r#"{"message":"hi"}"#),
            Reply::answer("posted it"),
        ],
    )
    .tools(ToolRegistry::new().with(subagents_demo::Post))
}

/// An approval answer was logged once it had taken effect, as an action
/// that holds wakes back is: the child's `ApprovalResolved`, its
/// finish and the parent's wake all came before the `HOST Approve` that
/// allowed them — a check saw the effect before its cause. Logged before
/// it is sent, as an action that lets things through is.
#[test]
fn an_approval_answer_is_logged_before_what_it_allows() {
    let report = poster()
        .on(Trigger::new(
            None,
            Moment::ApprovalRequested,
            |_, event| match event {
                AgentEvent::Child(_, inner) => match &**inner {
                    AgentEvent::ApprovalRequested(r) => Some(HostAction::Approve(r.id.clone())),
                    _ => None,
                },
                _ => None,
            },
        ))
        .at(Duration::ZERO, HostAction::User("go".into()))
        .run_for(Duration::from_secs(60))
        .run(0);
    let host = report
        .log
        .iter()
        .position(|l| {
            matches!(
                l,
                LogEntry::Host {
                    action: HostAction::Approve(_),
                    ..
                }
            )
        })
        .unwrap_or_else(|| panic!("never approved: {}", report.render()));
    let resolved = report
        .log
        .iter()
        .position(|l| matches!(l.event(), Some(AgentEvent::Child(_, inner)) if matches!(**inner, AgentEvent::ApprovalResolved { .. })))
        .unwrap_or_else(|| panic!("never resolved: {}", report.render()));
    assert!(host < resolved, "{}", report.render());
}

/// Driven step by step, an event read while a host action took effect (a
/// stop's own terminal status) was offered to the triggers only at the
/// next `advance`: after the host's next action, or — `finish` next —
/// never. `act` offers it once it is done.
#[tokio::test(start_paused = true)]
async fn an_event_read_while_a_live_action_takes_effect_fires_before_the_next_step() {
    let agent_1 = AgentId::new("agent_1");
    let scenario = background_worker().on(Trigger::new(
        Some(agent_1.clone()),
        Moment::Ended,
        |_, _| Some(HostAction::Typing(true)),
    ));
    let report = tokio::spawn(async move {
        let mut live = scenario.start(0).await;
        live.act(HostAction::User("go".into())).await;
        live.advance(Duration::from_secs(10)).await;
        live.act(HostAction::StopChild(agent_1)).await;
        live.act(HostAction::OnScreen(false)).await;
        live.finish().await
    })
    .await
    .unwrap();
    assert_fired_before_going_off_screen(&report);
}

/// A sub-agent's own sub-agent's events arrive nested in its parent's
/// (`Child(agent_1, Child(agent_2, …))`), and triggers read one level
/// only: an auto-approval never saw the grandchild's request, which
/// waited until the run ended (both children `stopped`, not `done`).
#[test]
fn a_trigger_fires_on_a_grandchilds_approval() {
    let report = Scenario::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Middle\nYou relay.", "relay")
                .tools(["http_post"])
                .wait(true),
        ),
        Reply::answer("Done."),
    ])
    .child_script(
        "Middle\n",
        vec![
            Reply::new().use_agent(
                &UseAgentCall::run("Poster\nYou post.", "post")
                    .tools(["http_post"])
                    .wait(true),
            ),
            Reply::answer("relayed"),
        ],
    )
    .child_script(
        "Poster\n",
        vec![
            Reply::new().tool_call("http_post", r#"{"message":"hi"}"#),
            Reply::answer("posted"),
        ],
    )
    .tools(ToolRegistry::new().with(subagents_demo::Post))
    .configure(|b| b.max_depth(2))
    .on(Trigger::new(
        None,
        Moment::ApprovalRequested,
        |_, event| match event {
            AgentEvent::Child(_, inner) => match &**inner {
                AgentEvent::ApprovalRequested(r) => Some(HostAction::Approve(r.id.clone())),
                _ => None,
            },
            _ => None,
        },
    ))
    .at(Duration::ZERO, HostAction::User("go".into()))
    .run_for(Duration::from_secs(60))
    .run(0);
    assert_eq!(
        fired(&report),
        [Moment::ApprovalRequested],
        "{}",
        report.render()
    );
    let statuses: Vec<_> = report.envelopes.iter().map(|e| e.status).collect();
    assert_eq!(
        statuses,
        [SubAgentStatus::Done, SubAgentStatus::Done],
        "{}",
        report.render()
    );
}

/// A `Trigger::per_run` given to `LiveSimulation::on` was pushed as it
/// was: two live runs given clones of it shared one action (one guard),
/// and the second fired nothing. `on` arms it afresh.
#[tokio::test(start_paused = true)]
async fn a_per_run_trigger_given_to_live_runs_fires_in_each() {
    let trigger = Trigger::per_run(None, Moment::ToolStarted, || {
        let fired = AtomicBool::new(false);
        move |_: &AgentId, _: &AgentEvent| {
            (!fired.swap(true, Ordering::SeqCst)).then_some(HostAction::Typing(true))
        }
    });
    for run in 0..2 {
        let trigger = trigger.clone();
        let report = tokio::spawn(async move {
            let mut live = background_worker().start(0).await;
            live.on(trigger);
            live.act(HostAction::User("go".into())).await;
            live.advance(Duration::from_secs(120)).await;
            live.finish().await
        })
        .await
        .unwrap();
        assert_eq!(
            fired(&report),
            [Moment::ToolStarted],
            "run {run}: {}",
            report.render()
        );
    }
}

/// `Moment::Background` with `inline_only` — "the moment an inline child
/// is handed off" — never fired: the hand-off was marked before the
/// trigger was asked whether the child was inline. It fires at the
/// hand-off of a child its parent waited on; not at a child started in
/// the background.
#[test]
fn an_inline_only_trigger_fires_at_the_hand_off() {
    let handed_off = Scenario::new(vec![
        Reply::new().use_agent(&work_call("Worker", 60, true)),
        Reply::answer("Handed off."),
        Reply::answer("Noted."),
    ])
    .child_script("Worker\n", worker(60))
    .tools(ToolRegistry::new().with(Sleep))
    .configure(|b| b.inline_wait(Duration::from_secs(5)))
    .at(Duration::ZERO, HostAction::User("go".into()))
    .on(Trigger::new(None, Moment::Background, |_, _| {
        Some(HostAction::Typing(true))
    })
    .inline_only())
    .run_for(Duration::from_secs(120))
    .run(0);
    assert_eq!(
        fired(&handed_off),
        [Moment::Background],
        "{}",
        handed_off.render()
    );
    assert!(handed_off.unfired.is_empty(), "{:?}", handed_off.unfired);
    let from_the_start = background_worker()
        .on(Trigger::new(None, Moment::Background, |_, _| {
            Some(HostAction::Typing(true))
        })
        .inline_only())
        .run_for(Duration::from_secs(120))
        .run(0);
    assert_eq!(fired(&from_the_start), [], "{}", from_the_start.render());
}

/// The same for an action that lets things through (review: the harness
/// as a host's test tool, thirty-fourth session): an approval's answer —
/// like a user turn, typing stopped, a showing — was logged before it was
/// sent and nothing was read after it, so the child's end it let through
/// stayed in the channel: its trigger fired only after the host's next
/// action had taken effect.
#[tokio::test(start_paused = true)]
async fn an_event_an_approval_answer_lets_through_fires_before_the_next_step() {
    let agent_1 = AgentId::new("agent_1");
    let scenario = poster().on(Trigger::new(
        Some(agent_1.clone()),
        Moment::Ended,
        |_, _| Some(HostAction::Typing(true)),
    ));
    let report = tokio::spawn(async move {
        let mut live = scenario.start(0).await;
        live.act(HostAction::User("go".into())).await;
        live.advance(Duration::from_secs(1)).await;
        let asked = live.log().iter().find_map(|l| match l.event() {
            Some(AgentEvent::Child(_, inner)) => match &**inner {
                AgentEvent::ApprovalRequested(r) => Some(r.id.clone()),
                _ => None,
            },
            _ => None,
        });
        live.act(HostAction::Approve(asked.expect("the child asked")))
            .await;
        let ended = live.thread().hub().status(&agent_1).map(|e| e.status);
        assert!(ended.is_some_and(|s| s.is_terminal()), "{ended:?}");
        live.act(HostAction::OnScreen(false)).await;
        live.finish().await
    })
    .await
    .unwrap();
    assert_fired_before_going_off_screen(&report);
}

/// The report's one trigger (on `Ended`) fired before the host's next
/// action, `OnScreen(false)`, was logged.
fn assert_fired_before_going_off_screen(report: &SimulationReport) {
    assert_eq!(fired(report), [Moment::Ended], "{}", report.render());
    let at = |found: &dyn Fn(&LogEntry) -> bool| report.log.iter().position(found).unwrap();
    let fired_at = at(&|l| matches!(l, LogEntry::Fired { .. }));
    let next_host = at(&|l| {
        matches!(
            l,
            LogEntry::Host {
                action: HostAction::OnScreen(false),
                ..
            }
        )
    });
    assert!(fired_at < next_host, "{}", report.render());
}
