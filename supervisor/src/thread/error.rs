//! What a call on a thread can fail with.

use subagents_messages::{AgentId, ApprovalRefusal, ThreadId};

/// Why a call on a thread failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadError {
    /// The thread could not be started.
    #[error("the thread could not be started: {0}")]
    Spawn(String),
    /// The thread was to start linked under a supervisor (a ractor host's
    /// actor) that is stopping: ractor refused the link, nothing of it
    /// runs. It read as `Spawn`, "Actor panicked during startup", where
    /// nothing had panicked.
    #[error("the thread could not be started: its supervisor is stopping")]
    SupervisorStopping,
    /// The thread's builder was refused before anything started (a limit,
    /// a request option or a profile no run could use): the builder's own
    /// error, as [`DelegationBuilder::spawn`](subagents_actors::DelegationBuilder::spawn)
    /// gives it. It read "Actor panicked during startup", a string.
    #[error("the thread could not be started: {0}")]
    Refused(subagents_actors::AgentError),
    /// The builder's clock, which stamps the children's envelopes, reads
    /// `stamped_ms`: older than the store's retention (and a minute) by
    /// the store's own clock, so each child's envelope and run would be
    /// pruned as they were written (no resume, no owed wake after a
    /// restart). Give both one clock.
    #[error(
        "the thread could not be started: its envelopes would be stamped {stamped_ms} ms \
         (its builder's clock), past the store's retention by the store's clock — each \
         would be pruned as it is saved; give the builder and the store one clock"
    )]
    ClockBehindStore {
        /// Now, by the builder's clock.
        stamped_ms: u64,
    },
    /// The thread is closed; the message was not delivered.
    #[error("the thread is closed")]
    Closed,
    /// The thread is closed; this user turn (given back) was not delivered.
    #[error("the thread is closed; the user turn was not delivered")]
    Undelivered(String),
    /// A user turn with no text (empty, or only whitespace), given back:
    /// not sent. Servers refuse an empty message (LM Studio, Mistral,
    /// Anthropic's and Gemini's compatible endpoints), and then every
    /// later call of the conversation that holds it.
    #[error("the user turn is empty; it was not sent")]
    EmptyTurn(String),
    /// No child of this thread has that id.
    #[error("there is no sub-agent `{0}` in this thread")]
    UnknownChild(AgentId),
    /// An answer to an approval was not taken (unknown, already answered,
    /// or the agent that asked ended first).
    #[error(transparent)]
    Approval(#[from] ApprovalRefusal),
    /// The thread is open, but its parent agent is gone (its actor died:
    /// a kill, a panic outside a turn): what it held (its usage, its
    /// state) went with it — close the thread. It read `Closed`, "the
    /// thread is closed", of an open thread.
    #[error("the thread's parent agent is gone; close the thread")]
    ParentGone,
    /// [`Threads`](crate::Threads): no open thread has that id.
    #[error("there is no open thread `{0}`")]
    UnknownThread(ThreadId),
    /// A thread of that id is already open: in this
    /// [`Threads`](crate::Threads), or live on the thread's store (another
    /// registry's, a [`ThreadHandle::spawn`](crate::ThreadHandle::spawn)
    /// with that id).
    #[error("a thread `{0}` is already open")]
    AlreadyOpen(ThreadId),
    /// [`Threads::delete`](crate::Threads::delete): the thread closed,
    /// but these writes of its envelopes and runs failed (each as
    /// [`ThreadHandle::persist_errors`](crate::ThreadHandle::persist_errors)
    /// names it): on disk its children
    /// are as they were before (`running`, owed a wake). `delete` took
    /// the only handle a host could ask.
    #[error("the thread closed, but {} write(s) to its store failed: {}", .0.len(), .0.join("; "))]
    NotSaved(Vec<String>),
    /// [`Threads::delete`](crate::Threads::delete) of a thread that had
    /// closed before it, whose store nobody holds open any more: its
    /// children were not forgotten —
    /// [`EnvelopeStore::forget_thread`](crate::store::EnvelopeStore::forget_thread)
    /// once the store is open again.
    #[error(
        "the thread `{0}` had closed and its store is no longer open: its children were not forgotten"
    )]
    NotForgotten(ThreadId),
}
