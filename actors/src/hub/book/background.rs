//! Which children run unwatched (in the background, or under a
//! background requester), and which go with a requester being stopped.

use subagents_messages::AgentId;

use super::Book;

impl Book {
    /// True when nobody waits on it inline.
    pub(crate) fn is_background(&self, id: &AgentId) -> bool {
        self.entries.get(id).is_some_and(|e| e.envelope.background)
    }

    /// True when `ancestor` requested it, or a requester of it up the
    /// chain.
    pub(crate) fn requested_under(&self, id: &AgentId, ancestor: &AgentId) -> bool {
        let mut at = id.clone();
        while let Some(requester) = self.requester_of(&at) {
            if &requester == ancestor {
                return true;
            }
            at = requester;
        }
        false
    }

    /// True when it, or a requester of it up the chain, runs in the
    /// background: a child waited on inline by a background child runs
    /// unwatched too — but not under a requester being stopped or whose
    /// turn is over: it goes with that one, and the policy answered a
    /// request the stop was about to cancel (one nobody approved, with no
    /// approval row). The whole chain is read: a background child under
    /// a requester being stopped goes with it too.
    pub(crate) fn in_background(&self, id: &AgentId) -> bool {
        let mut at = id.clone();
        let mut background = false;
        loop {
            if self.is_going(&at) {
                return false;
            }
            background |= self.is_background(&at);
            match self.requester_of(&at) {
                Some(requester) if self.contains(&requester) => at = requester,
                _ => return background,
            }
        }
    }

    /// It is being stopped, or its turn is over.
    pub(crate) fn is_going(&self, id: &AgentId) -> bool {
        self.entries.get(id).is_some_and(|e| e.going) || self.turn_over(id)
    }

    /// It is being stopped ([`Book::in_background`]).
    pub(crate) fn mark_going(&self, id: &AgentId) {
        if let Some(mut entry) = self.entries.get_mut(id) {
            entry.going = true;
        }
    }

    /// A stop (not an interrupt) of it, running, was accepted
    /// ([`Envelope::stopping`]): whether this marked it (the first time,
    /// and not for one ended). Its envelope is copied only for observers
    /// to read (a copy on every stop cost the hub cycle 1.5k instructions).
    pub(crate) fn mark_stopping(&self, id: &AgentId) -> bool {
        let Some(mut entry) = self.entries.get_mut(id) else {
            return false;
        };
        if entry.envelope.stopping || entry.envelope.status.is_terminal() {
            return false;
        }
        entry.envelope.stopping = true;
        true
    }
}
