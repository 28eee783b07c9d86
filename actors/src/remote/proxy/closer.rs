//! How a remote turn ends from outside its proxy: the hub's kill hook (the
//! hub or thread died without its stop), or the proxy's own drop when it
//! is killed. As a killed local agent's turn: its run asked to stop on its
//! node, its open approval and calls answered here, a failed `Result`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use subagents_messages::remote::RunRequest;
use subagents_messages::{AgentEvent, Outcome};
use tokio::time::Instant;

use super::ProxyState;
use crate::remote::link::NodeLink;
use crate::remote::mirror::Mirror;
use crate::sink::EventSink;

/// The mirror, whatever a holder panicked with.
pub(super) fn lock(mirror: &Mutex<Mirror>) -> MutexGuard<'_, Mirror> {
    mirror.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What ends a remote turn from outside its proxy: the hub's kill hook,
/// or the proxy's own drop when it is killed (no `post_stop`).
pub(super) struct Closer {
    pub(super) mirror: Mutex<Mirror>,
    pub(super) sink: EventSink,
    pub(super) out: EventSink,
    pub(super) link: Arc<dyn NodeLink>,
    pub(super) key: u64,
    pub(super) started: Instant,
    /// The run's `invoke_agent` span: a killed run's end is recorded on
    /// it, as a local agent's is.
    pub(super) span: tracing::Span,
    /// The turn's state (not kept alive by this: it holds the closer), for
    /// the conversation the closing events end.
    pub(super) shared: std::sync::Weak<Mutex<crate::agent::TurnState>>,
}

impl Closer {
    /// As a killed local agent's turn ends: the run asked to stop on its
    /// node (nothing runs unowned), its open approval and calls answered
    /// here, its failed `Result` — once, whoever is first.
    pub(super) fn close_killed(&self) {
        let text = "the agent stopped without ending its turn";
        let mut mirror = lock(&self.mirror);
        let Some((events, result)) = mirror.close(
            text,
            Outcome::Failed(text.to_owned()),
            self.started.elapsed(),
        ) else {
            return;
        };
        crate::agent::spans::record_remote_end(&self.span, &result);
        let _ = self.link.request(self.key, RunRequest::Stop);
        let step = events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolResult(_)));
        // Its conversation answers what the close answers: it ended on a
        // call with no tool message, and every server refused a resume.
        if let Some(shared) = self.shared.upgrade() {
            for event in &events {
                super::actor::progress(&shared, event);
            }
            // A message it took and never read: after its end, as a
            // local close keeps one (killed with its hub, it was lost —
            // only `finish`, which a kill never reaches, kept it).
            crate::agent::turn_state_lock(&shared).read_steering();
        }
        self.sink.close_with(|| {
            for event in events {
                self.out.emit(event);
            }
        });
        drop(mirror);
        if step {
            self.out.stepped();
        }
    }
}

impl Drop for ProxyState {
    /// A proxy killed (no `post_stop`: its hub or thread killed, or it
    /// alone) ends its turn as a local agent's drop does — its hub's
    /// children first, in order, if the hub is dying — and stops its run
    /// on the node. After a stop there is no run left.
    fn drop(&mut self) {
        let Some(mut run) = self.run.take() else {
            return;
        };
        if let Some(hook) = &self.config.on_killed {
            hook();
        }
        // Its answers sent on, as a close here settles them (a second one
        // held behind the first, never sent, read `Unsettled`).
        run.verdicts.unsettle(|id| self.answered.get(id).copied());
        run.closer.close_killed();
        // After its stop: the transport's state for the run goes (a route
        // held behind a gap stayed until the node was lost).
        self.link.forget(run.key);
    }
}
