//! The disk: a corrupt envelope, a full disk, the clock jumping under pruning.

use super::*;

use common::store::finished_envelope;

#[test]
fn corrupt_envelope_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000));
    {
        let (store, _) = EnvelopeStore::open(dir.path(), clock.clone()).unwrap();
        store
            .save(&finished_envelope("agent_1", 1_000_000))
            .unwrap();
    }
    std::fs::write(dir.path().join("agent_2.json"), "{ torn").unwrap();
    let (store, report) = EnvelopeStore::open(dir.path(), clock).unwrap();
    assert_eq!(report.corrupt.len(), 1);
    assert!(report.corrupt[0].path.ends_with("agent_2.json"));
    assert!(
        report.corrupt[0].moved_to.as_ref().unwrap().exists(),
        "moved aside, never deleted"
    );
    assert!(
        store.get(&AgentId::new("agent_1")).is_some(),
        "the others still load"
    );
}

#[tokio::test(start_paused = true)]
async fn disk_full() {
    // A write that fails (here: the directory vanished; `supervisor/tests/
    // store.rs` fills a real tmpfs as root) is surfaced with its path and
    // the envelope stays answerable from memory.
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = EnvelopeStore::open(dir.path(), Arc::new(ManualClock::new(0))).unwrap();
    std::fs::remove_dir_all(dir.path()).unwrap();
    let error = store.save(&finished_envelope("agent_1", 0)).unwrap_err();
    assert!(error.to_string().contains("agent_1.json"), "{error}");
    assert!(store.get(&AgentId::new("agent_1")).is_some());
}

#[test]
fn clock_jumps_in_pruning() {
    let dir = tempfile::tempdir().unwrap();
    let day = 24 * 3600 * 1000;
    let clock = Arc::new(ManualClock::new(10 * day));
    let (store, _) = EnvelopeStore::open(dir.path(), clock.clone()).unwrap();
    store.save(&finished_envelope("agent_1", 10 * day)).unwrap();
    store.save(&finished_envelope("agent_2", 12 * day)).unwrap(); // future-dated
    clock.set(5 * day); // backward jump
    assert!(
        store.prune().removed.is_empty(),
        "a backward jump prunes nothing"
    );
    clock.set(11 * day + 1); // forward past 24 h for agent_1 only
    assert_eq!(store.prune().removed, [AgentId::new("agent_1")]);
    assert!(
        store.get(&AgentId::new("agent_2")).is_some(),
        "future-dated: never pruned early"
    );
}
