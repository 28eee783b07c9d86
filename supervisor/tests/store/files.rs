//! Saving and reloading: what a file holds, corrupt and stray files, ids.

use super::*;

#[test]
fn store_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<EnvelopeStore>();
}

#[test]
fn open_creates_a_missing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/envelopes");
    let store = open(&dir, &clock(T0));
    assert!(dir.is_dir());
    assert!(store.is_empty());
}

#[test]
fn save_then_restart_reloads_envelopes_and_get_by_id_works() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let a = envelope("agent_2", T0, Some(T0 + 10));
    let b = envelope("agent_1", T0, None);
    let odd = envelope("../weird/id %", T0, Some(T0));
    {
        let store = open(tmp.path(), &clock);
        store.save(&a).unwrap();
        store.save(&b).unwrap();
        store.save(&odd).unwrap();
        // Overwrite: the newest version wins.
        let mut a2 = a.clone();
        a2.claimed = true;
        store.save(&a2).unwrap();
    }
    // The odd id stays inside the directory.
    assert_eq!(
        json_files(tmp.path()),
        [
            "%2E%2E%2Fweird%2Fid%20%25.json",
            "agent_1.json",
            "agent_2.json"
        ]
    );

    let (store, report) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    assert_eq!(report.loaded, 3);
    assert!(report.corrupt.is_empty() && report.temp_removed.is_empty());
    assert!(report.pruned.removed.is_empty());
    let mut a2 = a.clone();
    a2.claimed = true;
    assert_eq!(store.get(&AgentId::new("agent_2")), Some(a2));
    // It was running when its process stopped: it comes back interrupted
    // (saved so), everything else as it was.
    assert_eq!(report.interrupted, [AgentId::new("agent_1")]);
    let back = store.get(&AgentId::new("agent_1")).unwrap();
    assert_eq!(back.status, SubAgentStatus::Interrupted);
    assert!(
        back.error
            .as_deref()
            .unwrap()
            .contains("process running it stopped")
    );
    assert_eq!(
        Envelope {
            status: b.status,
            finished_at_ms: None,
            error: None,
            wake_owed: false,
            ..back
        },
        b
    );
    assert!(back.wake_owed, "its restart wake is owed, on disk");
    assert_eq!(store.interrupted(), [AgentId::new("agent_1")]);
    assert_eq!(
        store.interrupted(),
        [AgentId::new("agent_1")],
        "read, not taken"
    );
    assert_eq!(store.get(&odd.id), Some(odd));
    assert_eq!(store.get(&AgentId::new("agent_9")), None);
    assert_eq!(ids(&store), ["agent_1", "agent_2", "../weird/id %"]);
}

/// Stopped midway: the open saved each unfinished child `interrupted` (a
/// final status) and kept the restart list only in memory, so a process
/// that opened the store and ended before a thread delivered the restart
/// wake (a host that only read the report, a kill during the wake's turn)
/// left the next open nothing to wake the parent with. The wake is owed
/// on disk until a thread delivers it; listed in child-number order.
#[test]
fn a_restart_wake_no_thread_delivered_is_owed_to_the_next_open() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path(), &clock(T0));
        for id in ["agent_10", "agent_2"] {
            store.save(&envelope(id, T0, None)).unwrap();
        }
    }
    let first = open(tmp.path(), &clock(T0 + 1_000));
    let listed = [AgentId::new("agent_2"), AgentId::new("agent_10")];
    assert_eq!(first.interrupted(), listed, "in child-number order");
    drop(first);
    let second = open(tmp.path(), &clock(T0 + 2_000));
    assert_eq!(second.interrupted(), listed, "still owed");
    // Settled (as a thread does once the wake went out): not again.
    for id in &listed {
        let mut settled = second.get(id).unwrap();
        settled.wake_owed = false;
        second.save(&settled).unwrap();
    }
    drop(second);
    assert!(
        open(tmp.path(), &clock(T0 + 3_000))
            .interrupted()
            .is_empty()
    );
}

