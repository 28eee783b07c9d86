//! Finish stamps: in the order children finish, a clock's ties and
//! small steps back notwithstanding; a hub's death in the stream's order.

use super::*;

/// Time and the same instant: a restart delivers the wakes its last
/// process owed in the order of these stamps. Two finishes in one
/// millisecond went by number; a clock stepped back between two put the
/// later first. A stamp is strictly past the last; a clock ahead of them
/// reads as it is.
#[test]
fn finish_stamps_follow_the_order_children_finish_in() {
    let book = book_with(&["agent_1", "agent_2", "agent_3", "agent_4"], true);
    for (n, now) in [
        ("agent_2", 5),
        ("agent_1", 5),
        ("agent_3", 3),
        ("agent_4", 100),
    ] {
        assert!(book.finish(&id(n), SubAgentStatus::Done, None, None, now));
    }
    let stamp = |n| book.envelope(&id(n)).and_then(|e| e.finished_at_ms);
    assert_eq!(
        ["agent_2", "agent_1", "agent_3", "agent_4"].map(stamp),
        [Some(5), Some(6), Some(7), Some(100)]
    );
}

/// Replay (this session's stamps): the children a hub's death fails were
/// finished in the map's order, and stamped so since the stamps became
/// strictly increasing — a hash order on the record. In the order the
/// stream ends them: deepest first (own-diff review: by number alone, a
/// requester read as finished before its own child), then by number.
#[test]
fn children_failed_by_a_hubs_death_are_stamped_in_number_order() {
    let ids: Vec<String> = (1..=12).map(|n| format!("agent_{n}")).collect();
    let book = book_with(&ids.iter().map(String::as_str).collect::<Vec<_>>(), true);
    let mut deep = book.envelope(&id("agent_12")).unwrap();
    deep.id = id("agent_13");
    deep.depth = 2;
    book.insert(deep, None, None);
    let failed = book.fail_unfinished("the hub stopped", 7);
    let stamp = |n: &str| failed.iter().find(|e| e.id.as_str() == n)?.finished_at_ms;
    assert_eq!(stamp("agent_13"), Some(7), "the deepest first");
    let stamps: Vec<Option<u64>> = ids.iter().map(|n| stamp(n)).collect();
    assert_eq!(stamps, (8..20).map(Some).collect::<Vec<_>>(), "{failed:?}");
}

/// Review of this session's own change: the stamps' ratchet believed no
/// clock behind its last stamp — one that read a year ahead once (set
/// back since) stamped every later finish of the thread a year ahead,
/// and none was pruned until then. Kept past the last by a minute at
/// most; a clock stepped back further is believed.
#[test]
fn a_clock_far_ahead_once_does_not_stamp_every_later_finish() {
    const YEAR: u64 = 365 * 24 * 3_600_000;
    let book = book_with(&["agent_1", "agent_2", "agent_3"], true);
    for (n, now) in [
        ("agent_1", 1_000 + YEAR),
        ("agent_2", 1_010),
        ("agent_3", 1_005),
    ] {
        assert!(book.finish(&id(n), SubAgentStatus::Done, None, None, now));
    }
    let stamp = |n| book.envelope(&id(n)).and_then(|e| e.finished_at_ms);
    assert_eq!(
        ["agent_1", "agent_2", "agent_3"].map(stamp),
        [Some(1_000 + YEAR), Some(1_010), Some(1_011)]
    );
}
