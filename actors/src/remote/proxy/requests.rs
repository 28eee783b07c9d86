//! What the proxy's host asks of the remote turn — a stop, an approval's
//! answer, a message — sent on to its node, and the stop's grace.

use ractor::RpcReplyPort;
use subagents_messages::remote::RunRequest;
use subagents_messages::{
    AgentEvent, AgentSnapshot, ApprovalDecision, ApprovalId, ApprovalOutcome, ApprovalRefusal,
    ApprovalRequest, Outcome, Usage,
};

use crate::hub::{Refused, Steered};
use crate::remote::proxy::{ProxyState, lock};

impl ProxyState {
    /// Tells the node to stop the running turn; its key, for the grace
    /// ([`ProxyState::stop_overdue`]), while it runs on.
    pub(super) fn stop(&mut self) -> Option<u64> {
        self.waiting.clear();
        let run = self.run.as_mut()?;
        let first = !run.stopping;
        run.stopping = true;
        let key = run.key;
        if let Err(why) = self.link.request(key, RunRequest::Stop) {
            self.lost(&why);
            return None;
        }
        first.then_some(key)
    }

    /// The stop's grace ran out: run `key`, if it still runs, ends here,
    /// stopped (its node is asked again; what it left open is answered).
    pub(super) fn stop_overdue(&mut self, key: u64) {
        if self.run.as_ref().is_none_or(|run| run.key != key) {
            return;
        }
        let _ = self.link.request(key, RunRequest::Stop);
        let text = format!(
            "stopped: its node `{}` did not end it within {} s of the stop",
            self.link.node(),
            crate::defaults::REMOTE_STOP_GRACE.as_secs()
        );
        self.close(&text, Outcome::Stopped);
    }

    /// A child handed to the background in the instant between its
    /// policy's look at a request (above) and the request reaching the
    /// book (as it was passed on): answered now as the hub answers, which
    /// looked before it was there (see `crate::agent::call`).
    pub(super) fn answer_if_the_policy_now_does(&mut self, request: &ApprovalRequest) {
        if let Some(decision) = (self.config).policy_decides(&request.tool_name, &request.arguments)
        {
            let (reply, _) = tokio::sync::oneshot::channel();
            self.resolve_approval(request.id.clone(), decision, reply.into());
        }
    }

    /// Sends the host's answer on; `reply` is told once the node says
    /// whether its agent took it ([`super::Verdicts`]).
    pub(super) fn resolve_approval(
        &mut self,
        id: ApprovalId,
        decision: ApprovalDecision,
        reply: RpcReplyPort<Result<(), ApprovalRefusal>>,
    ) {
        if let Some(first) = self.answered.get(&id) {
            // The first answer's word not in yet: this one learns with it.
            if let Some(run) = self.run.as_mut().filter(|r| r.verdicts.waits(&id)) {
                run.verdicts.push(id, reply);
                return;
            }
            let _ = reply.send(Err(ApprovalRefusal::AlreadyAnswered {
                id,
                decision: *first,
            }));
            return;
        }
        let Some(key) = self
            .run
            .as_ref()
            .filter(|r| !r.stopping && lock(&r.closer.mirror).awaits(&id))
            .map(|r| r.key)
        else {
            let _ = reply.send(Err(if self.asked.contains(&id) {
                ApprovalRefusal::Ended(id)
            } else {
                ApprovalRefusal::Unknown(id)
            }));
            return;
        };
        let sent = self.link.request(
            key,
            RunRequest::Approve {
                id: id.clone(),
                decision,
            },
        );
        match sent {
            Ok(()) => {
                self.answered.insert(id.clone(), decision);
                if let Some(run) = self.run.as_mut() {
                    run.verdicts.push(id, reply);
                }
            }
            Err(why) => {
                self.lost(&why);
                let _ = reply.send(Err(ApprovalRefusal::Ended(id)));
            }
        }
    }

    pub(super) fn snapshot(&self) -> AgentSnapshot {
        AgentSnapshot {
            busy: self.run.is_some(),
            queued_turns: self.waiting.len(),
            pending_approvals: self
                .run
                .as_ref()
                .map_or(0, |r| lock(&r.closer.mirror).pending_approvals()),
            turns_finished: self.turns_finished,
            usage: self.usage,
            children_usage: Usage::default(),
            model_calls: 0,
            tool_calls: self.tool_calls,
        }
    }

