//! A message sent to a running turn: taken or refused, and how an answer
//! with no calls ends the turn — read, under the turn's lock, against the
//! messages taken meanwhile.

use subagents_messages::Limits;

use super::{Shared, TurnState, lock};

/// Hands a message to a running turn: `true` when it will read it at its
/// next model call, `false` when it takes no more (its answer was final,
/// or it ended). Under the turn's lock, against [`complete_unless_steered`]:
/// a message is either read or refused, never taken and lost.
pub(crate) fn steer(shared: &Shared, text: String) -> bool {
    let mut state = lock(shared);
    if state.closing {
        return false;
    }
    state.steering.push_back(text);
    true
}

/// The model answered without tool calls: the turn completes (`true`)
/// unless a message arrived meanwhile (`false`: it goes on to read it).
/// From a `true` on, no message is taken.
pub(crate) fn complete_unless_steered(
    shared: &Shared,
    limits: &Limits,
    out_of_time: impl FnOnce() -> bool,
) -> bool {
    matches!(
        answer_end(shared, limits, out_of_time),
        AnswerEnd::Final { .. }
    )
}

/// How an answer with no calls ends its turn ([`complete_unless_steered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerEnd {
    /// It goes on to read a message taken meanwhile.
    GoesOn,
    /// It is final; `unread`: a message taken meanwhile stays unread, kept
    /// after the answer (no call is left to read it).
    Final { unread: bool },
}

/// [`complete_unless_steered`], saying whether a message stays unread.
pub(crate) fn answer_end(
    shared: &Shared,
    limits: &Limits,
    out_of_time: impl FnOnce() -> bool,
) -> AnswerEnd {
    let mut state = lock(shared);
    // No next call could read a message taken during this one (its tokens
    // reached the budget, its time is up: the loop would end the turn
    // with a partial result): the answer stands, the message kept after
    // its end as a close keeps one (it once turned the answer into a
    // partial).
    // (The clock is read only with a message waiting.)
    let spent = |state: &TurnState| {
        state.progress.model_calls >= limits.max_model_calls
            || state.progress.usage.total() >= limits.token_budget
            || out_of_time()
    };
    if state.steering.is_empty() || spent(&state) {
        state.closing = true;
    }
    match state.closing {
        true => AnswerEnd::Final {
            unread: !state.steering.is_empty(),
        },
        false => AnswerEnd::GoesOn,
    }
}
