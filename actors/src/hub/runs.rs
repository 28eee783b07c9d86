//! Runs: a finished child that a message resumes goes on as a new run (a
//! new id) from its conversation; the book keeps what each run was asked,
//! its conversation, and the link to the next run.

use std::sync::Arc;

use subagents_messages::{AgentId, ChatMessage, ChildRequest, SubAgentStatus};

use crate::hub::book::Book;

mod repair;

use repair::{answer_open_calls, keep_final_answer};

/// What a finished child goes on from when a message resumes it.
#[derive(Debug, Clone)]
pub(crate) struct ResumeFrom {
    pub(crate) seed: Arc<ChildRequest>,
    pub(crate) conversation: Vec<ChatMessage>,
    pub(crate) status: SubAgentStatus,
}

/// A child's book entry as [`Book::conversation`] read it first.
pub(super) struct EntryRead {
    probe: Option<crate::agent::Probe>,
    kept: Option<Arc<Vec<ChatMessage>>>,
    running: bool,
    prefix: Option<Box<(AgentId, usize)>>,
}

impl Book {
    /// What it was asked (kept to resume it; a request's is given with
    /// [`Book::insert`]).
    #[cfg(test)]
    pub(crate) fn set_seed(&self, id: &AgentId, seed: Arc<ChildRequest>) {
        if let Some(mut entry) = self.entries.get_mut(id) {
            entry.seed = Some(seed);
        }
    }

    /// A child that never started keeps the messages it was sent while
    /// queued: its conversation is what its start would have read (its
    /// task, then each as a message from its requester).
    pub(crate) fn keep_unread(&self, id: &AgentId, messages: &[String]) {
        if let Some(mut entry) = self.entries.get_mut(id)
            && let Some(seed) = entry.seed.clone()
        {
            let mut conversation = first_messages(&seed);
            conversation.extend(
                messages
                    .iter()
                    .map(|m| ChatMessage::user(crate::agent::steering_text(m))),
            );
            entry.conversation = Some(Arc::new(conversation));
        }
    }

    /// The agent that asked for `id` (a resumed run's is its first
    /// run's), if the book holds what it was asked.
    pub(crate) fn requester_of(&self, id: &AgentId) -> Option<AgentId> {
        let entry = self.entries.get(id)?;
        entry.seed.as_ref().map(|seed| seed.requester.clone())
    }

    /// The run a message to `id` reaches: `id`, or the last run that
    /// went on from it.
    pub(crate) fn latest_run(&self, id: &AgentId) -> AgentId {
        self.latest_held(id).0
    }

    /// [`Book::latest_run`], and whether the book holds it, running
    /// (`Some(false)`) or ended (`Some(true)`) — read in the same lookup.
    fn latest_held(&self, id: &AgentId) -> (AgentId, Option<bool>) {
        let mut at = id.clone();
        // Bounded: each run names a later, distinct id.
        for _ in 0..self.entries.len() {
            let (next, ended) = match self.entries.get(&at) {
                Some(entry) => (
                    entry.envelope.continued_as.clone(),
                    entry.envelope.status.is_terminal(),
                ),
                None => return (at, None),
            };
            match next {
                Some(next) => at = next,
                None => return (at, Some(ended)),
            }
        }
        let held = self
            .entries
            .get(&at)
            .map(|e| e.envelope.status.is_terminal());
        (at, held)
    }

    /// The newest run of `id`'s chain: [`Book::latest_run`], then, for an
    /// earlier session's runs the book does not hold, the links `archive`
    /// keeps (not brought into the book). After a restart the book held
    /// none of a chain until a message came: a stop of its first id, or a
    /// resumed run reaching the children its first run asked for, stopped
    /// at the first run. The archive is read (behind its slot's lock) only
    /// past the book, or for a run the book holds ended: another thread
    /// may have gone on from an earlier session's child this book copied
    /// (a message to it that was refused), and a stop of the copy
    /// cancelled it, "done", while the other thread's run went on.
    pub(crate) fn newest_run(
        &self,
        id: &AgentId,
        archive: impl FnOnce() -> Option<Arc<dyn crate::hub::config::EnvelopeArchive>>,
    ) -> AgentId {
        let (mut at, held) = self.latest_held(id);
        if held == Some(false) {
            return at;
        }
        let Some(archive) = archive() else {
            return at;
        };
        let mut seen = rustc_hash::FxHashSet::default();
        while (!self.contains(&at) || self.is_terminal(&at)) && seen.insert(at.clone()) {
            match archive.get(&at).and_then(|e| e.continued_as) {
                Some(next) => at = self.latest_run(&next),
                None => break,
            }
        }
        at
    }

