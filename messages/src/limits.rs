//! Limits on one agent turn (ghyll's defaults).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The limits a turn runs under. Hitting one ends the turn with a partial
/// result that says what was done and which limit hit. Each is at least 1
/// (a limit of 0 is refused at the spawn: `AgentError::Limits`).
///
/// # Choosing values
/// The defaults (20 model calls, 50,000 tokens, 300 s) suit a focused sub-task on
/// a local model. Raise `wall_clock` for slow hardware rather than
/// `max_model_calls`: the wall clock is what bounds how long a parent can block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Model calls per turn (read as `max_turns` too, its name before).
    #[serde(alias = "max_turns")]
    pub max_model_calls: u32,
    /// Prompt plus completion tokens per turn.
    pub token_budget: u64,
    /// Time per turn, enforced during model calls and tools too (where they
    /// wait), and before each step: nothing starts past it, even after a
    /// tool that worked past it without waiting, or a model call the gate
    /// lets in in the tick it ran out.
    pub wall_clock: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_model_calls: 20,
            token_budget: 50_000,
            wall_clock: Duration::from_secs(300),
        }
    }
}

/// Which limit ended a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// `max_model_calls` model calls were made (read as `turns` too, its
    /// name before).
    #[serde(alias = "turns")]
    ModelCalls,
    /// `token_budget` was used up.
    Tokens,
    /// `wall_clock` ran out.
    WallClock,
    /// The server cut the model's answer: its output limit
    /// (`finish_reason: length`, or `max_tokens`) or its content filter
    /// (`content_filter`); the partial result names the reason.
    Output,
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitKind::ModelCalls => "model-call limit",
            LimitKind::Tokens => "token budget",
            LimitKind::WallClock => "wall-clock limit",
            LimitKind::Output => "model's output limit",
        })
    }
}
