//! A simulation harness for hosts: describe a scenario — scripted models,
//! tools, and host actions at virtual times — and run it in paused tokio
//! time with a seed. You get back the whole ordered event log (host
//! actions interleaved where they took effect), the transcript and the
//! final envelopes. The same scenario and seed give the same log; an hour
//! of virtual time runs in milliseconds.
//!
//! ```
//! use std::time::Duration;
//! use subagents::prelude::*;
//! use subagents::simulation::{HostAction, Scenario};
//!
//! let report = Scenario::new(vec![
//!     Turn::new().tool_call("use_agent",
//!         r#"{"action":"run","system_prompt":"Fetcher","input":"https://example.com","wait":false}"#),
//!     Turn::answer("Started."),
//!     Turn::answer("The title is Example Domain."),
//! ])
//! .child_script("Fetcher", vec![
//!     Turn::new().delay(Duration::from_secs(30)).tool_call("fetch_title", r#"{"url":"https://example.com"}"#),
//!     Turn::answer("Example Domain"),
//! ])
//! .tools(ToolRegistry::new().with(PageTitle::default()))
//! .at(Duration::ZERO, HostAction::User("What is the title?".into()))
//! .run_for(Duration::from_secs(120))
//! .run(7);
//!
//! assert_eq!(report.wakes(), ["agent_1"]);
//! assert_eq!(report.envelopes[0].result.as_deref(), Some("Example Domain"));
//! ```
//!
//! See `docs/simulation.md`.

use std::sync::Arc;
use std::time::Duration;

use subagents_actors::clock::TokioClock;
use subagents_actors::scripted::{ScriptedModel, Turn};
use subagents_actors::{DelegationBuilder, Model, ModelStream, ToolRegistry};
use subagents_messages::{
    AgentEvent, AgentId, ApprovalDecision, ApprovalId, Envelope, GateSnapshot, HubSnapshot,
    ModelRequest, Role, Transcript,
};
use subagents_supervisor::ThreadHandle;
use tokio::time::Instant;

/// The wall-clock reading at the start of every simulation
/// (2026-01-01T00:00:00Z): stamps are virtual and deterministic.
pub const SIMULATION_EPOCH_MS: u64 = 1_767_225_600_000;

/// Something the host does at a virtual time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAction {
    /// The user sends a message.
    User(String),
    /// The user starts (`true`) or stops typing.
    Typing(bool),
    /// The thread goes on (`true`) or off screen.
    OnScreen(bool),
    /// The host switches threads away (stop-all, wakes dropped).
    SwitchAway,
    /// The user stops the parent's turn.
    StopParent,
    /// The host approves an approval (ids are deterministic:
    /// `parent-approval-1`, `agent_2-approval-1`, …).
    Approve(ApprovalId),
    /// The host denies an approval.
    Deny(ApprovalId),
    /// The host stops a child by id.
    StopChild(AgentId),
}

/// One line of a simulation's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEntry {
    /// An event the thread emitted.
    Event(AgentEvent),
    /// A host action, placed after every event emitted before it took
    /// effect and before every event emitted after.
    Host(HostAction),
}

/// A logged entry with its virtual time since the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// Virtual time since the start.
    pub at: Duration,
    /// What happened.
    pub entry: LogEntry,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct SimulationReport {
    /// Everything, in order.
    pub log: Vec<Logged>,
    /// The events folded into a transcript (with user turns).
    pub transcript: Transcript,
    /// Every child's final envelope, in request order.
    pub envelopes: Vec<Envelope>,
    /// The gate at the end.
    pub gate: GateSnapshot,
    /// The hub at the end.
    pub hub: HubSnapshot,
    /// Virtual time simulated.
    pub elapsed: Duration,
}

