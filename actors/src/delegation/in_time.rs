//! A synchronous child (`delegate_task`, `agent`) still queued when its
//! wall-clock cap runs out: nothing else acts on a queued child's cap,
//! which only its start reads, and the requester's own limit cut its turn.

use subagents_messages::{AgentId, Envelope, SubAgentStatus};

use super::answers::{lost, not_started};
use super::engine::{Delegator, ParentStopPolicy, Waited, refuse};
use super::parent_stop::OnParentStop;
use crate::hub::DetachOutcome;
use crate::tool::{ToolCallContext, ToolError};

impl Delegator {
    /// A synchronous child still queued at its wall-clock cap. The parent's
    /// goes on in the background, its result a message (as an inline
    /// wait's that runs out); a child's is dropped — in the background it
    /// would stop when its requester ends, and tell nobody.
    pub(super) async fn not_started_in_time(
        &self,
        call: &ToolCallContext,
        id: &AgentId,
        cap: std::time::Duration,
        answer: impl Fn(&Envelope) -> Result<String, ToolError>,
    ) -> Result<String, ToolError> {
        if call.depth == 0 {
            let note = not_started(id, cap, true, self.woken);
            call.on_cut(note.clone());
            // Cut while it waits for the hub's answer (a slot freed in the
            // tick, the child started: nothing detached), the child goes
            // to the background, as the note says: it ran inline with
            // nobody waiting, its result a message to nobody.
            let cut = OnParentStop::armed(self.hub().clone(), id.clone(), ParentStopPolicy::Detach);
            call.slot.on_cut_hand_on(cut.hand_on());
            let detached = self.hub().detach(id, true).await;
            cut.disarm();
            return match detached {
                DetachOutcome::Detached => Err(refuse(note)),
                DetachOutcome::AlreadyFinished(envelope) => {
                    let output = answer(&envelope);
                    self.deliver(call, &envelope, &output);
                    output
                }
                // Admitted as the cap ran out (its wall clock what was left
                // of the cap): it runs to its end, and this call reads it.
                DetachOutcome::Started => match self.wait_inline(call, id, None, answer).await {
                    Waited::Delivered(output) => output,
                    _ => lost(id),
                },
                DetachOutcome::Unknown => lost(id),
            };
        }
        if self.hub().stop_asked(id, call).await.is_err() {
            return match self.wait_inline(call, id, None, answer).await {
                Waited::Delivered(output) => output,
                _ => lost(id),
            };
        }
        let never = |e: &Envelope| match e.status {
            SubAgentStatus::Stopped => Err(refuse(not_started(id, cap, false, self.woken))),
            _ => answer(e),
        };
        match self.wait_inline(call, id, None, never).await {
            Waited::Delivered(output) => output,
            _ => lost(id),
        }
    }
}