/// Stopped midway (a kill between two writes): a resume writes the new
/// run (`agent_2`, `resumed_from: agent_1`) before the old run's link, so
/// a kill between them left `agent_1` unlinked — the next session's
/// message to it went on from `agent_1` again, forking the chain. The open
/// restores the link from the run that names it.
#[test]
fn a_resume_link_lost_to_a_kill_is_restored_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path(), &clock(T0));
        store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
        let mut next = envelope("agent_2", T0 + 10, Some(T0 + 20));
        next.resumed_from = Some(AgentId::new("agent_1"));
        store.save(&next).unwrap();
        save_a_run(&store, "agent_2");
        let unrelated = envelope("agent_3", T0, Some(T0));
        store.save(&unrelated).unwrap();
    }
    let store = open(tmp.path(), &clock(T0 + 1_000));
    let linked = store.get(&AgentId::new("agent_1")).unwrap();
    assert_eq!(linked.continued_as, Some(AgentId::new("agent_2")));
    assert_eq!(
        store.get(&AgentId::new("agent_3")).unwrap().continued_as,
        None
    );
    drop(store);
    // On disk too.
    let again = open(tmp.path(), &clock(T0 + 2_000));
    let linked = again.get(&AgentId::new("agent_1")).unwrap();
    assert_eq!(linked.continued_as, Some(AgentId::new("agent_2")));
}

/// Stopped midway (store review, thirty-fourth session): a kill between
/// a resumed run's envelope and its run file (or a run write that failed)
/// left a run nothing resumes from — and the open linked the intact run
/// before it to it: a message to the chain then read "cannot resume", the
/// whole chain lost for one run. A link is restored only to a run whose
/// file landed.
#[test]
fn a_resume_link_is_not_restored_to_a_run_that_never_landed() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path(), &clock(T0));
        store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
        save_a_run(&store, "agent_1");
        let mut next = envelope("agent_2", T0 + 10, None);
        next.resumed_from = Some(AgentId::new("agent_1"));
        store.save(&next).unwrap();
    }
    let store = open(tmp.path(), &clock(T0 + 1_000));
    assert_eq!(
        store.get(&AgentId::new("agent_1")).unwrap().continued_as,
        None
    );
    assert!(store.run(&AgentId::new("agent_1")).is_some());
}

#[test]
fn saved_file_holds_only_the_envelope_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), &clock(T0));
    let e = envelope("agent_1", T0, Some(T0));
    store.save(&e).unwrap();
    let path = store.path_of(&e.id);
    let text = fs::read_to_string(&path).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    let mut expected = vec![
        "id",
        "name",
        "parent_tool_use_id",
        "task",
        "tools",
        "status",
        "background",
        "requested_at_ms",
        "started_at_ms",
        "finished_at_ms",
        "elapsed",
        "tool_calls",
        "last_tool",
        "usage",
        "model_calls",
        "children_usage",
        "result",
        "error",
        "claimed",
        "wake_owed",
        "depth",
        "resumed_from",
        "continued_as",
        "thread",
        "cancelled",
        "forgotten",
        "stopping",
    ];
    expected.sort();
    assert_eq!(keys, expected);
    assert!(text.len() < 1024, "small summary, got {} bytes", text.len());
    assert_eq!(text.lines().count(), 1, "compact JSON");
}

#[test]
fn corrupt_files_are_reported_with_path_moved_aside_and_others_still_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = clock(T0);
    {
        let store = open(dir, &clock);
        store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
        store.save(&envelope("agent_2", T0, None)).unwrap();
    }
    // Not JSON (a torn file).
    fs::write(dir.join("agent_3.json"), b"{\"id\":\"agent_3\",\"na").unwrap();
    // JSON, but not an envelope.
    fs::write(dir.join("agent_4.json"), b"{\"hello\": 1}").unwrap();
    // An envelope filed under another id's name.
    let e5 = serde_json::to_vec(&envelope("agent_5", T0, None)).unwrap();
    fs::write(dir.join("agent_6.json"), &e5).unwrap();
    // An earlier corrupt file of the same name is never overwritten.
    fs::write(dir.join("agent_4.json.corrupt"), b"older").unwrap();
    // Not ours: left alone.
    fs::write(dir.join("notes.txt"), b"hi").unwrap();

    let (store, report) = EnvelopeStore::open(dir, clock.clone()).unwrap();
    assert_eq!(report.loaded, 2);
    assert_eq!(ids(&store), ["agent_1", "agent_2"]);

    let corrupt: Vec<(PathBuf, Option<PathBuf>)> = report
        .corrupt
        .iter()
        .map(|c| (c.path.clone(), c.moved_to.clone()))
        .collect();
    assert_eq!(
        corrupt,
        [
            (
                dir.join("agent_3.json"),
                Some(dir.join("agent_3.json.corrupt"))
            ),
            (
                dir.join("agent_4.json"),
                Some(dir.join("agent_4.json.1.corrupt"))
            ),
            (
                dir.join("agent_6.json"),
                Some(dir.join("agent_6.json.corrupt"))
            ),
        ]
    );
    assert!(
        report.corrupt[0].error.contains("not valid JSON"),
        "{:?}",
        report.corrupt[0]
    );
    assert!(
        report.corrupt[1].error.contains("not an envelope"),
        "{:?}",
        report.corrupt[1]
    );
    assert!(
        report.corrupt[2].error.contains("agent_5"),
        "{:?}",
        report.corrupt[2]
    );

    // Moved aside, never deleted: contents intact.
    assert_eq!(
        fs::read(dir.join("agent_3.json.corrupt")).unwrap(),
        b"{\"id\":\"agent_3\",\"na"
    );
    assert_eq!(
        fs::read(dir.join("agent_4.json.corrupt")).unwrap(),
        b"older"
    );
    assert_eq!(
        fs::read(dir.join("agent_4.json.1.corrupt")).unwrap(),
        b"{\"hello\": 1}"
    );
    assert_eq!(fs::read(dir.join("agent_6.json.corrupt")).unwrap(), e5);
    assert!(dir.join("notes.txt").exists());
    assert_eq!(json_files(dir), ["agent_1.json", "agent_2.json"]);

    // The next open is clean.
    let (_, report) = reopen(store, dir, &clock);
    assert!(report.corrupt.is_empty());
    assert_eq!(report.loaded, 2);
}