impl SimulationReport {
    /// The events only, in order.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.log
            .iter()
            .filter_map(|l| match &l.entry {
                LogEntry::Event(e) => Some(e.clone()),
                LogEntry::Host(_) => None,
            })
            .collect()
    }

    /// Children whose results woke the parent, in order.
    pub fn wakes(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Wake(w) => Some(w.child.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The log as readable lines (`t=12.000s  event …`), for failures.
    pub fn render(&self) -> String {
        render(&self.log)
    }
}

/// A log as readable lines (`t=12.000s  event …`), for failures.
pub fn render(log: &[Logged]) -> String {
    log.iter()
        .map(|l| {
            let what = match &l.entry {
                LogEntry::Event(e) => format!("{e:?}"),
                LogEntry::Host(a) => format!("HOST {a:?}"),
            };
            format!("t={:>9.3}s  {what}", l.at.as_secs_f64())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

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
    duration: Duration,
    jitter: Duration,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("actions", &self.actions)
            .field("duration", &self.duration)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// A scenario whose parent answers with `parent_turns`, in order.
    pub fn new(parent_turns: Vec<Turn>) -> Self {
        Self {
            parent_prompt: "You are the parent.".into(),
            model: ScriptedModel::new(parent_turns),
            custom_model: None,
            tools: ToolRegistry::new(),
            configure: None,
            actions: Vec::new(),
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

    /// Turns for children whose system prompt contains `pattern`.
    pub fn child_script(mut self, pattern: impl Into<String>, turns: Vec<Turn>) -> Self {
        self.model = self.model.with_script(pattern, turns);
        self
    }

    /// Turns for children whose task contains `pattern`.
    pub fn child_input_script(mut self, pattern: impl Into<String>, turns: Vec<Turn>) -> Self {
        self.model = self.model.with_input_script(pattern, turns);
        self
    }

    /// The parent's tools (children may be given any of them).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// Further options on the parent (live cap, inline wait, policies…).
    pub fn configure(
        mut self,
        f: impl Fn(DelegationBuilder) -> DelegationBuilder + Send + Sync + 'static,
    ) -> Self {
        self.configure = Some(Arc::new(f));
        self
    }

    /// Does `action` at virtual time `at` (actions at one time run in the
    /// order added).
    pub fn at(mut self, at: Duration, action: HostAction) -> Self {
        self.actions.push((at, action));
        self
    }

    /// How long to simulate (default 60 s).
    pub fn run_for(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// Adds up to `max` of seeded latency before each model call, to vary
    /// interleavings by seed (deterministic for a seed).
    pub fn jitter(mut self, max: Duration) -> Self {
        self.jitter = max;
        self
    }

    /// Runs in a fresh paused current-thread runtime.
    ///
    /// # Panics
    /// If called from inside a tokio runtime (use [`Scenario::run_async`])
    /// or if the runtime cannot be built.
    #[allow(clippy::expect_used)]
    pub fn run(&self, seed: u64) -> SimulationReport {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime");
        runtime.block_on(self.run_async(seed))
    }

    /// Runs on the current runtime, which must be paused
    /// (`#[tokio::test(start_paused = true)]`).
    ///
    /// # Panics
    /// If the thread cannot be started (a bug, reported with its cause).
    #[allow(clippy::expect_used)]
    pub async fn run_async(&self, seed: u64) -> SimulationReport {
        let mut live = self.start(seed).await;
        let mut actions = self.actions.clone();
        actions.sort_by_key(|(at, _)| *at);
        for (at, action) in actions {
            if at > self.duration {
                break;
            }
            live.advance_to(at).await;
            live.act(action).await;
        }
        live.advance_to(self.duration).await;
        live.finish().await
    }

    /// Starts the scenario's thread without running its actions: drive it
    /// step by step with [`LiveSimulation::act`] and
    /// [`LiveSimulation::advance`] (the property tests do).
    ///
    /// # Panics
    /// If the thread cannot be started (a bug, reported with its cause).
    #[allow(clippy::expect_used)]
    pub async fn start(&self, seed: u64) -> LiveSimulation {
        let inner = match &self.custom_model {
            Some(make) => make(),
            None => Arc::new(self.model.clone()),
        };
        let model: Arc<dyn Model> = Arc::new(Jitter {
            inner,
            seed,
            max: self.jitter,
        });
        let mut builder = DelegationBuilder::new(model)
            .system_prompt(self.parent_prompt.clone())
            .tools(self.tools.clone())
            .clock(Arc::new(TokioClock::new(SIMULATION_EPOCH_MS)));
        if let Some(configure) = &self.configure {
            builder = configure(builder);
        }
        let (thread, events) = ThreadHandle::spawn(builder, None)
            .await
            .expect("the simulated thread starts");
        LiveSimulation {
            thread,
            events,
            start: Instant::now(),
            log: Vec::new(),
            transcript: Transcript::new(),
        }
    }
}

/// A running scenario, driven step by step.
#[derive(Debug)]
pub struct LiveSimulation {
    thread: ThreadHandle,
    events: subagents_actors::EventStream,
    start: Instant,
    log: Vec<Logged>,
    transcript: Transcript,
}

impl LiveSimulation {
    /// Lets virtual time run for `duration`, logging what happens.
    pub async fn advance(&mut self, duration: Duration) {
        let until = self.start.elapsed() + duration;
        self.advance_to(until).await;
    }

    /// Lets virtual time run until `at` since the start.
    pub async fn advance_to(&mut self, at: Duration) {
        let deadline = self.start + at;
        loop {
            tokio::select! {
                biased;
                event = self.events.recv() => match event {
                    Some(event) => self.record(event),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        self.drain();
    }

    /// Does a host action now. An action that can let a held wake through
    /// is logged just before it is sent; one that holds wakes back, once
    /// it has taken effect — so a check never sees a wake on the wrong
    /// side of the action that allowed or barred it.
    pub async fn act(&mut self, action: HostAction) {
        let releases = action.releases_wakes();
        if releases {
            self.drain();
            self.push_host(action.clone());
        }
        apply(&self.thread, &action).await;
        if !releases {
            self.drain();
            self.push_host(action);
        }
    }

    /// The log so far.
    pub fn log(&self) -> &[Logged] {
        &self.log
    }

    /// The thread's parent, hub and gate.
    pub fn parts(&self) -> &subagents_actors::DelegatingAgent {
        self.thread.parts()
    }

    /// Ends the run and reports.
    pub async fn finish(mut self) -> SimulationReport {
        self.drain();
        let parts = self.thread.parts().clone();
        let report = SimulationReport {
            log: self.log,
            transcript: self.transcript,
            envelopes: parts.hub.envelopes(),
            gate: parts.gate.snapshot().await.unwrap_or_default(),
            hub: parts.hub.snapshot().await.unwrap_or_default(),
            elapsed: self.start.elapsed(),
        };
        self.thread.close();
        report
    }

    fn record(&mut self, event: AgentEvent) {
        self.transcript.apply(&event);
        self.log.push(Logged {
            at: self.start.elapsed(),
            entry: LogEntry::Event(event),
        });
    }

    fn push_host(&mut self, action: HostAction) {
        self.log.push(Logged {
            at: self.start.elapsed(),
            entry: LogEntry::Host(action),
        });
    }

    fn drain(&mut self) {
        while let Some(event) = self.events.try_recv() {
            self.record(event);
        }
    }
}

impl HostAction {
    /// True for actions that can let a held wake through (typing stops,
    /// the thread comes on screen, the parent is stopped, a user turn).
    pub fn releases_wakes(&self) -> bool {
        matches!(
            self,
            HostAction::Typing(false)
                | HostAction::OnScreen(true)
                | HostAction::StopParent
                | HostAction::User(_)
        )
    }
}

async fn apply(thread: &ThreadHandle, action: &HostAction) {
    let _ = match action {
        HostAction::User(text) => thread.send_user(text.clone()),
        HostAction::Typing(on) => thread.typing(*on),
        HostAction::OnScreen(on) => thread.on_screen(*on),
        HostAction::SwitchAway => thread.switch_away().await.map(drop),
        HostAction::StopParent => thread.stop_parent(),
        HostAction::Approve(id) => thread
            .resolve_approval(id.clone(), ApprovalDecision::Approve)
            .await
            .map(drop),
        HostAction::Deny(id) => thread
            .resolve_approval(id.clone(), ApprovalDecision::Deny)
            .await
            .map(drop),
        HostAction::StopChild(id) => {
            let _ = thread.parts().hub.stop(id).await;
            Ok(())
        }
    };
    // The action has taken effect once the supervisor has handled it.
    let _ = thread.sync().await;
}

/// Seeded latency before each call, derived from the request alone (so it
/// does not depend on call order).
struct Jitter {
    inner: Arc<dyn Model>,
    seed: u64,
    max: Duration,
}

impl Model for Jitter {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if self.max.is_zero() {
            return self.inner.stream(request);
        }
        // A fixed hash (FNV-1a), not `DefaultHasher`: its algorithm is
        // unspecified across toolchains, and a replay must not change with
        // the compiler.
        let mut hash = Fnv::new();
        hash.write(&self.seed.to_le_bytes());
        hash.write_str(request.system_prompt());
        hash.write_str(
            request
                .messages
                .iter()
                .find(|m| m.role == Role::User)
                .map(|m| m.content.as_str()),
        );
        hash.write(&(request.assistant_turns() as u64).to_le_bytes());
        let nanos = hash.0 % (self.max.as_nanos().max(1) as u64);
        let delay = Duration::from_nanos(nanos);
        let inner = self.inner.stream(request);
        Box::pin(futures_util::stream::unfold(
            (Some(delay), inner),
            |(delay, mut inner)| async move {
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                }
                let next = futures_util::StreamExt::next(&mut inner).await?;
                Some((next, (None, inner)))
            },
        ))
    }
}

/// FNV-1a, 64 bits: a hash whose every output is fixed by its definition.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// A string, or its absence, framed so that no two inputs collide by
    /// concatenation.
    fn write_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.write(&[1]);
                self.write(&(s.len() as u64).to_le_bytes());
                self.write(s.as_bytes());
            }
            None => self.write(&[0]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv;

    #[test]
    fn the_jitter_hash_is_fixed_by_its_definition() {
        // FNV-1a's published test vectors.
        let mut h = Fnv::new();
        h.write(b"");
        assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
        let mut h = Fnv::new();
        h.write(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
        let mut h = Fnv::new();
        h.write(b"foobar");
        assert_eq!(h.0, 0x8594_4171_f739_67e8);
    }
}
