//! Property tests of every ordering invariant, with proptest-state-machine:
//! random sequences of host actions drive one or two real threads in
//! paused tokio time — user turns that fan out children (random work, wait
//! mode, end: answer, model error, panic, hang, approval, model-call limit, and a
//! seeded number of scheduler turns before the last answer; one in five
//! first starts a child of its own, depth 2, waited on inline), typing, on/off
//! screen, switches, parent and child stops, approval answers, closing a
//! thread, time passing — and host actions fired *the moment* a child event
//! is read (stop the parent on a child's `Result`, switch on its
//! `ToolResult`, claim its result at its completion, answer its approval),
//! after a seeded number of scheduler turns. Each case picks one or two
//! threads, whether they share an envelope store (they always share one
//! gate), the parent-stop policy, and whether every child runs on another
//! node (a loopback node through the wire codec, shared by the threads:
//! docs/cluster.md).
//!
//! After every step the whole log is checked against
//! docs/event-ordering.md, the wake rules and the delivery rule; at the
//! end, at rest, nothing is lost or held, every child has one final
//! envelope (in the store too), and the case is run a second time from the
//! same steps: the two logs must be byte-identical.
//!
//! 256 cases per run by default; `SUBAGENTS_SOAK_CASES=100000 cargo test
//! --release --all-features --test properties` is the soak (see
//! docs/testing.md). `SUBAGENTS_PRINT_INTERLEAVINGS=1` prints the distinct
//! interleavings the run reached.

#![cfg(feature = "test-util")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;

mod check_tests;
mod checks;
mod hand_logs;
mod model;
mod world;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::store::copy_dir;
use model::{ChildPlan, End, PlanModel, plan_message};
use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use subagents::actors::clock::ManualClock;
use subagents::actors::{DelegationBuilder, Model, ParentStopPolicy, Placement};
use subagents::messages::{AgentEvent, AgentId, SubAgentStatus, ThreadId};
use subagents::prelude::*;
use subagents::simulation::{HostAction, LiveSimulation, LogEntry, Moment, Scenario, Trigger};
use subagents::supervisor::store::EnvelopeStore;
use subagents_demo::{Post, Sleep};
use world::World;

const MAX_LIVE: usize = 2;

/// What a trigger does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnAction {
    StopParent,
    SwitchAway,
    StopChild,
    Approve,
    Deny,
    /// The user asks the parent for the child's result (`use_agent
    /// result`): a claim at that instant.
    Claim,
    /// The user has the parent send the child a message (`use_agent
    /// send`) at that instant: read at its next model call, or refused
    /// as finished.
    Send,
    /// The user has the parent interrupt the child (`use_agent
    /// interrupt`) at that instant: it ends `interrupted`, and a later
    /// `Send` resumes it as a new run.
    Interrupt,
}

/// One step of a scenario (its Debug form is the readable scenario a
/// shrunk failure prints). `usize` fields pick a thread (modulo the
/// threads open).
#[derive(Debug, Clone)]
enum Step {
    User(usize, Vec<ChildPlan>),
    Typing(usize, bool),
    OnScreen(usize, bool),
    SwitchAway(usize),
    StopParent(usize),
    StopChild(usize, usize),
    /// Answers the k-th approval still open.
    Answer(usize, usize, bool),
    /// Arms a trigger: at that moment of a child (only one waited on
    /// inline, with `true`), after that many scheduler turns.
    On(usize, Moment, OnAction, u32, bool),
    Close(usize),
    Wait(u64),
    /// What a `kill -9` at this instant would leave on disk (the shared
    /// store's files, copied), reopened: nothing lost, nothing stuck.
    Crash,
    /// A `kill -9` and a restart on what it left (a shared store): every
    /// thread started again under its id, the steps after it run on the
    /// new process.
    Restart,
    /// The same, once thread t's user had a background child start that
    /// works that many seconds, then every open thread's user started
    /// typing until it had answered: its wake (and any other that came
    /// meanwhile) is owed at the kill.
    RestartHeld(usize, u64),
    /// The user has the parent send a message (`use_agent send`) to the
    /// k-th child an earlier session of the thread started: an interrupted
    /// one goes on as a new run.
    Resume(usize, usize),
    /// The user has the parent send a message to the k-th child this
    /// session started, in whatever state it is: a running one is
    /// steered, an ended one resumed — a stopped one refused.
    Send(usize, usize),
    /// The host stops the k-th child this session started, then the user
    /// has the parent send it a message: refused, whatever state the
    /// stop found it in (it goes on for no one).
    StopThenSend(usize, usize),
    /// Two host actions sent in one tick (`LiveSimulation::act_together`)
    /// about the k-th child (or approval): a stop of it and the parent's
    /// stop; a stop of it and a switch; an approval's answer and a stop
    /// of the child that asked; a switch and the parent's stop; a stop of
    /// it and a message to it.
    Together(usize, usize, u8),
}

