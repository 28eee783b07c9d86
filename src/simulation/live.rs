//! A running scenario, driven step by step.

use std::time::Duration;

use subagents_messages::{AgentEvent, AgentId, ApprovalDecision, SubAgentStatus, Transcript};
use subagents_supervisor::ThreadHandle;
use tokio::time::Instant;

use crate::simulation::report::{HostAction, LogEntry, SimulationReport};
use crate::simulation::trigger::{Moment, Trigger};

/// A running scenario, driven step by step. Drive it from a task of its
/// own (`tokio::spawn`), not from a runtime's `block_on` future, which is
/// polled only between bursts of the other tasks: a trigger then reacts
/// late, never at the instant.
#[derive(Debug)]
pub struct LiveSimulation {
    thread: ThreadHandle,
    events: subagents_actors::EventStream,
    start: Instant,
    log: Vec<LogEntry>,
    transcript: Transcript,
    triggers: Vec<Trigger>,
    /// Children the parent no longer waits on inline.
    background: std::collections::HashSet<subagents_messages::AgentId>,
    /// Events read while the host acted (logged, not yet offered to the
    /// triggers): offered in order once the action is done.
    unfired: std::collections::VecDeque<AgentEvent>,
}

/// A simulation dropped closes its thread (sent, not waited for): a
/// `finish` given up before its close (a `select!`, a timeout) left the
/// thread running, its id held on its store — the next scenario opening
/// that id on that store was refused.
impl Drop for LiveSimulation {
    fn drop(&mut self) {
        self.thread.close();
    }
}

impl LiveSimulation {
    pub(super) fn new(thread: ThreadHandle, events: subagents_actors::EventStream) -> Self {
        Self {
            thread,
            events,
            start: Instant::now(),
            log: Vec::new(),
            transcript: Transcript::new(),
            triggers: Vec::new(),
            background: Default::default(),
            unfired: Default::default(),
        }
    }

    /// Does `trigger`'s action the moment its child event is read, after
    /// its scheduler turns (once; the first match fires it).
    pub fn on(&mut self, trigger: Trigger) {
        // Armed for this run: a `Trigger::per_run` action made afresh (a
        // clone given to two runs shared one guard, and the second run
        // logged otherwise).
        self.triggers.push(trigger.armed());
    }

    /// Lets virtual time run for `duration`, logging what happens.
    ///
    /// # Cancel safety
    /// Not cancel-safe: dropped while a trigger waits out its scheduler
    /// turns, that trigger is spent without acting, and an action being
    /// sent may take effect before its log entry. Await it to the end (a
    /// harness bounds the run with virtual time, not a `select!`).
    pub async fn advance(&mut self, duration: Duration) {
        let until = self.start.elapsed().saturating_add(duration);
        self.advance_to(until).await;
    }

