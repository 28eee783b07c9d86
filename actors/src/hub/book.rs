//! The envelope book: one envelope per child for the life of the hub, in a
//! map shared by the hub actor (which writes every status) and its handles
//! (which read it without a message). Plain data and rules, no actor.
//!
//! Rules kept here: statuses only move forward; a terminal envelope is
//! final but for two flags, `claimed` (the result was taken by a tool
//! call) and `background` (nobody waits inline), each set at most once;
//! queued children keep their queue order, so `status` can say where one
//! waits.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use rustc_hash::FxBuildHasher;
use subagents_messages::{
    AgentEvent, AgentId, ApprovalDecision, ChatMessage, ChildRequest, Envelope, SubAgentStatus,
};
use tokio::time::Instant;

use crate::agent::{LiveTurn, Probe};
use crate::hub::ids::child_number;
use crate::sink::EventSink;
use counters::Counters;

/// The longest tool name `status` shows.
pub(super) const TOOL_NAME_CHARS: usize = 80;

/// An envelope and the bookkeeping around it.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) envelope: Envelope,
    /// When it started running (tokio time).
    pub(super) started: Option<Instant>,
    /// Its place in the queue while it waits for a slot.
    pub(super) queued: Option<u64>,
    /// Its running turn, read for live progress (and, once it ended, for
    /// its conversation).
    pub(super) probe: Option<Probe>,
    /// What it was asked, and its conversation once it ended: a message
    /// resumes it from there (a new run).
    pub(super) seed: Option<Arc<ChildRequest>>,
    pub(super) conversation: Option<Arc<Vec<ChatMessage>>>,
    /// Its conversation is the start of that run's, this long (it was
    /// resumed as that run, which ended): see `Book::fold_into_next`.
    pub(super) prefix_of: Option<Box<(AgentId, usize)>>,
    /// Its last run's `invoke_agent` span, kept from its end only until a
    /// wake links to it or a tool call claims its result: a span held
    /// open is not exported.
    pub(super) run_span: Option<tracing::Span>,
    /// How it ends on the stream if its hub dies without its stop: held
    /// until it finishes.
    pub(super) closer: Option<Closer>,
    /// The number of the last approval it asked for (0: none): an answer
    /// to one it asked for once it ended is `Ended`, any other `Unknown`.
    pub(super) approvals_asked: u64,
    /// The approvals it asked for that were answered, and how (by the
    /// host, or by the background policy): an answer to one once it ended
    /// is `AlreadyAnswered`, as it was while it ran.
    pub(super) approvals_answered: Box<[(u64, ApprovalDecision)]>,
    /// It was failed because its hub died (`fail_unfinished`): every
    /// later call returns it again.
    pub(super) failed_by_hub_death: bool,
    /// It is being stopped: the children it waits on go with it, and the
    /// background policy answers none of their requests.
    pub(super) going: bool,
}

/// A child's own sink and its requester's: closing the first with its
/// terminal status on the second is its last word on the stream.
#[derive(Debug, Clone)]
pub(crate) struct Closer {
    pub(crate) child: EventSink,
    pub(crate) requester: EventSink,
}

impl Closer {
    /// Closes the child's sink with `status` as its last word (once: a
    /// closed sink says nothing more).
    fn close(&self, id: &AgentId, status: SubAgentStatus) {
        self.child.close_with(|| {
            self.requester
                .emit(AgentEvent::ChildStatus(id.clone(), status));
        });
    }
}

/// One writer (the hub) and a few readers need two shards; DashMap's
/// default, 4 per core, costs a padded lock and table each (1 KiB on 2
/// cores, 8 KiB on 16; docs/performance.md).
const SHARDS: usize = 2;

/// The book. Cheap to clone; clones share it. Entries are boxed: a free
/// bucket of a 400-byte entry would be 400 bytes held for nothing.
#[derive(Debug, Clone)]
pub(crate) struct Book {
    pub(super) entries: Arc<DashMap<AgentId, Box<Entry>, FxBuildHasher>>,
    counters: Arc<Counters>,
}

impl Default for Book {
    fn default() -> Self {
        Self {
            entries: Arc::new(DashMap::with_hasher_and_shard_amount(FxBuildHasher, SHARDS)),
            counters: Arc::default(),
        }
    }
}

