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

mod checks;
mod model;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::store::copy_dir;
use model::{ChildPlan, End, PlanModel, plan_message};
use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest, prop_state_machine};
use subagents::actors::clock::ManualClock;
use subagents::actors::{DelegationBuilder, Model, ParentStopPolicy, Placement};
use subagents::messages::{AgentEvent, AgentId, SubAgentStatus};
use subagents::prelude::*;
use subagents::simulation::{HostAction, LiveSimulation, LogEntry, Moment, Scenario, Trigger};
use subagents::supervisor::store::EnvelopeStore;
use subagents_demo::{Post, Sleep};

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
        0u64..40,
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
        (1usize..=2, any::<bool>(), any::<bool>(), any::<bool>())
            .prop_map(|(threads, shared_store, cascade, remote)| Reference {
                setup: Setup {
                    threads,
                    shared_store,
                    remote,
                    policy: if cascade {
                        ParentStopPolicy::Cascade
                    } else {
                        ParentStopPolicy::Detach
                    },
                },
                typing: vec![false; threads],
                off_screen: vec![false; threads],
            })
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
            1 => Just(Step::Close(n - 1)),
            4 => (1u64..90).prop_map(Step::Wait),
            1 => Just(Step::Crash),
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
        | Step::Close(t) => Some(*t),
        Step::Wait(_) | Step::Crash => None,
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

/// One or two live threads in one paused runtime, sharing a gate (and
/// maybe a store).
struct World {
    runtime: tokio::runtime::Runtime,
    setup: Setup,
    threads: Vec<LiveSimulation>,
    closed: Vec<bool>,
    store: Option<(tempfile::TempDir, Arc<EnvelopeStore>)>,
    gate: GateHandle,
    peak: Arc<AtomicUsize>,
    user_turns: usize,
    /// The other node, when the children run there.
    node: Option<Arc<common::loopback::Loopback>>,
}

fn open_store(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    let clock = Arc::new(ManualClock::new(subagents::simulation::Scenario::EPOCH_MS));
    Arc::new(EnvelopeStore::open(dir, clock).unwrap().0)
}

impl World {
    fn new(setup: Setup) -> World {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let gate = runtime.block_on(GateHandle::spawn(1)).unwrap();
        let store = setup.shared_store.then(|| {
            let dir = tempfile::tempdir().unwrap();
            let store = open_store(dir.path());
            (dir, store)
        });
        let node = setup.remote.then(|| {
            let model = Arc::new(PlanModel {
                in_flight: in_flight.clone(),
                peak: peak.clone(),
            });
            common::loopback::Loopback::with_gate("b", model, gate.clone())
        });
        let mut threads = Vec::new();
        for _ in 0..setup.threads {
            let (i, p, g) = (in_flight.clone(), peak.clone(), gate.clone());
            let placement = match &node {
                Some(node) => Placement::On(node.clone()),
                None => Placement::Local,
            };
            let policy = setup.policy;
            let mut scenario = Scenario::new(vec![])
                .with_model(move || {
                    Arc::new(PlanModel {
                        in_flight: i.clone(),
                        peak: p.clone(),
                    }) as Arc<dyn Model>
                })
                .tools(ToolRegistry::new().with(Sleep).with(Post))
                .configure(move |b: DelegationBuilder| {
                    b.max_live(MAX_LIVE)
                        .placement(placement.clone())
                        .max_depth(2)
                        .gate(g.clone())
                        .parent_stop(policy)
                        .inline_wait(Duration::from_secs(20))
                        .child_limits(Limits {
                            wall_clock: Duration::from_secs(60),
                            ..Limits::default()
                        })
                });
            if let Some((_, store)) = &store {
                scenario = scenario.store(store.clone());
            }
            threads.push(runtime.block_on(scenario.start(0)));
        }
        World {
            runtime,
            setup,
            closed: vec![false; threads.len()],
            threads,
            store,
            gate,
            peak,
            user_turns: 0,
            node,
        }
    }

    /// Runs `f` on the threads from a task of its own (so triggers react
    /// at the instant), then lets 1 ms pass on every thread.
    fn drive<F>(&mut self, f: impl FnOnce(Vec<LiveSimulation>) -> F)
    where
        F: std::future::Future<Output = Vec<LiveSimulation>> + Send + 'static,
    {
        let threads = std::mem::take(&mut self.threads);
        let future = f(threads);
        self.threads = self
            .runtime
            .block_on(async move { tokio::spawn(future).await.unwrap() });
    }

