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
