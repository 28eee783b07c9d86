//! Tests that need the supervisor's sealed messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gone;
mod wakes;
mod writes;

/// Reads `events` up to the parent's (top-level) `Result`.
async fn until_result(events: &mut subagents_actors::EventStream) {
    while let Some(event) = events.recv().await {
        if matches!(event, subagents_messages::AgentEvent::Result(_)) {
            return;
        }
    }
}
