//! Tests that need the supervisor's sealed messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gone;
mod wakes;
mod writes;