#[test]
fn stray_temp_files_from_interrupted_writes_are_removed_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = clock(T0);
    {
        let store = open(dir, &clock);
        store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
    }
    let ours = [
        ".agent_1.json.00001a2b00000003.subagents-tmp",
        ".agent_2.json.00001a2b00000004.subagents-tmp",
    ];
    fs::write(dir.join(ours[0]), b"{\"id\":\"agent_1\"").unwrap();
    fs::write(dir.join(ours[1]), b"").unwrap();
    let (store, report) = EnvelopeStore::open(dir, clock.clone()).unwrap();
    assert_eq!(report.temp_removed, [dir.join(ours[0]), dir.join(ours[1])]);
    assert!(report.corrupt.is_empty() && report.foreign.is_empty());
    assert!(!dir.join(ours[0]).exists());
    assert_eq!(ids(&store), ["agent_1"]);
    assert_eq!(
        store
            .get(&AgentId::new("agent_1"))
            .unwrap()
            .result
            .as_deref(),
        Some("all good")
    );
}

/// Defect: `.notes.json.backup` was removed as a stray temporary file.
#[test]
fn opening_a_store_never_removes_a_file_it_did_not_create() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = clock(T0);
    let foreign = [
        ".notes.json.backup",
        ".agent_1.json.aB3xY9",
        "README.txt",
        ".agent_1.json.0000ABCD00000001.subagents-tmp",
    ];
    for name in foreign {
        fs::write(dir.join(name), b"keep me").unwrap();
    }
    let (_, report) = EnvelopeStore::open(dir, clock.clone()).unwrap();
    for name in foreign {
        assert_eq!(
            fs::read(dir.join(name)).unwrap(),
            b"keep me",
            "{name} was touched"
        );
    }
    assert!(report.temp_removed.is_empty(), "{report:?}");
    let mut expected: Vec<PathBuf> = foreign.iter().map(|n| dir.join(n)).collect();
    expected.sort();
    assert_eq!(report.foreign, expected);
    // A save leaves no temporary of its own behind either.
    let (store, _) = EnvelopeStore::open(dir, clock.clone()).unwrap();
    store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut want: Vec<String> = foreign.iter().map(|n| n.to_string()).collect();
    want.push("agent_1.json".into());
    want.push(".subagents-lock".into());
    want.push(".subagents-session".into());
    want.sort();
    assert_eq!(names, want);
    // The store's count of opens: this was the second.
    let count = fs::read_to_string(dir.join(".subagents-session")).unwrap();
    assert_eq!(count, "2");
}

