//! Messages to children (`use_agent send`): to a running turn, kept for a
//! queued child's start, or — to a finished child — a new run that goes on
//! from its conversation (docs/lifecycle.md, "Runs").

use ractor::{ActorRef, RpcReplyPort};
use subagents_messages::{AgentId, SubAgentStatus, ToolUseId};

use crate::agent::AgentMsg;
use crate::hub::error::{Refused, Steered};
use crate::hub::lifecycle::HubState;
use crate::hub::msg::HubMsg;

/// A message for a child, as `use_agent send` gave it.
pub(super) struct Message {
    /// What the child reads.
    pub(super) text: String,
    /// The sending call (a new run's `ChildStarted` names it).
    pub(super) call: ToolUseId,
    /// The sender and its call's hold on its turn.
    pub(super) asking: Option<Box<(AgentId, crate::agent::CallSlot)>>,
    /// The sending call's span (a new run's spans sit under it).
    pub(super) span: tracing::Span,
}

impl HubState {
    /// A message for a child's latest run; never waits on the child.
    pub(super) async fn send(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
        message: Message,
        reply: RpcReplyPort<Result<Steered, Refused>>,
    ) {
        if !self.book.contains(id) && !self.import_archived(id) {
            let _ = reply.send(Err(self.not_found(id)));
            return;
        }
        let asked = id;
        let id = self.latest_run(id);
        if !self.book.contains(&id) {
            // A later run of the chain is archived without its run; or it
            // is no earlier session's (another thread resumed the child
            // here): not this thread's to reach — said of the child asked
            // about, not of a run the model never heard of.
            let refused = match self.not_found(&id) {
                Refused::UnknownChild(_) => Refused::ResumedElsewhere { id: asked.clone() },
                refused => refused,
            };
            let _ = reply.send(Err(refused));
            return;
        }
        // The sending call was cut before the hub read it: its model read
        // the cut's sentence, so nothing is delivered — delivered, a
        // running child took an instruction its sender was told had
        // stopped (a retry gave it twice); a resume made a run announced
        // after the sender's `Result`, its result a wake about an id the
        // model never had.
        if let Some(refused) = cut_asker(message.asking.as_deref()) {
            let _ = reply.send(Err(refused));
            return;
        }
        if self.book.is_terminal(&id) {
            let answer = self.resume(myself, &id, message).await;
            let _ = reply.send(answer);
            return;
        }
        // Its requester's turn is over (its end not read yet): the child
        // never starts, or stops with it — a message taken now is read by
        // no run (answered `queued`, kept for a start that never comes).
        // Refused as one that ended: the sender waits for its end.
        let orphaned = (self.children.get(&id))
            .is_some_and(|child| self.takes_no_children(&child.request.requester));
        let Some(child) = self.children.get_mut(&id) else {
            let _ = reply.send(Err(Refused::Finished { id }));
            return;
        };
        if child.stopping.is_some() || orphaned {
            // Being stopped or interrupted: it ends, then a message may
            // resume it.
            let _ = reply.send(Err(Refused::Finished { id }));
            return;
        }
        // The sending call: the message is taken only while it is open,
        // under its lock (its cut then says it was taken).
        let asking = message.asking.map(|asking| asking.1).unwrap_or_default();
        match &child.agent {
            // The child answers: its turn may have given its final answer
            // at this instant, and then it refuses.
            Some(agent) => {
                if let Err(ractor::MessagingErr::SendErr(AgentMsg::Steer { reply, .. })) =
                    agent.actor_ref().cast(AgentMsg::Steer {
                        text: message.text,
                        asking,
                        reply,
                    })
                {
                    let _ = reply.send(Err(Refused::Finished { id }));
                }
            }
            None => {
                let book = &self.book;
                let kept = asking.hand_over(|| {
                    child.followups.push(message.text);
                    // Kept in its run as it waits, and the run written: a
                    // process killed before it starts resumes it with them.
                    book.keep_unread(&id, &child.followups);
                    Some(Steered::Queued)
                });
                let Some(kept) = kept else {
                    let _ = reply.send(Err(Refused::Finished { id }));
                    return;
                };
                crate::hub::config::tell_each(&self.config.observers, "stepped", &id, |o| {
                    o.stepped(&id)
                });
                let _ = reply.send(Ok(kept));
            }
        }
    }

