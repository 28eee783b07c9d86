//! The host's handle on an agent, and what a call on it can fail with.

use ractor::{ActorCell, ActorRef};

use crate::agent::msg::{AgentMsg, TurnReply, UserTurn};
use subagents_messages::{
    AgentId, AgentResult, AgentSnapshot, ApprovalDecision, ApprovalId, ApprovalRefusal,
};

/// Why a call on an agent failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent could not be started.
    #[error("the agent could not be started: {0}")]
    Spawn(String),
    /// The agent was to start linked under a supervisor that is stopping
    /// (ractor refused the link): nothing of it runs. It read as `Spawn`,
    /// "Actor panicked during startup", where nothing had panicked.
    #[error("the agent could not be started: its supervisor is stopping")]
    SupervisorStopping,
    /// The agent is stopped; the message was not delivered.
    #[error("the agent `{0}` is stopped")]
    Closed(AgentId),
    /// The agent is stopped; this turn (its text given back) was not
    /// delivered.
    #[error("the agent `{agent}` is stopped; the turn was not delivered")]
    Undelivered {
        /// The agent.
        agent: AgentId,
        /// The turn's text.
        text: String,
    },
    /// A turn with no text (empty, or only whitespace), given back: not
    /// sent. Servers refuse an empty message (LM Studio, Mistral,
    /// Anthropic's and Gemini's compatible endpoints), and then every
    /// later call of the conversation that holds it.
    #[error("the turn sent to agent `{agent}` is empty; it was not sent")]
    EmptyTurn {
        /// The agent.
        agent: AgentId,
        /// The turn's text.
        text: String,
    },
    /// The turn was dropped before it ran: the agent's actor went away
    /// with the turn still queued. (A stop does not drop queued turns:
    /// each ends in a stopped result, "Stopped before it started.")
    #[error("the turn sent to agent `{0}` was dropped before it ran")]
    Dropped(AgentId),
    /// An answer to an approval was not taken.
    #[error(transparent)]
    Approval(ApprovalRefusal),
    /// A request option set by the host is one no server takes (a
    /// temperature that is not a number from 0 to 2, `max_tokens` 0): it
    /// was sent as `null`, or failed every model call.
    #[error("the request option `{field}` {why}")]
    Options {
        /// The option (`temperature`, `top_p`, `max_tokens`, or a
        /// profile's `max_iterations`).
        field: &'static str,
        /// What is wrong with it (and, for a profile's, which profile).
        why: String,
    },
    /// A limit set by the host (`AgentBuilder::limits`,
    /// `DelegationBuilder::limits` or `child_limits`) under which no turn
    /// can do anything: 0 model calls, 0 tokens, a wall clock of 0.
    #[error("the limit `{field}` {why}")]
    Limits {
        /// The limit (`max_model_calls`, `token_budget`, `wall_clock`,
        /// a delegation builder's `max_depth`).
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// A profile built in code (`ProfileSet::from_profiles`) has a name
    /// no call can select (empty, with whitespace or a control
    /// character), as a profile file would be refused for.
    #[error(transparent)]
    Profile(crate::profile::ProfileError),
}

impl AgentError {
    /// A spawn ractor refused, as an error: [`AgentError::SupervisorStopping`]
    /// when the supervisor it was to link under is stopping.
    pub(crate) fn from_spawn(e: &ractor::SpawnErr) -> Self {
        if supervisor_stopping(e) {
            Self::SupervisorStopping
        } else {
            Self::Spawn(e.to_string())
        }
    }
}

/// ractor refused a spawn because the supervisor it was to link under is
/// stopping (it says so only in its startup error's text).
#[doc(hidden)]
pub fn supervisor_stopping(e: &ractor::SpawnErr) -> bool {
    matches!(e, ractor::SpawnErr::StartupFailed(why) if why.to_string() == "Supervisor is shutting down")
}

/// A handle to an agent. Cheap to clone.
///
/// A handle, not an owner: dropped (every clone) without
/// [`AgentHandle::shutdown`], the agent runs on and its event stream
/// never ends.
#[derive(Debug, Clone)]
pub struct AgentHandle {
    id: AgentId,
    actor: ActorRef<AgentMsg>,
}

impl AgentHandle {
    /// Wraps a spawned agent actor.
    pub(crate) fn new(id: AgentId, actor: ActorRef<AgentMsg>) -> Self {
        Self { id, actor }
    }

    /// The agent's id.
    pub fn id(&self) -> &AgentId {
        &self.id
    }

    /// The agent actor's cell: to wait for it, link to it or stop it.
    /// Its messages are this handle's methods.
    pub fn actor(&self) -> &ActorCell {
        &self.actor
    }

    /// The actor itself, for this crate's own messages.
    pub(crate) fn actor_ref(&self) -> &ActorRef<AgentMsg> {
        &self.actor
    }

    /// Sends a user turn; its events follow on the stream. On a stopped
    /// agent the text comes back in [`AgentError::Undelivered`]; an empty
    /// one in [`AgentError::EmptyTurn`]. The
    /// turn's `invoke_agent` span sits under the caller's current span, if
    /// any (else it starts a trace of its own).
    pub fn send_user(&self, text: impl Into<String>) -> Result<(), AgentError> {
        self.cast_turn(text.into(), None, caller(), None)
    }

