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
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
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
