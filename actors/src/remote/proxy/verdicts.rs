//! The host's answers to a remote child's approvals, held until its node
//! says whether its agent took them: the node's `ApprovalResolved` (taken
//! as `Approved`/`Denied`, or `Cancelled`: its turn was cut first — its
//! wall clock, a stop of its own), or the run's end, says which. A local
//! agent answers in the same step it takes the answer; told `Ok` before
//! the node's word, a host read `Ok` while the stream said `Cancelled`.

use ractor::RpcReplyPort;
use subagents_messages::{ApprovalDecision, ApprovalId, ApprovalOutcome, ApprovalRefusal};

type Reply = RpcReplyPort<Result<(), ApprovalRefusal>>;

/// Answers sent on, in the order they came, each waiting on its node's
/// word. The run's end settles those left: `Ended` when its node ended it
/// (its agent never took them), `Unsettled` when it ended here first (a
/// close, or the proxy dropped: they may have been taken there).
#[derive(Default)]
pub(super) struct Verdicts(Vec<(ApprovalId, Reply)>);

impl Verdicts {
    /// True when an answer to `id` waits on its node's word.
    pub(super) fn waits(&self, id: &ApprovalId) -> bool {
        self.0.iter().any(|(waiting, _)| waiting == id)
    }

    /// `reply` learns what became of the answer to `id` sent on (a second
    /// answer, what became of the first).
    pub(super) fn push(&mut self, id: ApprovalId, reply: Reply) {
        self.0.push((id, reply));
    }

    /// The node's word on `id`: the first answer waiting is `Ok` if the
    /// agent took it, any later one `AlreadyAnswered` with it; all `Ended`
    /// if the turn was cut first. Returns true when it was taken.
    pub(super) fn settle(&mut self, id: &ApprovalId, outcome: &ApprovalOutcome) -> bool {
        let taken = match outcome {
            ApprovalOutcome::Approved => Some(ApprovalDecision::Approve),
            ApprovalOutcome::Denied => Some(ApprovalDecision::Deny),
            ApprovalOutcome::Cancelled(_) => None,
        };
        let mut first = true;
        let mut kept = Vec::with_capacity(self.0.len());
        for (waiting, reply) in self.0.drain(..) {
            if waiting != *id {
                kept.push((waiting, reply));
                continue;
            }
            let answer = match taken {
                Some(_) if first => Ok(()),
                Some(decision) => Err(ApprovalRefusal::AlreadyAnswered {
                    id: waiting,
                    decision,
                }),
                None => Err(ApprovalRefusal::Ended(waiting)),
            };
            first = false;
            let _ = reply.send(answer);
        }
        self.0 = kept;
        taken.is_some()
    }
}

impl Verdicts {
    /// The run ended here before its node's word on the answers waiting:
    /// the one sent on for each id is `Unsettled` — sent, perhaps taken
    /// (`Ended` said the agent never took it, and a run the node kept went
    /// on with an approved call); one held behind it, never sent, is
    /// `AlreadyAnswered` with the first (`first`: the decision sent). The
    /// ids.
    pub(super) fn unsettle(
        &mut self,
        first: impl Fn(&ApprovalId) -> Option<ApprovalDecision>,
    ) -> Vec<ApprovalId> {
        let mut sent: Vec<ApprovalId> = Vec::new();
        for (id, reply) in self.0.drain(..) {
            let answer = match first(&id).filter(|_| sent.contains(&id)) {
                Some(decision) => ApprovalRefusal::AlreadyAnswered {
                    id: id.clone(),
                    decision,
                },
                None => ApprovalRefusal::Unsettled(id.clone()),
            };
            let _ = reply.send(Err(answer));
            if !sent.contains(&id) {
                sent.push(id);
            }
        }
        sent
    }
}

impl Verdicts {
    /// The run's node ended it without its word on the answers waiting:
    /// its agent never took them — each `Ended`. The ids.
    pub(super) fn end(&mut self) -> Vec<ApprovalId> {
        self.0
            .drain(..)
            .map(|(id, reply)| {
                let _ = reply.send(Err(ApprovalRefusal::Ended(id.clone())));
                id
            })
            .collect()
    }
}

/// Dropped with answers still waiting (the proxy killed, its hub's death):
/// the run ended here before its node's word — `Unsettled`, as a close
/// here says (it read `Ended`, "the agent never took it").
impl Drop for Verdicts {
    fn drop(&mut self) {
        for (id, reply) in self.0.drain(..) {
            let _ = reply.send(Err(ApprovalRefusal::Unsettled(id)));
        }
    }
}