    fn advance(&mut self, by: Duration) {
        self.drive(move |mut threads| async move {
            futures_util::future::join_all(threads.iter_mut().map(|t| t.advance(by))).await;
            threads
        });
    }

    fn act(&mut self, thread: usize, action: HostAction) {
        self.drive(move |mut threads| async move {
            threads[thread].act(action).await;
            futures_util::future::join_all(
                threads
                    .iter_mut()
                    .map(|t| t.advance(Duration::from_millis(1))),
            )
            .await;
            threads
        });
    }

    fn apply(&mut self, step: &Step) {
        let thread = step_thread(step).unwrap_or(0) % self.threads.len();
        if self.closed[thread] && !matches!(step, Step::Wait(_) | Step::Crash) {
            return;
        }
        let action = match step {
            Step::User(_, plans) => {
                self.user_turns += 1;
                Some(HostAction::User(plan_message(self.user_turns, plans)))
            }
            Step::Typing(_, on) => Some(HostAction::Typing(*on)),
            Step::OnScreen(_, on) => Some(HostAction::OnScreen(*on)),
            Step::SwitchAway(_) => Some(HostAction::SwitchAway),
            Step::StopParent(_) => Some(HostAction::StopParent),
            Step::StopChild(_, k) => {
                let ids = started_ids(self.threads[thread].log());
                (!ids.is_empty()).then(|| HostAction::StopChild(ids[k % ids.len()].clone()))
            }
            Step::Answer(_, k, approve) => {
                let open = open_approvals(self.threads[thread].log());
                (!open.is_empty()).then(|| {
                    let id = open[k % open.len()].clone();
                    if *approve {
                        HostAction::Approve(id)
                    } else {
                        HostAction::Deny(id)
                    }
                })
            }
            Step::On(_, moment, what, yields, inline) => {
                let mut armed = trigger(*moment, *what, *yields);
                if *inline {
                    armed = armed.inline_only();
                }
                self.threads[thread].on(armed);
                None
            }
            Step::Close(_) => {
                self.closed[thread] = true;
                self.drive(move |mut threads| async move {
                    threads[thread].close().await;
                    threads
                });
                None
            }
            Step::Wait(secs) => {
                self.advance(Duration::from_secs(*secs));
                None
            }
            Step::Crash => {
                self.check_crash();
                None
            }
        };
        if let Some(action) = action {
            self.act(thread, action);
        }
    }