    /// The run a message to `id` reaches: its latest run, each later run
    /// of an earlier session taken from the archive as the chain reaches
    /// it (`agent_1` continued as `agent_2` before a restart: the new
    /// hub's book holds neither until a message comes).
    fn latest_run(&mut self, id: &AgentId) -> AgentId {
        let mut at = self.book.latest_run(id);
        // Bounded: each pass takes one more run into the book, or passes
        // one it cannot take (seen once).
        let mut passed = rustc_hash::FxHashSet::default();
        while !self.book.contains(&at) {
            if self.import_archived(&at) {
                at = self.book.latest_run(&at);
                continue;
            }
            // A run of the chain the book cannot take (its run file lost
            // or unreadable): the chain goes on past it, as `status` and a
            // stop read it — a message stopped there, and refused though
            // the newest run was whole.
            let next = self.config.archive.as_ref().and_then(|a| a.get(&at));
            match next.and_then(|e| e.continued_as) {
                Some(next) if passed.insert(at.clone()) => at = self.book.latest_run(&next),
                _ => break,
            }
        }
        at
    }

    /// The run a stop or an interrupt of `id` reaches: its newest, through
    /// the archive too (`Book::newest_run`). After a restart the book
    /// held neither `agent_1` nor the `agent_2` it went on as: a stop of
    /// `agent_1` cancelled it alone, and a message then resumed `agent_2`.
    pub(super) fn newest_run(&self, id: &AgentId) -> AgentId {
        self.book
            .newest_run(id, || self.archive.as_ref().and_then(|slot| slot.get()))
    }

    /// An earlier session's child (the newest run of its chain this hub
    /// knows) another thread began to resume, its link not yet written: a
    /// stop of it read the chain as ending there — cancelled it, "done",
    /// while the other thread's run went on.
    pub(super) fn resumed_elsewhere(&self, newest: &AgentId) -> bool {
        // The archive first: a hub with none (no store) reads nothing.
        let Some(archive) = self.archive.as_ref().and_then(|slot| slot.get()) else {
            return false;
        };
        self.book.status(newest).is_none_or(|s| s.is_terminal()) && archive.resuming(newest)
    }

    /// Why a message to `id`, which the book lacks, cannot reach it: the
    /// archive knows it but not its run, or nobody knows it.
    fn not_found(&self, id: &AgentId) -> Refused {
        match &self.config.archive {
            Some(archive) if archive.get(id).is_some() => Refused::NotResumable { id: id.clone() },
            _ => Refused::UnknownChild(id.clone()),
        }
    }

    /// A finished child of an earlier session (its envelope and run in the
    /// archive) comes into the book, so a message can resume it.
    fn import_archived(&mut self, id: &AgentId) -> bool {
        let Some(archive) = &self.config.archive else {
            return false;
        };
        let (Some(envelope), Some((seed, conversation))) = (archive.get(id), archive.run(id))
        else {
            return false;
        };
        if !envelope.status.is_terminal() {
            return false;
        }
        self.book.import(envelope, seed, conversation);
        true
    }

