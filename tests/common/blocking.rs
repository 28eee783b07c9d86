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