    /// Copies the shared store's files as they are now — what a process
    /// killed at this instant leaves (every write is atomic) — and reopens
    /// the copy: every child any thread started is there (nothing lost),
    /// each one that had not ended is `interrupted` with its run saved
    /// (resumable), and none is left unfinished (nothing stuck).
    fn check_crash(&mut self) {
        let Some((dir, _)) = &self.store else {
            return;
        };
        for (n, live) in self.threads.iter().enumerate() {
            if !self.closed[n] {
                self.runtime
                    .block_on(live.thread().flush_persistence())
                    .unwrap();
            }
        }
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), copy.path());
        let clock = Arc::new(ManualClock::new(subagents::simulation::Scenario::EPOCH_MS));
        let (reopened, report) = EnvelopeStore::open(copy.path(), clock).unwrap();
        for (n, live) in self.threads.iter().enumerate() {
            for id in started_ids(live.log()) {
                let envelope = reopened
                    .get(&id)
                    .unwrap_or_else(|| panic!("thread {n}: {id} lost in a crash"));
                assert!(
                    envelope.status.is_terminal(),
                    "{id} stuck: {:?}",
                    envelope.status
                );
            }
        }
        for id in &report.interrupted {
            let envelope = reopened.get(id).unwrap();
            assert_eq!(envelope.status, SubAgentStatus::Interrupted);
            assert!(
                reopened.run(id).is_some(),
                "{id} cannot be resumed: no run saved"
            );
        }
        CRASHES.fetch_add(report.interrupted.len(), Ordering::SeqCst);
    }

    fn logs(&self) -> Vec<String> {
        self.threads.iter().map(|t| t.render()).collect()
    }

    /// Checks every thread's log; at rest also what is held, and with
    /// `exactly_once` that every result that could reach its parent did.
    fn check(&self, at_rest: bool, exactly_once: bool) {
        for (n, live) in self.threads.iter().enumerate() {
            let log = live.log();
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let exactly_once = exactly_once
                    && self.setup.policy == ParentStopPolicy::Detach
                    && !self.closed[n];
                checks::check_everything(log, at_rest, exactly_once);
                assert!(
                    self.peak.load(Ordering::SeqCst) <= 1,
                    "guarantee 6: two model calls in flight on the shared gate"
                );
                let thread_hub = live.thread().hub().clone();
                if self.closed[n] {
                    return;
                }
                // The cap holds per requester (the parent's children, and
                // each child's own): checked on the log, level by level.
                common::check_cap(&checks::events(log), MAX_LIVE);
                let hub = self.runtime.block_on(thread_hub.snapshot()).unwrap();
                assert!(
                    hub.live <= MAX_LIVE + MAX_LIVE * MAX_LIVE,
                    "guarantee 5: {} live at two depths",
                    hub.live
                );
                if at_rest {
                    assert_eq!(
                        (hub.live, hub.queued),
                        (0, 0),
                        "at rest, slots are still reserved"
                    );
                    let started = started_ids(log).len();
                    assert_eq!(
                        thread_hub.envelopes().len(),
                        started,
                        "one envelope per child"
                    );
                    assert_eq!(hub.finished, started, "every child finished");
                }
            }));
            if let Err(panic) = checked {
                eprintln!(
                    "---- log of thread {n} ----\n{}\n-------------",
                    live.render()
                );
                std::panic::resume_unwind(panic);
            }
        }
        let gate = self.runtime.block_on(self.gate.snapshot()).unwrap();
        assert!(
            gate.in_flight <= 1,
            "a capacity-1 gate holds {} permits",
            gate.in_flight
        );
        if at_rest {
            assert_eq!(gate.in_flight, 0, "at rest, a gate permit is held");
            assert_eq!(gate.queued, 0, "at rest, someone waits at the gate");
            if let Some(node) = &self.node {
                assert_eq!(node.runner.live(), 0, "at rest, a run goes on on the node");
            }
        }
    }

    /// Brings every open thread to rest: typing off, on screen, an hour.
    fn settle(&mut self, reference: &Reference) {
        for t in 0..self.threads.len() {
            if self.closed[t] {
                continue;
            }
            if reference.typing[t] {
                self.act(t, HostAction::Typing(false));
            }
            if reference.off_screen[t] {
                self.act(t, HostAction::OnScreen(true));
            }
        }
        // Long enough for every child to end (work ≤ 40 s, wall clock 60 s,
        // queued behind the others) and every wake to land.
        self.advance(Duration::from_secs(3_600));
    }

    /// Closes every thread; with a store, every child ever started has a
    /// final envelope in it (read back from disk), ids unique across
    /// threads.
    fn close_all(&mut self) {
        for t in 0..self.threads.len() {
            if !self.closed[t] {
                self.closed[t] = true;
                self.drive(move |mut threads| async move {
                    threads[t].close().await;
                    threads
                });
            }
        }
        let Some((dir, _)) = &self.store else {
            return;
        };
        // A copy: the threads' store still holds the directory's lock.
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), copy.path());
        let reopened = open_store(copy.path());
        let mut seen = BTreeSet::new();
        for live in &self.threads {
            for id in started_ids(live.log()) {
                assert!(
                    seen.insert(id.clone()),
                    "{id} started on two threads of one store"
                );
                let envelope = reopened
                    .get(&id)
                    .unwrap_or_else(|| panic!("{id} has no envelope in the store"));
                assert!(
                    envelope.status.is_terminal(),
                    "{id} is stored {:?}",
                    envelope.status
                );
            }
        }
    }

    /// The distinct interleavings the fired triggers reached.
    fn signatures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for live in &self.threads {
            let log = live.log();
            for (i, entry) in log.iter().enumerate() {
                let LogEntry::Fired { child, moment, .. } = entry else {
                    continue;
                };
                // Triggers fire in no fixed order; the action is read off
                // the next host entry.
                let Some((at, action)) =
                    log.iter().enumerate().skip(i).find_map(|(at, l)| match l {
                        LogEntry::Host { action, .. } => Some((at, action)),
                        _ => None,
                    })
                else {
                    continue;
                };
                let what = format!("{moment:?}/{}", action_kind(action));
                out.push(checks::signature(log, at, child, &what));
            }
        }
        out
    }
}

