//! Tools that hold a worker: a stop that lands while a turn's task runs
//! on another worker (`abort` takes effect only where a task next waits).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::json;
use subagents::prelude::{Tool, ToolCallContext, ToolFuture};

/// Blocks its worker (no await) from its first poll until released.
pub struct Block {
    pub entered: Arc<AtomicBool>,
    pub release: Arc<AtomicBool>,
}

impl Tool for Block {
    fn name(&self) -> &str {
        "block"
    }
    fn description(&self) -> String {
        "holds its thread until released".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        let (entered, release) = (self.entered.clone(), self.release.clone());
        Box::pin(async move {
            entered.store(true, Ordering::SeqCst);
            while !release.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            Ok("released".into())
        })
    }
}

/// Counts its calls; never waits.
pub struct Count(pub Arc<AtomicUsize>);

impl Tool for Count {
    fn name(&self) -> &str {
        "count"
    }
    fn description(&self) -> String {
        "counts".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok("counted".into()) })
    }
}

/// What [`stopped_while_blocked`] saw.
pub struct StoppedWhileBlocked {
    /// The agent, still there.
    pub agent: subagents::prelude::AgentHandle,
    /// Its stream, after the turn's `Result`.
    pub events: subagents::prelude::EventStream,
    /// The turn's `Result`, and what came before it.
    pub result: subagents::prelude::AgentResult,
    pub log: Vec<subagents::prelude::AgentEvent>,
    /// How many times `count` ran.
    pub counted: usize,
}

/// On a multi-threaded runtime (the caller's): an agent on `model`, which
/// answers `block` then `count`; its turn is stopped while `block` holds
/// its worker, then `block` is released, and this returns once the turn's
/// task is gone.
pub async fn stopped_while_blocked(
    model: Arc<dyn subagents::prelude::Model>,
) -> StoppedWhileBlocked {
    use subagents::prelude::{AgentEvent, Limits, ToolRegistry};
    let entered = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicUsize::new(0));
    let tools = ToolRegistry::new()
        .with(Block {
            entered: entered.clone(),
            release: release.clone(),
        })
        .with(Count(counted.clone()));
    let (agent, mut events, _gate) = super::spawn_agent(model, tools, Limits::default()).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let idle = metrics.num_alive_tasks();
    agent.send_user("go").unwrap();
    while !entered.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    agent.stop_turn().unwrap();
    let mut log = Vec::new();
    let result = loop {
        let event = events.recv().await.expect("the stream ended");
        if let AgentEvent::Result(result) = &event {
            break (**result).clone();
        }
        log.push(event);
    };
    release.store(true, Ordering::SeqCst);
    // Until the turn's task is gone (it ends either way: before the fix
    // it ran the rest of the turn first).
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while metrics.num_alive_tasks() > idle {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the turn's task never ended");
    StoppedWhileBlocked {
        agent,
        events,
        result,
        log,
        counted: counted.load(Ordering::SeqCst),
    }
}
