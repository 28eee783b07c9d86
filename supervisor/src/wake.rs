//! Wakes: a finished background child becomes a synthetic user turn on
//! the parent. This is the pure core of the rules; the supervisor actor
//! feeds it and delivers what it releases.
//!
//! Rules: one wake in flight, the rest FIFO; never delivered while the
//! parent generates or the user types; delivered as soon as both are idle;
//! dropped when the thread is not on screen, and on a thread switch.

use std::collections::VecDeque;

use subagents_messages::text::one_line;
use subagents_messages::{AgentId, Envelope};

/// At most this many characters of a result go into a wake.
pub(crate) const WAKE_RESULT_LIMIT: usize = 2000;

/// The wake queue and the conditions that hold it back.
#[derive(Debug, Clone)]
pub(crate) struct WakeQueue {
    pending: VecDeque<AgentId>,
    in_flight: Option<AgentId>,
    generating: bool,
    typing: bool,
    on_screen: bool,
}

impl Default for WakeQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl WakeQueue {
    /// An empty queue for a thread on screen, idle.
    pub(crate) fn new() -> Self {
        Self {
            pending: VecDeque::new(),
            in_flight: None,
            generating: false,
            typing: false,
            on_screen: true,
        }
    }

    /// A background child finished. Dropped (returns `false`) when the
    /// thread is off screen.
    pub(crate) fn push(&mut self, child: AgentId) -> bool {
        if !self.on_screen {
            return false;
        }
        self.pending.push_back(child);
        true
    }

    /// The parent started or stopped generating (any turn).
    pub(crate) fn set_generating(&mut self, generating: bool) {
        self.generating = generating;
    }

    /// The user started or stopped typing.
    pub(crate) fn set_typing(&mut self, typing: bool) {
        self.typing = typing;
    }

    /// The thread went on or off screen; off screen drops every pending
    /// wake.
    pub(crate) fn set_on_screen(&mut self, on_screen: bool) {
        self.on_screen = on_screen;
        if !on_screen {
            self.pending.clear();
        }
    }

    /// A thread switch: drop every pending wake.
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
    }

    /// The wake turn in flight ended.
    pub(crate) fn finished(&mut self) {
        self.in_flight = None;
    }

    /// The next wake to deliver now, if every condition allows: it is then
    /// in flight until [`WakeQueue::finished`].
    pub(crate) fn release_next(&mut self) -> Option<AgentId> {
        if self.in_flight.is_some() || self.generating || self.typing || !self.on_screen {
            return None;
        }
        let next = self.pending.pop_front()?;
        self.in_flight = Some(next.clone());
        Some(next)
    }

    /// Drops a pending wake (its result was claimed another way).
    #[cfg(test)]
    pub(crate) fn forget(&mut self, child: &AgentId) {
        self.pending.retain(|c| c != child);
    }
}

/// The synthetic user turn for a finished child.
pub(crate) fn wake_text(envelope: &Envelope) -> String {
    let result = envelope
        .result
        .as_deref()
        .or(envelope.error.as_deref())
        .unwrap_or("(no result)");
    let clipped: String = result.chars().take(WAKE_RESULT_LIMIT).collect();
    let clipped = if clipped.len() < result.len() {
        format!("{clipped}…")
    } else {
        clipped
    };
    format!(
        "{}\nResult: {clipped}\n\nNo human typed this. Use the result to finish what the user asked; reply in a few sentences.",
        wake_line(envelope)
    )
}

