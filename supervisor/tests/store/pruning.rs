//! Retention: what is pruned, when, and what never is.

use super::*;

#[test]
fn pruning_removes_envelopes_older_than_24h_from_memory_and_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    // Finished: ages from finished_at (requested long before).
    store
        .save(&envelope("finished", T0 - 5 * DAY, Some(T0)))
        .unwrap();
    // Unfinished, saved in this session: running, never pruned.
    store.save(&envelope("running", T0, None)).unwrap();
    // Younger.
    store.save(&envelope("young", T0, Some(T0 + HOUR))).unwrap();

    clock.set(T0 + DAY);
    let report = store.prune();
    assert!(report.removed.is_empty(), "exactly 24 h old is kept");

    clock.set(T0 + DAY + 1);
    let report = store.prune();
    assert!(report.failed.is_empty());
    assert_eq!(report.removed, [AgentId::new("finished")]);
    assert_eq!(ids(&store), ["running", "young"]);
    assert_eq!(store.get(&AgentId::new("finished")), None);
    assert_eq!(json_files(tmp.path()), ["running.json", "young.json"]);

    clock.set(T0 + HOUR + DAY + 1);
    assert_eq!(store.prune().removed, [AgentId::new("young")]);
    assert_eq!(ids(&store), ["running"]);

    // Unfinished in an earlier session (its process died): the open marks
    // it interrupted, and it ages from then — one more retention to be
    // told of and resumed.
    let (reopened, report) = reopen(store, tmp.path(), &clock);
    assert!(report.pruned.removed.is_empty());
    assert_eq!(report.interrupted, [AgentId::new("running")]);
    clock.set(T0 + HOUR + 2 * DAY + 2);
    assert_eq!(reopened.prune().removed, [AgentId::new("running")]);
    assert!(reopened.is_empty());
    assert!(json_files(tmp.path()).is_empty());
}

/// Stopped midway: a child that had run longer than the retention when its
/// process died was pruned by the next open before the open marked the
/// unfinished ones interrupted — it aged from its request. Its envelope
/// and run were deleted: no `interrupted` status, no restart wake, and a
/// `send` to it "no sub-agent". A process that dies loses none of its
/// children: it is interrupted, and ages from the restart.
#[test]
fn a_child_running_longer_than_the_retention_is_interrupted_not_pruned_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    let id = AgentId::new("agent_1");
    store.save(&envelope("agent_1", T0, None)).unwrap();
    let request = subagents_messages::ChildRequest::new(
        AgentId::new("parent"),
        0,
        ToolUseId::new("call_1"),
        "Worker",
        "a long survey",
    );
    let said = [subagents_messages::ChatMessage::user("a long survey")];
    store.save_run(&id, &request, &said).unwrap();

    // It ran for a day and an hour; then the process was killed.
    clock.set(T0 + DAY + HOUR);
    let (reopened, report) = reopen(store, tmp.path(), &clock);
    assert!(report.pruned.removed.is_empty(), "{report:?}");
    assert_eq!(report.interrupted, [AgentId::new("agent_1")]);
    let envelope = reopened.get(&id).expect("kept");
    assert_eq!(envelope.status, SubAgentStatus::Interrupted);
    assert_eq!(envelope.finished_at_ms, Some(T0 + DAY + HOUR));
    assert_eq!(reopened.run(&id), Some((request, said.to_vec())));
    assert_eq!(reopened.interrupted(), [AgentId::new("agent_1")]);

    // A retention after the restart, not after the request.
    clock.set(T0 + 2 * DAY + HOUR);
    assert!(reopened.prune().removed.is_empty());
    clock.set(T0 + 2 * DAY + HOUR + 1);
    assert_eq!(reopened.prune().removed, [AgentId::new("agent_1")]);
    assert_eq!(reopened.run(&id), None);
}

