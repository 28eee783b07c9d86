//! Store helpers: a thread on a store, and what a killed process leaves
//! on disk.

use std::sync::Arc;

use subagents::actors::{DelegationBuilder, Model};
use subagents::prelude::{EventStream, Reply, ScriptedModel, ToolRegistry, UseAgentCall};
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle};
use subagents_demo::Sleep;

/// A thread on `store` whose parent has the `sleep` tool.
pub async fn thread_on(
    model: Arc<dyn Model>,
    store: Arc<EnvelopeStore>,
    max_live: usize,
) -> (ThreadHandle, EventStream) {
    let config = ThreadConfig::new(
        DelegationBuilder::new(model)
            .system_prompt("You are the parent.")
            .tools(ToolRegistry::new().with(Sleep))
            .max_live(max_live),
    )
    .store(store);
    ThreadHandle::spawn(config, None).await.unwrap()
}

/// What a killed process leaves, without the kill: the store directory
/// copied while its thread runs (files are written atomically, so a copy
/// is what a `kill -9` at that moment leaves on disk).
/// A file renamed or removed between the listing and its copy (a
/// writer's temporary, renamed over its target) is not there: skipped, as
/// a kill at that instant would not have left it under that name.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else if let Err(error) = std::fs::copy(entry.path(), target) {
            assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{error}");
        }
    }
}

/// A parent that runs `Worker` on the first part, then sends it the
/// second: `agent_1` is resumed as `agent_2` (each answers its part).
pub fn resumed_once() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Worker\nYou work.", "the first part")),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "the second part")),
        Reply::answer("Resumed."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::answer("first part done"),
            Reply::answer("second part done"),
        ],
    )
}

/// A finished (`done`) background child's envelope, answered `ok`.
pub fn finished_envelope(id: &str, finished_at_ms: u64) -> subagents::messages::Envelope {
    subagents::messages::Envelope {
        id: subagents::messages::AgentId::new(id),
        name: "Worker".into(),
        parent_tool_use_id: subagents::messages::ToolUseId::new("call_1_1"),
        task: "t".into(),
        tools: vec![],
        status: subagents::messages::SubAgentStatus::Done,
        background: true,
        requested_at_ms: finished_at_ms,
        started_at_ms: Some(finished_at_ms),
        finished_at_ms: Some(finished_at_ms),
        elapsed: std::time::Duration::from_secs(1),
        tool_calls: 0,
        last_tool: None,
        usage: Default::default(),
        model_calls: 0,
        children_usage: Default::default(),
        result: Some("ok".into()),
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
