//! A store opened by a relative path, then the process's working
//! directory changed (a host, a tool running `cd`). Its own binary: the
//! working directory is the whole process's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::sync::Arc;

use subagents_actors::clock::{Clock, ManualClock};
use subagents_messages::{AgentId, ChildRequest, ToolUseId};
use subagents_supervisor::store::EnvelopeStore;

/// Shared (two directories, one process): the store joined its relative
/// path onto the working directory at every write, read and prune, so
/// after a `cd` it wrote its runs into another directory — another
/// store's, outside its lock — and read that one's runs as its own
/// children's. The path is resolved once, at open.
#[test]
fn a_relative_store_path_stays_where_it_was_opened() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fs::create_dir_all(b.path().join("state/runs")).unwrap();
    std::env::set_current_dir(a.path()).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1_735_689_600_000));
    let (store, _) = EnvelopeStore::open("state", clock).unwrap();
    std::env::set_current_dir(b.path()).unwrap();
    let id = AgentId::new("agent_1");
    store
        .save_run(
            &id,
            &ChildRequest::new(
                AgentId::new("parent"),
                0,
                ToolUseId::new("call_1"),
                "Worker\nYou work.",
                "go",
            ),
            &[],
        )
        .unwrap();
    assert!(a.path().join("state/runs/agent_1.json").exists());
    assert!(!b.path().join("state/runs/agent_1.json").exists());
    assert_eq!(store.dir(), a.path().join("state"));
}