/// How a case is set up.
#[derive(Debug, Clone, Copy)]
struct Setup {
    threads: usize,
    shared_store: bool,
    policy: ParentStopPolicy,
    /// Every child runs on another node (an in-process loopback through
    /// the wire codec, shared by the threads, on their gate).
    remote: bool,
    /// A remote run's last report (`Ended`) comes a second after its
    /// `Result`: the window between them, where a stop or a switch lands
    /// after the stream said how the child ended, opens (handed over in
    /// one tick, it never did).
    slow_ended: bool,
    /// Of those, thread 0's `agent_1` is stopped at its `Result` (the
    /// window reached every time); drawn, so half the slow cases keep the
    /// generated triggers' own reach of it (the forced stop waits out the
    /// second, and a generated action on the same event came after it).
    stop_at_result: bool,
    /// The shared gate's capacity: at 2, two children's last model calls
    /// end in one tick (at 1 they never could: the wakes' finish order at
    /// the same instant was out of reach).
    gate: usize,
}

/// The reference: what the host has done, so steps stay meaningful.
#[derive(Debug, Clone)]
struct Reference {
    setup: Setup,
    typing: Vec<bool>,
    off_screen: Vec<bool>,
}

fn child_plan() -> impl Strategy<Value = ChildPlan> {
    (
        // Often alike: siblings ending at one instant.
        prop_oneof![3 => 0u64..40, 1 => Just(10)],
        any::<bool>(),
        prop_oneof![
            6 => Just(End::Answer),
            1 => Just(End::ModelError),
            1 => Just(End::Panic),
            1 => Just(End::Hang),
            2 => Just(End::Approval),
            1 => Just(End::Loop),
        ],
        0u8..6,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(work_secs, wait, end, yields, nested)| ChildPlan {
            work_secs,
            wait,
            end,
            yields,
            nested,
        })
}

fn on_step() -> impl Strategy<Value = (Moment, OnAction, bool)> {
    let any_moment = prop::sample::select(Moment::ALL.to_vec());
    prop_oneof![
        3 => (any_moment.clone(), prop::sample::select(vec![
            OnAction::StopParent, OnAction::SwitchAway, OnAction::StopChild,
        ]), any::<bool>()),
        2 => (Just(Moment::ApprovalRequested), prop::sample::select(vec![OnAction::Approve, OnAction::Deny]), Just(false)),
        2 => (prop::sample::select(vec![Moment::Result, Moment::Ended, Moment::ToolResult]), Just(OnAction::Claim), Just(false)),
        2 => (any_moment.clone(), Just(OnAction::Send), Just(false)),
        1 => (any_moment.clone(), Just(OnAction::Interrupt), Just(false)),
        // The sharpest edge: the parent stopped (or the thread switched)
        // at the instant a child it waits on inline finishes.
        4 => (Just(Moment::Result), prop::sample::select(vec![OnAction::StopParent, OnAction::SwitchAway]), Just(true)),
    ]
}

/// Scheduler turns before a trigger acts: mostly none or a few (the
/// window where a completion is still travelling), sometimes more.
fn yields() -> impl Strategy<Value = u32> {
    prop_oneof![4 => Just(0u32), 3 => 1u32..4, 1 => 4u32..16]
}