    /// Sends a user turn and waits for its result (events still follow on
    /// the stream). The turn's limits bound the wait — a tool of this
    /// agent that awaits it waits until its own turn's wall clock (the
    /// turn runs after the one that called the tool). Sent when first
    /// polled; dropped after that (a `select!`, a `timeout`), the turn
    /// goes on and a later turn queues behind it: stop it with
    /// [`AgentHandle::stop_turn`]. [`AgentHandle::queue_turn`] sends at
    /// once.
    pub async fn run(&self, text: impl Into<String>) -> Result<AgentResult, AgentError> {
        self.queue_turn(text)?.await
    }

    /// Sends a user turn now (it takes its place in the
    /// agent's FIFO at once) and gives back a future of its result, to
    /// await elsewhere. A stop ends it, queued or running, in a stopped
    /// result; the future fails with [`AgentError::Dropped`] only if the
    /// agent's actor went away with the turn unrun. On a stopped
    /// agent the text comes back in [`AgentError::Undelivered`]. Its span
    /// sits under the caller's, as for [`AgentHandle::send_user`].
    pub fn queue_turn(
        &self,
        text: impl Into<String>,
    ) -> Result<
        impl std::future::Future<Output = Result<AgentResult, AgentError>> + Send + 'static,
        AgentError,
    > {
        self.queue_turn_following(text, caller(), None)
    }

    /// [`AgentHandle::queue_turn`], the turn's `invoke_agent` span under
    /// `parent` (`None`: a trace of its own) and following from `follows`
    /// (the supervisor links a wake turn to the child's run).
    #[doc(hidden)] // used by subagents-supervisor's turns and wakes
    pub fn queue_turn_following(
        &self,
        text: impl Into<String>,
        parent: Option<tracing::Span>,
        follows: Option<tracing::Span>,
    ) -> Result<
        impl std::future::Future<Output = Result<AgentResult, AgentError>> + Send + 'static,
        AgentError,
    > {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.cast_turn(
            text.into(),
            Some(TurnReply::Port(tx.into())),
            parent,
            follows,
        )?;
        let id = self.id.clone();
        Ok(async move { rx.await.map_err(|_| AgentError::Dropped(id)) })
    }

    fn cast_turn(
        &self,
        text: String,
        reply: Option<TurnReply>,
        parent: Option<tracing::Span>,
        follows: Option<tracing::Span>,
    ) -> Result<(), AgentError> {
        if text.trim().is_empty() {
            return Err(AgentError::EmptyTurn {
                agent: self.id.clone(),
                text,
            });
        }
        self.actor
            .cast(AgentMsg::Turn {
                turn: UserTurn {
                    text,
                    followups: Vec::new(),
                    follows,
                    parent,
                },
                reply,
            })
            .map_err(|e| match e {
                ractor::MessagingErr::SendErr(AgentMsg::Turn { turn, .. }) => {
                    AgentError::Undelivered {
                        agent: self.id.clone(),
                        text: turn.text,
                    }
                }
                _ => AgentError::Closed(self.id.clone()),
            })
    }

    /// Stops the running turn and the queued ones: each ends in a result
    /// with `Outcome::Stopped` (a queued one's reads "Stopped before it
    /// started.").
    pub fn stop_turn(&self) -> Result<(), AgentError> {
        self.actor
            .cast(AgentMsg::Stop)
            .map_err(|_| AgentError::Closed(self.id.clone()))
    }

    /// Answers an approval. An answer not taken says why
    /// ([`AgentError::Approval`]: unknown, already answered, or its turn
    /// ended). The answer is in the agent's mailbox when this returns its
    /// future, so a stop sent after it arrives after it; the future waits
    /// for the verdict.
    pub fn resolve_approval(
        &self,
        id: ApprovalId,
        decision: ApprovalDecision,
    ) -> impl std::future::Future<Output = Result<(), AgentError>> + Send + 'static + use<> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = self.actor.cast(AgentMsg::ResolveApproval {
            id,
            decision,
            reply: tx.into(),
        });
        let agent = self.id.clone();
        async move {
            sent.map_err(|_| AgentError::Closed(agent.clone()))?;
            rx.await
                .map_err(|_| AgentError::Closed(agent))?
                .map_err(AgentError::Approval)
        }
    }

    /// The agent's state now.
    pub async fn snapshot(&self) -> Result<AgentSnapshot, AgentError> {
        ractor::call!(self.actor, AgentMsg::Snapshot)
            .map_err(|_| AgentError::Closed(self.id.clone()))
    }

    /// Stops the actor itself (ending any turn as stopped). It is drained,
    /// not stopped outright: a turn already in its mailbox (sent in the
    /// same tick) is taken and ends as stopped — ractor's stop is read
    /// before the mailbox and dropped it with no `Result`, though its
    /// `send_user` had returned `Ok`; a turn sent after this comes back in
    /// [`AgentError::Undelivered`].
    pub fn shutdown(&self) {
        if self.actor.drain().is_err() {
            self.actor.stop(None);
        }
    }
}

/// The caller's current span, if it has one: a turn sent from it runs
/// under it.
fn caller() -> Option<tracing::Span> {
    crate::agent::sender_span()
}
