//! What the agent answers from its state: an approval's verdict, its
//! snapshot.

use subagents_messages::{AgentSnapshot, ApprovalDecision, ApprovalId, ApprovalRefusal};

use super::AgentState;
use crate::agent::turn_state;

impl AgentState {
    /// Answers an approval: emits `ApprovalResolved` on the turn's stream
    /// and hands the decision to the waiting tool call, or says why not.
    pub(super) fn resolve_approval(
        &mut self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> Result<(), ApprovalRefusal> {
        let Some(responder) = self.approvals.remove(&id) else {
            return Err(self
                .closed_approvals
                .get(&id)
                .cloned()
                .unwrap_or(ApprovalRefusal::Unknown(id)));
        };
        let resolved = self.running.as_ref().is_some_and(|r| {
            turn_state::resolve_approval(&r.shared, &r.sink, &id, decision, responder)
        });
        if resolved {
            self.closed_approvals.insert(
                id.clone(),
                ApprovalRefusal::AlreadyAnswered { id, decision },
            );
            Ok(())
        } else {
            self.closed_approvals
                .insert(id.clone(), ApprovalRefusal::Ended(id.clone()));
            Err(ApprovalRefusal::Ended(id))
        }
    }

    pub(super) fn snapshot(&self) -> AgentSnapshot {
        AgentSnapshot {
            busy: self.running.is_some(),
            queued_turns: self.waiting.len(),
            pending_approvals: self.approvals.len(),
            turns_finished: self.turns_finished,
            usage: self.totals.usage,
            children_usage: self.totals.children_usage,
            model_calls: self.totals.model_calls,
            tool_calls: self.totals.tool_calls,
        }
    }
}