    /// What a finished child goes on from (`None` while it runs, or for a
    /// child restored from a store without its request).
    pub(crate) fn resume_from(&self, id: &AgentId) -> Option<ResumeFrom> {
        let (seed, status) = {
            let entry = self.entries.get(id)?;
            if !entry.envelope.status.is_terminal() {
                return None;
            }
            // Cancelled after it ended: it does not resume, as a stopped
            // one does not.
            let status = match entry.envelope.cancelled {
                true => SubAgentStatus::Stopped,
                false => entry.envelope.status,
            };
            (entry.seed.clone()?, status)
        };
        // What it kept, or — folded into the run it went on as — its start.
        let mut conversation = match self.conversation(id) {
            // Empty: the run ended (or its process died) before its turn
            // wrote anything — queued, or in its first model call.
            Some(conversation) if !conversation.is_empty() => conversation,
            _ => first_messages(&seed),
        };
        answer_open_calls(&mut conversation);
        Some(ResumeFrom {
            seed,
            conversation,
            status,
        })
    }

    /// The child's turn is over, though its end notice may not have
    /// reached the hub yet. The probe is read with no map guard
    /// held (the turn's lock is taken inside it, and an emit under that
    /// lock takes the map's: the tap).
    pub(crate) fn turn_over(&self, id: &AgentId) -> bool {
        let probe = self.entries.get(id).and_then(|e| e.probe.clone());
        probe.is_some_and(|p| p.closed())
    }

    /// Runs `f` while `id`'s turn is open, atomically with its close
    /// ([`crate::agent::Probe::while_open`]); an entry with no turn (or none at all:
    /// the parent) runs it. Says whether it ran.
    pub(crate) fn while_turn_open(&self, id: &AgentId, f: impl FnOnce()) -> bool {
        self.while_turn(id, false, f)
    }

    /// [`Book::while_turn_open`], and only while the turn takes more
    /// ([`crate::agent::Probe::while_taking`]).
    pub(crate) fn while_turn_takes(&self, id: &AgentId, f: impl FnOnce()) -> bool {
        self.while_turn(id, true, f)
    }

    fn while_turn(&self, id: &AgentId, taking: bool, f: impl FnOnce()) -> bool {
        // The probe taken out first: no shard guard is held under a turn's
        // lock (the order is turn, sink, shard).
        let probe = self.entries.get(id).and_then(|e| e.probe.clone());
        match probe {
            Some(probe) if taking => probe.while_taking(f),
            Some(probe) => probe.while_open(f),
            None => {
                f();
                true
            }
        }
    }

    /// Forgets a child announced to nobody (its requester's turn ended
    /// before its start could be said): no envelope of it is kept.
    pub(crate) fn forget_unannounced(&self, id: &AgentId) {
        self.entries.remove(id);
    }

    /// Its conversation: so far while it runs, whole once it ended.
    /// A child started with messages kept while it queued reads those
    /// until its turn publishes its own (a run written in between kept
    /// them). A run a message resumed reads the start of the run it went
    /// on as.
    pub(crate) fn conversation(&self, id: &AgentId) -> Option<Vec<ChatMessage>> {
        let read = self.entry_read(id)?;
        self.conversation_after(id, read)
    }

    /// A running child's conversation after its first `from` messages,
    /// read from its turn (see [`HubHandle::conversation_since`]).
    ///
    /// [`HubHandle::conversation_since`]: crate::hub::HubHandle::conversation_since
    pub(crate) fn conversation_since(&self, id: &AgentId, from: usize) -> Option<Vec<ChatMessage>> {
        let read = self.entry_read(id)?;
        if !read.running || read.prefix.is_some() {
            return None;
        }
        read.probe?.conversation_since(from)
    }

    /// A run as the thread saves it: its conversation (after its first
    /// `from` messages: `None` as [`Book::conversation_since`] is), and
    /// what it took and has not read, in one read of its turn.
    pub(crate) fn conversation_and_unread(
        &self,
        id: &AgentId,
        from: Option<usize>,
    ) -> Option<(Vec<ChatMessage>, Vec<ChatMessage>)> {
        let read = self.entry_read(id)?;
        let live = (read.running && read.prefix.is_none())
            .then(|| read.probe.clone())
            .flatten();
        let both = live.and_then(|probe| match from {
            // Read whole once ended or replaced (see `Probe::conversation_since`).
            Some(from) => probe.with_unread(|s| match s.ended.is_some() || s.replaced {
                true => None,
                false => s.history.get(from..).map(<[ChatMessage]>::to_vec),
            }),
            None => probe.with_unread(|s| Some(s.ended.as_deref().unwrap_or(&s.history).to_vec())),
        });
        match (both, from) {
            (Some(both), _) => Some(both),
            (None, Some(_)) => None,
            (None, None) => Some((self.conversation_after(id, read)?, Vec::new())),
        }
    }

    /// What [`Book::conversation`] reads of the entry first (the guard let
    /// go before the turn's lock is taken: see `get_live`).
    pub(super) fn entry_read(&self, id: &AgentId) -> Option<EntryRead> {
        let entry = self.entries.get(id)?;
        Some(EntryRead {
            probe: entry.probe.clone(),
            kept: entry.conversation.clone(),
            running: !entry.envelope.status.is_terminal(),
            prefix: entry.prefix_of.clone(),
        })
    }

