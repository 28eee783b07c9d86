//! A point host code is held at: once armed, the next pass says so and
//! waits to be let go — how a test opens a window inside the library
//! (a hub's handler reading its clock, a hook calling an observer) on a
//! runtime with several workers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The hold itself (see the module).
pub struct Held {
    armed: AtomicBool,
    inside: Mutex<mpsc::Sender<()>>,
    go: Mutex<mpsc::Receiver<()>>,
}

impl Held {
    /// A hold, unarmed; what says it is held (`inside`) and what lets it
    /// go (`go`).
    pub fn new() -> (Arc<Self>, mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (inside_tx, inside) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let held = Arc::new(Self {
            armed: AtomicBool::new(false),
            inside: Mutex::new(inside_tx),
            go: Mutex::new(go_rx),
        });
        (held, inside, go)
    }

    /// The next pass holds.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Held here once armed: says so, then waits (a minute at most).
    pub fn pass(&self) {
        if self.armed.swap(false, Ordering::SeqCst) {
            let _ = self.inside.lock().unwrap().send(());
            let _ = self
                .go
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(60));
        }
    }
}

/// Waits (off the runtime's workers) until a hold says it is held.
pub async fn until_held(inside: mpsc::Receiver<()>, what: &str) {
    tokio::task::spawn_blocking(move || inside.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .unwrap_or_else(|_| panic!("{what}"));
}

/// A hub observer held at its first `finished` once armed: the hub's
/// handler is then between a child's terminal status on the stream and
/// the notice that makes its thread write the envelope.
pub struct HoldFinish(pub Arc<Held>);

impl subagents::actors::hub::HubObserver for HoldFinish {
    fn finished(&self, _envelope: &subagents::messages::Envelope) {
        self.0.pass();
    }
}

/// A hub observer held at its first `started` once armed: the hub's
/// handler is then between a child's `ChildStarted` and its reply to the
/// request (the asking call has not read the child's id yet).
pub struct HoldStart(pub Arc<Held>);

impl subagents::actors::hub::HubObserver for HoldStart {
    fn finished(&self, _envelope: &subagents::messages::Envelope) {}

    fn started(
        &self,
        _envelope: &subagents::messages::Envelope,
        _request: &subagents::messages::ChildRequest,
    ) {
        self.0.pass();
    }
}

/// A tool that waits, in its call, until the test lets it go.
pub struct Hold(pub Arc<tokio::sync::Notify>);

impl subagents::prelude::Tool for Hold {
    fn name(&self) -> &str {
        "hold"
    }
    fn description(&self) -> String {
        "waits until let go".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _call: subagents::prelude::ToolCallContext) -> subagents::prelude::ToolFuture {
        let go = self.0.clone();
        Box::pin(async move {
            go.notified().await;
            Ok("let go".into())
        })
    }
}

/// A hub observer held at its first `stepped` once armed: a child's
/// handler is then between a message it took and its answer to the
/// sender (the step is told before the answer).
pub struct HoldStepped(pub Arc<Held>);

impl subagents::actors::hub::HubObserver for HoldStepped {
    fn finished(&self, _envelope: &subagents::messages::Envelope) {}

    fn stepped(&self, _id: &subagents::messages::AgentId) {
        self.0.pass();
    }
}