#[test]
fn clock_jumping_backward_prunes_nothing_new() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let mut store = open(tmp.path(), &clock);
    for h in 0..48 {
        store
            .save(&envelope(&format!("agent_{h:02}"), T0, Some(T0 + h * HOUR)))
            .unwrap();
    }
    clock.set(T0 + 40 * HOUR);
    let first = store.prune();
    // Stamps older than T0 + 16 h are gone: agent_00..agent_15.
    assert_eq!(first.removed.len(), 16);
    let survivors = ids(&store);
    assert_eq!(survivors.len(), 32);

    // Backward, by hours, by days, to before every stamp: nothing new.
    for back in [T0 + 39 * HOUR, T0 + 20 * HOUR, T0, T0 - 30 * DAY, 0] {
        clock.set(back);
        let report = store.prune();
        assert!(report.removed.is_empty(), "at {back}: {report:?}");
        assert_eq!(ids(&store), survivors);
        // Reopening (which prunes) after the jump prunes nothing either.
        let (reopened, report) = reopen(store, tmp.path(), &clock);
        store = reopened;
        assert!(report.pruned.removed.is_empty());
        assert_eq!(report.loaded, 32);
    }

    // Back to where it was: still nothing new.
    clock.set(T0 + 40 * HOUR);
    assert!(store.prune().removed.is_empty());
    assert_eq!(ids(&store), survivors);
}

#[test]
fn future_dated_envelopes_are_never_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let mut store = open(tmp.path(), &clock);
    // Written before the clock was set back by a month.
    let future = T0 + 30 * DAY;
    store
        .save(&envelope("from_the_future", future, Some(future)))
        .unwrap();
    store
        .save(&envelope("unfinished_future", future, None))
        .unwrap();

    for now in [
        T0,
        T0 + DAY + 1,
        T0 + 10 * DAY,
        future - 1,
        future,
        future + DAY,
    ] {
        clock.set(now);
        assert!(store.prune().removed.is_empty(), "at {now}");
        let (reopened, report) = reopen(store, tmp.path(), &clock);
        store = reopened;
        assert!(report.pruned.removed.is_empty(), "reopen at {now}");
    }
    assert_eq!(store.len(), 2);

    // Once the clock passes the stamp, it ages like any other (the
    // unfinished one is an earlier session's since the first reopen, and
    // interrupted there).
    clock.set(future + DAY + 1);
    assert_eq!(store.prune().removed.len(), 2);
    assert!(json_files(tmp.path()).is_empty());
}

#[test]
fn pruning_runs_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    {
        let store = open(tmp.path(), &clock);
        store.save(&envelope("old", T0, Some(T0))).unwrap();
        store
            .save(&envelope("recent", T0, Some(T0 + 2 * HOUR)))
            .unwrap();
    }
    clock.set(T0 + DAY + HOUR);
    let (store, report) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    assert_eq!(report.loaded, 2);
    assert_eq!(report.pruned.removed, [AgentId::new("old")]);
    assert_eq!(ids(&store), ["recent"]);
    assert_eq!(json_files(tmp.path()), ["recent.json"]);
}

#[test]
fn retention_is_configurable() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let (store, _) =
        EnvelopeStore::open_with_retention(tmp.path(), clock.clone(), Duration::from_secs(60))
            .unwrap();
    assert_eq!(store.retention(), Duration::from_secs(60));
    store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
    clock.set(T0 + 60_000);
    assert!(store.prune().removed.is_empty());
    clock.set(T0 + 60_001);
    assert_eq!(store.prune().removed, [AgentId::new("agent_1")]);
}

