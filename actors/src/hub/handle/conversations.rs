//! A child's conversation, read from its turn while it runs (what the
//! thread saves at each step, and a host may show), never waiting.

use subagents_messages::{AgentId, ChatMessage};

use crate::hub::HubHandle;

impl HubHandle {
    /// A child's conversation: its task, its model's answers and tool
    /// calls, their results — so far while it runs, whole once it ended
    /// (what a message resumes it from). Never waits.
    pub fn conversation(&self, id: &AgentId) -> Option<Vec<ChatMessage>> {
        self.book.conversation(id)
    }

    /// A running child's conversation after its first `from` messages —
    /// what it added since a reader copied that many. `None` when it is
    /// not running in a turn of its own now (queued, ended, a run a
    /// message resumed) or has fewer: read it whole
    /// ([`HubHandle::conversation`]). Never waits.
    pub fn conversation_since(&self, id: &AgentId, from: usize) -> Option<Vec<ChatMessage>> {
        self.book.conversation_since(id, from)
    }

    /// A child's conversation as [`HubHandle::conversation`] (after its
    /// first `from` messages: as [`HubHandle::conversation_since`]), and
    /// what it took and has not read, in one read of its turn.
    #[doc(hidden)] // used by subagents-supervisor to save a run
    pub fn conversation_and_unread(
        &self,
        id: &AgentId,
        from: Option<usize>,
    ) -> Option<(Vec<ChatMessage>, Vec<ChatMessage>)> {
        self.book.conversation_and_unread(id, from)
    }
}
