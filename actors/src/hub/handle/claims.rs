//! A tool call taking a finished child's result: claimed in the book, or
//! in the archive for a child of an earlier session.

use subagents_messages::AgentId;

use crate::hub::HubHandle;
use crate::hub::msg::HubMsg;
use crate::hub::msg::sealed::HubInternal;

impl HubHandle {
    /// A tool call took a finished child's result (its output is settled,
    /// see [`ToolCallContext::settle`](crate::ToolCallContext::settle)):
    /// marks it claimed at once, so no wake follows, and has the hub tell
    /// its observers ([`Claimed::Here`], or [`Claimed::Imported`] for an
    /// earlier session's child imported to be resumed); [`Claimed::No`] when it was
    /// claimed before or has not finished.
    ///
    /// An earlier session's child the book does not hold is
    /// [`Claimed::Archived`]: the caller records it with
    /// [`HubHandle::claim_archived`] once it holds no lock (the archive
    /// may write to disk; under the turn's lock, a stop of that turn
    /// blocked its worker behind the write).
    ///
    /// With it, the child's run span, for the caller to drop once it holds
    /// no lock (its close runs every tracing layer: a synchronous
    /// exporter's send, under the turn's lock, held up the turn's stop).
    pub(crate) fn claim(&self, id: &AgentId) -> (Claimed, Option<tracing::Span>) {
        let Some((_, span)) = self.book.claim(id) else {
            // Its usage was counted in that session, not again here.
            return match self.book.contains(id) {
                true => (Claimed::No, None),
                false => (Claimed::Archived, None),
            };
        };
        let _ = self
            .actor
            .cast(HubMsg::Internal(HubInternal::Claimed { id: id.clone() }));
        // One imported to be resumed (a message sent it) is the book's
        // now, but ran in that session: its usage was counted there (a
        // result taken after a `send` added it to this turn's children).
        match self.book.ran_here(id) {
            true => (Claimed::Here, span),
            false => (Claimed::Imported, span),
        }
    }

    /// Records the claim of an earlier session's child in the archive.
    pub(crate) fn claim_archived(&self, id: &AgentId) {
        if let Some(archive) = self.archive() {
            archive.claim(id);
        }
    }
}

/// What [`HubHandle::claim`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claimed {
    /// Claimed a child of this hub's book: its usage is the claimer's.
    Here,
    /// Claimed in this hub's book, a child of an earlier session imported
    /// there: its usage was counted in that session.
    Imported,
    /// Claimed before, or not finished: nothing.
    No,
    /// A child of an earlier session: to record in the archive.
    Archived,
}