impl Book {
    /// Records a new child (its envelope as requested), how it ends on the
    /// stream, and what it was asked (kept to resume it).
    pub(crate) fn insert(
        &self,
        envelope: Envelope,
        closer: Option<Closer>,
        seed: Option<Arc<ChildRequest>>,
    ) {
        self.entries.insert(
            envelope.id.clone(),
            Box::new(Entry {
                envelope,
                started: None,
                queued: None,
                probe: None,
                seed,
                conversation: None,
                prefix_of: None,
                run_span: None,
                closer,
                approvals_asked: 0,
                approvals_answered: Box::default(),
                failed_by_hub_death: false,
                going: false,
            }),
        );
    }

    /// True when the book has this child.
    pub(crate) fn contains(&self, id: &AgentId) -> bool {
        self.entries.contains_key(id)
    }

    /// `id` ran here (it has a probe): not an earlier session's child,
    /// imported to be resumed, whose usage was counted there.
    pub(crate) fn ran_here(&self, id: &AgentId) -> bool {
        self.entries.get(id).is_some_and(|e| e.probe.is_some())
    }

    /// The envelope now: while it runs, its elapsed time, usage, model
    /// and tool calls are as of this instant.
    pub(crate) fn get(&self, id: &AgentId) -> Option<Envelope> {
        self.get_live(id).map(|(envelope, _)| envelope)
    }

    /// The envelope now, and what its running turn does (`None` once it
    /// ended, or before it started).
    pub(crate) fn get_live(&self, id: &AgentId) -> Option<(Envelope, Option<LiveTurn>)> {
        // The turn's lock is taken after the map's guard is dropped: the
        // tap takes them the other way round (an event emitted under the
        // turn's lock updates the map).
        let (mut envelope, probe) = {
            let entry = self.entries.get(id)?;
            let probe = entry
                .probe
                .clone()
                .filter(|_| !entry.envelope.status.is_terminal());
            (current(&entry), probe)
        };
        let live = probe.and_then(|p| p.read());
        // The larger of each: what its `Result` reported stays (a remote
        // child's proxy counts nothing live, and a cut turn's `Result`
        // counts the call in flight) until its end comes in.
        if let Some(live) = &live {
            envelope.usage.prompt_tokens =
                envelope.usage.prompt_tokens.max(live.usage.prompt_tokens);
            envelope.usage.completion_tokens = envelope
                .usage
                .completion_tokens
                .max(live.usage.completion_tokens);
            envelope.model_calls = envelope.model_calls.max(live.model_calls);
            envelope.tool_calls = envelope.tool_calls.max(live.tool_calls);
        }
        Some((envelope, live))
    }

    /// Where its running turn is published (its conversation, once the
    /// turn has published one: [`Book::conversation`]); [`Book::start`]'s.
    #[cfg(test)]
    pub(crate) fn set_probe(&self, id: &AgentId, probe: Probe) {
        if let Some(mut entry) = self.entries.get_mut(id) {
            entry.probe = Some(probe);
        }
    }

    /// Usage and call counts, as of now, of every child that ran here (has
    /// a probe: an earlier session's, imported, was counted there).
    ///
    /// An ended child's counts are read in place; only a running one's
    /// envelope is read as of now (its probe, taken outside the map's
    /// guard). Each was copied whole — its result, task, tools — so every
    /// read cost as much as everything the thread ever ran.
    pub(crate) fn totals(&self) -> (subagents_messages::Usage, u64, u64) {
        let mut totals = (subagents_messages::Usage::default(), 0u64, 0u64);
        let mut add = |envelope: &Envelope| {
            totals.0.add(envelope.usage);
            totals.1 += u64::from(envelope.model_calls);
            totals.2 += u64::from(envelope.tool_calls);
        };
        let mut running = Vec::new();
        for entry in self.entries.iter().filter(|e| e.probe.is_some()) {
            if entry.envelope.status.is_terminal() {
                add(&entry.envelope);
            } else {
                running.push(entry.key().clone());
            }
        }
        for envelope in running.iter().filter_map(|id| self.get(id)) {
            add(&envelope);
        }
        totals
    }

    /// The id of every child in the book, in no order.
    pub(crate) fn ids(&self) -> Vec<AgentId> {
        self.entries.iter().map(|e| e.key().clone()).collect()
    }

    /// Its status now, without copying its envelope.
    pub(crate) fn status(&self, id: &AgentId) -> Option<SubAgentStatus> {
        self.entries.get(id).map(|e| e.envelope.status)
    }

