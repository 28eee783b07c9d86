//! Host actions fired the moment a child event is read: the edges where a
//! stop, a switch or an answer lands in the same instant as a completion.

use std::sync::Arc;

use subagents_messages::{AgentEvent, AgentId, SubAgentStatus};

use crate::simulation::report::HostAction;

/// A moment in a child's life, as its parent's stream shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Moment {
    /// `ChildStatus(queued)`: it waits for a slot.
    Queued,
    /// `ChildRunning` or `ChildStatus(running)`: it starts.
    Running,
    /// `ChildStatus(background)`: the parent no longer waits on it.
    Background,
    /// One of its own `Text` deltas: it is in a model call.
    Text,
    /// One of its own `ToolStarted`: it is in a tool.
    ToolStarted,
    /// One of its own `ToolResult`s.
    ToolResult,
    /// One of its own `ApprovalRequested`.
    ApprovalRequested,
    /// Its own `Result`: its turn just ended, the hub has not seen it yet.
    Result,
    /// Its terminal status.
    Ended,
}

impl Moment {
    /// Every moment, in life order.
    pub const ALL: [Moment; 9] = [
        Moment::Queued,
        Moment::Running,
        Moment::Background,
        Moment::Text,
        Moment::ToolStarted,
        Moment::ToolResult,
        Moment::ApprovalRequested,
        Moment::Result,
        Moment::Ended,
    ];

    /// The child and the moment an event shows, if any — a sub-agent's
    /// own sub-agent's too, whose events arrive nested in its parent's
    /// (`Child(agent_1, Child(agent_2, …))`): a trigger on it never fired.
    pub fn of(event: &AgentEvent) -> Option<(&AgentId, Moment)> {
        let event = Self::unnested(event);
        let moment = match event {
            AgentEvent::ChildStatus(_, SubAgentStatus::Queued) => Moment::Queued,
            AgentEvent::ChildStatus(_, SubAgentStatus::Running) | AgentEvent::ChildRunning(_) => {
                Moment::Running
            }
            AgentEvent::ChildStatus(_, SubAgentStatus::Background) => Moment::Background,
            AgentEvent::ChildStatus(_, _) => Moment::Ended,
            AgentEvent::Child(_, inner) => match &**inner {
                AgentEvent::Text(_) => Moment::Text,
                AgentEvent::ToolStarted(_) => Moment::ToolStarted,
                AgentEvent::ToolResult(_) => Moment::ToolResult,
                AgentEvent::ApprovalRequested(_) => Moment::ApprovalRequested,
                AgentEvent::Result(_) => Moment::Result,
                _ => return None,
            },
            _ => return None,
        };
        Some((event.child_id()?, moment))
    }

    /// `event` at its own child's level: a grandchild's event arrives
    /// wrapped in its parent's (`Child(agent_1, Child(agent_2, …))`,
    /// `Child(agent_1, ChildStatus(agent_2, …))`), unwrapped to the
    /// innermost child event.
    pub(crate) fn unnested(event: &AgentEvent) -> &AgentEvent {
        let mut event = event;
        while let AgentEvent::Child(_, inner) = event
            && matches!(
                **inner,
                AgentEvent::Child(..)
                    | AgentEvent::ChildStatus(..)
                    | AgentEvent::ChildRunning(_)
                    | AgentEvent::ChildStarted(_)
            )
        {
            event = inner;
        }
        event
    }
}

/// What a trigger does, given the child and the event that fired it
/// (`None`: nothing, e.g. no approval to answer).
pub(crate) type TriggerAction =
    Arc<dyn Fn(&AgentId, &AgentEvent) -> Option<HostAction> + Send + Sync>;

/// A host action fired once, the first time a child event matches.
#[derive(Clone)]
pub struct Trigger {
    /// Which child (`None`: any).
    pub child: Option<AgentId>,
    /// At which moment.
    pub moment: Moment,
    /// Scheduler turns the host lets pass before it acts (0: at once).
    pub yields: u32,
    /// Only a child its parent waits on inline (not started with
    /// `wait: false`, not handed to the background yet).
    pub inline_only: bool,
    /// What it does.
    action: TriggerAction,
    /// Makes a fresh action for each run ([`Trigger::per_run`]).
    make: Option<Arc<dyn Fn() -> TriggerAction + Send + Sync>>,
}

impl std::fmt::Debug for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trigger")
            .field("child", &self.child)
            .field("moment", &self.moment)
            .field("yields", &self.yields)
            .field("inline_only", &self.inline_only)
            .finish_non_exhaustive()
    }
}