fn action_kind(action: &HostAction) -> &'static str {
    match action {
        HostAction::User(text) if text.starts_with("SEND ") => "Send",
        HostAction::User(text) if text.starts_with("INTERRUPT ") => "Interrupt",
        HostAction::User(_) => "Claim",
        HostAction::StopParent => "StopParent",
        HostAction::SwitchAway => "SwitchAway",
        HostAction::StopChild(_) => "StopChild",
        HostAction::Approve(_) => "Approve",
        HostAction::Deny(_) => "Deny",
        _ => "other",
    }
}

fn trigger(moment: Moment, what: OnAction, yields: u32) -> Trigger {
    Trigger::new(None, moment, move |child, event| match what {
        OnAction::StopParent => Some(HostAction::StopParent),
        OnAction::SwitchAway => Some(HostAction::SwitchAway),
        OnAction::StopChild => Some(HostAction::StopChild(child.clone())),
        OnAction::Claim => Some(HostAction::User(format!("RESULT {child}"))),
        OnAction::Send => Some(HostAction::User(format!("SEND {child}"))),
        OnAction::Interrupt => Some(HostAction::User(format!("INTERRUPT {child}"))),
        OnAction::Approve | OnAction::Deny => match event {
            AgentEvent::Child(_, inner) => match &**inner {
                AgentEvent::ApprovalRequested(r) if what == OnAction::Approve => {
                    Some(HostAction::Approve(r.id.clone()))
                }
                AgentEvent::ApprovalRequested(r) => Some(HostAction::Deny(r.id.clone())),
                _ => None,
            },
            _ => None,
        },
    })
    .after_yields(yields)
}

/// Every child started, at any depth (a grandchild's `ChildStarted` is
/// inside its child's `Child` event).
fn started_ids(log: &[LogEntry]) -> Vec<AgentId> {
    fn started(event: &AgentEvent, out: &mut Vec<AgentId>) {
        match event {
            AgentEvent::ChildStarted(info) => out.push(info.id.clone()),
            AgentEvent::Child(_, inner) => started(inner, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for l in log {
        if let Some(event) = l.event() {
            started(event, &mut out);
        }
    }
    out
}

fn open_approvals(log: &[LogEntry]) -> Vec<subagents::messages::ApprovalId> {
    let mut open = Vec::new();
    for l in log {
        if let Some(AgentEvent::Child(_, inner)) = l.event() {
            match &**inner {
                AgentEvent::ApprovalRequested(r) => open.push(r.id.clone()),
                AgentEvent::ApprovalResolved { id: resolved, .. } => {
                    open.retain(|id| id != resolved)
                }
                _ => {}
            }
        }
    }
    open
}

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
        sut.world.apply(&step);
        sut.steps.push(step);
        sut
    }

    fn check_invariants(sut: &Self, _reference: &Reference) {
        sut.world.check(false, false);
    }

    fn teardown(mut sut: Self, reference: Reference) {
        sut.world.settle(&reference);
        sut.world.check(true, true);
        let first = sut.world.logs();
        if let Some(node) = &sut.world.node {
            REMOTE_CASES.fetch_add(1, Ordering::SeqCst);
            REMOTE_RUNS.fetch_add(node.started.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        sut.world.close_all();
        sut.world.check(true, false);
        // Determinism: the same steps from the same start give the same
        // logs, byte for byte.
        // The checks between steps drive the runtime too (their snapshot
        // calls let tasks run), so the replay runs them as well.
        let mut again = World::new(reference.setup);
        for step in &sut.steps {
            again.apply(step);
            again.check(false, false);
        }
        again.settle(&reference);
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
        again.close_all();
        let mut reached = REACHED.lock().unwrap();
        reached.extend(sut.world.signatures());
        let done = CASES_DONE.fetch_add(1, Ordering::SeqCst) + 1;
        if done == cases() as usize {
            assert!(
                model::GRANDCHILDREN_DELIVERED.load(Ordering::SeqCst) > 0,
                "no case reached a grandchild's answer: the depth-2 path is not exercised"
            );
        }
        if std::env::var_os("SUBAGENTS_PRINT_INTERLEAVINGS").is_some() && done == cases() as usize {
            eprintln!(
                "{} cases, {} distinct interleavings; crash snapshots found {} children mid-run; {} cases ran {} children on another node:",
                done,
                reached.len(),
                CRASHES.load(Ordering::SeqCst),
                REMOTE_CASES.load(Ordering::SeqCst),
                REMOTE_RUNS.load(Ordering::SeqCst)
            );
            for line in reached.iter() {
                eprintln!("  {line}");
            }
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
