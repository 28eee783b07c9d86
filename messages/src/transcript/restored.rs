//! A transcript a host restored, as new events arrive.

use super::tests::{child_started, tool_started};
use super::*;

/// Repeated, across a restart: a host that restores its transcript (a
/// thread with no store numbers its children from `agent_1` again) saw
/// the new `agent_1`'s events folded into the earlier row of that id —
/// the new row stayed "requested" for good. The newest row takes them.
#[test]
fn a_child_id_seen_again_folds_into_its_newest_row() {
    let id = AgentId::new("agent_1");
    let mut t = Transcript::from_events(&[
        tool_started("c1", "use_agent"),
        child_started("agent_1", "c1"),
        AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Done),
        tool_started("c2", "use_agent"),
        child_started("agent_1", "c2"),
    ]);
    t.apply(&AgentEvent::ChildStatus(
        id.clone(),
        SubAgentStatus::Running,
    ));
    let rows: Vec<_> = (t.items.iter())
        .filter_map(|item| match item {
            TranscriptItem::Agent(run) => {
                Some((run.info.parent_tool_use_id.to_string(), run.status))
            }
            _ => None,
        })
        .collect();
    let c = |call: &str| call.to_owned();
    let running = Some(SubAgentStatus::Running);
    assert_eq!(
        rows,
        [(c("c1"), Some(SubAgentStatus::Done)), (c("c2"), running)]
    );
    assert_eq!(t.child(&id).unwrap().info.parent_tool_use_id.as_str(), "c2");
}

/// A transcript `levels` deep: one child's row at each level, holding the
/// next.
fn nested(levels: usize) -> Transcript {
    let mut transcript = Transcript::new();
    for _ in 0..levels {
        let info = SubAgentInfo {
            id: AgentId::new("agent_1"),
            parent_tool_use_id: ToolUseId::new("c"),
            name: String::new(),
            tools: Vec::new(),
            background: false,
            resumed_from: None,
        };
        let run = SubAgentRun {
            info,
            status: None,
            queued: false,
            transcript,
        };
        transcript = Transcript::new();
        transcript.items.push(TranscriptItem::Agent(run));
    }
    transcript
}

/// Foreign or damaged bytes (a host's stored transcript): each child's row
/// holds the child's own transcript, and the decoder recursed once per
/// level with no limit — about 100 KB of nesting overflowed a worker's
/// stack, which aborts the process (the `Child` events' limit did not
/// cover it). Past 128 levels it is an error, as for events.
#[test]
fn a_transcript_nested_past_the_limit_is_an_error_not_a_stack_overflow() {
    use crate::codec::Wire;
    // Built, encoded and dropped on a large stack: each is recursive.
    let encoded = |levels: usize| {
        let build = move || nested(levels).to_wire().unwrap();
        let large = std::thread::Builder::new().stack_size(1 << 30);
        large.spawn(build).unwrap().join().unwrap()
    };
    let decodes = |bytes: Vec<u8>| {
        let small = std::thread::Builder::new().stack_size(2 << 20);
        let read = move || Transcript::from_wire(&bytes).map(std::mem::forget).is_ok();
        small.spawn(read).unwrap().join().unwrap()
    };
    assert!(!decodes(encoded(100_000)), "deeper than the limit");
    let limit = usize::try_from(crate::event::MAX_NESTING).unwrap();
    assert!(decodes(encoded(limit)), "at the limit");
    assert!(!decodes(encoded(limit + 1)), "one past it");
}

/// Damaged bytes, held at rest (review: cost faster than its input): each
/// level of nested transcripts reserved room for the rows its length
/// claimed before reading the first — 127 levels claiming 250 rows each,
/// a child's row apiece, the bytes cut there: every reservation held at
/// once as the decode failed, ~60 times the input. Rows are read one by
/// one.
#[test]
fn a_transcript_claiming_rows_it_lacks_reserves_nothing_for_them() {
    use crate::codec::Wire;
    let encoded = |levels: usize| nested(levels).to_wire().unwrap();
    // A level opens the same way each time: its row count (1), then its
    // one child's row up to that child's transcript.
    let (core, one, two) = (encoded(0), encoded(1), encoded(2));
    let open = (1..one.len())
        .filter(|&a| 2 * a + core.len() <= two.len() && a + core.len() <= one.len())
        .find(|&a| {
            two[a..2 * a] == two[..a]
                && one[..a] == two[..a]
                && one[a..a + core.len()] == core[..]
                && two[2 * a..2 * a + core.len()] == core[..]
        })
        .expect("a level's opening");
    let mut level = two[..open].to_vec();
    assert_eq!(level[0], 1, "a level opens with its row count");
    level[0] = 250;
    let hostile: Vec<u8> = level.repeat(127);
    let mut decoded = true;
    let held = allocation_counter::measure(|| {
        decoded = Transcript::from_wire(&hostile).is_ok();
    });
    assert!(!decoded, "the rows claimed are not there");
    assert!(
        held.bytes_max < 64 * hostile.len() as u64 / 4,
        "{} bytes held at most for {} bytes of input",
        held.bytes_max,
        hostile.len()
    );
}