    /// True when it ended, or is not in the book.
    pub(crate) fn is_terminal(&self, id: &AgentId) -> bool {
        self.entries
            .get(id)
            .is_none_or(|e| e.envelope.status.is_terminal())
    }

    /// Moves its status strictly forward; `false` (nothing changed) for a
    /// repeated or backward move.
    pub(crate) fn advance(&self, id: &AgentId, status: SubAgentStatus) -> bool {
        match self.entries.get_mut(id) {
            Some(mut entry) if status.rank() > entry.envelope.status.rank() => {
                entry.envelope.status = status;
                if status == SubAgentStatus::Background {
                    entry.envelope.background = true;
                }
                true
            }
            _ => false,
        }
    }

    /// It waits for a slot, behind every child queued before it.
    pub(crate) fn mark_queued(&self, id: &AgentId) {
        let seq = self
            .counters
            .next_queued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(mut entry) = self.entries.get_mut(id) {
            entry.queued = Some(seq);
        }
    }

    /// Its 1-based place among the children waiting for a slot of its
    /// requester's (the cap holds per requester).
    pub(crate) fn queue_position(&self, id: &AgentId) -> Option<usize> {
        let (mine, requester) = {
            let entry = self.entries.get(id)?;
            (
                entry.queued?,
                entry.seed.as_ref().map(|s| s.requester.clone()),
            )
        };
        let ahead = self
            .entries
            .iter()
            .filter(|e| e.queued.is_some_and(|q| q < mine))
            .filter(|e| e.seed.as_ref().map(|s| &s.requester) == requester.as_ref())
            .count();
        Some(ahead + 1)
    }

    /// Ends it (once): terminal status, result or error, stamps. False if
    /// it had ended already (or is unknown). The final envelope is
    /// [`Book::envelope`]: copied only for whoever reads it.
    pub(crate) fn finish(
        &self,
        id: &AgentId,
        status: SubAgentStatus,
        result: Option<String>,
        error: Option<String>,
        now_ms: u64,
    ) -> bool {
        let finished = self.finish_as(id, status, result, error, now_ms, false);
        if finished {
            self.fold_into_next(id);
        }
        finished
    }

    /// `finish`, and `by_hub_death`: the child is failed because its hub
    /// died (marked in the same step, so a concurrent `fail_unfinished`
    /// that lost the finish still returns it).
    fn finish_as(
        &self,
        id: &AgentId,
        status: SubAgentStatus,
        result: Option<String>,
        error: Option<String>,
        now_ms: u64,
        by_hub_death: bool,
    ) -> bool {
        // The turn's lock is taken with no map guard held (see get_live).
        let Some(probe) = self.entries.get(id).map(|entry| entry.probe.clone()) else {
            return false;
        };
        let run_span = probe.as_ref().and_then(Probe::take_span);
        let conversation = probe.as_ref().and_then(Probe::conversation_at_end);
        let Some(mut entry) = self.entries.get_mut(id) else {
            return false;
        };
        if entry.envelope.status.is_terminal() {
            return false;
        }
        // What the book keeps of the turn is taken: the rest goes (the
        // probe itself stays, the mark of a child that ran here).
        if let Some(probe) = &probe {
            probe.let_go();
        }
        if conversation.is_some() {
            entry.conversation = conversation;
        }
        // A resumed run's seed carries the conversation it went on from,
        // which its own now holds whole: kept too, a child resumed k times
        // held its conversation k times over (k² for one chain).
        if entry.conversation.as_ref().is_some_and(|c| !c.is_empty())
            && let Some(seed) = entry.seed.as_mut().filter(|s| !s.conversation.is_empty())
        {
            Arc::make_mut(seed).conversation = Vec::new();
        }
        // Kept only for a wake that may link to it (else it held the turn
        // that started it open for the thread's life); a hub's death wakes
        // nobody.
        let may_wake = matches!(status, SubAgentStatus::Done | SubAgentStatus::Failed)
            && entry.envelope.depth == 1
            && !by_hub_death
            && !(self.counters.no_wakes).load(std::sync::atomic::Ordering::SeqCst);
        // One not kept closes after the entry's guard (every layer runs).
        let (kept, closes) = match may_wake {
            true => (run_span, None),
            false => (None, run_span),
        };
        entry.run_span = kept;
        if let Some(started) = entry.started {
            entry.envelope.elapsed = started.elapsed();
        }
        entry.queued = None;
        entry.closer = None;
        entry.envelope.status = status;
        entry.envelope.finished_at_ms = Some(self.counters.finish_stamp(now_ms));
        entry.envelope.result = result;
        entry.envelope.error = error;
        entry.failed_by_hub_death = by_hub_death;
        drop(entry);
        drop(closes);
        true
    }

