//! How a turn's run ended, and the result its close reads.

use subagents_messages::{AgentResult, LimitKind, Limits, Outcome};

use crate::agent::answer::partial_result;
use crate::agent::turn_state::{TurnState, cut_result};

/// How a turn's run ended.
pub(crate) enum Ran {
    /// Its result (not yet emitted: [`close`] emits it).
    Ended(AgentResult),
    /// Its wall clock ran out: its result is read in its close, under the
    /// turn's lock, as a stop's is (read here, a call its tool settled
    /// from another task before the close was answered with its output
    /// and left out of the counts).
    OutOfTime,
}

impl Ran {
    /// What the turn's close reads its result with.
    pub(crate) fn result(
        self,
        limits: Limits,
        started: tokio::time::Instant,
    ) -> impl FnOnce(&TurnState) -> AgentResult {
        move |state| match self {
            Ran::Ended(result) => result,
            Ran::OutOfTime => cut_result(
                state,
                |progress| partial_result(LimitKind::WallClock, &limits, progress),
                |_| Outcome::LimitReached(LimitKind::WallClock),
                started,
            ),
        }
    }
}
