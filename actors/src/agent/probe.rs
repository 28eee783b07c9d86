//! A running turn seen from outside: what it does now and its progress,
//! published by the agent for readers that must not send it a message
//! (the hub's `status`, and the conversation kept to resume a child).

use std::sync::{Arc, Mutex, PoisonError};

use subagents_messages::{ChatMessage, Usage};

use crate::agent::turn_state::{Shared, lock};

/// What a running turn is doing now (`use_agent status` shows it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Activity {
    /// Between steps: the turn just started, or a step just ended.
    #[default]
    Thinking,
    /// Waiting for the model gate (another agent's call holds it).
    WaitingForModel,
    /// In a model call.
    InModelCall,
    /// Running this tool.
    InTool(String),
    /// This tool's call waits for the host's approval.
    AwaitingApproval(String),
}

impl Activity {
    /// The snake-case name `status` shows (`"in_model_call"`).
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Activity::Thinking => "thinking",
            Activity::WaitingForModel => "waiting_for_model",
            Activity::InModelCall => "in_model_call",
            Activity::InTool(_) => "in_tool",
            Activity::AwaitingApproval(_) => "awaiting_approval",
        }
    }

    /// The tool it is in, if any.
    pub(crate) fn tool(&self) -> Option<&str> {
        match self {
            Activity::InTool(tool) | Activity::AwaitingApproval(tool) => Some(tool),
            _ => None,
        }
    }
}

/// A running turn seen from outside: what it does, since how long, and
/// its progress so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiveTurn {
    pub(crate) activity: Activity,
    pub(crate) for_: std::time::Duration,
    pub(crate) model_calls: u32,
    pub(crate) tool_calls: u32,
    pub(crate) usage: Usage,
}

/// Where an agent publishes its running turn, for a reader that must not
/// send it a message (the hub's `status`). Empty until its first turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct Probe(Arc<Mutex<Option<Shared>>>);