    pub(super) fn steer(
        &mut self,
        text: String,
        asking: crate::agent::CallSlot,
        reply: RpcReplyPort<Result<Steered, Refused>>,
    ) {
        let finished = || Refused::Finished {
            id: self.config.id.clone(),
        };
        let Some(run) = self
            .run
            .as_mut()
            .filter(|r| !lock(&r.closer.mirror).ended())
        else {
            let _ = reply.send(Err(finished()));
            return;
        };
        // Its sending call cut already: not sent on (its model read that
        // it stopped). One cut while the node takes it is not known here
        // until the verdict comes (docs/cluster.md).
        if !asking.is_open() {
            let _ = reply.send(Err(finished()));
            return;
        }
        self.next_steer += 1;
        let n = self.next_steer;
        run.steers.insert(n, (text.clone(), asking, reply));
        if let Err(why) = self.link.request(run.key, RunRequest::Steer { n, text }) {
            self.lost(&why);
        }
    }
}

impl ProxyState {
    /// The node's verdict on message `n`: taken, it waits for the node's
    /// read (`Steered`) to be folded where the node read it — unless that
    /// read came first; refused, its sender hears so.
    pub(super) fn steered(&mut self, n: u64, taken: bool) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        let Some((text, asking, reply)) = run.steers.remove(&n) else {
            return;
        };
        if taken {
            // A cut of the sending call from now on reads that it was.
            asking.note_taken(&Steered::Running);
            match run.read_ahead.iter().position(|read| *read == text) {
                Some(at) => {
                    run.read_ahead.remove(at);
                }
                // Kept until the node reads it (folded then, where it read
                // it) or the run ends here (folded after its end, as a
                // local close does): lost, a restart's resume lacked an
                // instruction its parent was told was taken.
                None => {
                    crate::agent::turn_state_lock(&run.shared)
                        .steering
                        .push_back(text);
                    run.closer.sink.stepped();
                }
            }
        }
        let _ = reply.send(if taken {
            Ok(Steered::Running)
        } else {
            Err(Refused::Finished {
                id: self.config.id.clone(),
            })
        });
    }
}

impl ProxyState {
    /// Why `event` says the host did what it did not (`None`: it may have):
    /// a local agent says an approval was `Approved` or `Denied` only as
    /// it takes the host's answer, and reads a message (`Steered`) only
    /// one its parent sent. A node's `Approved` over the host's `Deny`
    /// (or for a request nobody answered) told the host `Ok` for a denial
    /// while the stream, and the envelope, said the call was approved;
    /// a node's `Steered` for a text nobody sent went into the parent's
    /// stream and the saved conversation as the parent's own words.
    pub(super) fn not_given(&self, run: &super::RemoteRun, event: &AgentEvent) -> Option<String> {
        match event {
            AgentEvent::ApprovalResolved { id, outcome, .. } => {
                let said = match outcome {
                    ApprovalOutcome::Approved => ApprovalDecision::Approve,
                    ApprovalOutcome::Denied => ApprovalDecision::Deny,
                    ApprovalOutcome::Cancelled(_) => return None,
                };
                let word = |d: ApprovalDecision| match d {
                    ApprovalDecision::Approve => "approved",
                    ApprovalDecision::Deny => "denied",
                };
                match self.answered.get(id) {
                    Some(given) if *given == said => None,
                    Some(given) => Some(format!(
                        "said the approval `{id}` was {}, but its answer was {}",
                        word(said),
                        word(*given)
                    )),
                    None => Some(format!(
                        "said the approval `{id}` was {}, but nobody answered it",
                        word(said)
                    )),
                }
            }
            AgentEvent::Steered(text) => {
                let taken = crate::agent::turn_state_lock(&run.shared)
                    .steering
                    .contains(text);
                let sent = run.steers.values().filter(|(t, ..)| t == text).count();
                let read = run.read_ahead.iter().filter(|t| *t == text).count();
                (!taken && sent <= read).then(|| "read a message its parent never sent".to_owned())
            }
            _ => None,
        }
    }
}

/// Its node read `text` (its `Steered` event): no longer waiting to be
/// read — or read before its verdict came (`read_ahead`, the run's).
pub(super) fn read(state: &mut crate::agent::TurnState, read_ahead: &mut Vec<String>, text: &str) {
    match state.steering.iter().position(|waiting| waiting == text) {
        Some(at) => {
            state.steering.remove(at);
        }
        None => read_ahead.push(text.to_owned()),
    }
}
