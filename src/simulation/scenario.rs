//! A scenario: models, tools, options and host actions over time.

use std::sync::Arc;
use std::time::Duration;

use subagents_actors::scripted::{Reply, ScriptedModel};
use subagents_actors::{DelegationBuilder, Model, ToolRegistry};
use subagents_messages::ThreadId;
use subagents_supervisor::store::EnvelopeStore;
use subagents_supervisor::{ThreadConfig, ThreadHandle};

use crate::simulation::jitter::Jitter;
use crate::simulation::live::LiveSimulation;
use crate::simulation::report::{HostAction, SIMULATION_EPOCH_MS, SimulationReport};
use crate::simulation::trigger::Trigger;

type Configure = Arc<dyn Fn(DelegationBuilder) -> DelegationBuilder + Send + Sync>;
type MakeModel = Arc<dyn Fn() -> Arc<dyn Model> + Send + Sync>;

/// A scenario: models, tools, options and host actions over time.
#[derive(Clone)]
pub struct Scenario {
    parent_prompt: String,
    model: ScriptedModel,
    custom_model: Option<MakeModel>,
    tools: ToolRegistry,
    configure: Option<Configure>,
    actions: Vec<(Duration, HostAction)>,
    triggers: Vec<Trigger>,
    store: Option<Arc<EnvelopeStore>>,
    thread_id: Option<ThreadId>,
    duration: Duration,
    jitter: Duration,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("actions", &self.actions)
            .field("triggers", &self.triggers)
            .field("thread_id", &self.thread_id)
            .field("duration", &self.duration)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// The wall-clock reading at the start of every simulation, in ms
    /// since the Unix epoch (2026-01-01T00:00:00Z): stamps are virtual and
    /// deterministic.
    pub const EPOCH_MS: u64 = SIMULATION_EPOCH_MS;

    /// A scenario whose parent answers with `parent_replies`, in order.
    pub fn new(parent_replies: Vec<Reply>) -> Self {
        Self {
            parent_prompt: "You are the parent.".into(),
            model: ScriptedModel::new(parent_replies),
            custom_model: None,
            tools: ToolRegistry::new(),
            configure: None,
            actions: Vec::new(),
            triggers: Vec::new(),
            store: None,
            thread_id: None,
            duration: Duration::from_secs(60),
            jitter: Duration::ZERO,
        }
    }

    /// Runs on a model of your own instead of the scripted one (made anew
    /// for each run; the seeded jitter still applies). Child scripts added
    /// with `child_script` are then unused.
    pub fn with_model(mut self, make: impl Fn() -> Arc<dyn Model> + Send + Sync + 'static) -> Self {
        self.custom_model = Some(Arc::new(make));
        self
    }