impl ReferenceStateMachine for Reference {
    type State = Self;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Self> {
        (
            1usize..=2,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            1usize..=2,
        )
            .prop_map(
                |(threads, shared_store, cascade, remote, slow, forced, gate)| Reference {
                    setup: Setup {
                        gate,
                        threads,
                        shared_store,
                        remote,
                        slow_ended: remote && slow,
                        stop_at_result: remote && slow && forced,
                        policy: if cascade {
                            ParentStopPolicy::Cascade
                        } else {
                            ParentStopPolicy::Detach
                        },
                    },
                    typing: vec![false; threads],
                    off_screen: vec![false; threads],
                },
            )
            .boxed()
    }

    fn transitions(state: &Self) -> BoxedStrategy<Step> {
        let n = state.setup.threads;
        let typing = state.typing.clone();
        let off = state.off_screen.clone();
        prop_oneof![
            4 => (0..n, prop::collection::vec(child_plan(), 0..4)).prop_map(|(t, p)| Step::User(t, p)),
            1 => (0..n).prop_map(move |t| Step::Typing(t, !typing[t])),
            1 => (0..n).prop_map(move |t| Step::OnScreen(t, off[t])),
            1 => (0..n).prop_map(Step::SwitchAway),
            1 => (0..n).prop_map(Step::StopParent),
            1 => (0..n, 0usize..8).prop_map(|(t, k)| Step::StopChild(t, k)),
            1 => (0..n, 0usize..4, any::<bool>()).prop_map(|(t, k, a)| Step::Answer(t, k, a)),
            4 => (0..n, on_step(), yields()).prop_map(|(t, (m, a, i), y)| Step::On(t, m, a, y, i)),
            1 => (0..n).prop_map(Step::Close),
            4 => (1u64..90).prop_map(Step::Wait),
            1 => Just(Step::Crash),
            1 => Just(Step::Restart),
            1 => (0..n, 0u64..20).prop_map(|(t, secs)| Step::RestartHeld(t, secs)),
            1 => (0..n, 0usize..8).prop_map(|(t, k)| Step::Resume(t, k)),
            1 => (0..n, 0usize..8).prop_map(|(t, k)| Step::Send(t, k)),
            1 => (0..n, 0usize..8).prop_map(|(t, k)| Step::StopThenSend(t, k)),
            2 => (0..n, 0usize..8, 0u8..5).prop_map(|(t, k, pair)| Step::Together(t, k, pair)),
        ]
        .boxed()
    }

    fn preconditions(state: &Self, step: &Step) -> bool {
        // A shrunk case may have fewer threads than its steps name.
        step_thread(step).is_none_or(|t| t < state.setup.threads)
    }

    fn apply(mut state: Self, step: &Step) -> Self {
        match step {
            Step::Typing(t, on) => state.typing[*t] = *on,
            Step::OnScreen(t, on) => state.off_screen[*t] = !*on,
            // A new process: its threads start on screen, nobody typing.
            Step::Restart | Step::RestartHeld(..) if state.setup.shared_store => {
                state.typing.fill(false);
                state.off_screen.fill(false);
            }
            _ => {}
        }
        state
    }
}

/// The thread a step acts on (`None` for time passing).
fn step_thread(step: &Step) -> Option<usize> {
    match step {
        Step::User(t, _)
        | Step::Typing(t, _)
        | Step::OnScreen(t, _)
        | Step::SwitchAway(t)
        | Step::StopParent(t)
        | Step::StopChild(t, _)
        | Step::Answer(t, _, _)
        | Step::On(t, ..)
        | Step::Close(t)
        | Step::Resume(t, _)
        | Step::Send(t, _)
        | Step::StopThenSend(t, _)
        | Step::Together(t, ..) => Some(*t),
        Step::Wait(_) | Step::Crash | Step::Restart | Step::RestartHeld(..) => None,
    }
}

