//! The prune's and the forget's tests.

use std::sync::Arc;
use std::time::Duration;

use subagents_actors::clock::ManualClock;
use subagents_messages::{Envelope, SubAgentStatus, ToolUseId};

use super::*;

const T0: u64 = 1_700_000_000_000;
const DAY: u64 = 24 * 3600 * 1000;

fn done(id: &str) -> Envelope {
    Envelope {
        id: AgentId::new(id),
        name: id.to_owned(),
        parent_tool_use_id: ToolUseId::new(format!("call_{id}")),
        task: "work".to_owned(),
        tools: Vec::new(),
        status: SubAgentStatus::Done,
        background: true,
        requested_at_ms: T0,
        started_at_ms: Some(T0),
        finished_at_ms: Some(T0),
        elapsed: Duration::ZERO,
        tool_calls: 0,
        last_tool: None,
        usage: Default::default(),
        model_calls: 1,
        children_usage: Default::default(),
        result: Some("done".to_owned()),
        error: None,
        claimed: false,
        wake_owed: true,
        depth: 1,
        resumed_from: None,
        continued_as: None,
        thread: None,
        cancelled: false,
        forgotten: false,
        stopping: false,
    }
}

/// Review of this session's own diff: a wake a thread had taken (and
/// not delivered: the parent was busy) was given back on a switch
/// away after a prune had removed its child — owed again, and the next
/// thread shown took it and settled it, sending nothing. The same for
/// a restart list given back. What was pruned is not given back.
#[test]
fn a_wake_given_back_after_its_child_was_pruned_is_owed_no_more() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    store.save(&done("agent_1")).unwrap();
    drop(store);
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    assert_eq!(store.take_owed_wakes(None), [AgentId::new("agent_1")]);
    clock.set(T0 + 2 * DAY);
    assert_eq!(store.prune().removed, [AgentId::new("agent_1")]);
    store.give_back_owed(&AgentId::new("agent_1"));
    assert!(store.owed_wakes().is_empty(), "{:?}", store.owed_wakes());
    store.give_back_interrupted(vec![AgentId::new("agent_1")]);
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
}

/// Replay (review: orders that reach a host): the removed ids came in
/// the ids' text order (`agent_10` before `agent_2`), another
/// version's after them in the directory's order — every other list
/// the store gives is in child-number order.
#[test]
fn a_prunes_removals_are_in_child_number_order() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    for id in ["agent_10", "agent_2"] {
        store.save(&done(id)).unwrap();
    }
    clock.set(T0 + 2 * DAY);
    let ids = |names: &[&str]| names.iter().map(|n| AgentId::new(*n)).collect::<Vec<_>>();
    assert_eq!(store.prune().removed, ids(&["agent_2", "agent_10"]));
}

/// Replay (review: orders that reach a host, thirty-seventh session):
/// removals that failed were listed in the ids' text order (`agent_10`
/// before `agent_2`), another version's in the directory's.
#[test]
fn a_prunes_failed_removals_are_in_child_number_order() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    for id in ["agent_10", "agent_2"] {
        store.save(&done(id)).unwrap();
        unremovable(&store, id);
    }
    clock.set(T0 + 2 * DAY);
    let failed: Vec<String> = (store.prune().failed.iter())
        .map(|e| match e {
            StoreError::Remove { path, .. } => path.file_name().unwrap().display().to_string(),
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0].starts_with("agent_2") && failed[1].starts_with("agent_10"),
        "{failed:?}"
    );
}

/// The same for a forget's failed writes (listed in the ids' text
/// order).
#[test]
fn a_forgets_failed_writes_are_in_child_number_order() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
    let thread = ThreadId::new("t");
    for id in ["agent_10", "agent_2"] {
        let mut envelope = done(id);
        envelope.thread = Some(thread.clone());
        store.save(&envelope).unwrap();
        unremovable(&store, id);
    }
    let failed: Vec<String> = (store.forget_thread(&thread).unwrap().iter())
        .map(|e| e.to_string())
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed[0].contains("agent_2") && failed[1].contains("agent_10"),
        "{failed:?}"
    );
}

/// Shared (review: wakes at the same instant, thirty-fourth session): a
/// wake or a restart list a thread took and gave back (a switch away,
/// a killed thread) was listed again though the child's result had
/// been claimed, or the child resumed or stopped, meanwhile — a host's
/// badge counted wakes the next showing settled unsent.
#[test]
fn a_wake_given_back_after_its_result_was_claimed_is_owed_no_more() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    for id in ["agent_1", "agent_2"] {
        store.save(&done(id)).unwrap();
    }
    let mut running = done("agent_3");
    running.status = SubAgentStatus::Running;
    running.wake_owed = false;
    store.save(&running).unwrap();
    let mut stopped = running.clone();
    stopped.id = AgentId::new("agent_4");
    store.save(&stopped).unwrap();
    drop(store);
    let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
    let [one, two, three, four] = ["agent_1", "agent_2", "agent_3", "agent_4"].map(AgentId::new);
    assert_eq!(store.take_owed_wakes(None), [one.clone(), two.clone()]);
    assert_eq!(store.take_interrupted(None), [three.clone(), four.clone()]);
    let mut claimed = store.get(&one).unwrap();
    claimed.claimed = true;
    store.save(&claimed).unwrap();
    let mut resumed = store.get(&three).unwrap();
    resumed.continued_as = Some(AgentId::new("agent_5"));
    store.save(&resumed).unwrap();
    let mut cancelled = store.get(&four).unwrap();
    cancelled.cancelled = true;
    store.save(&cancelled).unwrap();
    store.give_back_owed(&one);
    store.give_back_owed(&two);
    assert_eq!(store.owed_wakes(), [two]);
    store.give_back_interrupted(vec![three, four]);
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
}