    /// Lets virtual time run until `at` since the start.
    ///
    /// # Cancel safety
    /// Not cancel-safe: dropped while a trigger waits out its scheduler
    /// turns, that trigger is spent without acting, and an action being
    /// sent may take effect before its log entry. Await it to the end (a
    /// harness bounds the run with virtual time, not a `select!`).
    pub async fn advance_to(&mut self, at: Duration) {
        // Past what an `Instant` holds (`Duration::MAX`: until it
        // settles), thirty years of virtual time: adding it panicked.
        let bounded = self.start.checked_add(at);
        let deadline =
            bounded.unwrap_or_else(|| self.start + Duration::from_secs(30 * 365 * 24 * 60 * 60));
        // What the last action read is offered first.
        self.fire_unfired().await;
        loop {
            tokio::select! {
                biased;
                event = self.events.recv() => match event {
                    Some(event) => {
                        self.record(event.clone());
                        self.fire(&event).await;
                        self.fire_unfired().await;
                    }
                    // Ended (closed, killed): the time still runs (what
                    // else shares its gate or store, the clock of what
                    // follows) — returned at once, a later action or a
                    // `finish` read the old instant. Not "until it
                    // settles": it has.
                    None => {
                        if bounded.is_some() {
                            tokio::time::sleep_until(deadline).await;
                        }
                        break;
                    }
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        self.drain();
        self.fire_unfired().await;
    }

    /// Offers the events read while the host acted to the triggers, in
    /// order (an action they fire may read more; those follow).
    async fn fire_unfired(&mut self) {
        while let Some(event) = self.unfired.pop_front() {
            self.fire(&event).await;
        }
    }

    /// Does a host action now. An action that can let a held wake through
    /// is logged just before it is sent; one that holds wakes back, once
    /// it has taken effect — so a check never sees a wake on the wrong
    /// side of the action that allowed or barred it.
    ///
    /// # Cancel safety
    /// Not cancel-safe: dropped after the action was sent, it may take
    /// effect with no log entry. Await it to the end.
    pub async fn act(&mut self, action: HostAction) {
        self.apply(action).await;
        // What it read as it took effect (a stop's own terminal status)
        // is offered now: it waited for the next `advance`, after the
        // host's next action, or — `finish` next — for ever.
        self.fire_unfired().await;
    }

    /// Does `actions` in one instant, as a host reacting to one event with
    /// several calls does: each is sent before any is awaited (a stop and
    /// an approval's answer, a stop and a switch, in one tick). Logged as
    /// [`LiveSimulation::act`] logs them: what can let a held wake through
    /// (and an approval's answer) before it is sent, what holds wakes back
    /// once all have taken effect.
    ///
    /// # Cancel safety
    /// As [`LiveSimulation::act`]'s: await it to the end.
    pub async fn act_together(&mut self, actions: Vec<HostAction>) {
        let first = |a: &HostAction| {
            a.releases_wakes() || matches!(a, HostAction::Approve(_) | HostAction::Deny(_))
        };
        self.drain();
        let logged = self.log.len();
        for action in actions.iter().filter(|a| first(a)) {
            self.push_host(action.clone());
        }
        let refused =
            futures_util::future::join_all(actions.iter().map(|a| apply(&self.thread, a))).await;
        // Each refusal just after its own action's entry, as `act` logs
        // it: all put after the last, a refusal read as the next action's.
        let at = self.start.elapsed();
        let said = |why: Result<(), String>| why.err().map(|why| LogEntry::Refused { at, why });
        let (early, late): (Vec<_>, Vec<_>) = actions
            .into_iter()
            .zip(refused)
            .partition(|(action, _)| first(action));
        let hosts = self.log.split_off(logged);
        for (host, (_, why)) in hosts.into_iter().zip(early) {
            self.log.push(host);
            self.log.extend(said(why));
        }
        self.drain();
        for (action, why) in late {
            self.push_host(action);
            self.log.extend(said(why));
        }
        self.fire_unfired().await;
    }

    /// [`LiveSimulation::act`] without offering what it read (a trigger's
    /// action, offered by the loop that fired it).
    async fn apply(&mut self, action: HostAction) {
        // Logged before it is sent when it lets something through: a held
        // wake, or a call waiting on the host (an approval answer let the
        // child's `ApprovalResolved`, its end and a wake come before it).
        let log_first = action.releases_wakes()
            || matches!(action, HostAction::Approve(_) | HostAction::Deny(_));
        if log_first {
            self.drain();
            self.push_host(action.clone());
        }
        let refused = apply(&self.thread, &action).await.err();
        if !log_first {
            self.drain();
            self.push_host(action);
        }
        // Said, not dropped: a refused action was logged as if it had
        // taken effect, and the test read a run it never had.
        if let Some(why) = refused {
            self.log.push(LogEntry::Refused {
                at: self.start.elapsed(),
                why,
            });
        }
        // What it let through while it took effect (an approval's child
        // ending, a released wake): read now, offered before the host's
        // next action — left in the channel, it was read, and its trigger
        // fired, only after that action had taken effect.
        if log_first {
            self.drain();
        }
    }

    /// Fires every armed trigger `event` matches, in the order they were
    /// added, each after its own yields (only the first fired: a second
    /// trigger on the same moment waited for a later such event, for ever
    /// for a child's `Result` or `Ended`).
    async fn fire(&mut self, event: &AgentEvent) {
        // A grandchild's event, as its own level shows it.
        let event = crate::simulation::Moment::unnested(event);
        // Inline as the event finds it: the hand-off itself
        // (`ChildStatus(background)`) is an inline child's last moment
        // — `Moment::Background` with `inline_only` is "the moment an
        // inline child is handed off", and read after the hand-off was
        // marked it never fired. A child started in the background never
        // was inline.
        let inline = event
            .child_id()
            .is_some_and(|id| !self.background.contains(id))
            && !matches!(event, AgentEvent::ChildStarted(info) if info.background);
        match event {
            AgentEvent::ChildStarted(info) if info.background => {
                self.background.insert(info.id.clone());
            }
            AgentEvent::ChildStatus(id, SubAgentStatus::Background) => {
                self.background.insert(id.clone());
            }
            _ => {}
        }
        // Each action is asked for once: a stateful one (a counter, a
        // fire-once guard) sees each event once.
        let mut fired = Vec::new();
        let mut armed = Vec::with_capacity(self.triggers.len());
        for trigger in std::mem::take(&mut self.triggers) {
            match trigger.fire(event, inline) {
                Some(action) => fired.push((trigger.yields, action)),
                None => armed.push(trigger),
            }
        }
        self.triggers = armed;
        for (yields, action) in fired {
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            if let Some((child, moment)) = crate::simulation::Moment::of(event) {
                self.log.push(LogEntry::Fired {
                    at: self.start.elapsed(),
                    child: child.clone(),
                    moment,
                });
            }
            self.apply(action).await;
        }
    }

    /// The log so far.
    pub fn log(&self) -> &[LogEntry] {
        &self.log
    }

    /// The log so far as readable lines (`t=12.000s  event …`), for
    /// failures.
    pub fn render(&self) -> String {
        crate::simulation::report::render(&self.log)
    }

    /// The thread's handle.
    pub fn thread(&self) -> &ThreadHandle {
        &self.thread
    }

    /// Closes the thread and waits until everything it made has stopped
    /// (its envelopes written), logging what it emitted meanwhile. The
    /// close is sent when this is called, not when first polled.
    pub fn close(&mut self) -> impl std::future::Future<Output = ()> + '_ {
        let closed = self.thread.close_and_wait();
        async move {
            closed.await;
            self.drain();
        }
    }

    /// Ends the run and reports: the gate and hub as the run left them,
    /// then the thread closed — what the close emitted (a child still
    /// running ends `stopped`) is in the log, and every envelope is final
    /// (on its store too). After [`LiveSimulation::close`] the hub and a
    /// gate the thread made are gone: their snapshots are the defaults
    /// (read them before the close to assert on them).
    pub async fn finish(mut self) -> SimulationReport {
        self.drain();
        self.fire_unfired().await;
        // Said, not dropped: a trigger that never fired left no trace,
        // and the test's assertion about what followed it held vacuously.
        let unfired = self.unfired_triggers();
        let elapsed = self.start.elapsed();
        let gate = self.thread.gate().snapshot().await.unwrap_or_default();
        let hub = self.thread.hub().snapshot().await.unwrap_or_default();
        self.close().await;
        SimulationReport {
            envelopes: self.thread.hub().envelopes(),
            log: std::mem::take(&mut self.log),
            transcript: std::mem::take(&mut self.transcript),
            gate,
            hub,
            elapsed,
            unfired,
        }
    }

    /// The triggers still armed (none of their events read yet), in the
    /// order added: the child each waits for (`None`: any) and its moment
    /// — at the end, the report's [`SimulationReport::unfired`].
    pub fn unfired_triggers(&self) -> Vec<(Option<AgentId>, Moment)> {
        self.triggers
            .iter()
            .map(|t| (t.child.clone(), t.moment))
            .collect()
    }

    fn record(&mut self, event: AgentEvent) {
        self.transcript.apply(&event);
        self.log.push(LogEntry::Event {
            at: self.start.elapsed(),
            event,
        });
    }

    fn push_host(&mut self, action: HostAction) {
        self.log.push(LogEntry::Host {
            at: self.start.elapsed(),
            action,
        });
    }

    /// Logs what is there to read; the triggers are offered it later
    /// ([`LiveSimulation::fire_unfired`]).
    fn drain(&mut self) {
        while let Some(event) = self.events.try_recv() {
            self.record(event.clone());
            self.unfired.push_back(event);
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

/// Applies `action`; why the thread refused it, if it did.
async fn apply(thread: &ThreadHandle, action: &HostAction) -> Result<(), String> {
    let applied = match action {
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
        HostAction::StopChild(id) => thread.stop_child(id).await.map(drop),
    };
    // The action has taken effect once the supervisor has handled it.
    let _ = thread.sync().await;
    applied.map_err(|e| e.to_string())
}
