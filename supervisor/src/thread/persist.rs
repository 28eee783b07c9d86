//! The thread's writes to its store, in the order they were asked for: one
//! writer task takes them from a queue and does each off the runtime
//! (file I/O blocks). Order matters: a child's "started" envelope must not
//! land after its final one, nor an older conversation after a newer one.

use std::sync::{Arc, Mutex, PoisonError};

use subagents_messages::{AgentId, ChatMessage, ChildRequest, Envelope};
use tokio::sync::{mpsc, oneshot};

use crate::store::EnvelopeStore;

/// The thread's failed writes, each named once (a prune that fails on
/// every write is listed once), shared by the thread, its writer and every
/// handle: read without the thread, so a close's own failed writes — the
/// final envelopes — are still told once it has gone.
#[derive(Debug, Clone, Default)]
pub(crate) struct PersistErrors(Arc<Mutex<Vec<String>>>);

impl PersistErrors {
    /// Notes a failed write (logged).
    pub(super) fn push(&self, error: String) {
        tracing::error!(%error, "an envelope or run could not be persisted; it stays in memory");
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !list.contains(&error) {
            list.push(error);
        }
    }

    /// Every failed write so far, in the order first seen.
    pub(super) fn list(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One write.
pub(super) enum Write {
    /// An envelope (then a prune: envelopes past the retention leave as the
    /// session goes).
    Envelope(Box<Envelope>),
    /// What a child was asked and its conversation so far.
    Run {
        id: AgentId,
        request: Arc<ChildRequest>,
        conversation: Vec<ChatMessage>,
    },
    /// The wake for a finished child is no longer owed (delivered or
    /// dropped): cleared on the envelope as the store holds it then.
    Settle(AgentId),
    /// Answered once every write before it is done.
    Flush(oneshot::Sender<()>),
}

/// The queue of a thread's writes; dropping it ends the writer once the
/// queue is empty.
#[derive(Debug, Clone)]
pub(super) struct Writer(mpsc::UnboundedSender<Write>);

impl Writer {
    /// Starts the writer of `store`; failures go to `errors`.
    pub(super) fn start(store: Arc<EnvelopeStore>, errors: PersistErrors) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Write>();
        tokio::spawn(async move {
            while let Some(write) = rx.recv().await {
                if let Write::Flush(done) = write {
                    let _ = done.send(());
                    continue;
                }
                let store = store.clone();
                let errors = errors.clone();
                let _ = tokio::task::spawn_blocking(move || do_write(&store, write, &errors)).await;
            }
        });
        Self(tx)
    }

    /// Queues `write` (dropped if the writer is gone).
    pub(super) fn send(&self, write: Write) {
        let _ = self.0.send(write);
    }

    /// Resolves once every write queued before it is done.
    pub(super) fn flushed(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Write::Flush(tx));
        rx
    }
}

fn do_write(store: &EnvelopeStore, write: Write, errors: &PersistErrors) {
    let failed = |error: String| errors.push(error);
    match write {
        Write::Envelope(envelope) => {
            if let Err(error) = store.save(&envelope) {
                failed(error.to_string());
            }
            for error in store.prune().failed {
                failed(error.to_string());
            }
        }
        Write::Run {
            id,
            request,
            conversation,
        } => {
            if let Err(error) = store.save_run(&id, &request, &conversation) {
                failed(error.to_string());
            }
        }
        Write::Settle(id) => {
            let settled = store.update(&id, |e| std::mem::replace(&mut e.wake_owed, false));
            if let Err(error) = settled {
                failed(error.to_string());
            }
        }
        Write::Flush(done) => {
            let _ = done.send(());
        }
    }
}
