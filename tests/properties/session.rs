//! Sessions of the world a case runs in: a process's life (a runtime, a
//! gate, the other node, the threads), and a `kill -9` and a restart
//! between two — the shared store's files as the killed process leaves
//! them, reopened by a new process whose threads start again under their
//! ids.

use super::*;

pub(super) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// The threads of one session (a process's life): a gate, the other node
/// when the children run there, and the threads, on `store` if shared (each
/// named, so a restart wakes each for its own children).
pub(super) fn start_session(
    runtime: &tokio::runtime::Runtime,
    setup: Setup,
    counters: (&Arc<AtomicUsize>, &Arc<AtomicUsize>),
    store: Option<&Arc<EnvelopeStore>>,
    session: usize,
) -> (
    GateHandle,
    Option<Arc<common::loopback::Loopback>>,
    Vec<LiveSimulation>,
) {
    let (in_flight, peak) = counters;
    let gate = runtime.block_on(GateHandle::spawn(setup.gate)).unwrap();
    let node = setup.remote.then(|| {
        let model = Arc::new(PlanModel {
            in_flight: in_flight.clone(),
            peak: peak.clone(),
            session,
        });
        let _inside = runtime.enter();
        let node = common::loopback::Loopback::with_gate("b", model, gate.clone());
        node.slow_ended
            .store(setup.slow_ended, std::sync::atomic::Ordering::SeqCst);
        node
    });
    let mut threads = Vec::new();
    for n in 0..setup.threads {
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
                    session,
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
        if let Some(store) = store {
            scenario = scenario
                .store(store.clone())
                .thread_id(ThreadId::new(format!("t{n}")));
        }
        if setup.stop_at_result && n == 0 {
            // The window this setting opens, reached every time: the
            // first thread's `agent_1` stopped at its `Result`, between it
            // and its end a second later (the generated triggers reached
            // it a few times in 256 cases).
            scenario = scenario.on(Trigger::new(
                Some(AgentId::new("agent_1")),
                Moment::Result,
                |child, _| Some(HostAction::StopChild(child.clone())),
            ));
        }
        threads.push(runtime.block_on(scenario.start(0)));
    }
    (gate, node, threads)
}

impl World {
    /// What a `kill -9` at this instant leaves of the shared store: every
    /// open thread's writes flushed, the directory copied (each write is
    /// atomic). `None` without a shared store.
    pub(super) fn killed_copy(&mut self) -> Option<tempfile::TempDir> {
        self.store.as_ref()?;
        // To a fixpoint: a flush runs the runtime, and what it ran (a wake's
        // turn ending, its settle written) was neither in the logs the
        // checks read nor, when it queued a write after the flush, on
        // disk — the kill's expectations and the copy disagreed.
        let flush = |w: &Self| {
            for (n, live) in w.threads.iter().enumerate() {
                if !w.closed[n] {
                    w.runtime
                        .block_on(live.thread().flush_persistence())
                        .unwrap();
                }
            }
        };
        for _ in 0..8 {
            flush(self);
            let logged = |w: &Self| w.threads.iter().map(|t| t.log().len()).sum::<usize>();
            let before = logged(self);
            self.advance(Duration::ZERO);
            if logged(self) == before {
                break;
            }
        }
        // What the last drain queued (a step's run write logs nothing) is
        // on disk before the copy: copied mid-write, a temporary file
        // vanished under the copy.
        flush(self);
        let (dir, _) = self.store.as_ref()?;
        let copy = tempfile::tempdir().unwrap();
        copy_dir(dir.path(), copy.path());
        Some(copy)
    }

    /// A `kill -9` and a restart: what the shared store holds at this
    /// instant (flushed, copied) is reopened by a new process — a new
    /// runtime, gate and node — and each thread is started again under its
    /// id. Checked here: every result the killed session owed its parent
    /// is owed on disk, none it delivered is; the new session's checks
    /// then hold it to the restart's wake and the owed wakes.
    pub(super) fn restart(&mut self) {
        let Some(copy) = self.killed_copy() else {
            return;
        };
        let summaries: Vec<checks::Summary> = self
            .threads
            .iter()
            .zip(&self.earlier)
            .enumerate()
            .map(|(n, (live, earlier))| {
                let elsewhere = checks::failed_elsewhere(live);
                let summary =
                    checks::check_everything(live.log(), false, false, earlier, &elsewhere);
                if self.closed[n] {
                    checks::Summary::default()
                } else {
                    summary
                }
            })
            .collect();
        let logs: Vec<Vec<LogEntry>> = self.threads.iter().map(|t| t.log().to_vec()).collect();
        let mut ids: BTreeSet<AgentId> = self
            .earlier
            .first()
            .map(|e| e.ids.clone())
            .unwrap_or_default();
        for log in &logs {
            ids.extend(started_ids(log));
        }
        self.earlier_logs.push(logs);
        let closed_before = std::mem::take(&mut self.closed);
        // The kill: every task of the process dropped where it stands.
        let old = std::mem::replace(&mut self.runtime, paused_runtime());
        {
            let _inside = old.enter();
            drop(std::mem::take(&mut self.threads));
            drop(self.node.take());
        }
        drop(old);
        self.store = None;
        let clock = Arc::new(ManualClock::new(subagents::simulation::Scenario::EPOCH_MS));
        let (reopened, report) = EnvelopeStore::open(copy.path(), clock).unwrap();
        let reopened = Arc::new(reopened);
        let owed = reopened.owed_wakes();
        self.earlier = (0..self.setup.threads)
            .map(|n| {
                let mine = |id: &AgentId| {
                    reopened.get(id).and_then(|e| e.thread) == Some(ThreadId::new(format!("t{n}")))
                };
                let earlier = checks::Earlier {
                    ids: ids.clone(),
                    owed: owed.iter().filter(|id| mine(id)).cloned().collect(),
                    interrupted: report.interrupted.iter().filter(|id| mine(id)).cloned().collect(),
                };
                if closed_before[n] {
                    assert!(
                        earlier.owed.is_empty() && earlier.interrupted.is_empty(),
                        "thread {n} was closed, yet its children are owed or interrupted on disk: {earlier:?}"
                    );
                }
                let summary = &summaries[n];
                for id in &summary.owed {
                    assert!(
                        earlier.owed.contains(id),
                        "thread {n}: {id}'s result was owed its parent when the process was killed, and is not owed on disk"
                    );
                }
                for id in &summary.delivered {
                    assert!(
                        !earlier.owed.contains(id),
                        "thread {n}: {id}'s result reached its parent, yet a wake is owed on disk"
                    );
                }
                earlier
            })
            .collect();
        RESTARTS.fetch_add(1, Ordering::SeqCst);
        for earlier in &self.earlier {
            RESTART_INTERRUPTED.fetch_add(earlier.interrupted.len(), Ordering::SeqCst);
            RESTART_OWED.fetch_add(earlier.owed.len(), Ordering::SeqCst);
        }
        let (gate, node, threads) = start_session(
            &self.runtime,
            self.setup,
            (&self.in_flight, &self.peak),
            Some(&reopened),
            self.earlier_logs.len(),
        );
        self.store = Some((copy, reopened));
        self.gate = gate;
        self.node = node;
        self.threads = threads;
        self.closed = vec![false; self.threads.len()];
    }

    /// The children thread `n` started in earlier sessions.
    pub(super) fn earlier_ids(&self, n: usize) -> Vec<AgentId> {
        self.earlier_logs
            .iter()
            .flat_map(|session| started_ids(&session[n]))
            .collect()
    }
}