    /// The rest of [`Book::conversation`], after the entry's read: a
    /// finish may have come in between (another worker).
    pub(super) fn conversation_after(
        &self,
        id: &AgentId,
        read: EntryRead,
    ) -> Option<Vec<ChatMessage>> {
        if let Some(prefix) = read.prefix {
            let (next, len) = *prefix;
            return self.start_of(next, len);
        }
        if read.running || read.kept.is_none() {
            if let Some(live) = read.probe.as_ref().and_then(|p| p.conversation()) {
                return Some(live);
            }
            // The finish let go of the probe between the two reads: what
            // it kept is in the entry now. Read as it was before, a stop
            // in a tool gave `None`, and the thread wrote `[]` over the
            // child's run file.
            if let Some(now) = self.entries.get(id).and_then(|e| e.conversation.clone()) {
                return Some(now.as_ref().clone());
            }
        }
        read.kept.map(|kept| kept.as_ref().clone())
    }

    /// The first `len` messages of run `at`'s conversation, following
    /// the runs it was resumed as to the one that holds it whole.
    fn start_of(&self, mut at: AgentId, len: usize) -> Option<Vec<ChatMessage>> {
        // Bounded: each run names a later, distinct id — unless files
        // written by another hand name a cycle, which holds nothing.
        for _ in 0..=self.entries.len() {
            let next = self.entries.get(&at)?.prefix_of.clone();
            match next {
                Some(next) => at = next.0,
                None => {
                    let mut whole = self.conversation(&at)?;
                    whole.truncate(len);
                    return Some(whole);
                }
            }
        }
        None
    }

    /// Run `id`, resumed from another, ended holding its conversation
    /// whole — which begins with the whole of the run it went on from.
    /// That run keeps only where its own ends: each kept its copy, so a
    /// child resumed k times held k²/2 conversations' worth of messages
    /// for the thread's life.
    pub(crate) fn fold_into_next(&self, id: &AgentId) {
        let (from, whole) = {
            let Some(entry) = self.entries.get(id) else {
                return;
            };
            // Most runs are first runs: nothing to fold, nothing cloned.
            let Some(from) = entry.seed.as_ref().and_then(|s| s.resumed_from.as_ref()) else {
                return;
            };
            // A run its files say it went on from (written by another
            // hand) is no start of itself.
            if from == id {
                return;
            }
            match entry.conversation.clone() {
                Some(whole) => (from.clone(), whole),
                None => return,
            }
        };
        // No guard of `id`'s is held: the two may share a shard.
        let Some(mut earlier) = self.entries.get_mut(&from) else {
            return;
        };
        let starts_it = earlier.envelope.continued_as.as_ref() == Some(id)
            && earlier
                .conversation
                .as_ref()
                .is_some_and(|c| whole.get(..c.len()) == Some(&c[..]));
        if starts_it && let Some(kept) = earlier.conversation.take() {
            earlier.prefix_of = Some(Box::new((id.clone(), kept.len())));
        }
    }

    /// A child of an earlier session (from the archive), so a message can
    /// resume it: its final envelope, what it was asked, its conversation
    /// — kept as a finished run's is (`Book::finish`): not twice over in
    /// its seed, and the run it went on from, if imported before it, kept
    /// only as where its own conversation ends in this one's. One message
    /// after a restart brings a whole chain in, and each run's file
    /// repeats the one before: a child resumed k times was k² messages in
    /// the book for the thread's life.
    pub(crate) fn import(
        &self,
        envelope: subagents_messages::Envelope,
        mut seed: ChildRequest,
        mut conversation: Vec<ChatMessage>,
    ) {
        let id = envelope.id.clone();
        if let (SubAgentStatus::Done, Some(answer)) = (envelope.status, &envelope.result) {
            keep_final_answer(&mut conversation, answer);
        }
        self.insert(envelope, None, None);
        if !conversation.is_empty() {
            seed.conversation = Vec::new();
        }
        if let Some(mut entry) = self.entries.get_mut(&id) {
            entry.seed = Some(Arc::new(seed));
            entry.conversation = Some(Arc::new(conversation));
        }
        self.fold_into_next(&id);
    }

    /// A message resumed it as `next`.
    pub(crate) fn set_continued(&self, id: &AgentId, next: AgentId) {
        let closes = self.entries.get_mut(id).and_then(|mut entry| {
            entry.envelope.continued_as = Some(next);
            // The run it goes on as wakes the parent, not this one: its
            // span closes after the guard (every tracing layer runs).
            entry.run_span.take()
        });
        drop(closes);
    }
}

/// What a run's turn starts from, as its start builds it: the
/// conversation it goes on from, then its input (a resumed run's as a
/// message from its requester).
fn first_messages(seed: &ChildRequest) -> Vec<ChatMessage> {
    let mut conversation = seed.conversation.clone();
    conversation.push(ChatMessage::user(match seed.resumed_from {
        Some(_) => crate::agent::steering_text(&seed.input),
        None => seed.input.clone(),
    }));
    conversation
}

#[cfg(test)]
mod tests;
