//! The hub's answers that change no child: an approval routed to the
//! child that asked, and the counts.

use ractor::RpcReplyPort;
use subagents_messages::{AgentId, ApprovalRefusal, Envelope, HubSnapshot, SubAgentStatus};

use crate::agent::AgentMsg;
use crate::hub::lifecycle::HubState;

impl HubState {
    /// How a child at `depth` placed on `node` runs there: kept if its
    /// parent's node is lost (by the builder's setting: `Detach` is the
    /// user's parent's, so a grandchild — whose result nobody could read
    /// — never is), with the delegation tools' names.
    pub(super) fn remote_on(
        &self,
        node: std::sync::Arc<dyn crate::remote::NodeLink>,
        depth: u32,
    ) -> crate::remote::Remote {
        crate::remote::Remote {
            node,
            keep_if_orphaned: self.config.keep_orphans && depth <= 1,
            approvals_after: self.config.approvals_after,
            delegation: self
                .config
                .delegation_tools
                .get()
                .into_iter()
                .flatten()
                .map(|t| t.name().to_owned())
                .collect(),
        }
    }

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
        // An earlier session's child: what it asked closed with its
        // process (a host's restored row read `Unknown`, "no agent asked
        // it") — also once a message brought it into the book, which
        // keeps no count of what it asked then. Else, ended: answered
        // (how), one it asked for and nobody answered (`Ended`), any
        // other number (`Unknown`: no agent asked it).
        let refusal = if self.archived(&owner).is_some() {
            ApprovalRefusal::Ended(id)
        } else if self.book.contains(&owner) && self.book.is_terminal(&owner) {
            self.book.approval_refusal(id, &owner, n)
        } else {
            ApprovalRefusal::Unknown(id)
        };
        let _ = reply.send(Err(refusal));
    }

    /// A child's status: the book's, else an earlier session's from the
    /// archive.
    pub(super) fn status_of(&self, id: &AgentId) -> Option<SubAgentStatus> {
        self.book
            .status(id)
            .or_else(|| self.archived(id).map(|e| e.status))
    }

    /// A child whose turn is over though it has not ended: its answer
    /// given while its own children stop, or its end notice still on its
    /// way (a wall clock that ran out in the poll its call was sent in).
    pub(super) fn turn_over(&self, id: &AgentId) -> bool {
        // One lookup: the thread's parent (most requests) is no child.
        self.children
            .get(id)
            .is_some_and(|c| c.ending.is_some() || self.book.turn_over(id))
    }

    /// A requester no child is added under (nor started for): its turn is
    /// over, or it is being stopped or interrupted — its turn ends at its
    /// agent's next read, and a child added under it meanwhile started
    /// for nobody, uncounted by the stop-all that stopped it. (Not
    /// [`HubState::turn_over`]: a cascade of a child being interrupted
    /// still prefers the stop.)
    pub(super) fn takes_no_children(&self, id: &AgentId) -> bool {
        self.children
            .get(id)
            .is_some_and(|c| c.ending.is_some() || c.stopping.is_some() || self.book.turn_over(id))
    }

    /// The envelope of an earlier session's child `id`, from the archive.
    pub(super) fn archived(&self, id: &AgentId) -> Option<Envelope> {
        let archive = self.archive.as_ref().and_then(|slot| slot.get())?;
        archive.get(id)
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
