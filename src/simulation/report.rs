//! Host actions, the log and the report.

use std::time::Duration;

use crate::simulation::Moment;
use subagents_messages::{
    AgentEvent, AgentId, ApprovalId, Envelope, GateSnapshot, HubSnapshot, Transcript,
};

/// The wall-clock reading at the start of every simulation.
pub(crate) const SIMULATION_EPOCH_MS: u64 = 1_767_225_600_000;

/// Something the host does at a virtual time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAction {
    /// The user sends a message.
    User(String),
    /// The user starts (`true`) or stops typing.
    Typing(bool),
    /// The thread goes on (`true`) or off screen.
    OnScreen(bool),
    /// The host switches threads away as `ThreadHandle::switch_away` does
    /// (stop-all, pending wakes dropped): the thread stays on screen, so
    /// a child its parent starts afterwards still wakes it. A `Threads`
    /// switch also takes the one left off screen: follow it with
    /// `OnScreen(false)` at the same instant.
    SwitchAway,
    /// The user stops the parent's turn.
    StopParent,
    /// The host approves an approval (ids are deterministic:
    /// `parent-approval-1`, `agent_2-approval-1`, … — on a store, the
    /// parent's and its children's numbers from their thread's block of
    /// the store's session: docs/simulation.md).
    Approve(ApprovalId),
    /// The host denies an approval.
    Deny(ApprovalId),
    /// The host stops a child by id.
    StopChild(AgentId),
}

/// One line of a simulation's log, with its virtual time since the start
/// (`at`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEntry {
    /// An event the thread emitted.
    Event {
        /// Virtual time since the start.
        at: Duration,
        /// The event.
        event: AgentEvent,
    },
    /// A host action, placed after every event emitted before it took
    /// effect and before every event emitted after.
    Host {
        /// Virtual time since the start.
        at: Duration,
        /// The action.
        action: HostAction,
    },
    /// A trigger fired on `child`'s `moment`: the next `Host` entry is
    /// its action (events emitted while the action took effect may come
    /// between).
    Fired {
        /// Virtual time since the start.
        at: Duration,
        /// The child whose event fired it.
        child: AgentId,
        /// The moment that fired it.
        moment: Moment,
    },
    /// The host action just logged was refused (an approval id that was
    /// never asked, a child that does not exist, a closed thread): it
    /// took no effect, and why.
    Refused {
        /// Virtual time since the start.
        at: Duration,
        /// Why, as the thread's handle said it.
        why: String,
    },
}

impl LogEntry {
    /// Virtual time since the start.
    pub fn at(&self) -> Duration {
        match self {
            LogEntry::Event { at, .. }
            | LogEntry::Host { at, .. }
            | LogEntry::Fired { at, .. }
            | LogEntry::Refused { at, .. } => *at,
        }
    }

    /// The event, if this line is one.
    pub fn event(&self) -> Option<&AgentEvent> {
        match self {
            LogEntry::Event { event, .. } => Some(event),
            LogEntry::Host { .. } | LogEntry::Fired { .. } | LogEntry::Refused { .. } => None,
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct SimulationReport {
    /// Everything, in order, the thread's close included.
    pub log: Vec<LogEntry>,
    /// The events folded into a transcript (with user turns).
    pub transcript: Transcript,
    /// Every child's final envelope, in request order.
    pub envelopes: Vec<Envelope>,
    /// The gate as the run left it (before the thread's close). A run
    /// closed first ([`LiveSimulation::close`](super::LiveSimulation::close))
    /// has no gate of its own left to read: the default (all zero) — a
    /// gate given to the builder (or the registry's) runs on, read as it
    /// is then.
    pub gate: GateSnapshot,
    /// The hub as the run left it (before the thread's close); the
    /// default after [`LiveSimulation::close`](super::LiveSimulation::close),
    /// as `gate`.
    pub hub: HubSnapshot,
    /// Virtual time simulated.
    pub elapsed: Duration,
    /// The triggers still armed when the run ended, in the order added:
    /// the child each waited for (`None`: any) and its moment. Each never
    /// fired — its child never came to that moment (an id a reused store
    /// numbers later, `Queued` for a child that started at once, `Text`
    /// for a call that writes none) — so an assertion about what followed
    /// its action held without it; assert this is empty. [`render`] ends
    /// with one `UNFIRED agent_9 Ended` line for each (`any` for `None`).
    /// (A trigger that never fired left no trace:
    /// `a_trigger_that_never_fired_is_in_the_report`.)
    ///
    /// [`render`]: SimulationReport::render
    pub unfired: Vec<(Option<AgentId>, Moment)>,
}

impl SimulationReport {
    /// The events only, in order.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.log.iter().filter_map(|l| l.event().cloned()).collect()
    }

    /// Children whose results woke the parent, in order.
    pub fn wakes(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Wake { child, .. } => Some(child.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The log as readable lines (`t=12.000s  event …`), for failures,
    /// then a line for each trigger that never fired
    /// (`t=…  UNFIRED agent_9 Ended`, at the run's end:
    /// [`SimulationReport::unfired`]).
    pub fn render(&self) -> String {
        let mut text = render(&self.log);
        for (child, moment) in &self.unfired {
            let child = child.as_ref().map_or("any", AgentId::as_str);
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!(
                "t={:>9.3}s  UNFIRED {child} {moment:?}",
                self.elapsed.as_secs_f64()
            ));
        }
        text
    }
}

/// A log as readable lines (`t=12.000s  event …`), for failures.
pub(crate) fn render(log: &[LogEntry]) -> String {
    log.iter()
        .map(|l| {
            let what = match l {
                LogEntry::Event { event, .. } => format!("{event:?}"),
                LogEntry::Host { action, .. } => format!("HOST {action:?}"),
                LogEntry::Fired { child, moment, .. } => format!("FIRED {child} {moment:?}"),
                LogEntry::Refused { why, .. } => format!("REFUSED {why}"),
            };
            format!("t={:>9.3}s  {what}", l.at().as_secs_f64())
        })
        .collect::<Vec<_>>()
        .join("\n")
}