    /// The envelope as recorded, with no live reading: a finished child's
    /// final one.
    pub(crate) fn envelope(&self, id: &AgentId) -> Option<Envelope> {
        self.entries.get(id).map(|entry| entry.envelope.clone())
    }

    /// A tool call took its finished result: no wake follows. Returns the
    /// envelope if this call claimed it (not claimed before). An earlier
    /// session's interrupted child, imported, has no result to claim: its
    /// restart wake stays owed (claimed at a `status` read, a kill before
    /// the reading turn ended left it unlisted at the next open); one
    /// interrupted here is claimed, its usage the reading turn's. With it,
    /// its run span, which no wake will link to: the caller lets it close
    /// (and export: every tracing layer runs then) holding no lock.
    pub(crate) fn claim(&self, id: &AgentId) -> Option<(Envelope, Option<tracing::Span>)> {
        let mut entry = self.entries.get_mut(id)?;
        let status = entry.envelope.status;
        let earlier = status == SubAgentStatus::Interrupted && entry.probe.is_none();
        if !status.is_terminal() || earlier || entry.envelope.claimed {
            return None;
        }
        entry.envelope.claimed = true;
        Some((entry.envelope.clone(), entry.run_span.take()))
    }

    /// A stop reached `id` after it ended: cancelled for good, its status
    /// unchanged. Its envelope if this changed it (`None` for one still
    /// running, unknown, cancelled already or ended `stopped`).
    pub(crate) fn cancel(&self, id: &AgentId) -> Option<Envelope> {
        let mut entry = self.entries.get_mut(id)?;
        if !entry.envelope.cancellable() {
            return None;
        }
        entry.envelope.cancelled = true;
        Some(entry.envelope.clone())
    }

    /// Nobody waits inline on a finished child any more, and nobody took
    /// its result: it becomes a background result (it wakes the parent).
    /// Returns the envelope when that changed it.
    pub(crate) fn release_finished(&self, id: &AgentId) -> Option<Envelope> {
        let mut entry = self.entries.get_mut(id)?;
        let envelope = &mut entry.envelope;
        if !envelope.status.is_terminal() || envelope.claimed || envelope.background {
            return None;
        }
        envelope.background = true;
        Some(envelope.clone())
    }

    /// Every envelope, in child-number order.
    pub(crate) fn all(&self) -> Vec<Envelope> {
        let mut all: Vec<Envelope> = self.entries.iter().map(|e| current(&e)).collect();
        all.sort_by_key(|e| (child_number(&e.id).unwrap_or(u64::MAX), e.id.clone()));
        all
    }
}

fn current(entry: &Entry) -> Envelope {
    let mut envelope = entry.envelope.clone();
    if !envelope.status.is_terminal()
        && let Some(started) = entry.started
    {
        envelope.elapsed = started.elapsed();
    }
    envelope
}

/// A new child's envelope, as requested.
pub(crate) fn requested(
    id: AgentId,
    name: String,
    request: &subagents_messages::ChildRequest,
    tools: Vec<String>,
    now_ms: u64,
) -> Envelope {
    Envelope {
        id,
        name,
        parent_tool_use_id: request.parent_tool_use_id.clone(),
        task: request.input.clone(),
        tools,
        status: SubAgentStatus::Queued,
        background: request.background,
        requested_at_ms: now_ms,
        started_at_ms: None,
        finished_at_ms: None,
        elapsed: Duration::ZERO,
        tool_calls: 0,
        last_tool: None,
        usage: Default::default(),
        model_calls: 0,
        children_usage: Default::default(),
        result: None,
        error: None,
        claimed: false,
        wake_owed: false,
        depth: request.requester_depth + 1,
        resumed_from: request.resumed_from.clone(),
        continued_as: None,
        thread: None,
        cancelled: false,
        forgotten: false,
        stopping: false,
    }
}

mod approvals;
mod background;
mod counters;
mod death;
mod spans;
mod starting;
mod tap;
#[cfg(test)]
mod tests;