/// The distinct interleavings reached so far (see `checks::signature`).
static REACHED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
static CASES_DONE: AtomicUsize = AtomicUsize::new(0);
/// Children a crash snapshot found running or queued (so `Step::Crash`
/// reached children mid-run).
static CRASHES: AtomicUsize = AtomicUsize::new(0);
/// Cases whose children ran on another node, and the runs started there.
static REMOTE_CASES: AtomicUsize = AtomicUsize::new(0);
static REMOTE_RUNS: AtomicUsize = AtomicUsize::new(0);
/// Of those, the cases whose runs' `Ended` came a second after their
/// `Result` (`Setup::slow_ended`), and the host stops or switches of
/// those cases that landed inside that second (the window it opens:
/// counted from the logs, not from the setting).
static SLOW_ENDED_CASES: AtomicUsize = AtomicUsize::new(0);
static SLOW_WINDOW_HIT: AtomicUsize = AtomicUsize::new(0);
/// Restarts, and the children they found interrupted and owed a wake
/// (summed over threads): the next session's checks held them to it.
static RESTARTS: AtomicUsize = AtomicUsize::new(0);
static RESTART_INTERRUPTED: AtomicUsize = AtomicUsize::new(0);
static RESTART_OWED: AtomicUsize = AtomicUsize::new(0);
/// Messages the user sent to a chain the host had stopped (each refused:
/// `checks::check_stopped_chains_stay_stopped`).
static SENT_TO_STOPPED: AtomicUsize = AtomicUsize::new(0);

/// The system under test, and the steps it took (to replay them).
struct Sut {
    world: World,
    steps: Vec<Step>,
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Self;
    type Reference = Reference;

    fn init_test(reference: &Reference) -> Self {
        Sut {
            world: World::new(reference.setup),
            steps: Vec::new(),
        }
    }

    fn apply(mut sut: Self, _reference: &Reference, step: Step) -> Self {
        failing(|| sut.world.apply(&step));
        sut.steps.push(step);
        sut
    }

    fn check_invariants(sut: &Self, _reference: &Reference) {
        failing(|| sut.world.check(false, false));
    }

    fn teardown(sut: Self, reference: Reference) {
        failing(|| check_at_rest_and_replay(sut, &reference));
        let done = CASES_DONE.fetch_add(1, Ordering::SeqCst) + 1;
        if done != cases() as usize {
            return;
        }
        // Read, not held: a coverage assert that failed holding the lock
        // poisoned it, and every later teardown failed on that instead.
        let reached = REACHED.lock().unwrap().clone();
        if std::env::var_os("SUBAGENTS_PRINT_INTERLEAVINGS").is_some() {
            print_coverage(done, &reached);
        }
        // Not once a case failed: proptest then shrinks it, running
        // candidates whose teardowns pass, and their count reached the
        // one these assert at — a coverage message about a run cut short
        // replaced the real failure as the case reported.
        if !FAILED.load(Ordering::SeqCst) {
            assert_coverage(reached.len());
        }
    }
}

/// Set once any step, check or teardown of any case panicked.
static FAILED: AtomicBool = AtomicBool::new(false);

/// Runs `f`; a panic sets [`FAILED`], then goes on unwinding.
fn failing<T>(f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        FAILED.store(true, Ordering::SeqCst);
        std::panic::resume_unwind(panic)
    })
}

/// A case's end: settled, checked at rest, closed and checked again, then
/// replayed from its steps (the same logs, byte for byte); what it
/// reached is counted.
fn check_at_rest_and_replay(mut sut: Sut, reference: &Reference) {
    sut.world.settle(reference);
    sut.world.check(true, true);
    SENT_TO_STOPPED.fetch_add(sut.world.sent_to_stopped(), Ordering::SeqCst);
    let first = sut.world.logs();
    if let Some(node) = &sut.world.node {
        REMOTE_CASES.fetch_add(1, Ordering::SeqCst);
        REMOTE_RUNS.fetch_add(node.started.load(Ordering::SeqCst), Ordering::SeqCst);
        if reference.setup.slow_ended {
            SLOW_ENDED_CASES.fetch_add(1, Ordering::SeqCst);
            SLOW_WINDOW_HIT.fetch_add(sut.world.actions_in_end_windows(), Ordering::SeqCst);
        }
    }
    sut.world.close_all();
    sut.world.check(true, false);
    let closed = sut.world.logs();
    // Determinism: the same steps from the same start give the same
    // logs, byte for byte.
    // The checks between steps drive the runtime too (their snapshot
    // calls let tasks run), so the replay runs them as well.
    let mut again = World::new(reference.setup);
    for step in &sut.steps {
        again.apply(step);
        again.check(false, false);
    }
    again.settle(reference);
    again.check(true, true);
    let replayed = again.logs();
    for (n, (a, b)) in first.iter().zip(&replayed).enumerate() {
        if a != b {
            let at = a.lines().zip(b.lines()).position(|(x, y)| x != y);
            eprintln!(
                "---- thread {n}, first run ----\n{a}\n---- replay ----\n{b}\n---- first difference at line {at:?}"
            );
        }
    }
    assert_eq!(first, replayed, "the same steps replayed differently");
    // And what the close emits (its stops' ends, the last wakes
    // dropped): replayed too — it was compared only up to the close.
    again.close_all();
    assert_eq!(closed, again.logs(), "the close replayed differently");
    REACHED.lock().unwrap().extend(sut.world.signatures());
    GRANDCHILDREN_QUEUED.fetch_add(sut.world.grandchildren_queued(), Ordering::SeqCst);
}

