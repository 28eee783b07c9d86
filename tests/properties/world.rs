//! The world a case runs in: one or two live threads in one paused
//! runtime, the host's steps applied to them, and the checks after each.

use super::*;

#[path = "session.rs"]
mod session;

use session::{paused_runtime, start_session};

/// Steps that sent two or more host actions in one tick (counted for the
/// coverage the whole run asserts).
pub(super) static TOGETHER_SENT: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// One or two live threads in one paused runtime, sharing a gate (and
/// maybe a store).
pub(super) struct World {
    setup: Setup,
    runtime: tokio::runtime::Runtime,
    threads: Vec<LiveSimulation>,
    closed: Vec<bool>,
    store: Option<(tempfile::TempDir, Arc<EnvelopeStore>)>,
    gate: GateHandle,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    user_turns: usize,
    /// The other node, when the children run there.
    pub(super) node: Option<Arc<common::loopback::Loopback>>,
    /// Each earlier session's logs (one per thread), before each restart.
    earlier_logs: Vec<Vec<Vec<LogEntry>>>,
    /// What the last restart left each thread.
    earlier: Vec<checks::Earlier>,
}

pub(super) fn open_store(dir: &std::path::Path) -> Arc<EnvelopeStore> {
    let clock = Arc::new(ManualClock::new(subagents::simulation::Scenario::EPOCH_MS));
    Arc::new(EnvelopeStore::open(dir, clock).unwrap().0)
}

impl World {
    pub(super) fn new(setup: Setup) -> World {
        let runtime = paused_runtime();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let store = setup.shared_store.then(|| {
            let dir = tempfile::tempdir().unwrap();
            let store = open_store(dir.path());
            (dir, store)
        });
        let (gate, node, threads) = start_session(
            &runtime,
            setup,
            (&in_flight, &peak),
            store.as_ref().map(|(_, s)| s),
            0,
        );
        World {
            setup,
            runtime,
            closed: vec![false; threads.len()],
            earlier: vec![checks::Earlier::default(); threads.len()],
            threads,
            store,
            gate,
            in_flight,
            peak,
            user_turns: 0,
            node,
            earlier_logs: Vec::new(),
        }
    }

    /// Runs `f` on the threads from a task of its own (so triggers react
    /// at the instant), then lets 1 ms pass on every thread.
    pub(super) fn drive<F>(&mut self, f: impl FnOnce(Vec<LiveSimulation>) -> F)
    where
        F: std::future::Future<Output = Vec<LiveSimulation>> + Send + 'static,
    {
        let threads = std::mem::take(&mut self.threads);
        let future = f(threads);
        self.threads = self
            .runtime
            .block_on(async move { tokio::spawn(future).await.unwrap() });
    }

    pub(super) fn advance(&mut self, by: Duration) {
        self.drive(move |mut threads| async move {
            futures_util::future::join_all(threads.iter_mut().map(|t| t.advance(by))).await;
            threads
        });
    }

    pub(super) fn act(&mut self, thread: usize, action: HostAction) {
        self.act_together(thread, vec![action]);
    }

    /// `actions` in one tick on `thread` (one alone as `act` does it),
    /// then a millisecond for all.
    pub(super) fn act_together(&mut self, thread: usize, mut actions: Vec<HostAction>) {
        let (together, logged) = (actions.len() > 1, self.threads[thread].log().len());
        self.drive(move |mut threads| async move {
            match actions.len() {
                1 => threads[thread].act(actions.remove(0)).await,
                _ => threads[thread].act_together(actions).await,
            }
            futures_util::future::join_all(
                threads
                    .iter_mut()
                    .map(|t| t.advance(Duration::from_millis(1))),
            )
            .await;
            threads
        });
        // Counted by the log: both logged at one instant, neither
        // refused (a count of the steps drawn said nothing of the reach).
        let new = &self.threads[thread].log()[logged..];
        let at: Vec<Duration> = new
            .iter()
            .filter_map(|e| match e {
                LogEntry::Host { at, .. } => Some(*at),
                _ => None,
            })
            .collect();
        let refused = new.iter().any(|e| matches!(e, LogEntry::Refused { .. }));
        if together && at.len() > 1 && at.iter().all(|t| *t == at[0]) && !refused {
            TOGETHER_SENT.fetch_add(1, Ordering::SeqCst);
        }
    }