/// Held past the retention: a run whose envelope is gone (a kill between
/// a prune's two removals, a run's removal that failed, an envelope moved
/// aside as corrupt) was never pruned — prune visits envelopes only — so a
/// whole conversation outlived the retention for good. It goes once the
/// retention has passed since its file was written; a fresh one stays.
#[test]
fn a_run_whose_envelope_is_gone_is_pruned_after_the_retention() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let at = |ms: u64| std::time::UNIX_EPOCH + Duration::from_millis(ms);
    for (name, written) in [("agent_1.json", T0 - 2 * DAY), ("agent_2.json", T0)] {
        let file = std::fs::File::create(runs.join(name)).unwrap();
        std::io::Write::write_all(&mut &file, b"{}").unwrap();
        file.set_modified(at(written)).unwrap();
    }
    // One with its envelope, as old: an envelope's run goes with it.
    let store = open(tmp.path(), &clock(T0 - 2 * DAY));
    store
        .save(&envelope("agent_3", T0 - 2 * DAY, None))
        .unwrap();
    drop(store);
    let old = runs.join("agent_3.json");
    std::fs::write(&old, b"{}").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(at(T0 - 2 * DAY))
        .unwrap();
    let (_, report) = EnvelopeStore::open(tmp.path(), clock(T0)).unwrap();
    assert_eq!(report.pruned.runs_removed, [AgentId::new("agent_1")]);
    let mut left: Vec<String> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["agent_2.json", "agent_3.json"]);
}

/// Foreign input: the store deletes only what it wrote (docs/persistence.md:
/// "a file the store did not create is never deleted"). A user's
/// `runs/notes.json`, or `runs/agent_01.json` (no id the store hands
/// out), is no run of a child: both were removed once the retention
/// passed, as orphan runs.
#[test]
fn a_run_the_store_cannot_tell_is_an_orphan_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let at = |ms: u64| std::time::UNIX_EPOCH + Duration::from_millis(ms);
    for name in ["notes.json", "agent_01.json"] {
        let file = std::fs::File::create(runs.join(name)).unwrap();
        std::io::Write::write_all(&mut &file, b"{}").unwrap();
        file.set_modified(at(T0 - 2 * DAY)).unwrap();
    }
    let (_, report) = EnvelopeStore::open(tmp.path(), clock(T0)).unwrap();
    assert!(report.pruned.runs_removed.is_empty(), "{report:?}");
    for name in ["notes.json", "agent_01.json"] {
        assert!(runs.join(name).exists(), "{name} was removed");
    }
}

/// Stopped midway, twice, by the retention: a child an earlier open
/// interrupted whose restart wake never went out (that process ended
/// before a thread was shown) was listed again by the next open more than
/// a retention later — and pruned by the same open: `interrupted` named a
/// child the store no longer had, and the first thread shown (any
/// conversation: a missing envelope belongs to every thread) woke its
/// parent for "0 sub-agent(s) interrupted". A prune while a process runs
/// left it listed the same way. Pruned, it is listed no more.
#[test]
fn a_pruned_interrupted_child_is_listed_no_more() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    store.save(&envelope("agent_1", T0, None)).unwrap();
    // Process A: interrupts it, shows no thread.
    let (store, report) = reopen(store, tmp.path(), &clock);
    assert_eq!(report.interrupted, [AgentId::new("agent_1")]);
    // Process B, past the retention.
    clock.set(T0 + 2 * DAY);
    let (store, report) = reopen(store, tmp.path(), &clock);
    assert_eq!(report.pruned.removed, [AgentId::new("agent_1")]);
    assert!(report.interrupted.is_empty(), "{:?}", report.interrupted);
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());

    // A prune while a process runs.
    store
        .save(&envelope("agent_2", T0 + 2 * DAY, None))
        .unwrap();
    let (store, report) = reopen(store, tmp.path(), &clock);
    assert_eq!(report.interrupted, [AgentId::new("agent_2")]);
    clock.set(T0 + 4 * DAY);
    assert_eq!(store.prune().removed, [AgentId::new("agent_2")]);
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
}

