//! Property tests of every ordering invariant, with proptest-state-machine:
//! random sequences of host actions (user turns that fan out children with
//! random work, outcomes and wait modes; typing; on/off screen; thread
//! switches; parent and child stops; time passing) drive a real thread in
//! paused tokio time. After every step the whole log is checked against
//! docs/event-ordering.md and the wake rules; at the end, at rest, nothing
//! is lost and nothing is held.
//!
//! 256 cases per run by default; `SUBAGENTS_SOAK_CASES=100000 cargo test
//! --release --all-features --test properties` is the soak (see
//! docs/simulation.md).

#![cfg(feature = "test-util")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use serde::{Deserialize, Serialize};
use serde_json::json;
use subagents::actors::{DelegationBuilder, Model, ModelStream};
use subagents::messages::{AgentEvent, AgentId, ChatMessage, ModelRequest, Role, SubAgentStatus};
use subagents::prelude::*;
use subagents::simulation::{HostAction, LiveSimulation, LogEntry, Logged, Scenario};

const MAX_LIVE: usize = 2;

/// How a child ends after its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum End {
    Answer,
    ModelError,
    Panic,
    Hang,
}

/// One child a user turn asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ChildPlan {
    work_secs: u64,
    wait: bool,
    end: End,
}

/// One step of a scenario (its Debug form is the readable scenario a
/// shrunk failure prints).
#[derive(Debug, Clone)]
enum Step {
    User(Vec<ChildPlan>),
    Typing(bool),
    OnScreen(bool),
    SwitchAway,
    StopParent,
    StopChild(usize),
    Wait(u64),
}

/// The reference: what the host has done, so steps stay meaningful.
#[derive(Debug, Clone, Default)]
struct Reference {
    typing: bool,
    off_screen: bool,
    user_turns: usize,
    children_planned: usize,
}

fn child_plan() -> impl Strategy<Value = ChildPlan> {
    (
        0u64..40,
        any::<bool>(),
        prop_oneof![6 => Just(End::Answer), 1 => Just(End::ModelError), 1 => Just(End::Panic), 1 => Just(End::Hang)],
    )
        .prop_map(|(work_secs, wait, end)| ChildPlan { work_secs, wait, end })
}

impl ReferenceStateMachine for Reference {
    type State = Self;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Self> {
        Just(Reference::default()).boxed()
    }

    fn transitions(state: &Self) -> BoxedStrategy<Step> {
        let typing = !state.typing;
        let on_screen = state.off_screen;
        prop_oneof![
            4 => prop::collection::vec(child_plan(), 0..4).prop_map(Step::User),
            1 => Just(Step::Typing(typing)),
            1 => Just(Step::OnScreen(on_screen)),
            1 => Just(Step::SwitchAway),
            1 => Just(Step::StopParent),
            1 => (0usize..8).prop_map(Step::StopChild),
            4 => (1u64..90).prop_map(Step::Wait),
        ]
        .boxed()
    }

    fn apply(mut state: Self, step: &Step) -> Self {
        match step {
            Step::User(plans) => {
                state.user_turns += 1;
                state.children_planned += plans.len();
            }
            Step::Typing(on) => state.typing = *on,
            Step::OnScreen(on) => state.off_screen = !*on,
            _ => {}
        }
        state
    }
}

/// The parent fans out the children a `PLAN` message lists, then answers;
/// a child works (in a tool, holding no permit), then ends as planned.
struct PlanModel {
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

fn play(turn: Turn) -> ModelStream {
    ScriptedModel::new(vec![turn]).stream(ModelRequest {
        messages: vec![],
        tools: vec![],
    })
}

fn last(messages: &[ChatMessage]) -> Option<&ChatMessage> {
    messages.last()
}

impl Model for PlanModel {
    fn name(&self) -> &str {
        "plan"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let guard = Guard(self.in_flight.clone());
        let stream = if request
            .system_prompt()
            .is_some_and(|p| p.starts_with("Child"))
        {
            child_turn(&request)
        } else {
            parent_turn(&request)
        };
        Box::pin(futures_util::StreamExt::map(stream, move |chunk| {
            let _ = &guard;
            chunk
        }))
    }
}

struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn parent_turn(request: &ModelRequest) -> ModelStream {
    let Some(message) = last(&request.messages) else {
        return play(Turn::answer("?"));
    };
    if message.role == Role::User {
        if let Some(plan) = message.content.strip_prefix("PLAN ") {
            let (turn_no, plans): (usize, Vec<ChildPlan>) = serde_json::from_str(plan).unwrap();
            let mut turn = Turn::new();
            for (k, child) in plans.iter().enumerate() {
                turn = turn.tool_call(
                    "use_agent",
                    json!({
                        "action": "run",
                        "system_prompt": format!("Child {turn_no}.{k}\nYou work."),
                        "input": serde_json::to_string(child).unwrap(),
                        "tools": ["sleep"],
                        "wait": child.wait,
                    })
                    .to_string(),
                );
            }
            if plans.is_empty() {
                turn = turn.text("Nothing to delegate.");
            }
            return play(turn);
        }
        return play(Turn::answer("Noted."));
    }
    play(Turn::answer("Delegated."))
}

fn child_turn(request: &ModelRequest) -> ModelStream {
    let input = request
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let plan: ChildPlan = serde_json::from_str(&input).unwrap();
    if request.assistant_turns() == 0 {
        return play(
            Turn::new()
                .text("Working. ")
                .tool_call("sleep", json!({"secs": plan.work_secs}).to_string()),
        );
    }
    play(match plan.end {
        End::Answer => Turn::answer("Finished."),
        End::ModelError => Turn::new().error("the model went away"),
        End::Panic => Turn::new().panic("adapter bug"),
        End::Hang => Turn::new().text("Thinking…").hang(),
    })
}

/// The system under test: a live thread in its own paused runtime.
struct Sut {
    runtime: tokio::runtime::Runtime,
    live: Option<LiveSimulation>,
    peak: Arc<AtomicUsize>,
    user_turns: usize,
}

impl Sut {
    fn live(&mut self) -> &mut LiveSimulation {
        self.live.as_mut().unwrap()
    }

