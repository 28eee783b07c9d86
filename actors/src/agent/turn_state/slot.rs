//! A tool call's hold on its turn: settle its output, say what a cut
//! answers it with, deliver a child's result with its usage.

use subagents_messages::{AgentId, Usage};

use super::{OpenCall, ToolOutcome, TurnState, lock};
use crate::tool::{ToolError, error_output};
use std::sync::Mutex;

/// A tool call's hold on its turn (see [`ToolCallContext::settle`]). Empty
/// outside a turn.
#[derive(Clone, Default)]
pub(crate) struct CallSlot {
    /// The turn, and which of its calls ([`OpenCall::seq`]). Held weakly:
    /// a tool may keep its context after its call (the docs allow it), and
    /// a strong hold kept a top-level turn's whole state — its span open,
    /// never exported, and its conversation — for as long.
    pub(crate) turn: Option<(std::sync::Weak<Mutex<TurnState>>, u64)>,
}

/// A delegation call's cut note for the child it asked for, written once
/// the child's id is known (see [`CallSlot::on_child_announced`]).
/// Given the child's id and depth.
pub(crate) struct ChildNote(pub(crate) Box<WriteChildNote>);

/// What writes a [`ChildNote`].
pub(crate) type WriteChildNote = dyn FnOnce(&AgentId, u32) -> String + Send;

impl std::fmt::Debug for ChildNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChildNote")
    }
}

/// A `send` call's cut note for its message, written once a child took it
/// (see [`CallSlot::on_message_taken`]). Given how it was taken.
pub(crate) struct TakenNote(pub(crate) Box<WriteTakenNote>);

/// What writes a [`TakenNote`].
pub(crate) type WriteTakenNote = dyn FnOnce(&crate::hub::Steered) -> String + Send;

impl std::fmt::Debug for TakenNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TakenNote")
    }
}

/// What the close that answers a cut call runs first: a waiting
/// delegation call hands its child on (detached or stopped), before the
/// turn's result goes out — done only as the cut task was dropped, on
/// another worker, the turn's end could reach the thread first, and a
/// wake queued after the child's went out before it.
#[derive(Clone)]
pub(crate) struct HandOn(pub(crate) std::sync::Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for HandOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandOn")
    }
}

impl std::fmt::Debug for CallSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSlot")
            .field("in_turn", &self.turn.is_some())
            .finish()
    }
}

impl CallSlot {
    /// Runs `f` on this call while it is open; `None` once it is closed
    /// (or outside a turn).
    fn with_open<R>(&self, f: impl FnOnce(&mut OpenCall) -> R) -> Option<R> {
        let (turn, seq) = self.turn.as_ref()?;
        let shared = turn.upgrade()?;
        let mut state = lock(&shared);
        state.open.as_deref_mut().filter(|o| o.seq == *seq).map(f)
    }

    pub(crate) fn on_cut(&self, output: String) {
        self.with_open(|open| open.on_cut = Some(output));
    }

    /// What a cut of this call runs as it answers it ([`HandOn`]).
    pub(crate) fn on_cut_hand_on(&self, hand_on: HandOn) {
        self.with_open(|open| open.hand_on = Some(hand_on));
    }

    /// What the call reads if cut once its child is announced (`note`
    /// writes it for the child's id): set as the hub announces it (see
    /// [`CallSlot::announce_child`]), before the call has read the id.
    pub(crate) fn on_child_announced(&self, note: ChildNote) {
        self.with_open(|open| open.on_child = Some(note));
    }

    /// What the call reads if cut once its message was taken (`note`
    /// writes it for how): set before the message is sent, written as a
    /// child takes it ([`CallSlot::hand_over`]).
    pub(crate) fn on_message_taken(&self, note: TakenNote) {
        self.with_open(|open| open.on_taken = Some(note));
    }

    /// Runs `take` (a message handed to a child: how it took it, or
    /// `None`) while the call is open, under its turn's lock — atomically
    /// with the cut: nothing is taken for a call that was cut, and once
    /// taken the call's cut note says how. How it was taken; `None` when
    /// it was not, or the call was cut (`take` not run). Outside a turn
    /// it runs.
    pub(crate) fn hand_over(
        &self,
        take: impl FnOnce() -> Option<crate::hub::Steered>,
    ) -> Option<crate::hub::Steered> {
        if self.turn.is_none() {
            return take();
        }
        self.with_open(|open| {
            let taken = take();
            if let Some(how) = &taken {
                open.note_taken(how);
            }
            taken
        })
        .flatten()
    }

    /// A message sent on was taken (by a node, whose word came): the
    /// call's cut note says so from now on, while it is open.
    pub(crate) fn note_taken(&self, how: &crate::hub::Steered) {
        self.with_open(|open| open.note_taken(how));
    }

    /// [`CallSlot::while_open`] for the announcement of the call's child
    /// `id` (at `depth`): under the same lock, the call's cut note names
    /// the child — if `announce` says it was announced. Says whether it
    /// was (the call open, and `announce` said so).
    pub(crate) fn announce_child(
        &self,
        id: &AgentId,
        depth: u32,
        announce: impl FnOnce() -> bool,
    ) -> bool {
        if self.turn.is_none() {
            return announce();
        }
        self.with_open(|open| {
            let said = announce();
            if said && let Some(note) = open.on_child.take() {
                open.on_cut = Some((note.0)(id, depth));
            }
            said
        })
        .unwrap_or(false)
    }

    /// True while the call is open in its turn (outside a turn, always).
    pub(crate) fn is_open(&self) -> bool {
        self.while_open(|| ())
    }

    /// Runs `f` while the call is open, under its turn's lock — atomically
    /// with the cut, which closes the call under that lock — and says
    /// whether it ran; outside a turn it runs.
    pub(crate) fn while_open(&self, f: impl FnOnce()) -> bool {
        match &self.turn {
            None => {
                f();
                true
            }
            Some(_) => self.with_open(|_| f()).is_some(),
        }
    }

    /// Fixes the call's output; `false` once the call is no longer open
    /// (its turn was cut and the call answered already).
    pub(crate) fn settle(&self, output: &Result<String, ToolError>) -> bool {
        self.deliver(output, || None)
    }

    /// Settles the call's output and, in the same step under the turn's
    /// lock, takes what `claim` delivers with it: a child's usage (its own
    /// and its children's), counted in this turn's result. Nothing can
    /// close the turn between the two, so the child's tokens are in the
    /// count of the turn that answered the call with its result — and when
    /// the turn was cut first, `claim` is not called (the result is not
    /// delivered; `false`). Outside a turn, `claim` runs and `true`.
    pub(crate) fn deliver(
        &self,
        output: &Result<String, ToolError>,
        claim: impl FnOnce() -> Option<Usage>,
    ) -> bool {
        let Some((turn, seq)) = &self.turn else {
            claim();
            return true;
        };
        // Gone: the turn ended (and with it the call).
        let Some(shared) = turn.upgrade() else {
            return false;
        };
        let mut state = lock(&shared);
        let Some(open) = state
            .open
            .as_mut()
            .filter(|o| o.seq == *seq && o.settled.is_none())
        else {
            return false;
        };
        open.settled = Some(match output {
            Ok(text) => ToolOutcome {
                output: text.clone(),
                is_error: false,
            },
            Err(e) => ToolOutcome {
                output: error_output(&open.name, e),
                is_error: true,
            },
        });
        if let Some(usage) = claim() {
            state.progress.children_usage.add(usage);
        }
        true
    }
}