    /// The parent's system prompt (default: "You are the parent.").
    pub fn parent_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.parent_prompt = prompt.into();
        self
    }

    /// The replies, one per model call, of children whose system prompt
    /// contains `pattern`. Patterns are tried in the order added (the
    /// first that matches wins: end a name with `"\n"`), and a child that
    /// matches none runs the parent's replies (docs/simulation.md).
    pub fn child_script(mut self, pattern: impl Into<String>, replies: Vec<Reply>) -> Self {
        self.model = self.model.with_script(pattern, replies);
        self
    }

    /// The replies, one per model call, of children whose task contains
    /// `pattern`.
    pub fn child_input_script(mut self, pattern: impl Into<String>, replies: Vec<Reply>) -> Self {
        self.model = self.model.with_input_script(pattern, replies);
        self
    }

    /// The parent's tools (children may be given any of them).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Further options on the parent (live cap, inline wait, policies…).
    /// Calls add up: each closure is applied after the ones given before
    /// it, so a test can extend a helper's scenario
    /// (`base().configure(|b| b.parent_stop(..))` keeps the helper's
    /// settings), and where two set one option, the later wins.
    pub fn configure(
        mut self,
        f: impl Fn(DelegationBuilder) -> DelegationBuilder + Send + Sync + 'static,
    ) -> Self {
        // Composed: a second call replaced the first, and a helper's
        // settings (its `max_depth`, say) were dropped without a word.
        self.configure = Some(match self.configure.take() {
            Some(earlier) => Arc::new(move |builder| f(earlier(builder))),
            None => Arc::new(f),
        });
        self
    }

    /// Does `action` at virtual time `at` (actions at one time run in the
    /// order added).
    pub fn at(mut self, at: Duration, action: HostAction) -> Self {
        self.actions.push((at, action));
        self
    }

    /// Does `trigger`'s action the moment its child event is read (once).
    pub fn on(mut self, trigger: Trigger) -> Self {
        self.triggers.push(trigger);
        self
    }

    /// Persists envelopes in `store` (share one store between scenarios
    /// to test threads on one store). Open it on the simulation's clock,
    /// `ManualClock::new(Scenario::EPOCH_MS)`: envelopes are stamped in
    /// virtual time from [`Scenario::EPOCH_MS`] (or just past the latest
    /// stamp the store holds, for a session on what an earlier one
    /// left), and a store that reads
    /// the system's date finds them past its retention and prunes each as
    /// it is saved.
    ///
    /// # Panics
    /// If `store`'s clock puts where the session's stamps start
    /// ([`Scenario::EPOCH_MS`], or past the latest stamp the store holds)
    /// past its retention (a test set up so would see every envelope it
    /// wrote vanish).
    pub fn store(mut self, store: Arc<EnvelopeStore>) -> Self {
        assert!(
            store.retains(stamps_start(Some(&store))),
            "the store's clock puts the simulation's epoch (Scenario::EPOCH_MS, or past the \
             store's latest stamp) past its retention: every envelope the scenario writes \
             would be pruned as it is saved; open the store with \
             ManualClock::new(Scenario::EPOCH_MS)"
        );
        self.store = Some(store);
        self
    }

    /// Names the thread (`ThreadConfig::id`): on a store, its envelopes
    /// name it, and a thread started again under the id on the store a
    /// killed process left is woken for its own interrupted and owed
    /// children (a restart, simulated: docs/supervisor.md).
    pub fn thread_id(mut self, id: ThreadId) -> Self {
        self.thread_id = Some(id);
        self
    }

    /// How long to simulate (default 60 s).
    pub fn run_for(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// Adds up to `max` of seeded latency before each model call, to vary
    /// interleavings by seed (deterministic for a seed), in whole
    /// milliseconds: 0 to `max`, or 0 to 1 ms for a `max` under one
    /// (virtual time resolves to 1 ms). Without one (the default) the
    /// seed varies nothing: every seed gives the same run.
    pub fn jitter(mut self, max: Duration) -> Self {
        self.jitter = max;
        self
    }

    /// Runs in a fresh paused current-thread runtime. The seed draws the
    /// [`Scenario::jitter`]'s delays (none without one); say it in a
    /// failure's message, so the run can be replayed.
    ///
    /// # Panics
    /// If called from inside a tokio runtime (use [`Scenario::run_async`]),
    /// if the runtime cannot be built, or as [`Scenario::run_async`] does.
    #[allow(clippy::expect_used)]
    pub fn run(&self, seed: u64) -> SimulationReport {
        // Every driver, as `#[tokio::test]` has (`run_async`'s runtime):
        // with time alone, a tool or model doing I/O (a socket, a local
        // mock server) failed under `run` and worked under `run_async`.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime");
        runtime.block_on(self.run_async(seed))
    }

    /// Runs on the current runtime, which must be paused
    /// (`#[tokio::test(start_paused = true)]`). The thread is driven from a
    /// task of its own, so triggers react as promptly as any actor.
    ///
    /// # Panics
    /// At once if the runtime is not a current-thread one with paused
    /// time (a multi-thread runtime cannot pause): the run went silently
    /// in wall-clock time, `run_for` slept for real and the same seed gave
    /// another log. If an action is timed after the run's end
    /// ([`Scenario::run_for`]), or the thread cannot be started (as
    /// [`Scenario::start`] says). A panic of the run is raised again as it
    /// was, not wrapped in the task's `JoinError`.
    ///
    /// # Cancel safety
    /// Dropped before it returns, the run goes on in its task to its end
    /// (holding its thread and store until then); await it to the end.
    pub async fn run_async(&self, seed: u64) -> SimulationReport {
        assert_paused("Scenario::run_async");
        // An action past the end was dropped without a word: the test
        // checked a run that never had it.
        if let Some((at, action)) = self.actions.iter().find(|(at, _)| *at > self.duration) {
            panic!(
                "the action {action:?} at {at:?} is after the run's end ({:?}): set run_for to at least {at:?}",
                self.duration
            );
        }
        let scenario = self.clone();
        match tokio::spawn(async move { scenario.drive(seed).await }).await {
            Ok(report) => report,
            // The run's own panic, as it was raised: it read "the
            // simulation task: JoinError::Panic(Id(1), \"…\", …)".
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => panic!("the simulation task: {error}"),
        }
    }

    async fn drive(&self, seed: u64) -> SimulationReport {
        let mut live = self.start(seed).await;
        let mut actions = self.actions.clone();
        actions.sort_by_key(|(at, _)| *at);
        for (at, action) in actions {
            live.advance_to(at).await;
            live.act(action).await;
        }
        live.advance_to(self.duration).await;
        live.finish().await
    }

    /// Starts the scenario's thread, its triggers armed, without running
    /// its actions: drive it step by step with [`LiveSimulation::act`] and
    /// [`LiveSimulation::advance`] (the property tests do). The runtime
    /// must be a current-thread one with paused time, as for
    /// [`Scenario::run_async`].
    ///
    /// # Panics
    /// If the runtime's time is not paused (as [`Scenario::run_async`]),
    /// or the thread cannot be started, with the [`ThreadError`] that
    /// says why: a builder [`Scenario::configure`] made that no run could
    /// use (`Refused`, e.g. `max_live(0)`), or a [`Scenario::thread_id`]
    /// already live on the scenario's store (`AlreadyOpen`: another
    /// scenario's thread, still running, under the same id).
    ///
    /// [`ThreadError`]: subagents_supervisor::ThreadError
    pub async fn start(&self, seed: u64) -> LiveSimulation {
        assert_paused("Scenario::start");
        let inner = match &self.custom_model {
            Some(make) => make(),
            None => Arc::new(self.model.clone()),
        };
        // Wrapped only for a jitter: the wrapper is another object, and a
        // registry serving this model to children gives it another gate.
        let model: Arc<dyn Model> = match self.jitter.is_zero() {
            true => inner,
            false => Arc::new(Jitter {
                inner,
                seed,
                max: self.jitter,
            }),
        };
        let mut builder = DelegationBuilder::new(model)
            .system_prompt(self.parent_prompt.clone())
            .tools(self.tools.clone())
            .clock(Arc::new(TokioClock::new(self.epoch_ms())));
        if let Some(configure) = &self.configure {
            builder = configure(builder);
        }
        let mut config = ThreadConfig::new(builder);
        if let Some(store) = &self.store {
            config = config.store(store.clone());
        }
        if let Some(id) = &self.thread_id {
            config = config.id(id.clone());
        }
        let (thread, events) = match ThreadHandle::spawn(config, None).await {
            Ok(started) => started,
            // Named as the error says it (`expect` printed its `Debug`
            // after "the simulated thread starts", which read as a bug of
            // the harness for a test's own setting).
            Err(error) => panic!("Scenario::start: {error}"),
        };
        let mut live = LiveSimulation::new(thread, events);
        // Armed here, not only by `run`: a scenario started step by step
        // ran without the triggers it was given.
        for trigger in &self.triggers {
            live.on(trigger.clone());
        }
        live
    }
}

