//! The persisted-envelopes store: restart, corrupt files, pruning and clock
//! jumps, write failures (full disk), crash safety, the directory lock.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod crash;
mod files;
mod locking;
mod own_files;
mod pruning;
mod restart_edges;
mod write_errors;

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use subagents_actors::clock::{Clock, ManualClock};
use subagents_messages::event::SubAgentStatus;
use subagents_messages::{AgentId, Envelope, ToolUseId, Usage};
use subagents_supervisor::store::{EnvelopeStore, StoreError};

const HOUR: u64 = 60 * 60 * 1000;
const DAY: u64 = 24 * HOUR;
/// 2025-01-01T00:00:00Z.
const T0: u64 = 1_735_689_600_000;

fn envelope(id: &str, requested_at_ms: u64, finished_at_ms: Option<u64>) -> Envelope {
    Envelope {
        id: AgentId::new(id),
        name: format!("worker {id}"),
        parent_tool_use_id: ToolUseId::new(format!("call_{id}")),
        task: "summarise the file".to_owned(),
        tools: vec!["read_file".to_owned()],
        status: if finished_at_ms.is_some() {
            SubAgentStatus::Done
        } else {
            SubAgentStatus::Running
        },
        background: false,
        requested_at_ms,
        started_at_ms: Some(requested_at_ms),
        finished_at_ms,
        elapsed: Duration::from_millis(1500),
        tool_calls: 2,
        last_tool: Some("read_file".to_owned()),
        usage: Usage {
            prompt_tokens: 100,
            completion_tokens: 20,
        },
        model_calls: 3,
        children_usage: Default::default(),
        result: finished_at_ms.map(|_| "all good".to_owned()),
        error: None,
        claimed: false,
        wake_owed: false,
        depth: 1,
        resumed_from: None,
        continued_as: None,
        thread: None,
        cancelled: false,
        forgotten: false,
        stopping: false,
    }
}

/// A run file for `id`, as a resume writes one.
fn save_a_run(store: &EnvelopeStore, id: &str) {
    let request = subagents_messages::ChildRequest::new(
        AgentId::new("parent"),
        0,
        ToolUseId::new("call_1"),
        "Worker",
        "work",
    );
    let said = [subagents_messages::ChatMessage::user("work")];
    store.save_run(&AgentId::new(id), &request, &said).unwrap();
}

fn clock(now: u64) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(now))
}

fn open(dir: &Path, clock: &Arc<ManualClock>) -> EnvelopeStore {
    let (store, report) = EnvelopeStore::open(dir, clock.clone() as Arc<dyn Clock>).unwrap();
    assert!(report.corrupt.is_empty(), "{report:?}");
    store
}

fn ids(store: &EnvelopeStore) -> Vec<String> {
    store.all().iter().map(|e| e.id.to_string()).collect()
}

fn json_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// Closes `store` and opens its directory again (one store per directory:
/// the lock is released when the first goes).
fn reopen(
    store: EnvelopeStore,
    dir: &Path,
    clock: &Arc<ManualClock>,
) -> (EnvelopeStore, subagents_supervisor::store::LoadReport) {
    drop(store);
    EnvelopeStore::open(dir, clock.clone()).unwrap()
}

/// `all()` was sorted by id as text: a store of more than nine children
/// listed `agent_10` before `agent_2`, unlike the same children read from
/// their hub (`HubHandle::envelopes`) or the restart list. Child-number
/// order, as theirs.
#[test]
fn all_lists_children_in_child_number_order() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(1_000);
    let store = open(tmp.path(), &clock);
    for id in ["agent_10", "agent_2", "agent_1"] {
        store.save(&envelope(id, 1_000, None)).unwrap();
    }
    assert_eq!(ids(&store), ["agent_1", "agent_2", "agent_10"]);
    let (store, _) = reopen(store, tmp.path(), &clock);
    assert_eq!(ids(&store), ["agent_1", "agent_2", "agent_10"]);
}

/// An id no hub numbered — `agent_012` (a leading zero; another tool's
/// file, a host's own id) — was read as 12 by `all()`, put last by the
/// hub, and listed by its length in the restart list: three orders for
/// one store. Each lists it after the numbered ones now, as the hub does.
#[test]
fn an_id_with_a_leading_zero_is_listed_after_the_numbered_ones_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(1_000);
    let store = open(tmp.path(), &clock);
    for id in ["agent_20", "agent_012", "agent_2", "agent_100"] {
        store.save(&envelope(id, 1_000, None)).unwrap();
    }
    let want = ["agent_2", "agent_20", "agent_100", "agent_012"];
    assert_eq!(ids(&store), want);
    let (store, _) = reopen(store, tmp.path(), &clock);
    let restart: Vec<String> = store
        .interrupted()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(restart, want);
}