/// The one-line transcript form of a wake: always one line, whatever the
/// name and task hold (see `one_line`).
pub(crate) fn wake_line(envelope: &Envelope) -> String {
    let task = one_line(&envelope.task, 80);
    format!(
        "[use_agent {} finished] {} ({}, {} s, task: \"{task}\")",
        one_line(envelope.id.as_str(), 80),
        one_line(&envelope.name, 80),
        envelope.status,
        envelope.elapsed.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u32) -> AgentId {
        AgentId::new(format!("agent_{n}"))
    }

    #[test]
    fn one_in_flight_rest_fifo() {
        let mut q = WakeQueue::new();
        q.push(id(1));
        q.push(id(2));
        assert_eq!(q.release_next(), Some(id(1)));
        assert_eq!(q.release_next(), None, "one in flight");
        q.finished();
        assert_eq!(q.release_next(), Some(id(2)));
    }

    #[test]
    fn typing_and_generating_hold_wakes_back() {
        let mut q = WakeQueue::new();
        q.push(id(1));
        q.set_typing(true);
        assert_eq!(q.release_next(), None);
        q.set_typing(false);
        q.set_generating(true);
        assert_eq!(q.release_next(), None);
        q.set_generating(false);
        assert_eq!(q.release_next(), Some(id(1)));
    }

    #[test]
    fn off_screen_drops_and_refuses_wakes() {
        let mut q = WakeQueue::new();
        q.push(id(1));
        q.set_on_screen(false);
        assert!(!q.push(id(2)));
        q.set_on_screen(true);
        assert_eq!(q.release_next(), None);
    }

    #[test]
    fn a_switch_drops_pending_and_forget_removes_one() {
        let mut q = WakeQueue::new();
        q.push(id(1));
        q.push(id(2));
        q.push(id(3));
        q.forget(&id(2));
        assert_eq!(q.release_next(), Some(id(1)));
        q.finished();
        assert_eq!(q.release_next(), Some(id(3)));
        q.finished();
        q.push(id(4));
        q.clear();
        assert_eq!(q.release_next(), None);
    }

    #[test]
    fn wake_text_clips_the_result_and_says_no_human_typed_it() {
        let envelope = Envelope {
            id: id(3),
            name: "Fetcher".into(),
            parent_tool_use_id: "c".into(),
            task: "fetch it".into(),
            tools: vec![],
            status: subagents_messages::SubAgentStatus::Done,
            background: true,
            requested_at_ms: 0,
            started_at_ms: None,
            finished_at_ms: None,
            elapsed: std::time::Duration::from_secs(12),
            tool_calls: 0,
            last_tool: None,
            usage: Default::default(),
            result: Some("x".repeat(3000)),
            error: None,
            claimed: false,
            depth: 1,
        };
        let text = wake_text(&envelope);
        assert!(text.starts_with(
            "[use_agent agent_3 finished] Fetcher (done, 12 s, task: \"fetch it\")\nResult: xxx"
        ));
        assert_eq!(text.matches('x').count(), WAKE_RESULT_LIMIT);
        assert!(text.ends_with("No human typed this. Use the result to finish what the user asked; reply in a few sentences."));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push,
        Typing(bool),
        Generating(bool),
        OnScreen(bool),
        Clear,
        Next,
        Finished,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Push),
            1 => any::<bool>().prop_map(Op::Typing),
            1 => any::<bool>().prop_map(Op::Generating),
            1 => any::<bool>().prop_map(Op::OnScreen),
            1 => Just(Op::Clear),
            3 => Just(Op::Next),
            2 => Just(Op::Finished),
        ]
    }

    proptest! {
        /// Delivered wakes are in push order, never two in flight, never
        /// while typing/generating/off screen, never one pushed before the
        /// last clear or off-screen.
        #[test]
        fn wake_rules_hold(ops in prop::collection::vec(op(), 0..300)) {
            let mut q = WakeQueue::new();
            let (mut n, mut last_delivered, mut barrier) = (0u32, 0u32, 0u32);
            let (mut typing, mut generating, mut on_screen, mut in_flight) = (false, false, true, false);
            for op in ops {
                match op {
                    Op::Push => { n += 1; q.push(id(n)); }
                    Op::Typing(t) => { typing = t; q.set_typing(t); }
                    Op::Generating(g) => { generating = g; q.set_generating(g); }
                    Op::OnScreen(o) => { on_screen = o; if !o { barrier = n; } q.set_on_screen(o); }
                    Op::Clear => { barrier = n; q.clear(); }
                    Op::Finished => { in_flight = false; q.finished(); }
                    Op::Next => if let Some(w) = q.release_next() {
                        let k: u32 = w.as_str()["agent_".len()..].parse().unwrap();
                        prop_assert!(!in_flight && !typing && !generating && on_screen);
                        prop_assert!(k > last_delivered, "FIFO");
                        prop_assert!(k > barrier, "a dropped wake was delivered");
                        last_delivered = k;
                        in_flight = true;
                    },
                }
            }
        }
    }
}