    fn check(&self, at_rest: bool) {
        let live = self.live.as_ref().unwrap();
        let log = live.log();
        let checked = std::panic::catch_unwind(AssertUnwindSafe(|| {
            check_everything(log, at_rest);
            assert!(
                self.peak.load(Ordering::SeqCst) <= 1,
                "guarantee 6: two model calls in flight"
            );
            let parts = live.parts().clone();
            let (hub, gate) = self.runtime.block_on(async {
                (
                    parts.hub.snapshot().await.unwrap(),
                    parts.gate.snapshot().await.unwrap(),
                )
            });
            assert!(hub.live <= MAX_LIVE, "guarantee 5: {} live", hub.live);
            assert!(
                gate.in_flight <= 1,
                "a capacity-1 gate holds {} permits",
                gate.in_flight
            );
            if at_rest {
                assert_eq!(
                    (hub.live, hub.queued),
                    (0, 0),
                    "at rest, slots are still reserved"
                );
                assert_eq!(gate.in_flight, 0, "at rest, a gate permit is held");
                assert_eq!(gate.queued, 0, "at rest, someone waits at the gate");
                let started = log
                    .iter()
                    .filter(|l| matches!(l.entry, LogEntry::Event(AgentEvent::ChildStarted(_))))
                    .count();
                assert_eq!(
                    parts.hub.envelopes().len(),
                    started,
                    "one envelope per child requested"
                );
                assert_eq!(hub.finished, started, "every child finished");
            }
        }));
        if let Err(panic) = checked {
            let rendered = subagents::simulation::render(log);
            eprintln!("---- log ----\n{rendered}\n-------------");
            std::panic::resume_unwind(panic);
        }
    }
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Self;
    type Reference = Reference;

    fn init_test(_reference: &Reference) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (i, p) = (in_flight.clone(), peak.clone());
        let scenario = Scenario::new(vec![])
            .with_model(move || {
                Arc::new(PlanModel {
                    in_flight: i.clone(),
                    peak: p.clone(),
                }) as Arc<dyn Model>
            })
            .tools(ToolRegistry::new().with(Sleep))
            .configure(|b: DelegationBuilder| {
                b.max_live(MAX_LIVE)
                    .inline_wait(Duration::from_secs(20))
                    .child_limits(Limits {
                        wall_clock: Duration::from_secs(60),
                        ..Limits::default()
                    })
            });
        let live = runtime.block_on(scenario.start(0));
        Sut {
            runtime,
            live: Some(live),
            peak,
            user_turns: 0,
        }
    }

    fn apply(mut sut: Self, _reference: &Reference, step: Step) -> Self {
        let action = match step {
            Step::User(plans) => {
                sut.user_turns += 1;
                Some(HostAction::User(format!(
                    "PLAN {}",
                    serde_json::to_string(&(sut.user_turns, plans)).unwrap()
                )))
            }
            Step::Typing(on) => Some(HostAction::Typing(on)),
            Step::OnScreen(on) => Some(HostAction::OnScreen(on)),
            Step::SwitchAway => Some(HostAction::SwitchAway),
            Step::StopParent => Some(HostAction::StopParent),
            Step::StopChild(k) => {
                let ids: Vec<AgentId> = started_ids(sut.live().log());
                (!ids.is_empty()).then(|| HostAction::StopChild(ids[k % ids.len()].clone()))
            }
            Step::Wait(secs) => {
                let runtime = &sut.runtime;
                let live = sut.live.as_mut().unwrap();
                runtime.block_on(live.advance(Duration::from_secs(secs)));
                None
            }
        };
        if let Some(action) = action {
            let runtime = &sut.runtime;
            let live = sut.live.as_mut().unwrap();
            runtime.block_on(async {
                live.act(action).await;
                live.advance(Duration::from_millis(1)).await;
            });
        }
        sut
    }

