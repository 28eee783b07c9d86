//! The store's own files beside the envelopes (its lock, its count of
//! sessions), and entries under an envelope's name that are no file.

use super::*;

/// Foreign or damaged input: a count of sessions the open could not keep
/// (not a number, past the last session whose approval numbers fit in a
/// `u64`, a folder where the file is) was taken as none or used unwritten
/// — the next session's parents numbered their approvals as this one's,
/// and a host's row kept across the restart answered a new request; a
/// count of 99,999,999 saturated every parent's base to `u64::MAX` (the
/// first approval overflowed). The open fails, naming the file.
#[test]
fn a_session_count_that_cannot_be_kept_fails_the_open() {
    let count = |dir: &Path| dir.join(".subagents-session");
    let refused = |dir: &Path| match EnvelopeStore::open(dir, clock(T0)) {
        Err(StoreError::OwnFile { path, problem, .. }) => {
            assert_eq!(path, count(dir));
            problem
        }
        other => panic!("opened: {:?}", other.map(|(_, report)| report)),
    };
    let tmp = tempfile::tempdir().unwrap();
    fs::write(count(tmp.path()), "not a number").unwrap();
    assert!(refused(tmp.path()).contains("not a count"));

    let tmp = tempfile::tempdir().unwrap();
    fs::write(count(tmp.path()), "99999999").unwrap();
    assert!(refused(tmp.path()).contains("no approval numbers are left"));
    // The last session that fits still opens.
    fs::write(count(tmp.path()), "18446743").unwrap();
    drop(open(tmp.path(), &clock(T0)));
    assert_eq!(fs::read_to_string(count(tmp.path())).unwrap(), "18446744");
    assert!(refused(tmp.path()).contains("no approval numbers are left"));

    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(count(tmp.path())).unwrap();
    assert!(refused(tmp.path()).contains("not a regular file"));

    // Counted from 1, one more per open.
    let tmp = tempfile::tempdir().unwrap();
    drop(open(tmp.path(), &clock(T0)));
    drop(open(tmp.path(), &clock(T0)));
    assert_eq!(fs::read_to_string(count(tmp.path())).unwrap(), "2");
}

/// Foreign or damaged input: the last child number kept before a prune,
/// unreadable, taken as none would hand the pruned ids out again. The
/// open fails, naming the file; a number written by an editor (a
/// byte-order mark, a line end) is read.
#[test]
fn a_kept_child_number_that_cannot_be_read_fails_the_open() {
    let kept = |dir: &Path| dir.join(".subagents-ids");
    let refused = |dir: &Path| match EnvelopeStore::open(dir, clock(T0)) {
        Err(StoreError::OwnFile { path, problem, .. }) => {
            assert_eq!(path, kept(dir));
            problem
        }
        other => panic!("opened: {:?}", other.map(|(_, report)| report)),
    };
    let tmp = tempfile::tempdir().unwrap();
    fs::write(kept(tmp.path()), "agent_3").unwrap();
    assert!(refused(tmp.path()).contains("not a child number"));
    fs::write(kept(tmp.path()), "9007199254740992").unwrap();
    assert!(refused(tmp.path()).contains("past the last child number"));
    fs::remove_file(kept(tmp.path())).unwrap();
    fs::create_dir(kept(tmp.path())).unwrap();
    assert!(refused(tmp.path()).contains("not a regular file"));

    let tmp = tempfile::tempdir().unwrap();
    fs::write(kept(tmp.path()), "\u{feff}41\n").unwrap();
    let store = open(tmp.path(), &clock(T0));
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_42")));
}

