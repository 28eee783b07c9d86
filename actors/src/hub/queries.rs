//! The hub's answers that change no child: an approval routed to the
//! child that asked, and the counts.

use ractor::RpcReplyPort;
use subagents_messages::{ApprovalRefusal, HubSnapshot};

use crate::agent::AgentMsg;
use crate::hub::lifecycle::HubState;

impl HubState {
    pub(super) fn resolve_approval(
        &self,
        id: subagents_messages::ApprovalId,
        decision: subagents_messages::ApprovalDecision,
        reply: RpcReplyPort<Result<(), ApprovalRefusal>>,
    ) {
        let Some((owner, n)) = id.parts() else {
            let _ = reply.send(Err(ApprovalRefusal::Unknown(id)));
            return;
        };
        if let Some(agent) = self.children.get(&owner).and_then(|c| c.agent.as_ref()) {
            let _ = agent.actor_ref().cast(AgentMsg::ResolveApproval {
                id,
                decision,
                reply,
            });
            return;
        }
        // Ended: answered (how), one it asked for and nobody answered
        // (`Ended`), any other number (`Unknown`: no agent asked it).
        let refusal = if self.book.is_terminal(&owner) {
            self.book.approval_refusal(id, &owner, n)
        } else {
            ApprovalRefusal::Unknown(id)
        };
        let _ = reply.send(Err(refusal));
    }

    pub(super) fn snapshot(&self) -> HubSnapshot {
        let (usage, model_calls, tool_calls) = self.book.totals();
        HubSnapshot {
            max_live: self.slots.max_live(),
            live: self.slots.live(),
            queued: self.slots.queued(),
            requested: self.requested,
            finished: self.finished,
            usage,
            model_calls,
            tool_calls,
        }
    }
}
