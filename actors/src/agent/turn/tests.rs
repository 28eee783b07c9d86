//! The turn's future sizes.

use super::*;
use crate::footprint::borrowing_future_size as future_size;

/// A turn's future is held for as long as the turn runs — waiting at
/// the gate, on the model, on a child — by every child of every
/// thread: a local that outlives its use across an await widens all
/// of them (the progress copy, the built request and a streamed
/// chunk took 320 bytes a turn, 15 MiB per 10,000 threads).
#[test]
fn a_waiting_turns_future_stays_small() {
    let turn = future_size(|ctx: &'static TurnContext| run_turn(ctx));
    let model_call = future_size(|ctx: &'static TurnContext| ask_model(ctx, Vec::new()));
    // A debug build's sizes (the tests'): 1,016 and 536 before.
    assert!(turn <= 704, "run_turn's future is {turn} bytes");
    assert!(
        model_call <= 384,
        "ask_model's future is {model_call} bytes"
    );
    // The turn's state, shared by its task and its actor for the
    // turn's life: the open call (152 bytes) is boxed, only a tool
    // call holds one (576 bytes before).
    let state = std::mem::size_of::<crate::agent::turn_state::TurnState>();
    assert!(state <= 448, "a turn's state is {state} bytes");
}
