//! The thread supervisor's protocol, private to this crate: the requests
//! [`ThreadHandle`](crate::ThreadHandle)'s methods send, and a sealed
//! part — finished children, persistence, turn ends — only the
//! supervisor's own observer and tasks write. A host (actor-based or not)
//! talks to a thread through its handle; `ThreadHandle::actor` gives the
//! `ActorCell` to wait for, link or stop.
//!
//! ```compile_fail
//! // A host cannot name the thread's messages, so it cannot forge one
//! // (a finished child, a turn's end) or bypass the handle's wake gating.
//! use subagents_supervisor::thread::ThreadMsg;
//! ```
//!
//! ```compile_fail
//! // Nor send one through the supervisor's cell: there is no message
//! // type to send.
//! # async fn f(thread: subagents_supervisor::ThreadHandle) {
//! thread.actor().send_message(subagents_supervisor::thread::ThreadMsg::Typing(true));
//! # }
//! ```

use ractor::RpcReplyPort;
use subagents_actors::hub::Refused;
use subagents_messages::{
    AgentId, ApprovalDecision, ApprovalId, ApprovalRefusal, Envelope, SubAgentStatus,
};

/// What the ThreadSupervisor actor is told.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum ThreadMsg {
    /// Sent by the host: a user turn for the parent. Events follow on the
    /// thread's stream; wakes wait until the parent is idle again.
    UserTurn {
        /// What the user wrote.
        text: String,
        /// The span the turn's run sits under (`None`: a trace of its
        /// own). `ThreadHandle::send_user` passes the caller's current one.
        span: Option<tracing::Span>,
    },
    /// Sent by the host: the user started (`true`) or stopped typing.
    /// Wakes are held back while the user types.
    Typing(bool),
    /// Sent by the host: the thread went on (`true`) or off screen. Off
    /// screen drops pending wakes and refuses new ones.
    OnScreen(bool),
    /// Sent by the host on a thread switch (new, open another, delete,
    /// clear): every live and queued child is stopped, pending wakes are
    /// dropped — an earlier session's given back to the store unless
    /// `forget` (a clear, a delete: the user is done with them). Replies
    /// with how many children were stopped.
    SwitchAway {
        /// Told how many children were stopped.
        reply: Option<RpcReplyPort<usize>>,
        /// Drop an earlier session's wakes too.
        forget: bool,
    },
    /// Sent by the host: stop the parent's running turn. A child the parent
    /// waited on inline is detached (or stopped, by policy).
    StopParent,
    /// Sent by the host: answer an approval, routed to the agent that
    /// asked (the parent, or a child). Replies whether it was taken, or a
    /// typed reason why not.
    ResolveApproval {
        /// The approval.
        id: ApprovalId,
        /// The answer.
        decision: ApprovalDecision,
        /// Taken, or why not.
        reply: RpcReplyPort<Result<(), ApprovalRefusal>>,
    },
    /// Sent by the host: stop one child. Forwarded to the hub from the
    /// handler, so an approval answer the host sent before reaches the
    /// child first; the hub replies once the child has ended.
    StopChild {
        /// The child.
        id: AgentId,
        /// Its status after it ended, or why not.
        reply: RpcReplyPort<Result<SubAgentStatus, Refused>>,
    },
    /// Sent by the host: reply with a child's envelope by id — this
    /// session's, or a persisted one of an earlier session. Never waits.
    Envelope {
        /// The child.
        id: AgentId,
        /// Its envelope, if known.
        reply: RpcReplyPort<Option<Envelope>>,
    },
    /// Sent by the host: reply once every envelope write started so far has
    /// finished (successfully or not).
    FlushPersistence(RpcReplyPort<()>),
    /// Sent by the host: reply once every message the host sent before has
    /// been handled (messages from one sender are handled in order).
    Ping(RpcReplyPort<()>),
    /// Sent by the host: close the thread once every message sent before
    /// has been handled (ractor's stop is read first, and drops them).
    Close,
    /// Sent only by the supervisor's own observer and tasks (sealed).
    Internal(sealed::ThreadInternal),
}

// Built with ractor's `cluster` feature (only by the subagents-cluster
// workspace, which sets `--cfg subagents_cluster`), a message type says
// it is one: the blanket impl is gone then. It never crosses a node.
#[cfg(subagents_cluster)]
impl ractor::Message for ThreadMsg {}

pub(crate) mod sealed {
    //! Pub in a private module, not re-exported: nameable in this crate
    //! only.
    #![allow(unreachable_pub)]

    #[cfg(test)]
    use ractor::RpcReplyPort;
    use subagents_messages::{AgentId, ChildRequest, Envelope};

    /// The supervisor's own messages.
    #[derive(Debug)]
    pub enum ThreadInternal {
        /// Sent by the hub's observer: a child reached a terminal status.
        ChildFinished(Box<Envelope>),
        /// Sent by the hub's observer: a child (a run) was requested; its
        /// envelope now and what it was asked.
        ChildStarted(Box<(Envelope, ChildRequest)>),
        /// Sent by the hub's observer: a child made a step (its
        /// conversation grew, or it took a message): its run is written.
        ChildStepped(AgentId),
        /// Sent by the hub's observer: a stop of a running child was
        /// accepted; its envelope, marked `stopping`, is written while it
        /// has not ended.
        ChildStopping(AgentId),
        /// Sent by the supervisor's own flush task, once the hub has
        /// answered: every notice the hub sent before is read, so the
        /// flush waits for the writes they queued.
        FlushNow(tokio::sync::oneshot::Sender<()>),
        /// Sent by the supervisor to itself after a switch gave an earlier
        /// session's wakes back: taken again if the thread is still on
        /// screen once what the host sent with the switch is read.
        ShownAfterSwitch,
        /// Sent by the supervisor to itself as the user stops typing, and
        /// as it starts: the wakes held (or taken from the store) go out
        /// after what the host sent in the same tick.
        DeliverWakes,
        /// Sent by a killed thread's state as it is dropped (its ractor
        /// host read its termination): it gave the store's wakes it had
        /// taken back (these), after this thread opened and took the
        /// store's; or by a resume that failed, its held wake offered again.
        StoreWakesBack(Vec<subagents_messages::AgentId>),
        /// Sent by a registry (`Threads`) as it leaves the thread (a
        /// switch sent, its children stopping): off screen, a child's wake
        /// held until the leave is done (`OnScreen(false)`) or given up
        /// (`OnScreen(true)`).
        Leaving,
        /// Sent by the supervisor's own turn tasks: a parent turn ended.
        TurnEnded {
            /// It was a wake's turn.
            wake: bool,
        },
        /// Sent by this crate's tests: how many children's requests the
        /// supervisor holds for their run files.
        #[cfg(test)]
        HeldRequests(RpcReplyPort<usize>),
    }
}