/// Defect: a valid envelope `agent_18446744073709551615` made the next id
/// overflow (a panic in `ThreadHandle::spawn`, or in the hub one id
/// later). An id out of range is a corrupt file, and the ids handed out
/// stay in range.
#[test]
fn a_stored_id_out_of_range_is_a_corrupt_file_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = clock(T0);
    for id in [
        "agent_18446744073709551615",
        "agent_18446744073709551614",
        "agent_9007199254740992",
    ] {
        let json = serde_json::to_vec(&envelope(id, T0, Some(T0))).unwrap();
        fs::write(dir.join(format!("{id}.json")), json).unwrap();
    }
    let ok = serde_json::to_vec(&envelope("agent_41", T0, Some(T0))).unwrap();
    fs::write(dir.join("agent_41.json"), ok).unwrap();
    let (store, report) = EnvelopeStore::open(dir, clock.clone()).unwrap();
    assert_eq!(report.corrupt.len(), 3, "{report:?}");
    for corrupt in &report.corrupt {
        assert!(corrupt.error.contains("out of range"), "{corrupt:?}");
        assert!(corrupt.moved_to.is_some());
    }
    assert_eq!(ids(&store), ["agent_41"]);
    assert_eq!(store.child_ids().next().unwrap(), AgentId::new("agent_42"));
}

/// Defect: two threads on one store both numbered their first child
/// `agent_1`. The store's counter is shared by every clone.
#[test]
fn every_user_of_one_store_draws_unique_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = clock(T0);
    {
        let store = open(dir, &clock);
        store.save(&envelope("agent_7", T0, Some(T0))).unwrap();
    }
    let store = open(dir, &clock);
    let (a, b) = (store.child_ids(), store.child_ids());
    let drawn = std::thread::scope(|s| {
        let ta = s.spawn(|| (0..100).map(|_| a.next().unwrap()).collect::<Vec<_>>());
        let tb = s.spawn(|| (0..100).map(|_| b.next().unwrap()).collect::<Vec<_>>());
        let mut all = ta.join().unwrap();
        all.extend(tb.join().unwrap());
        all
    });
    let unique: std::collections::HashSet<_> = drawn.iter().collect();
    assert_eq!(unique.len(), 200);
    assert!(!unique.contains(&AgentId::new("agent_7")));
    assert!(unique.contains(&AgentId::new("agent_8")));
}

/// Foreign input: a run file that is JSON but not an object (another
/// tool's file, a hand edit) is no run — it panicked the hub that looked
/// it up (`use_agent send` to an archived id) — and one that is an object
/// of the wrong shape is none either.
#[test]
fn a_run_file_that_is_not_a_run_is_none_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), &clock(T0));
    let runs = tmp.path().join("runs");
    fs::create_dir_all(&runs).unwrap();
    let id = AgentId::new("agent_1");
    for text in [
        "[]",
        "1",
        "\"x\"",
        "true",
        "null",
        "{}",
        "{\"request\":[]}",
        "not json",
    ] {
        fs::write(runs.join("agent_1.json"), text).unwrap();
        assert!(store.run(&id).is_none(), "{text}");
    }
    // A run the store wrote reads back.
    let request = subagents_messages::ChildRequest::new(
        AgentId::new("parent"),
        0,
        ToolUseId::new("call_1"),
        "Worker",
        "work",
    );
    let said = [subagents_messages::ChatMessage::user("work")];
    store.save_run(&id, &request, &said).unwrap();
    assert_eq!(store.run(&id), Some((request, said.to_vec())));
}

/// A rewrite made a file readable by more users: the temporary file was
/// created with the umask's default mode and renamed over the one a host
/// had made private (`chmod 600`; run files hold whole conversations). A
/// rewrite keeps the file's permissions.
#[cfg(unix)]
#[test]
fn a_rewrite_keeps_the_files_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    let e = envelope("agent_1", T0, Some(T0));
    store.save(&e).unwrap();
    let path = tmp.path().join("agent_1.json");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    store.save(&e).unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");
}

/// A store's folders were made with the umask's default (0755): any local
/// user could read every envelope and every run's whole conversation. The
/// folders a store makes are its owner's alone (0700); one a host made
/// keeps its mode.
#[cfg(unix)]
#[test]
fn the_folders_a_store_makes_are_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let dir = tmp.path().join("state").join("envelopes");
    let store = open(&dir, &clock);
    let id = AgentId::new("agent_1");
    let request = subagents_messages::ChildRequest::new(
        AgentId::new("parent"),
        0,
        ToolUseId::new("call_1"),
        "Worker",
        "work",
    );
    store.save_run(&id, &request, &[]).unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for made in [tmp.path().join("state"), dir.clone(), dir.join("runs")] {
        assert_eq!(
            mode(&made),
            0o700,
            "{} mode {:o}",
            made.display(),
            mode(&made)
        );
    }
    drop(store);
    let shared = tmp.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o750)).unwrap();
    let _store = open(&shared, &clock);
    assert_eq!(mode(&shared), 0o750);
}

