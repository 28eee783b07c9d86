//! A simulation harness for hosts: describe a scenario — scripted models,
//! tools, and host actions at virtual times — and run it in paused tokio
//! time with a seed. You get back the whole ordered event log (host
//! actions interleaved where they took effect), the transcript and the
//! final envelopes. The same scenario and seed give the same log; an hour
//! of virtual time runs in milliseconds.
//!
//! ```
//! use std::time::Duration;
//! use subagents::prelude::*;
//! use subagents_demo::PageTitle; // this repository's example tools (`demo/`, not published)
//! use subagents::simulation::{HostAction, Scenario};
//!
//! let report = Scenario::new(vec![
//!     Reply::new().use_agent(&UseAgentCall::run("Fetcher", "https://example.com").background()),
//!     Reply::answer("Started."),
//!     Reply::answer("The title is Example Domain."),
//! ])
//! .child_script("Fetcher", vec![
//!     Reply::new().delay(Duration::from_secs(30)).tool_call("fetch_title", r#"{"url":"https://example.com"}"#),
//!     Reply::answer("Example Domain"),
//! ])
//! .tools(ToolRegistry::new().with(PageTitle::default()))
//! .at(Duration::ZERO, HostAction::User("What is the title?".into()))
//! .run_for(Duration::from_secs(120))
//! .run(7);
//!
//! assert_eq!(report.wakes(), ["agent_1"]);
//! assert_eq!(report.envelopes[0].result.as_deref(), Some("Example Domain"));
//! ```
//!
//! Host actions can also fire *the moment* a child event is read
//! ([`Scenario::on`], [`LiveSimulation::on`]): stop the parent on a child's
//! `Result`, switch on its last `ToolResult`, answer its approval — after a
//! chosen number of scheduler turns, so every ordering of a stop against a
//! completion is reachable. The harness drives the thread from a task of
//! its own, so it reacts as promptly as any actor.
//!
//! | file | holds |
//! |---|---|
//! | `report.rs` | host actions, the log and the report |
//! | `trigger.rs` | actions fired on a child event ([`Moment`], [`Trigger`]) |
//! | `scenario.rs` | [`Scenario`]: what to run |
//! | `live.rs` | [`LiveSimulation`]: a running scenario, step by step |
//! | `jitter.rs` | seeded latency with a fixed hash |
//!
//! See `docs/simulation.md`.

mod jitter;
mod live;
mod report;
mod scenario;
mod trigger;

pub use live::LiveSimulation;
pub use report::{HostAction, LogEntry, SimulationReport};
pub use scenario::Scenario;
pub use trigger::{Moment, Trigger};