/// The same for an owed wake (review: the store shared and interrupted):
/// a finished child whose wake the last process owed, pruned before any
/// thread took it, stayed in `owed_wakes` — a host's badge counted a wake
/// that never came, and the first thread shown took it (a missing
/// envelope belongs to every thread) and settled it, sending nothing.
#[test]
fn a_pruned_owed_wake_is_listed_no_more() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    let mut done = envelope("agent_1", T0, Some(T0));
    done.wake_owed = true;
    store.save(&done).unwrap();
    let (store, _) = reopen(store, tmp.path(), &clock);
    assert_eq!(store.owed_wakes(), [AgentId::new("agent_1")]);
    clock.set(T0 + 2 * DAY);
    assert_eq!(store.prune().removed, [AgentId::new("agent_1")]);
    assert!(store.owed_wakes().is_empty(), "{:?}", store.owed_wakes());
}

/// A conversation forgotten through the store left its children on the
/// restart list and in the owed wakes for the rest of the process: a
/// forgotten child belongs to no thread, so none would ever take them,
/// and a host's badges read from the lists never cleared.
#[test]
fn a_forgotten_conversations_children_are_listed_no_more() {
    use subagents_messages::ThreadId;
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    let a = ThreadId::new("a");
    let mut running = envelope("agent_1", T0, None);
    running.thread = Some(a.clone());
    let mut done = envelope("agent_2", T0, Some(T0));
    done.wake_owed = true;
    done.thread = Some(a.clone());
    store.save(&running).unwrap();
    store.save(&done).unwrap();
    let (store, _) = reopen(store, tmp.path(), &clock);
    assert_eq!(store.interrupted(), [AgentId::new("agent_1")]);
    assert_eq!(store.owed_wakes(), [AgentId::new("agent_2")]);
    assert!(store.forget_thread(&a).unwrap().is_empty());
    assert!(store.interrupted().is_empty(), "{:?}", store.interrupted());
    assert!(store.owed_wakes().is_empty(), "{:?}", store.owed_wakes());
}

/// Repeated, across restarts: the counter started past every id the
/// directory named, so an id pruned from it was handed out again by the
/// open after — a host's row kept from before (`agent_1-approval-1`, a
/// restored transcript's `agent_1`) matched the new child. Before a prune
/// removes a file, the last child number is kept (`.subagents-ids`), and
/// the counter starts past it: pruned at an open, or in the session.
#[test]
fn an_id_pruned_from_the_directory_is_not_handed_out_again() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    let first = store.child_ids().next().unwrap();
    assert_eq!(first, AgentId::new("agent_1"));
    store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
    // Pruned by the next open; the one after it named no child.
    clock.set(T0 + DAY + 1);
    let (store, report) = reopen(store, tmp.path(), &clock);
    assert_eq!(report.pruned.removed, [first]);
    let (store, _) = reopen(store, tmp.path(), &clock);
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_2")));

    // Pruned in the session: the numbers handed out (agent_3, never
    // saved, too) are kept before the file goes.
    let ids = store.child_ids();
    assert_eq!(ids.next(), Some(AgentId::new("agent_3")));
    store
        .save(&envelope("agent_2", T0, Some(T0 + DAY)))
        .unwrap();
    clock.set(T0 + 2 * DAY + 2);
    assert_eq!(store.prune().removed, [AgentId::new("agent_2")]);
    let (store, _) = reopen(store, tmp.path(), &clock);
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_4")));

    // A host's own id past the counter, pruned: its number is kept too.
    store.save(&envelope("agent_90", T0, Some(T0))).unwrap();
    assert_eq!(store.prune().removed, [AgentId::new("agent_90")]);
    let (store, report) = reopen(store, tmp.path(), &clock);
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_91")));
    assert!(report.foreign.is_empty(), "{report:?}");
}

/// Foreign (a host's own ids; review: the store as foreign input): a host
/// saving an envelope under a child id the store's counter had not
/// reached (kept from a run without a store, or imported) saw a later
/// child of a thread take that id — its envelopes overwrote the host's,
/// and took the host's thread, claim and cancel (after a restart, woken
/// in another conversation). The counter goes past every child id saved.
#[test]
fn a_child_id_a_host_saved_is_never_handed_out() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    store.save(&envelope("agent_4", T0, Some(T0))).unwrap();
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_5")));
    // One the counter is past changes nothing.
    store.save(&envelope("agent_2", T0, Some(T0))).unwrap();
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_6")));
}