/// Threads whose log held a grandchild queued behind the nested cap.
static GRANDCHILDREN_QUEUED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// What the whole run reached, asserted once every case passed.
fn assert_coverage(reached: usize) {
    assert!(
        model::GRANDCHILDREN_DELIVERED.load(Ordering::SeqCst) > 0,
        "no case reached a grandchild's answer: the depth-2 path is not exercised"
    );
    assert!(
        GRANDCHILDREN_QUEUED.load(Ordering::SeqCst) > 0,
        "no case queued a grandchild: the cap, level by level, is not reached"
    );
    // What the run reached, asserted (printed only, a harness
    // whose triggers stopped firing — twice fixed before — or
    // whose crash snapshots never caught a child mid-run passed
    // every case): at the default count and above.
    if cases() >= 256 {
        assert!(
            reached >= 30,
            "only {reached} distinct interleavings: the triggers did not fire"
        );
        assert!(
            CRASHES.load(Ordering::SeqCst) > 0,
            "no crash snapshot found a child mid-run"
        );
        assert!(
            REMOTE_RUNS.load(Ordering::SeqCst) > 0,
            "no case ran a child on another node"
        );
        assert!(
            RESTART_INTERRUPTED.load(Ordering::SeqCst) > 0,
            "no restart found a child interrupted"
        );
        assert!(
            RESTART_OWED.load(Ordering::SeqCst) > 0,
            "no restart found a wake owed (`RestartHeld` holds them)"
        );
        assert!(
            SENT_TO_STOPPED.load(Ordering::SeqCst) > 0,
            "no message reached a stopped chain: the stopped-chain check held nothing"
        );
        assert!(
            checks::SENT_READ.load(Ordering::SeqCst) > 0,
            "no message a child took was checked as read"
        );
        assert!(
            world::TOGETHER_SENT.load(Ordering::SeqCst) > 0,
            "no step sent two host actions in one tick"
        );
        assert!(
            SLOW_WINDOW_HIT.load(Ordering::SeqCst) > 0,
            "no stop or switch landed between a remote run's Result and its end"
        );
    }
}

/// What the whole run reached, printed (`SUBAGENTS_PRINT_INTERLEAVINGS`).
fn print_coverage(done: usize, reached: &BTreeSet<String>) {
    eprintln!(
        "{} cases, {} distinct interleavings; crash snapshots found {} children mid-run; {} cases ran {} children on another node ({} with each run's end a second after its result); {} restarts found {} children interrupted and {} owed a wake:",
        done,
        reached.len(),
        CRASHES.load(Ordering::SeqCst),
        REMOTE_CASES.load(Ordering::SeqCst),
        REMOTE_RUNS.load(Ordering::SeqCst),
        SLOW_ENDED_CASES.load(Ordering::SeqCst),
        RESTARTS.load(Ordering::SeqCst),
        RESTART_INTERRUPTED.load(Ordering::SeqCst),
        RESTART_OWED.load(Ordering::SeqCst)
    );
    eprintln!(
        "{} messages were sent to a chain the host had stopped; {} taken were found read; {} steps sent host actions together; {} stops or switches landed between a remote run's Result and its end",
        SENT_TO_STOPPED.load(Ordering::SeqCst),
        checks::SENT_READ.load(Ordering::SeqCst),
        world::TOGETHER_SENT.load(Ordering::SeqCst),
        SLOW_WINDOW_HIT.load(Ordering::SeqCst)
    );
    for line in reached.iter() {
        eprintln!("  {line}");
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
