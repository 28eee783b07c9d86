//! A running turn as the agent holds it, and how it ends when the actor
//! goes away without a stop (a kill): its `Result` on the stream still.

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
    /// Its `invoke_agent` span.
    pub(super) span: tracing::Span,
}

impl Drop for RunningTurn {
    /// An actor killed mid-turn (no `post_stop`) still ends its turn on
    /// the stream: the call in flight is answered and the turn's `Result`
    /// says it failed. A turn that ended before is left alone.
    fn drop(&mut self) {
        if !self.sink.is_open() {
            return;
        }
        let progress = turn_state::lock(&self.shared).progress_at_cut();
        let text = "the agent stopped without ending its turn".to_owned();
        let result = turn_state::result(
            text.clone(),
            Outcome::Failed(text.clone()),
            &progress,
            self.started,
        );
        turn_state::close(&self.shared, &self.sink, &self.out, &result, &|| {
            text.clone()
        });
    }
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
