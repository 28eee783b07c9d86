//! Runs: a finished child that a message resumes goes on as a new run (a
//! new id) from its conversation; the book keeps what each run was asked,
//! its conversation, and the link to the next run.

use std::sync::Arc;

use subagents_messages::{AgentId, ChatMessage, ChildRequest, SubAgentStatus};

use crate::hub::book::Book;

/// What a finished child goes on from when a message resumes it.
#[derive(Debug, Clone)]
pub(crate) struct ResumeFrom {
    pub(crate) seed: Arc<ChildRequest>,
    pub(crate) conversation: Vec<ChatMessage>,
    pub(crate) status: SubAgentStatus,
}

impl Book {
    /// What it was asked (kept to resume it).
    pub(crate) fn set_seed(&self, id: &AgentId, seed: ChildRequest) {
        if let Some(mut entry) = self.entries.get_mut(id) {
            entry.seed = Some(Arc::new(seed));
        }
    }

    /// The run a message to `id` reaches: `id`, or the last run that
    /// went on from it.
    pub(crate) fn latest_run(&self, id: &AgentId) -> AgentId {
        let mut at = id.clone();
        // Bounded: each run names a later, distinct id.
        for _ in 0..self.entries.len() {
            match self
                .entries
                .get(&at)
                .and_then(|e| e.envelope.continued_as.clone())
            {
                Some(next) => at = next,
                None => break,
            }
        }
        at
    }

    /// What a finished child goes on from (`None` while it runs, or for a
    /// child restored from a store without its request).
    pub(crate) fn resume_from(&self, id: &AgentId) -> Option<ResumeFrom> {
        let entry = self.entries.get(id)?;
        if !entry.envelope.status.is_terminal() {
            return None;
        }
        let seed = entry.seed.clone()?;
        let conversation = match &entry.conversation {
            Some(conversation) => conversation.as_ref().clone(),
            None => vec![ChatMessage::user(seed.input.clone())],
        };
        Some(ResumeFrom {
            seed,
            conversation,
            status: entry.envelope.status,
        })
    }

    /// A message resumed it as `next`.
    pub(crate) fn set_continued(&self, id: &AgentId, next: AgentId) {
        if let Some(mut entry) = self.entries.get_mut(id) {
            entry.envelope.continued_as = Some(next);
        }
    }
}