/// Replay (review: same seed, same bytes, thirty-eighth session): a
/// resume of an earlier session's child is decided at once
/// (`begin_resume`), its link written later by the thread's writer. A
/// wake given back in between (a switch in the same instant) was
/// listed again or not by how far that write had got — and the child's
/// file kept `wake_owed` or not with it. A resume begun goes on: not
/// listed again, whenever the link lands.
#[test]
fn a_wake_given_back_as_its_resume_begins_is_owed_no_more() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    store.save(&done("agent_1")).unwrap();
    let mut running = done("agent_2");
    running.status = SubAgentStatus::Running;
    running.wake_owed = false;
    store.save(&running).unwrap();
    drop(store);
    let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
    let [one, two] = ["agent_1", "agent_2"].map(AgentId::new);
    assert_eq!(store.take_owed_wakes(None), std::slice::from_ref(&one));
    assert_eq!(store.take_interrupted(None), std::slice::from_ref(&two));
    assert!(store.begin_resume(&one) && store.begin_resume(&two));
    store.give_back_owed(&one);
    store.give_back_interrupted(vec![two]);
    assert!(store.owed_wakes().is_empty(), "{:?}", store.owed_wakes());
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
}

/// Written by another version (review: a host upgrading the library):
/// an envelope this version cannot read (a later version's status)
/// is left in place for that version — and was never pruned, nor its
/// run: after a rollback its conversation outlived the retention for
/// as long as this version ran. Removed at twice the retention by its
/// file's time; kept before.
#[test]
fn another_versions_envelope_leaves_at_twice_the_retention() {
    let tmp = tempfile::tempdir().unwrap();
    let later = r#"{"id":"agent_1","status":"paused","task":"t"}"#;
    fs::write(tmp.path().join("agent_1.json"), later).unwrap();
    fs::create_dir(tmp.path().join("runs")).unwrap();
    fs::write(tmp.path().join("runs/agent_1.json"), "{}").unwrap();
    let now = subagents_actors::clock::Clock::now_ms(&subagents_actors::clock::SystemClock);
    let clock = Arc::new(ManualClock::new(now + DAY + DAY / 2));
    let (store, report) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    assert_eq!(report.unreadable.len(), 1, "{report:?}");
    assert!(store.prune().removed.is_empty(), "past the retention only");
    assert!(tmp.path().join("agent_1.json").exists());
    clock.set(now + 2 * DAY + DAY / 2);
    assert_eq!(store.prune().removed, [AgentId::new("agent_1")]);
    assert!(!tmp.path().join("agent_1.json").exists());
    assert!(!tmp.path().join("runs/agent_1.json").exists());
    // A run written since (a step of an unfinished child) keeps both.
    let later_run = tmp.path().join("agent_2.json");
    fs::write(&later_run, later.replace("agent_1", "agent_2")).unwrap();
    let three_days_back = std::time::SystemTime::now() - Duration::from_secs(3 * 24 * 3600);
    fs::File::options()
        .write(true)
        .open(&later_run)
        .unwrap()
        .set_modified(three_days_back)
        .unwrap();
    fs::write(tmp.path().join("runs/agent_2.json"), "{}").unwrap();
    drop(store);
    let (store, _) = EnvelopeStore::open(tmp.path(), Arc::new(ManualClock::new(now))).unwrap();
    assert!(store.prune().removed.is_empty());
    assert!(later_run.exists());
    drop(store);
    // Its number is not handed out again.
    let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_3")));
}

/// Review (the last read of this session's change): a stop of an
/// earlier session's child checked another thread's resume of it
/// outside the store's lock; the resume, begun between the check and
/// the cancel (two workers), had its chain cancelled under it. The
/// cancel reads the resume's mark under the lock the resume takes.
#[test]
fn a_child_another_thread_began_to_resume_is_not_cancelled() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    store.save(&done("agent_1")).unwrap();
    store.save(&done("agent_2")).unwrap();
    drop(store);
    let (store, _) = EnvelopeStore::open(tmp.path(), clock).unwrap();
    assert!(store.begin_resume(&AgentId::new("agent_1")));
    store
        .cancel_unless_resuming(&AgentId::new("agent_1"))
        .unwrap();
    assert!(!store.get(&AgentId::new("agent_1")).unwrap().cancelled);
    store
        .cancel_unless_resuming(&AgentId::new("agent_2"))
        .unwrap();
    assert!(store.get(&AgentId::new("agent_2")).unwrap().cancelled);
}

/// Unbounded growth (review of this session's diff): a closed thread's
/// finished children join the earlier session's (a thread opened again
/// reads them), and those ids stayed for the store's life, pruned or not.
/// The prune lets them go with the envelope.
#[test]
fn a_pruned_child_is_no_earlier_sessions_any_more() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    store.save(&done("agent_1")).unwrap();
    drop(store);
    let (store, _) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    let one = AgentId::new("agent_1");
    assert!(store.is_from_earlier_session(&one) && store.begin_resume(&one));
    clock.set(T0 + 2 * DAY);
    assert_eq!(store.prune().removed, std::slice::from_ref(&one));
    assert!(!store.is_from_earlier_session(&one));
    assert!(!store.is_resuming(&one));
}

/// `id`'s file made one neither removed nor written: a directory in its
/// place (fails as root too).
fn unremovable(store: &EnvelopeStore, id: &str) {
    let path = store.path_of(&AgentId::new(id));
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir_all(path.join("held")).unwrap();
}