impl Trigger {
    /// Fires `action` at `moment` of `child` (any child when `None`).
    pub fn new(
        child: Option<AgentId>,
        moment: Moment,
        action: impl Fn(&AgentId, &AgentEvent) -> Option<HostAction> + Send + Sync + 'static,
    ) -> Self {
        Self {
            child,
            moment,
            yields: 0,
            inline_only: false,
            action: Arc::new(action),
            make: None,
        }
    }

    /// Like [`Trigger::new`], with an action `make` builds afresh for each
    /// run of the scenario: the state it captures (a counter, a fire-once
    /// guard) starts over, so the same scenario and seed give the same
    /// log run after run. An action given to [`Trigger::new`] is one
    /// closure shared by every run — a guard that fired in the first run
    /// stays fired in the second.
    pub fn per_run<F>(
        child: Option<AgentId>,
        moment: Moment,
        make: impl Fn() -> F + Send + Sync + 'static,
    ) -> Self
    where
        F: Fn(&AgentId, &AgentEvent) -> Option<HostAction> + Send + Sync + 'static,
    {
        let make: Arc<dyn Fn() -> TriggerAction + Send + Sync> =
            Arc::new(move || Arc::new(make()) as TriggerAction);
        Self {
            action: make(),
            make: Some(make),
            ..Self::new(child, moment, |_, _| None)
        }
    }

    /// This trigger as one run arms it: a [`Trigger::per_run`] action made
    /// afresh.
    pub(crate) fn armed(&self) -> Self {
        let mut armed = self.clone();
        if let Some(make) = &self.make {
            armed.action = make();
        }
        armed
    }

    /// Fires only on a child its parent waits on inline.
    pub fn inline_only(mut self) -> Self {
        self.inline_only = true;
        self
    }

    /// Lets `yields` scheduler turns pass before acting.
    pub fn after_yields(mut self, yields: u32) -> Self {
        self.yields = yields;
        self
    }

    /// The action to take if `event` fires this trigger; `inline` tells
    /// whether the event's child is waited on inline.
    pub fn fire(&self, event: &AgentEvent, inline: bool) -> Option<HostAction> {
        // Its action reads the event at its child's own level.
        let event = Moment::unnested(event);
        let (child, moment) = Moment::of(event)?;
        if moment != self.moment
            || self.child.as_ref().is_some_and(|c| c != child)
            || (self.inline_only && !inline)
        {
            return None;
        }
        (self.action)(child, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use subagents_messages::{AgentResult, Outcome};

    fn result() -> AgentEvent {
        AgentEvent::Result(Box::new(AgentResult {
            text: String::new(),
            outcome: Outcome::Completed,
            model_calls: 0,
            tool_calls: 0,
            usage: Default::default(),
            children_usage: Default::default(),
            elapsed: Default::default(),
        }))
    }

    #[test]
    fn moments_are_read_off_top_level_child_events() {
        let id = AgentId::new("agent_1");
        let child_result = AgentEvent::Child(id.clone(), Box::new(result()));
        assert_eq!(Moment::of(&child_result), Some((&id, Moment::Result)));
        let ended = AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Done);
        assert_eq!(Moment::of(&ended), Some((&id, Moment::Ended)));
        let running = AgentEvent::ChildRunning(id.clone());
        assert_eq!(Moment::of(&running), Some((&id, Moment::Running)));
        assert_eq!(Moment::of(&result()), None, "the parent's own Result");
    }

    #[test]
    fn a_trigger_matches_its_child_and_moment_only() {
        let trigger = Trigger::new(Some(AgentId::new("agent_2")), Moment::Result, |id, _| {
            Some(HostAction::StopChild(id.clone()))
        });
        let of = |n: &str| AgentEvent::Child(AgentId::new(n), Box::new(result()));
        assert_eq!(trigger.fire(&of("agent_1"), true), None);
        assert_eq!(
            trigger.fire(&of("agent_2"), true),
            Some(HostAction::StopChild(AgentId::new("agent_2")))
        );
        let ended = AgentEvent::ChildStatus(AgentId::new("agent_2"), SubAgentStatus::Done);
        assert_eq!(trigger.fire(&ended, true), None);
        let inline = trigger.inline_only();
        assert_eq!(inline.fire(&of("agent_2"), false), None);
        assert!(inline.fire(&of("agent_2"), true).is_some());
    }
}
