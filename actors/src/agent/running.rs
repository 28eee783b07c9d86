//! A running turn as the agent holds it, how it ends when the actor goes
//! away without a stop (a kill): its `Result` on the stream still, and
//! how it takes a message sent to it.

use std::sync::Arc;

use tokio::time::Instant;

use crate::agent::msg::TurnReply;
use crate::agent::turn_state;
use crate::sink::EventSink;
use subagents_messages::Outcome;

#[derive(Debug)]
pub(super) struct RunningTurn {
    pub(super) run: u64,
    pub(super) task: AbortOnDrop,
    pub(super) sink: EventSink,
    /// The agent's own sink (the turn's `Result` goes there).
    pub(super) out: EventSink,
    pub(super) shared: turn_state::Shared,
    pub(super) started: Instant,
    pub(super) reply: Option<TurnReply>,
    /// A stop came after the turn had ended (its notice still in the
    /// mailbox): the turns queued then — this many, the first in the
    /// queue — end when the notice is read.
    pub(super) stop_queued: usize,
}

impl Drop for RunningTurn {
    /// An actor killed mid-turn (no `post_stop`) still ends its turn on
    /// the stream: the call in flight is answered and the turn's `Result`
    /// says it failed. A turn that ended before is left alone.
    fn drop(&mut self) {
        end_as_killed(&self.shared, &self.sink, &self.out, self.started);
    }
}

/// What ending a child's turn from outside its actor needs, kept in the
/// turn's state for a hub that dies without its stop (killed, or its
/// handler crashed). ractor kills the hub's children in the order of its
/// child map, a `HashMap` with a random seed, and each child ended its
/// turn on the stream as its task ran — a different order on every run.
/// Now the first agent killed mid-turn — a child, a remote child's proxy,
/// or the thread's parent — once its hub or its thread is dead ends every
/// child's turn of that hub through these, deepest first then in
/// child-number order (`AgentConfig::on_killed`, `hub::actor::kill_hook`,
/// `Book::end_turns_as_killed`); each child's own end then finds its turn
/// closed, and the parent's own turn ends after them. (The hub's own state,
/// dropped as it dies, fails what is left — `impl Drop for HubState` —
/// but may be dropped after the children's kill hooks have run.)
#[derive(Clone)]
pub(crate) enum TurnEnds {
    /// A local agent's turn: its sink, the agent's own, when it started.
    Local {
        sink: EventSink,
        out: EventSink,
        started: Instant,
    },
    /// A turn run on another node: its proxy's closer (the run asked to
    /// stop there, its open calls and approval answered here, its failed
    /// `Result`; once).
    Remote(Arc<dyn Fn() + Send + Sync>),
}

impl std::fmt::Debug for TurnEnds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Local { started, .. } => f
                .debug_struct("Local")
                .field("started", started)
                .finish_non_exhaustive(),
            Self::Remote(_) => f.write_str("Remote"),
        }
    }
}

impl TurnEnds {
    /// Ends the turn of `shared` as a killed actor's (once, whoever is
    /// first: the turn's sink closes once).
    pub(crate) fn end(&self, shared: &turn_state::Shared) {
        match self {
            Self::Local { sink, out, started } => end_as_killed(shared, sink, out, *started),
            Self::Remote(close) => close(),
        }
    }
}

/// Ends a turn whose actor went away without a stop: the call in flight
/// is answered and the turn's `Result` says it failed. A turn that ended
/// before is left alone.
fn end_as_killed(shared: &turn_state::Shared, sink: &EventSink, out: &EventSink, started: Instant) {
    if !sink.is_open() {
        return;
    }
    let text = "the agent stopped without ending its turn";
    let killed = |state: &turn_state::TurnState| {
        turn_state::cut_result(
            state,
            |_| text.to_owned(),
            |text| Outcome::Failed(text.to_owned()),
            started,
        )
    };
    turn_state::close(shared, sink, out, killed, &|_| text.to_owned());
}

/// The running turn's task, aborted when dropped: if the actor dies
/// without its `post_stop` (killed), dropping its state still ends the
/// turn, and the gate permit the turn held goes with it.
#[derive(Debug)]
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A message for the running turn (`use_agent send`), read at its next
/// model call; refused as finished (`id`'s) when no turn runs or its
/// answer was final. Taken only while the sending call is open (cut, its
/// model read that it stopped: taken, the message was acted on all the
/// same), and under its lock its cut note then says it was taken.
pub(super) fn steer(
    running: Option<&RunningTurn>,
    id: &subagents_messages::AgentId,
    text: String,
    asking: &crate::agent::CallSlot,
    reply: ractor::RpcReplyPort<Result<crate::hub::Steered, crate::hub::Refused>>,
) {
    let taken = asking.hand_over(|| {
        running
            .is_some_and(|r| turn_state::steer(&r.shared, text))
            .then_some(crate::hub::Steered::Running)
    });
    // Its run written with it (where it will read it): a process killed
    // before its next model call lost it.
    if let Some(running) = running.filter(|_| taken.is_some()) {
        running.sink.stepped();
    }
    let _ = reply.send(taken.ok_or_else(|| crate::hub::Refused::Finished { id: id.clone() }));
}