    /// A finished run goes on as a new one (a new id, in the background,
    /// from its conversation, reading `text` first). A stopped child does
    /// not resume.
    async fn resume(
        &mut self,
        myself: &ActorRef<HubMsg>,
        id: &AgentId,
        message: Message,
    ) -> Result<Steered, Refused> {
        let Some(from) = self.book.resume_from(id) else {
            return Err(Refused::Finished { id: id.clone() });
        };
        if from.status == SubAgentStatus::Stopped {
            return Err(Refused::Stopped { id: id.clone() });
        }
        let asking = message.asking;
        // An archived child another thread stopped since this book took
        // its copy: the store's word, read now.
        let archive = self.config.archive.clone();
        if let Some(archive) = &archive
            && archive.get(id).is_some_and(|e| e.cancelled)
        {
            return Err(Refused::Stopped { id: id.clone() });
        }
        // An archived child another thread resumed first (the link may not
        // have reached the store yet): not forked.
        if let Some(archive) = &archive
            && !archive.begin_resume(id)
        {
            return Err(Refused::ResumedElsewhere { id: id.clone() });
        }
        let mut request = (*from.seed).clone();
        // It reports to its requester as that one goes on now: a run that
        // ended and was resumed is its latest run (the one that, reaching
        // its earlier run's children, sent this).
        request.requester = self.book.newest_run(&request.requester, || archive.clone());
        request.parent_tool_use_id = message.call;
        request.input = message.text;
        request.background = true;
        request.stop_if_abandoned = false;
        request.resumed_from = Some(id.clone());
        // A background run: nobody waits on it to the end, so the caps a
        // synchronous call set from its turn's leftovers do not carry over.
        request.wall_clock_cap = None;
        request.token_cap = None;
        request.conversation = from.conversation;
        // Announced under the sending call's lock: as its asking call when
        // the sender is the new run's requester (the parent resuming its
        // own child); around the requester's turn otherwise (the parent
        // resuming its grandchild, which goes on under its requester).
        let (call, sender) = match asking {
            Some(asking) if asking.0 == request.requester => (Some(asking.1), None),
            asking => (None, asking.map(|asking| asking.1)),
        };
        let next = match self
            .spawn_child(
                myself,
                std::sync::Arc::new(request),
                message.span,
                call,
                sender,
            )
            .await
        {
            Ok(next) => next,
            Err(refused) => {
                if let Some(archive) = &archive {
                    archive.resume_failed(id);
                }
                // Said of the run, not of the message: a send names no
                // model or tool (told "or omit `model`", it could not).
                let why = match refused {
                    Refused::UnknownModel {
                        model, provider, ..
                    } => format!(
                        "it ran on the model `{model}`{}, which is not registered here",
                        provider
                            .map(|p| format!(" from provider `{p}`"))
                            .unwrap_or_default()
                    ),
                    Refused::AmbiguousModel { model, providers } => format!(
                        "it ran on the model `{model}`, which several providers serve here ({})",
                        providers.join(", ")
                    ),
                    Refused::UnknownTool(e) => format!("it had a tool not registered here ({e})"),
                    // A run reports to its requester: one that has ended (a
                    // child's child, after that child) has none to go on
                    // under.
                    Refused::UnknownRequester(requester)
                    | Refused::Finished { id: requester }
                    | Refused::RequesterEnded { id: requester } => {
                        format!("it worked for `{requester}`, which has ended")
                    }
                    Refused::RequesterNotStarted { id: requester } => {
                        format!(
                            "it works for `{requester}`, which waits in the queue and has not started"
                        )
                    }
                    refused => return Err(refused),
                };
                return Err(Refused::CannotResume {
                    id: id.clone(),
                    why,
                });
            }
        };
        self.book.set_continued(id, next.clone());
        // The link is on disk with the resume, not at the thread's close:
        // a process that dies before then must not fork the chain.
        if !self.config.observers.is_empty()
            && let Some(envelope) = self.book.get(id)
        {
            self.tell_observers(&envelope);
        }
        Ok(Steered::Resumed(next))
    }
}

/// Why a `use_agent` request (a send, an interrupt, a stop) does nothing:
/// its asking call was cut before the hub read it — its model read the
/// cut's sentence, so the request's effect would be one it never knew of.
/// `None` while the call is open, or for a host's request (no call).
pub(super) fn cut_asker(asking: Option<&(AgentId, crate::agent::CallSlot)>) -> Option<Refused> {
    let (sender, call) = asking?;
    (!call.is_open()).then(|| Refused::RequesterEnded { id: sender.clone() })
}