/// Foreign (a torn file, a directory, a lost envelope): the counter went
/// past the ids that *loaded* only. A corrupt `agent_3.json` moved aside
/// gave `agent_3` to the next child — which then read the old child's
/// `runs/agent_3.json` (a kill before its first run write resumed it with
/// another child's task and tools), and an earlier link `continued_as:
/// agent_3` led to it. An unreadable file was written over. Every id a
/// name in the store gives (an envelope, one moved aside, a temporary
/// file, a run, a link) is taken.
#[test]
fn ids_named_by_files_the_open_did_not_load_are_not_handed_out() {
    let clock = clock(T0);
    // `agent_1` loads; `setup` adds one name; the next id handed out.
    let next_after = |setup: &dyn Fn(&Path)| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let store = open(dir, &clock);
        store.save(&envelope("agent_1", T0, Some(T0))).unwrap();
        drop(store);
        fs::create_dir_all(dir.join("runs")).unwrap();
        setup(dir);
        let (store, _) = EnvelopeStore::open(dir, clock.clone()).unwrap();
        assert_eq!(ids(&store), ["agent_1"]);
        store.child_ids().next().unwrap().to_string()
    };
    let torn =
        |dir: &Path| fs::write(dir.join("agent_4.json"), b"{\"id\":\"agent_4\",\"na").unwrap();
    assert_eq!(next_after(&torn), "agent_5", "moved aside as corrupt");
    // Not a file: skipped, as an unreadable one is.
    let skipped = |dir: &Path| fs::create_dir(dir.join("agent_4.json")).unwrap();
    assert_eq!(next_after(&skipped), "agent_5", "skipped");
    let orphan_run = |dir: &Path| fs::write(dir.join("runs").join("agent_4.json"), b"{}").unwrap();
    assert_eq!(
        next_after(&orphan_run),
        "agent_5",
        "a run without its envelope"
    );
    let linked = |dir: &Path| {
        let mut first = envelope("agent_1", T0, Some(T0));
        first.continued_as = Some(AgentId::new("agent_4"));
        fs::write(
            dir.join("agent_1.json"),
            serde_json::to_vec(&first).unwrap(),
        )
        .unwrap();
    };
    assert_eq!(next_after(&linked), "agent_5", "a link to a lost envelope");
    let nothing = |_: &Path| {};
    assert_eq!(next_after(&nothing), "agent_2");
}

/// Stopped midway: a process killed while writing a run left
/// `runs/.agent_1.json.<hex>.subagents-tmp` (a whole conversation) for
/// good: the open listed only the top directory. It is removed and listed
/// in `temp_removed`, as one beside the envelopes is.
#[test]
fn stray_temp_files_in_runs_are_removed_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = clock(T0);
    drop(open(dir, &clock));
    let runs = dir.join("runs");
    fs::create_dir_all(&runs).unwrap();
    let stray = runs.join(".agent_1.json.00001a2b00000003.subagents-tmp");
    fs::write(&stray, b"{\"request\":").unwrap();
    let (_store, report) = EnvelopeStore::open(dir, clock.clone()).unwrap();
    assert_eq!(report.temp_removed, std::slice::from_ref(&stray));
    assert!(!stray.exists());
}

/// Shared: a copy of an earlier session's child taken before another
/// thread resumed it (its link) or took its result (its claim), saved
/// after, erased both — the next session resumed the child's own run
/// again, forking the chain. A link and a claim, once held, are kept —
/// and the thread it belongs to: another thread's copy never makes it
/// that thread's (its restart wakes would go there).
#[test]
fn a_save_of_an_older_copy_keeps_the_link_and_the_claim() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    let read_before = envelope("agent_1", T0, Some(T0));
    let mut linked = read_before.clone();
    linked.continued_as = Some(AgentId::new("agent_2"));
    linked.claimed = true;
    linked.thread = Some(subagents_messages::ThreadId::new("a"));
    store.save(&linked).unwrap();
    store.save(&read_before).unwrap();
    let mut another = read_before.clone();
    another.thread = Some(subagents_messages::ThreadId::new("b"));
    store.save(&another).unwrap();
    let (store, _) = reopen(store, tmp.path(), &clock);
    let held = store.get(&AgentId::new("agent_1")).unwrap();
    assert_eq!(held.continued_as, Some(AgentId::new("agent_2")));
    assert!(held.claimed);
    assert_eq!(
        held.thread,
        Some(subagents_messages::ThreadId::new("a")),
        "its thread, once held, is kept"
    );
}

