//! The book's tap on a child's own events: its envelope kept current
//! (tool calls, usage), its approvals noted, its observers told each step.

use std::sync::Arc;

use dashmap::DashMap;
use rustc_hash::FxBuildHasher;

use subagents_messages::text::one_line;
use subagents_messages::{AgentEvent, AgentId, ApprovalDecision, ApprovalOutcome};

use crate::hub::book::{Book, TOOL_NAME_CHARS};
use crate::sink::Tapped;

impl Book {
    /// Keeps a child's envelope current from its own events (tool calls,
    /// usage), and tells `observers` each step it makes (an answer with
    /// calls, a call answered, a message taken: told once its turn's lock
    /// is let go, [`crate::sink::EventSink::stepped`]).
    pub(crate) fn tap(
        &self,
        id: AgentId,
        observers: Vec<Arc<dyn crate::hub::HubObserver>>,
    ) -> crate::sink::Tap {
        // A weak hold: the child's sink is kept in the book (its entry's
        // closer, its turn's ends), so a strong one is a cycle — a thread
        // killed without its stop, then let go, kept its whole book and
        // its host's stream open for good. Once the book is gone there is
        // no envelope to keep current.
        let entries = Arc::downgrade(&self.entries);
        Arc::new(move |tapped: Tapped<'_>| match tapped {
            // A host's bug must not break the child's events.
            Tapped::Stepped => {
                crate::hub::config::tell_each(&observers, "stepped", &id, |o| o.stepped(&id))
            }
            Tapped::Event(event) => {
                if let Some(entries) = entries.upgrade() {
                    tap_event(&entries, &id, event);
                }
            }
        })
    }
}

/// An event of the child `id`, kept in its envelope.
fn tap_event(
    entries: &DashMap<AgentId, Box<super::Entry>, FxBuildHasher>,
    id: &AgentId,
    event: &AgentEvent,
) {
    match event {
        AgentEvent::ApprovalRequested(request) => {
            if let (Some(mut entry), Some((_, n))) = (entries.get_mut(id), request.id.parts()) {
                entry.approvals_asked = entry.approvals_asked.max(n);
            }
        }
        AgentEvent::ApprovalResolved {
            id: asked, outcome, ..
        } => {
            let decision = match outcome {
                ApprovalOutcome::Approved => ApprovalDecision::Approve,
                ApprovalOutcome::Denied => ApprovalDecision::Deny,
                ApprovalOutcome::Cancelled(_) => return,
            };
            if let (Some(mut entry), Some((_, n))) = (entries.get_mut(id), asked.parts()) {
                let mut answered = std::mem::take(&mut entry.approvals_answered).into_vec();
                answered.push((n, decision));
                entry.approvals_answered = answered.into_boxed_slice();
            }
        }
        AgentEvent::ToolStarted(call) => {
            if let Some(mut entry) = entries.get_mut(id) {
                entry.envelope.tool_calls += 1;
                entry.envelope.last_tool = Some(one_line(&call.name, TOOL_NAME_CHARS));
            }
        }
        AgentEvent::Result(result) => {
            if let Some(mut entry) = entries.get_mut(id) {
                entry.envelope.usage = result.usage;
                entry.envelope.children_usage = result.children_usage;
                entry.envelope.model_calls = result.model_calls;
                entry.envelope.tool_calls = result.tool_calls;
            }
        }
        _ => {}
    }
}