    fn check_invariants(sut: &Self, _reference: &Reference) {
        sut.check(false);
    }

    fn teardown(mut sut: Self, _reference: Reference) {
        let runtime = &sut.runtime;
        let live = sut.live.as_mut().unwrap();
        // Long enough for every child to end (work ≤ 40 s, wall clock 60 s,
        // queued behind at most all the others) and every wake to land.
        runtime.block_on(live.advance(Duration::from_secs(3_600)));
        sut.check(true);
        let live = sut.live.take().unwrap();
        sut.runtime.block_on(live.finish());
    }
}

fn started_ids(log: &[Logged]) -> Vec<AgentId> {
    log.iter()
        .filter_map(|l| match &l.entry {
            LogEntry::Event(AgentEvent::ChildStarted(info)) => Some(info.id.clone()),
            _ => None,
        })
        .collect()
}

/// Every guarantee of docs/event-ordering.md and every wake rule, over the
/// whole log.
fn check_everything(log: &[Logged], at_rest: bool) {
    let events: Vec<AgentEvent> = log
        .iter()
        .filter_map(|l| match &l.entry {
            LogEntry::Event(e) => Some(e.clone()),
            LogEntry::Host(_) => None,
        })
        .collect();
    common::check_log(&events, at_rest);
    common::check_inline_order_settled(&events);

    let mut typing = false;
    let mut on_screen = true;
    let mut generating = 0usize;
    let mut wake_in_flight = false;
    let mut started: Vec<AgentId> = Vec::new();
    let mut before_switch: HashSet<AgentId> = HashSet::new();
    let mut handed_off: HashSet<AgentId> = HashSet::new();
    let mut terminal: HashMap<AgentId, (usize, SubAgentStatus)> = HashMap::new();
    let mut finished_off_screen: HashSet<AgentId> = HashSet::new();
    let mut last_woken: Option<usize> = None;
    let mut woken: HashSet<AgentId> = HashSet::new();
    for (i, logged) in log.iter().enumerate() {
        match &logged.entry {
            LogEntry::Host(HostAction::Typing(on)) => typing = *on,
            LogEntry::Host(HostAction::OnScreen(on)) => on_screen = *on,
            LogEntry::Host(_) => {}
            LogEntry::Event(event) => match event {
                AgentEvent::UserMessage(_) => generating += 1,
                AgentEvent::SwitchedAway => before_switch.extend(started.iter().cloned()),
                AgentEvent::Result(_) => {
                    assert!(generating > 0, "a Result with no turn in flight");
                    generating -= 1;
                    wake_in_flight = false;
                }
                AgentEvent::ChildStarted(info) => {
                    started.push(info.id.clone());
                    if info.background {
                        handed_off.insert(info.id.clone());
                    }
                }
                AgentEvent::ChildStatus(id, SubAgentStatus::Background) => {
                    handed_off.insert(id.clone());
                }
                AgentEvent::ChildStatus(id, status) if status.is_terminal() => {
                    terminal.insert(id.clone(), (i, *status));
                    if !on_screen {
                        finished_off_screen.insert(id.clone());
                    }
                }
                AgentEvent::Wake(wake) => {
                    let child = &wake.child;
                    assert!(!wake_in_flight, "two wakes in flight ({child})");
                    assert_eq!(generating, 0, "a wake ({child}) while the parent generates");
                    assert!(!typing, "a wake ({child}) while the user types");
                    assert!(on_screen, "a wake ({child}) while off screen");
                    assert!(
                        !before_switch.contains(child),
                        "a wake ({child}) after a thread switch"
                    );
                    assert!(
                        !finished_off_screen.contains(child),
                        "a wake ({child}) that finished off screen"
                    );
                    assert!(
                        handed_off.contains(child),
                        "a wake ({child}) for a result delivered inline (claimed)"
                    );
                    assert!(woken.insert(child.clone()), "two wakes for {child}");
                    let (at, status) = terminal
                        .get(child)
                        .copied()
                        .unwrap_or_else(|| panic!("a wake ({child}) before the child ended"));
                    assert!(
                        matches!(status, SubAgentStatus::Done | SubAgentStatus::Failed),
                        "a wake ({child}) for a {status} child"
                    );
                    assert!(
                        last_woken.is_none_or(|last| at > last),
                        "wakes out of FIFO order ({child})"
                    );
                    last_woken = Some(at);
                    wake_in_flight = true;
                    generating += 1;
                }
                _ => {}
            },
        }
    }
}

fn cases() -> u32 {
    std::env::var("SUBAGENTS_SOAK_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: cases(),
        failure_persistence: None,
        .. Config::default()
    })]

    #[test]
    fn every_ordering_invariant_holds_under_random_scenarios(sequential 1..24 => Sut);
}