/// The same, at a prune: a number that cannot be written down keeps the
/// files that hold it (each), reported; once it can, they go.
#[test]
fn a_prune_that_cannot_keep_the_child_number_removes_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let store = open(tmp.path(), &clock);
    for id in ["agent_1", "agent_2"] {
        store.save(&envelope(id, T0, Some(T0))).unwrap();
    }
    let kept = tmp.path().join(".subagents-ids");
    fs::create_dir(&kept).unwrap();
    fs::write(kept.join("held"), "").unwrap();
    clock.set(T0 + DAY + 1);
    let report = store.prune();
    assert!(report.removed.is_empty(), "{report:?}");
    assert!(
        matches!(&report.failed[..], [StoreError::OwnFile { path, .. }] if *path == kept),
        "{report:?}"
    );
    assert_eq!(json_files(tmp.path()), ["agent_1.json", "agent_2.json"]);
    fs::remove_dir_all(&kept).unwrap();
    let report = store.prune();
    assert_eq!(report.removed.len(), 2, "{report:?}");
    assert_eq!(fs::read_to_string(&kept).unwrap(), "2");
}

/// Foreign input: a FIFO where the store's lock or its count is held the
/// open for ever (opening it blocks until another end opens; a link to
/// `/dev/zero` read without end). Only a regular file is taken.
#[test]
fn a_lock_or_count_that_is_no_regular_file_fails_the_open() {
    for (name, fifo) in [
        (".subagents-lock", true),
        (".subagents-session", true),
        (".subagents-session", false),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(name);
        if fifo {
            let made = Command::new("mkfifo").arg(&path).status().unwrap();
            assert!(made.success());
        } else {
            std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        }
        let (tx, rx) = mpsc::channel();
        let dir = tmp.path().to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(match EnvelopeStore::open(&dir, clock(T0)) {
                Err(StoreError::OwnFile { path, .. }) => Some(path),
                _ => None,
            });
        });
        let answer = rx.recv_timeout(Duration::from_secs(5));
        assert_eq!(
            answer,
            Ok(Some(path.clone())),
            "{name}: the open did not return"
        );
    }
}

/// Foreign input: a link or a folder under an envelope's name was skipped
/// at open with no word in the report — the model read "no such
/// sub-agent", and the host had nothing telling it why. It is listed as
/// unreadable, left in place and not followed.
#[test]
fn a_link_under_an_envelopes_name_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let store = open(&dir, &clock(T0));
    store.save(&envelope("agent_3", T0, Some(T0))).unwrap();
    drop(store);
    let backup = tmp.path().join("agent_3.json");
    fs::rename(dir.join("agent_3.json"), &backup).unwrap();
    std::os::unix::fs::symlink(&backup, dir.join("agent_3.json")).unwrap();
    fs::create_dir(dir.join("agent_4.json")).unwrap();
    let (store, report) = EnvelopeStore::open(&dir, clock(T0)).unwrap();
    let listed: Vec<&Path> = report.unreadable.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(listed, [dir.join("agent_3.json"), dir.join("agent_4.json")]);
    assert!(report.unreadable[0].error.contains("not a regular file"));
    assert_eq!(report.loaded, 0);
    assert!(store.get(&AgentId::new("agent_3")).is_none());
    assert_eq!(store.child_ids().next(), Some(AgentId::new("agent_5")));
}

/// Review of this session's refusal (caught before it landed): the open
/// loaded the directory — moving corrupt files aside, which its report
/// says — before it refused the count, and the report went with the
/// error: once the count was repaired, the next open reported nothing. A
/// count is read (and refused) before anything is touched.
#[test]
fn a_refused_count_touches_nothing_so_the_next_open_reports_it_all() {
    let tmp = tempfile::tempdir().unwrap();
    let corrupt = tmp.path().join("agent_3.json");
    fs::write(&corrupt, "{ torn").unwrap();
    let count = tmp.path().join(".subagents-session");
    fs::write(&count, "not a number").unwrap();
    assert!(matches!(
        EnvelopeStore::open(tmp.path(), clock(T0)),
        Err(StoreError::OwnFile { .. })
    ));
    assert!(corrupt.exists(), "moved aside by an open that failed");
    fs::write(&count, "7").unwrap();
    let (_store, report) = EnvelopeStore::open(tmp.path(), clock(T0)).unwrap();
    let reported: Vec<&Path> = report.corrupt.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(reported, [corrupt.as_path()]);
}