impl Scenario {
    /// Where this session's stamps start: [`Scenario::EPOCH_MS`], or just
    /// past the latest stamp its store holds — a session started again on
    /// what an earlier one left (a restart, simulated) goes on from it.
    /// Each began at the epoch again: a child of the later session was
    /// stamped as finished before the earlier one's, and owed wakes
    /// (delivered in the order their children finished) came backwards.
    fn epoch_ms(&self) -> u64 {
        stamps_start(self.store.as_deref())
    }
}

/// [`Scenario::EPOCH_MS`], or just past the latest stamp `store` holds.
fn stamps_start(store: Option<&EnvelopeStore>) -> u64 {
    let latest = store
        .into_iter()
        .flat_map(EnvelopeStore::all)
        .flat_map(|e| [Some(e.requested_at_ms), e.started_at_ms, e.finished_at_ms]);
    latest.flatten().max().map_or(SIMULATION_EPOCH_MS, |at| {
        at.saturating_add(1).max(SIMULATION_EPOCH_MS)
    })
}

/// Panics, naming `what` and the cure, unless the current runtime is a
/// current-thread one whose time is paused. On any other, a scenario ran
/// silently in wall-clock time: `run_for` slept for real (an hour for an
/// hour), jitter and stamps were wall-clock readings, and on several
/// workers `after_yields` counted nobody's turns — the same seed gave
/// another log.
fn assert_paused(what: &str) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let flavor = Handle::current().runtime_flavor();
    let why = if flavor != RuntimeFlavor::CurrentThread {
        "a multi-thread runtime, whose time cannot be paused"
    } else if !time_is_paused() {
        "a runtime whose time is not paused"
    } else {
        return;
    };
    panic!(
        "{what} runs in virtual time, and this is {why}: use \
         #[tokio::test(start_paused = true)] (a current-thread runtime built with \
         start_paused(true)), or Scenario::run, which builds one"
    );
}

/// Whether tokio's clock is paused: paused, `Instant::now()` keeps its
/// value until time is advanced, which happens only while the runtime
/// parks — never while this task runs without yielding; running, it
/// follows the system's monotonic clock, which is let move first.
fn time_is_paused() -> bool {
    let before = tokio::time::Instant::now();
    let real = std::time::Instant::now();
    while std::time::Instant::now() == real {
        std::hint::spin_loop();
    }
    tokio::time::Instant::now() == before
}

/// Wall-clock stamps that follow tokio time from a fixed epoch: under
/// `tokio::time::pause` they are virtual and deterministic (the simulation
/// harness uses it).
#[derive(Debug)]
struct TokioClock {
    epoch_ms: u64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading `epoch_ms` now, advancing with tokio time.
    fn new(epoch_ms: u64) -> Self {
        Self {
            epoch_ms,
            start: tokio::time::Instant::now(),
        }
    }
}

impl subagents_actors::clock::Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.epoch_ms
            .saturating_add(self.start.elapsed().as_millis() as u64)
    }
}