impl Probe {
    /// The turn now running (or the last one).
    pub(crate) fn publish(&self, shared: &Shared) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(shared.clone());
    }

    /// Ends the running turn as a killed actor's, if it has not ended
    /// (see [`crate::agent::running::TurnEnds`]); true when it did.
    pub(crate) fn end_as_killed(&self) -> bool {
        let Some(shared) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return false;
        };
        // Taken, then used with no lock held: ending takes the turn's lock.
        let ends = lock(&shared).ends.take();
        if let Some(ends) = ends {
            ends.end(&shared);
            return true;
        }
        false
    }

    /// The result its turn ended with while the report of that end was
    /// not read yet — a local turn closed by its task, a remote turn whose
    /// `Result` its node sent before its `Ended`: what a hub takes for a
    /// child whose death came first, never its termination.
    pub(crate) fn kept_result(&self) -> Option<subagents_messages::AgentResult> {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let state = lock(&shared);
        state.kept_end.as_ref().map(|kept| kept.0.clone())
    }

    /// Lets go of its turn once the child has ended and what the book
    /// keeps was taken (its conversation, its span): the turn's state —
    /// its last answer's copy, its streaming buffer, a remote child's
    /// conversation — is not held for the hub's life.
    pub(crate) fn let_go(&self) {
        let turn = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(turn);
    }

    /// Its turn has been closed (by its end, a stop or a kill): what
    /// ends it from outside is taken then, and set from its start.
    pub(crate) fn closed(&self) -> bool {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        shared.is_some_and(|shared| lock(&shared).ends.is_none())
    }

    /// Runs `f` under its turn's lock while the turn is open, and says
    /// whether it ran: nothing that closes the turn (its end, a stop, a
    /// kill, on another worker) comes between the check and what `f`
    /// emits. A probe with no turn yet runs it, as [`Probe::closed`] reads
    /// such a probe open. `f` must not take this turn's lock.
    pub(crate) fn while_open(&self, f: impl FnOnce()) -> bool {
        self.while_open_and(false, f)
    }

    /// [`Probe::while_open`], and only while the turn takes more — not
    /// closing (its final answer given, its close still to run).
    pub(crate) fn while_taking(&self, f: impl FnOnce()) -> bool {
        self.while_open_and(true, f)
    }

    fn while_open_and(&self, taking: bool, f: impl FnOnce()) -> bool {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(shared) = shared else {
            f();
            return true;
        };
        let state = lock(&shared);
        if state.ends.is_none() || (taking && state.closing) {
            return false;
        }
        f();
        drop(state);
        true
    }

    /// The `invoke_agent` span of the last turn, taken (the probe holds
    /// it no longer, so it can close).
    pub(crate) fn take_span(&self) -> Option<tracing::Span> {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        lock(&shared).span.take()
    }

    /// The conversation of the turn now running (so far), or of the last
    /// one (whole, once it ended).
    pub(crate) fn conversation(&self) -> Option<Vec<ChatMessage>> {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let state = lock(&shared);
        // Closed, the conversation moved to `ended` (until the hub takes
        // it): read there, not the emptied running one.
        Some(match &state.ended {
            Some(ended) => ended.as_ref().clone(),
            None => state.history.clone(),
        })
    }

    /// What `read` takes of the turn's state, and the messages it took
    /// and has not read yet, as it will read them at its next model call
    /// (none once it ended: a close reads them), in one hold of its lock
    /// (a message it reads between two holds was in neither).
    pub(crate) fn with_unread<T>(
        &self,
        read: impl FnOnce(&crate::agent::turn_state::TurnState) -> Option<T>,
    ) -> Option<(T, Vec<ChatMessage>)> {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let state = lock(&shared);
        let read = read(&state)?;
        let unread = match state.ended {
            Some(_) => Vec::new(),
            None => (state.steering.iter())
                .map(|text| ChatMessage::user(crate::agent::turn_state::steering_text(text)))
                .collect(),
        };
        Some((read, unread))
    }

    /// The running turn's conversation after its first `from` messages:
    /// `None` once it ended (its last message may have been replaced by
    /// its result) or its conversation was replaced (a remote run's, whole,
    /// at its end), before it published one, or when it has fewer.
    pub(crate) fn conversation_since(&self, from: usize) -> Option<Vec<ChatMessage>> {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let state = lock(&shared);
        // Replaced too: a remote run's close puts its node's conversation
        // in place of the one folded from its reports (another shape: a
        // step read after it spliced the node's tail onto the fold). Not
        // closing alone: a local turn's last allowed call closes it to
        // messages, and every step of it copied the whole conversation.
        if state.ended.is_some() || state.replaced {
            return None;
        }
        state.history.get(from..).map(<[ChatMessage]>::to_vec)
    }

    /// The conversation of the last turn: once it ended, the one it ended
    /// with (shared with the agent and every caller, not copied); a turn
    /// that has not closed (its child failed around it) gives a copy of
    /// what it has so far.
    pub(crate) fn conversation_at_end(&self) -> Option<Arc<Vec<ChatMessage>>> {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let state = lock(&shared);
        // Shared, not taken: a caller that loses the finish (two callers
        // failing a dead hub's children at once, on two workers) left the
        // winner nothing — the book kept `[]`, written over the child's
        // run file at the thread's close.
        Some(match &state.ended {
            Some(ended) => ended.clone(),
            None => Arc::new(state.history.clone()),
        })
    }

    /// The turn as it is now. Takes the probe's lock, then the turn's, one
    /// after the other (never one inside a caller's other lock).
    pub(crate) fn read(&self) -> Option<LiveTurn> {
        let shared = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let state = lock(&shared);
        Some(LiveTurn {
            activity: state.activity.clone(),
            for_: state
                .activity_since
                .map(|s| s.elapsed())
                .unwrap_or_default(),
            model_calls: state.progress.model_calls,
            tool_calls: state.progress.tool_calls,
            usage: state.progress.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::turn_state::TurnState;
    use crate::sink::EventSink;
    use subagents_messages::{AgentResult, Outcome};

    fn turn(messages: &[&str]) -> (Probe, Shared) {
        let history = messages.iter().map(|m| ChatMessage::user(*m)).collect();
        let shared: Shared = Arc::new(Mutex::new(TurnState::new(history)));
        let probe = Probe::default();
        probe.publish(&shared);
        (probe, shared)
    }

    fn stopped() -> AgentResult {
        let progress = crate::agent::turn_state::Progress::default();
        crate::agent::turn_state::result(
            "stopped".into(),
            Outcome::Stopped,
            &progress,
            tokio::time::Instant::now(),
        )
    }

    #[test]
    fn an_ended_turns_conversation_is_shared_with_the_agent_and_every_caller() {
        let (probe, shared) = turn(&["hi"]);
        let (out, _stream) = EventSink::channel();
        let agents =
            crate::agent::turn_state::close(&shared, &out.gated(), &out, |_| stopped(), &|_| {
                "cut".to_owned()
            })
            .unwrap()
            .0;
        let books = probe.conversation_at_end().unwrap();
        assert!(Arc::ptr_eq(&agents, &books), "one copy for both");
        assert_eq!(books.len(), 2, "the input and the stopped answer");
        // A second caller (one that will lose the finish, or win it)
        // shares it too: handed out once, the other got `[]`.
        assert!(Arc::ptr_eq(&probe.conversation_at_end().unwrap(), &books));
    }

    /// Between a turn's close and its hand-over to the hub (the child's
    /// `Result` on the stream, its finish not read yet), the conversation
    /// had moved out of the running state: a host reading it got `[]`, and
    /// so did the thread writing the child's run on its last step (a call
    /// cut by a stop is answered in that close) — a crash then resumed the
    /// child from its task. It reads the ended one.
    #[test]
    fn a_closed_turns_conversation_reads_whole_before_it_is_handed_over() {
        let (probe, shared) = turn(&["hi"]);
        let (out, _stream) = EventSink::channel();
        crate::agent::turn_state::close(&shared, &out.gated(), &out, |_| stopped(), &|_| {
            "cut".to_owned()
        })
        .unwrap();
        let read = probe.conversation().unwrap();
        assert_eq!(read.len(), 2, "the input and the stopped answer: {read:?}");
        assert_eq!(
            probe.conversation_at_end().unwrap().len(),
            2,
            "still handed over whole"
        );
    }

    /// Review of this session's own change: a remote run's close puts
    /// its node's conversation in place of the one folded from its
    /// reports, and marks it closing, not ended: a step read then, by
    /// index, spliced the node's tail onto the fold (a tool result after
    /// no call that made it). What was added since is read only while
    /// the turn runs; closing or ended, the reader reads it whole.
    #[test]
    fn what_a_turn_added_is_read_only_while_it_runs() {
        let (probe, shared) = turn(&["task", "call", "result"]);
        assert_eq!(probe.conversation_since(1).map(|m| m.len()), Some(2));
        assert_eq!(probe.conversation_since(4), None, "fewer than that");
        // Closing to messages (a local turn's last allowed call): still
        // read by index (this session's own review of a resume: each step
        // of that call copied the whole conversation).
        crate::agent::turn_state::lock(&shared).closing = true;
        assert_eq!(probe.conversation_since(1).map(|m| m.len()), Some(2));
        crate::agent::turn_state::lock(&shared).replaced = true;
        assert_eq!(probe.conversation_since(1), None, "replaced");
    }

    #[test]
    fn a_running_turns_conversation_is_copied_not_taken() {
        let (probe, shared) = turn(&["hi", "more"]);
        let copy = probe.conversation_at_end().unwrap();
        assert_eq!(copy.len(), 2);
        assert_eq!(
            crate::agent::turn_state::lock(&shared).history.len(),
            2,
            "the running turn keeps its conversation"
        );
    }
}
