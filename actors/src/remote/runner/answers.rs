//! A run's answers on messages, sent before its end.

use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A run's answers on messages (`Steered`) still to be sent: each is sent
/// from a task of its own, and a stop in the message's tick ended the run
/// first — its `Steered` numbered after the `Ended`, dropped by a
/// transport that ends the route there, and the message (taken, in the
/// run's conversation) refused "finished" and sent again.
#[derive(Default)]
pub(super) struct Answers {
    out: std::sync::atomic::AtomicUsize,
    sent: tokio::sync::Notify,
}

/// One answer on a message, counted in its run's [`Answers`] until it is
/// dropped (sent, or its task dropped unrun).
pub(super) struct Answering(Arc<Answers>);

impl Answering {
    pub(super) fn begin(answers: &Arc<Answers>) -> Self {
        answers.out.fetch_add(1, Ordering::SeqCst);
        Self(answers.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.out.fetch_sub(1, Ordering::SeqCst);
        self.0.sent.notify_waiters();
    }
}

impl Answers {
    /// Returns once every answer begun is sent (the agent answers each
    /// message before it reads a later stop, and one it never read is
    /// answered as it goes).
    pub(super) async fn all_sent(&self) {
        loop {
            let sent = self.sent.notified();
            tokio::pin!(sent);
            sent.as_mut().enable();
            if self.out.load(Ordering::SeqCst) == 0 {
                return;
            }
            sent.await;
        }
    }
}