    pub(super) fn apply(&mut self, step: &Step) {
        let thread = step_thread(step).unwrap_or(0) % self.threads.len();
        if self.closed[thread]
            && !matches!(
                step,
                Step::Wait(_) | Step::Crash | Step::Restart | Step::RestartHeld(..)
            )
        {
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
            Step::Restart => {
                self.restart();
                None
            }
            Step::RestartHeld(t, secs) => {
                if self.store.is_some() {
                    let plan = ChildPlan {
                        work_secs: *secs,
                        wait: false,
                        end: End::Answer,
                        yields: 0,
                        nested: false,
                    };
                    self.apply(&Step::User(*t, vec![plan]));
                    for t in 0..self.threads.len() {
                        if !self.closed[t] {
                            self.act(t, HostAction::Typing(true));
                        }
                    }
                    self.advance(Duration::from_secs(secs + 5));
                    self.restart();
                }
                None
            }
            Step::StopThenSend(_, k) => {
                let ids = started_ids(self.threads[thread].log());
                if let Some(id) = (!ids.is_empty()).then(|| ids[k % ids.len()].clone()) {
                    self.act(thread, HostAction::StopChild(id.clone()));
                    Some(HostAction::User(format!("SEND {id}")))
                } else {
                    None
                }
            }
            Step::Send(_, k) => {
                let ids = started_ids(self.threads[thread].log());
                (!ids.is_empty()).then(|| HostAction::User(format!("SEND {}", ids[k % ids.len()])))
            }
            Step::Together(_, k, pair) => {
                let log = self.threads[thread].log();
                let ids = started_ids(log);
                let child = (!ids.is_empty()).then(|| ids[k % ids.len()].clone());
                let open = open_approvals(log);
                let asked = (!open.is_empty()).then(|| open[k % open.len()].clone());
                let actions = match (pair, child, asked) {
                    (0, Some(id), _) => vec![HostAction::StopChild(id), HostAction::StopParent],
                    (1, Some(id), _) => vec![HostAction::StopChild(id), HostAction::SwitchAway],
                    (2, _, Some(approval)) => {
                        let owner = approval.parts().map(|(agent, _)| agent);
                        let mut both = vec![HostAction::Approve(approval)];
                        both.extend(owner.map(HostAction::StopChild));
                        both
                    }
                    (3, ..) => vec![HostAction::SwitchAway, HostAction::StopParent],
                    (4, Some(id), _) => vec![
                        HostAction::StopChild(id.clone()),
                        HostAction::User(format!("SEND {id}")),
                    ],
                    _ => Vec::new(),
                };
                if !actions.is_empty() {
                    self.act_together(thread, actions);
                }
                None
            }
            Step::Resume(_, k) => {
                let ids = self.earlier_ids(thread);
                (!ids.is_empty()).then(|| HostAction::User(format!("SEND {}", ids[k % ids.len()])))
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
    pub(super) fn check_crash(&mut self) {
        let Some(copy) = self.killed_copy() else {
            return;
        };
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

    /// Host stops and switches, over every thread's log, that landed
    /// between a child's `Result` and its end.
    pub(super) fn actions_in_end_windows(&self) -> usize {
        self.threads
            .iter()
            .map(|t| checks::actions_between_result_and_end(t.log()))
            .sum()
    }

    /// What a replay must give again, byte for byte: each thread's log
    /// (every entry with its exact virtual time: the rendered form kept
    /// milliseconds) and its children's envelopes (what a store would
    /// persist; a difference only there was outside the replay check).
    pub(super) fn logs(&self) -> Vec<String> {
        let earlier = self.earlier_logs.iter().flatten().map(|log| {
            log.iter()
                .map(|l| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        });
        earlier
            .chain(self.threads.iter().map(|t| {
                let mut lines: Vec<String> = t.log().iter().map(|l| format!("{l:?}")).collect();
                lines.extend(
                    t.thread()
                        .hub()
                        .envelopes()
                        .iter()
                        .map(|e| format!("{e:?}")),
                );
                lines.join("\n")
            }))
            .collect()
    }

    /// Thread `n`'s logs, one per session, in order.
    fn sessions_of(&self, n: usize) -> Vec<&[LogEntry]> {
        self.earlier_logs
            .iter()
            .map(|session| session[n].as_slice())
            .chain([self.threads[n].log()])
            .collect()
    }

    /// Messages the user sent to a chain the host had stopped, on every
    /// thread (what the stopped-chain check had to hold).
    pub(super) fn sent_to_stopped(&self) -> usize {
        (0..self.threads.len())
            .map(|n| checks::check_stopped_chains_stay_stopped(&self.sessions_of(n)))
            .sum()
    }

    /// Checks every thread's log; at rest also what is held, and with
    /// `exactly_once` that every result that could reach its parent did.
    pub(super) fn check(&self, at_rest: bool, exactly_once: bool) {
        for (n, live) in self.threads.iter().enumerate() {
            let log = live.log();
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // Under both policies: under `Cascade` a child that
                // finished as the parent's turn was cut is a wake (the cut
                // call says so); left out, a result lost there was never
                // seen (the eighteenth session found one on another node).
                let exactly_once = exactly_once && !self.closed[n];
                let elsewhere = checks::failed_elsewhere(live);
                checks::check_everything(log, at_rest, exactly_once, &self.earlier[n], &elsewhere);
                if at_rest {
                    checks::check_stopped_chains_stay_stopped(&self.sessions_of(n));
                }
                assert!(
                    self.peak.load(Ordering::SeqCst) <= self.setup.gate,
                    "guarantee 6: more model calls in flight than the shared gate's {}",
                    self.setup.gate
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
                    // An earlier session's child a message reached (resumed,
                    // or refused) is in the book too.
                    let started = started_ids(log).len();
                    let envelopes = thread_hub.envelopes();
                    let earlier = envelopes
                        .iter()
                        .filter(|e| self.earlier[n].ids.contains(&e.id))
                        .count();
                    assert_eq!(envelopes.len() - earlier, started, "one envelope per child");
                    assert_eq!(hub.finished, started, "every child finished");
                    assert!(
                        envelopes.iter().all(|e| e.status.is_terminal()),
                        "at rest, a child has not ended: {envelopes:?}"
                    );
                    checks::check_sent_messages_read(log, |id| {
                        let envelope = thread_hub.status(id);
                        let started = envelope.as_ref().is_some_and(|e| e.started_at_ms.is_some());
                        let next = envelope.and_then(|e| e.continued_as);
                        (thread_hub.conversation(id), next, started)
                    });
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
            gate.in_flight <= self.setup.gate,
            "a capacity-{} gate holds {} permits",
            self.setup.gate,
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
    pub(super) fn settle(&mut self, reference: &Reference) {
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
    pub(super) fn close_all(&mut self) {
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
        // The open's report kept: it marks what it finds unfinished
        // `interrupted`, so "stored terminal" held for a close that wrote
        // nothing. Each child is stored as its stream ended it.
        let clock = Arc::new(ManualClock::new(subagents::simulation::Scenario::EPOCH_MS));
        let (reopened, report) = EnvelopeStore::open(copy.path(), clock).unwrap();
        let mut seen = BTreeSet::new();
        for live in &self.threads {
            let ended = terminal_statuses(live.log());
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
                if let Some(status) = ended.get(&id) {
                    assert_eq!(
                        envelope.status, *status,
                        "{id} ended {status:?} on the stream, stored {:?}",
                        envelope.status
                    );
                    assert!(
                        !report.interrupted.contains(&id),
                        "{id} ended {status:?}, read back unfinished"
                    );
                }
            }
        }
    }

    /// How many threads' logs hold a grandchild that waited in its
    /// requester's queue (the nested cap reached).
    pub(super) fn grandchildren_queued(&self) -> usize {
        self.threads
            .iter()
            .filter(|live| {
                live.log().iter().any(|l| {
                    matches!(l, LogEntry::Event { event: AgentEvent::Child(_, inner), .. }
                        if matches!(**inner, AgentEvent::ChildStatus(_, SubAgentStatus::Queued)))
                })
            })
            .count()
    }

    /// The distinct interleavings the fired triggers reached.
    pub(super) fn signatures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for live in &self.threads {
            let log = live.log();
            for (i, entry) in log.iter().enumerate() {
                let LogEntry::Fired { child, moment, .. } = entry else {
                    continue;
                };
                // Triggers fire in no fixed order; the action is read off
                // the next host entry.
                let Some(action) = log.iter().skip(i).find_map(|l| match l {
                    LogEntry::Host { action, .. } => Some(action),
                    _ => None,
                }) else {
                    continue;
                };
                let what = format!("{moment:?}/{}", action_kind(action));
                // The side of the trigger the child ended on: a stop or a
                // switch is logged once it has taken effect (the child it
                // ended ended before that entry every time).
                out.push(checks::signature(log, i, child, &what));
            }
        }
        out
    }
}

pub(super) fn action_kind(action: &HostAction) -> &'static str {
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

pub(super) fn trigger(moment: Moment, what: OnAction, yields: u32) -> Trigger {
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
pub(super) fn started_ids(log: &[LogEntry]) -> Vec<AgentId> {
    pub(super) fn started(event: &AgentEvent, out: &mut Vec<AgentId>) {
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

/// Each child's terminal status on the stream, at any depth.
pub(super) fn terminal_statuses(
    log: &[LogEntry],
) -> std::collections::BTreeMap<AgentId, SubAgentStatus> {
    fn ended(event: &AgentEvent, out: &mut std::collections::BTreeMap<AgentId, SubAgentStatus>) {
        match event {
            AgentEvent::ChildStatus(id, status) if status.is_terminal() => {
                out.insert(id.clone(), *status);
            }
            AgentEvent::Child(_, inner) => ended(inner, out),
            _ => {}
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for l in log {
        if let Some(event) = l.event() {
            ended(event, &mut out);
        }
    }
    out
}

pub(super) fn open_approvals(log: &[LogEntry]) -> Vec<subagents::messages::ApprovalId> {
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
