//! One store per directory: the lock that enforces it.

use super::*;

/// Shared: two stores on one directory (two processes, or one process
/// opening it twice) each counted ids from the same files, wrote over
/// each other's `agent_2.json`, and the second marked the first's running
/// children interrupted. The second open is refused, naming the lock; the
/// directory is free again once the first store is gone.
#[test]
fn a_second_store_on_one_directory_is_refused_until_the_first_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let first = open(tmp.path(), &clock);
    let mut running = envelope("agent_1", T0, None);
    running.status = SubAgentStatus::Running;
    first.save(&running).unwrap();

    let second = EnvelopeStore::open(tmp.path(), clock.clone());
    match second {
        Err(StoreError::Locked { path, lock }) => {
            assert_eq!(path, tmp.path());
            assert_eq!(lock, tmp.path().join(".subagents-lock"));
        }
        other => panic!("a second store opened: {:?}", other.map(|(_, r)| r)),
    }
    assert_eq!(
        first.get(&AgentId::new("agent_1")).unwrap().status,
        SubAgentStatus::Running,
        "the first store's running child was left alone"
    );

    drop(first);
    let (store, report) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    assert_eq!(report.interrupted, [AgentId::new("agent_1")]);
    assert!(
        report.foreign.is_empty(),
        "the lock file is the store's own: {report:?}"
    );
    drop(store);
}

/// Shared: a lock file this process may not write (root-owned 0644 from
/// a run under `sudo`, another user's in a shared directory) made the
/// store open unlocked, so a second process shared the directory again —
/// ids handed out twice, the first's running children marked interrupted.
/// `flock` needs no write access: it is locked read-only. (As root, a
/// mode does not stop a write: the file is bind-mounted read-only.)
#[cfg(target_os = "linux")]
#[test]
fn a_lock_file_this_process_cannot_write_still_locks() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let first = open(tmp.path(), &clock);
    let lock = tmp.path().join(".subagents-lock");
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o444)).unwrap();
    let writable = || fs::OpenOptions::new().write(true).open(&lock).is_ok();
    let _mount = writable().then(|| ReadOnlyBind::mount(&lock)).flatten();
    if writable() {
        eprintln!("skipped: the lock file cannot be made unwritable here");
        return;
    }
    match EnvelopeStore::open(tmp.path(), clock.clone()) {
        Err(StoreError::Locked { lock: named, .. }) => assert_eq!(named, lock),
        other => panic!("a second store opened: {:?}", other.map(|(_, r)| r)),
    }
    drop(first);
    let (_store, report) = EnvelopeStore::open(tmp.path(), clock.clone()).unwrap();
    assert!(report.foreign.is_empty(), "{report:?}");
}

/// A file bind-mounted read-only over itself; unmounted on drop.
#[cfg(target_os = "linux")]
struct ReadOnlyBind(PathBuf);

#[cfg(target_os = "linux")]
impl ReadOnlyBind {
    /// `None` when mounting is not allowed here.
    fn mount(file: &Path) -> Option<Self> {
        let run = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .arg(file)
                .arg(file)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !run(&["--bind"]) {
            return None;
        }
        let bound = ReadOnlyBind(file.to_path_buf());
        let _ = Command::new("mount")
            .args(["-o", "remount,ro,bind"])
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        Some(bound)
    }
}

#[cfg(target_os = "linux")]
impl Drop for ReadOnlyBind {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg(&self.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Shared, by a user's hand: the `Locked` error names the lock file, and
/// a user who deleted it as stale let a second store open beside the live
/// one (`flock` locks the file, not its name). The directory is locked
/// too.
#[test]
fn a_deleted_lock_file_does_not_let_a_second_store_in() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = clock(T0);
    let first = open(tmp.path(), &clock);
    std::fs::remove_file(tmp.path().join(".subagents-lock")).unwrap();
    assert!(
        matches!(
            EnvelopeStore::open(tmp.path(), clock.clone()),
            Err(StoreError::Locked { .. })
        ),
        "a second store opened"
    );
    drop(first);
    assert!(EnvelopeStore::open(tmp.path(), clock).is_ok());
}

/// Stopped midway (the directory removed under a live store): a run's
/// write made the store's directory again, without a lock file, and wrote
/// on — a second store could open it beside this one. The write fails,
/// naming what is missing.
#[test]
fn a_run_write_does_not_make_a_removed_store_directory_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let clock = clock(T0);
    let first = open(&dir, &clock);
    std::fs::remove_dir_all(&dir).unwrap();
    let written = first.save_run(
        &AgentId::new("agent_1"),
        &subagents_messages::ChildRequest::new(
            AgentId::new("parent"),
            0,
            ToolUseId::new("call_1"),
            "Worker",
            "work",
        ),
        &[subagents_messages::ChatMessage::user("work")],
    );
    assert!(written.is_err(), "the run was written");
    assert!(!dir.exists(), "the directory was made again");
}