/// Foreign (a kill inside a child's first write; review: the store as
/// foreign input): the open that removed the stray temporary file
/// counted past the id it named, but wrote that number nowhere — the
/// open after it, no name left to give it, handed `agent_7` out again
/// (a host's row kept for the killed child matched the new one). The
/// number is kept before the file is removed.
#[test]
fn a_stray_temporary_files_id_is_kept_past_the_open_that_removed_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, clock) = (tmp.path(), clock(T0));
    let store = open(dir, &clock);
    store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
    drop(store);
    let stray = dir.join(".agent_7.json.0000000100000000.subagents-tmp");
    fs::write(&stray, b"{\"id\":\"agent_7\"").unwrap();
    for open_n in 1..=2 {
        let (store, report) = EnvelopeStore::open(dir, clock.clone()).unwrap();
        assert_eq!(report.temp_removed.len(), usize::from(open_n == 1));
        let next = store.child_ids().next();
        assert_eq!(next, Some(AgentId::new("agent_8")), "open {open_n}");
    }
}

/// Unbounded growth (review: a store open for weeks, thirty-eighth
/// session): each forgotten thread (every `Threads::delete` on a store)
/// left its mark — a write for it lands forgotten, for a killed thread's
/// writer still draining — for the store's life: one entry per deleted
/// conversation, never let go unless a thread of the same id was opened
/// again. Let go by the prune past the retention (no writer drains that
/// long); within it, a late write still lands forgotten.
#[test]
fn a_forgotten_threads_mark_is_let_go_past_the_retention() {
    use subagents_messages::ThreadId;
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    let thread = ThreadId::new("deleted");
    let late = |id: &str, at: u64| {
        let mut e = envelope(id, at, Some(at));
        e.thread = Some(thread.clone());
        e
    };
    store.save(&late("agent_1", T0)).unwrap();
    assert!(store.forget_thread(&thread).unwrap().is_empty());
    // A writer still draining, within the retention: forgotten.
    clock.set(T0 + DAY);
    store.prune();
    store.save(&late("agent_2", T0 + DAY)).unwrap();
    assert!(store.get(&AgentId::new("agent_2")).unwrap().forgotten);
    // Past it, the mark is gone: a thread of that id, written later, is
    // not anybody's forgotten one.
    clock.set(T0 + DAY + 1);
    store.prune();
    store.save(&late("agent_3", T0 + DAY + 1)).unwrap();
    assert!(!store.get(&AgentId::new("agent_3")).unwrap().forgotten);
}

/// Review of this session's diff: with a short retention (0 is allowed)
/// the mark was let go at the next prune, a millisecond on — a killed
/// thread's writer still draining wrote its child as not forgotten, and
/// after a restart it was woken for the deleted conversation. Kept an
/// hour at least.
#[test]
fn a_forgotten_threads_mark_outlives_a_short_retention() {
    use subagents_messages::ThreadId;
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = EnvelopeStore::open_with_retention(tmp.path(), clock.clone(), Duration::ZERO)
        .unwrap()
        .0;
    let thread = ThreadId::new("deleted");
    assert!(store.forget_thread(&thread).unwrap().is_empty());
    clock.set(T0 + 1);
    store.prune();
    let mut running = envelope("agent_1", T0, None);
    running.thread = Some(thread.clone());
    store.save(&running).unwrap();
    assert!(store.get(&AgentId::new("agent_1")).unwrap().forgotten);
    clock.set(T0 + HOUR + 1);
    store.prune();
    let mut later = envelope("agent_2", T0 + HOUR + 1, None);
    later.thread = Some(thread);
    store.save(&later).unwrap();
    assert!(!store.get(&AgentId::new("agent_2")).unwrap().forgotten);
}