/// Foreign input (another version of the library): an envelope whose
/// status this version does not know (`paused`) was moved aside as
/// corrupt — lost to the version that wrote it for good — and its
/// conversation pruned as an orphan's once the retention passed. An
/// envelope filed under its own id that only fails to decode is left in
/// place, reported unreadable; its id is not handed out, its run is kept.
#[test]
fn an_envelope_of_another_version_is_left_in_place_with_its_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    an_envelope_and_its_run(dir);
    let path = dir.join("agent_3.json");
    let text = fs::read_to_string(&path).unwrap();
    let newer = text.replace("\"status\":\"done\"", "\"status\":\"paused\"");
    assert_ne!(text, newer);
    fs::write(&path, &newer).unwrap();
    let later = clock(T0 + 3 * DAY);
    let (store, report) = EnvelopeStore::open(dir, later).unwrap();
    assert!(report.corrupt.is_empty(), "{report:?}");
    assert_eq!(report.unreadable.len(), 1, "{report:?}");
    assert_eq!(report.unreadable[0].path, path);
    assert_eq!(fs::read_to_string(&path).unwrap(), newer, "left as it was");
    assert!(dir.join("runs/agent_3.json").exists(), "its run was pruned");
    assert!(report.pruned.runs_removed.is_empty());
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_4")));
}

/// A store in `dir` that saved `agent_3` (done at `T0`) and its run (asked
/// "work"), then let go.
fn an_envelope_and_its_run(dir: &Path) -> AgentId {
    let store = open(dir, &clock(T0));
    let id = AgentId::new("agent_3");
    store.save(&envelope("agent_3", T0, Some(T0))).unwrap();
    let request = subagents_messages::ChildRequest::new(
        AgentId::new("parent"),
        0,
        ToolUseId::new("call_1"),
        "Worker",
        "work",
    );
    store
        .save_run(
            &id,
            &request,
            &[subagents_messages::ChatMessage::user("work")],
        )
        .unwrap();
    drop(store);
    id
}

/// Foreign input: a FIFO put where a child's run is (or a link to one, or
/// to `/dev/zero`) held whoever read it — the hub's handler, resuming the
/// child — for ever. Only a regular file is read.
#[test]
fn a_run_that_is_no_regular_file_is_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), &clock(T0));
    let runs = tmp.path().join("runs");
    fs::create_dir_all(&runs).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(runs.join("agent_1.json"))
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", runs.join("agent_2.json")).unwrap();
    let store = Arc::new(store);
    for id in ["agent_1", "agent_2"] {
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = store.clone();
        std::thread::spawn(move || {
            let _ = tx.send(reader.run(&AgentId::new(id)).is_none());
        });
        let none = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(none, Ok(true), "{id}: the read did not return");
    }
}

/// Foreign input (review: files written by another tool): an envelope and
/// a run saved again by an editor that writes a UTF-8 byte-order mark
/// (PowerShell 5's `Set-Content -Encoding UTF8`, "UTF-8 with BOM"): the
/// envelope was "not valid JSON", moved aside as corrupt (its owed wake
/// lost, its run pruned later as an orphan's), and the run read as none.
/// The mark is skipped, as RFC 8259 allows.
#[test]
fn files_an_editor_saved_with_a_byte_order_mark_still_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let id = an_envelope_and_its_run(dir);
    // The store's own count of sessions too (review of this session's
    // change: `trim` keeps U+FEFF, and the store did not open at all).
    for path in [
        dir.join("agent_3.json"),
        dir.join("runs/agent_3.json"),
        dir.join(".subagents-session"),
    ] {
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(fs::read(&path).unwrap());
        fs::write(&path, bytes).unwrap();
    }
    let (store, report) = EnvelopeStore::open(dir, clock(T0)).unwrap();
    assert!(report.corrupt.is_empty(), "{report:?}");
    assert!(report.unreadable.is_empty(), "{report:?}");
    assert_eq!(store.get(&id).map(|e| e.status), Some(SubAgentStatus::Done));
    let (asked, said) = store.run(&id).expect("its run reads");
    assert_eq!((asked.input.as_str(), said.len()), ("work", 1));
}
