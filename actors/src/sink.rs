//! The event sink: how agents put events on their thread's single ordered
//! stream.
//!
//! The stream is a tokio unbounded channel, never ractor's `OutputPort`
//! (which drops messages when a subscriber lags): no event is ever dropped
//! while the host holds the [`EventStream`], so nothing bounds what it
//! holds but the host's reading. One turn's events are bounded by its
//! [`Limits`](subagents_messages::Limits) (model calls, tokens, wall clock),
//! its tools' outputs and the live-children cap; but a thread shown and
//! not typing goes on without the host — each background child's result
//! wakes its parent for another turn, which may start another — so the
//! events waiting between two reads have no bound of their own. A host
//! that stops reading for long should take the thread off screen (its
//! wakes are then dropped, so it starts no turn of its own), or drop the
//! stream if it will never show the thread again: emits are then no-ops,
//! and a thread's stream cannot be drawn again — its approval requests
//! are never seen, so each waits to its turn's wall clock.
//!
//! Sinks form a tree that mirrors the agents: a child's sink wraps each
//! event as `AgentEvent::Child(id, ..)` and forwards it to the parent's.
//! Every sink can be *closed*: `EventSink::close_with` runs a closure
//! (typically: emit a terminal event on another sink) atomically with the
//! close, so that nothing emitted through the closed sink can follow it.
//! This is what makes "nothing of a child after its terminal status" hold
//! even when a child is finishing at the instant it is stopped. Only the
//! runtime closes a sink (an agent its turn's, the hub a child's): a host
//! that closed a turn's sink would leave the turn unable to end.
//!
//! ```compile_fail
//! fn close(sink: &subagents_actors::EventSink) {
//!     sink.close_with(|| {});
//! }
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use subagents_messages::{AgentEvent, AgentId};
use tokio::sync::mpsc;

/// Where an agent's events go. Cheap to clone.
#[derive(Clone)]
pub struct EventSink {
    node: Arc<Node>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field("open", &self.is_open())
            .finish_non_exhaustive()
    }
}

struct Node {
    target: Target,
    open: Mutex<bool>,
}

enum Target {
    Root(mpsc::UnboundedSender<AgentEvent>),
    Forward {
        parent: EventSink,
        wrap: Option<AgentId>,
        tap: Option<Tap>,
    },
}

/// Sees each event of a nested sink (unwrapped) before it is forwarded.
/// It is also told when the nested sink's agent made a step (an answer
/// asking for calls, a call answered, a message taken), once no lock of
/// its turn is held ([`EventSink::stepped`]).
pub(crate) type Tap = Arc<dyn Fn(Tapped<'_>) + Send + Sync>;

/// What a [`Tap`] sees.
pub(crate) enum Tapped<'a> {
    /// An event of the nested sink, before it is forwarded.
    Event(&'a AgentEvent),
    /// Its agent ended a step.
    Stepped,
}

impl EventSink {
    /// A new stream: the sink agents write to and the stream the host reads.
    pub fn channel() -> (EventSink, EventStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self::from_target(Target::Root(tx)), EventStream { rx })
    }

    /// A sink nobody reads: what a stopped actor keeps in place of its
    /// own, so the stream it wrote to ends whoever still holds its state.
    /// One for the process (a channel made per stop cost every agent's
    /// stop an allocation of the channel's first block).
    pub(crate) fn unread() -> EventSink {
        static UNREAD: std::sync::OnceLock<EventSink> = std::sync::OnceLock::new();
        UNREAD.get_or_init(|| Self::channel().0).clone()
    }

    /// A sink whose events reach this one as `AgentEvent::Child(id, ..)`.
    pub fn nested(&self, id: AgentId) -> EventSink {
        Self::from_target(Target::Forward {
            parent: self.clone(),
            wrap: Some(id),
            tap: None,
        })
    }

    /// Like [`EventSink::nested`], with `tap` seeing each event first (the
    /// hub keeps a child's envelope current this way) and told of each
    /// step its agent ends.
    pub(crate) fn nested_with_tap(&self, id: AgentId, tap: Tap) -> EventSink {
        Self::from_target(Target::Forward {
            parent: self.clone(),
            wrap: Some(id),
            tap: Some(tap),
        })
    }

    /// Tells the tap of this agent's level (this sink, or the nearest
    /// above it up to the first nesting) that a step ended. Called by
    /// whoever made it (the turn after an answer with calls, one without
    /// that goes on to read a message, or a call's `ToolResult`; the
    /// agent's or a proxy's handler after a message it took; a proxy after
    /// its node read one), after it let go of the turn's lock: a hook may read the turn's
    /// conversation, which takes that lock — called from the emit, under
    /// it, such a read never returned.
    pub(crate) fn stepped(&self) {
        let mut sink = self;
        while let Target::Forward { parent, wrap, tap } = &sink.node.target {
            if let Some(tap) = tap {
                tap(Tapped::Stepped);
                return;
            }
            if wrap.is_some() {
                return;
            }
            sink = parent;
        }
    }

    /// A sink that forwards unchanged to this one but can be closed on its
    /// own (one per turn, so a stopped turn emits nothing more).
    pub(crate) fn gated(&self) -> EventSink {
        Self::from_target(Target::Forward {
            parent: self.clone(),
            wrap: None,
            tap: None,
        })
    }

    fn from_target(target: Target) -> Self {
        Self {
            node: Arc::new(Node {
                target,
                open: Mutex::new(true),
            }),
        }
    }

    /// Emits an event. Returns `false` when this sink (or one above it) is
    /// closed: the event is discarded, and what emitted it has been cut.
    /// An event for a stream the host dropped is discarded too, but counts
    /// as emitted (`true`): nobody reads it, and the agent goes on exactly
    /// as if somebody did (a dropped stream read as a cut turn left every
    /// tool result out of the conversation).
    pub fn emit(&self, event: AgentEvent) -> bool {
        let open = self
            .node
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !*open {
            return false;
        }
        self.deliver(event)
    }

    fn deliver(&self, event: AgentEvent) -> bool {
        match &self.node.target {
            Target::Root(tx) => {
                // Err only when the host dropped the stream: a no-op.
                let _ = tx.send(event);
                true
            }
            Target::Forward {
                parent, wrap, tap, ..
            } => {
                if let Some(tap) = tap {
                    tap(Tapped::Event(&event));
                }
                match wrap {
                    None => parent.emit(event),
                    Some(id) => parent.emit(AgentEvent::Child(id.clone(), Box::new(event))),
                }
            }
        }
    }

    /// Closes this sink, running `last` under the same lock if it was open
    /// (so nothing emitted through this sink can come after what `last`
    /// emits). Returns `false`, without running `last`, if it was already
    /// closed. `last` must not emit through this same sink.
    pub(crate) fn close_with(&self, last: impl FnOnce()) -> bool {
        let mut open = self
            .node
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !*open {
            return false;
        }
        last();
        *open = false;
        true
    }

    /// Runs `f` under this sink's lock if it is open (so nothing `f`
    /// emits elsewhere can come after what a [`EventSink::close_with`]
    /// emits); says whether it ran. `f` must not emit through this same
    /// sink.
    pub(crate) fn while_open(&self, f: impl FnOnce()) -> bool {
        let open = self
            .node
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *open {
            f();
        }
        *open
    }

    /// True while this sink accepts events (ignores sinks above it).
    pub(crate) fn is_open(&self) -> bool {
        *self
            .node
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The host's end of a thread's event stream.
#[derive(Debug)]
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<AgentEvent>,
}

impl EventStream {
    /// The next event; `None` once every sink is gone.
    ///
    /// Cancel-safe, as the [`Stream`](futures_util::Stream) impl is: a
    /// `recv` given up (the other branch of a `select!`, a timeout) takes
    /// no event — the next call reads it.
    pub async fn recv(&mut self) -> Option<AgentEvent> {
        self.rx.recv().await
    }

    /// The next event if one is ready. `None` both when none is ready yet
    /// and when the stream has ended: [`EventStream::is_ended`] tells
    /// them apart.
    pub fn try_recv(&mut self) -> Option<AgentEvent> {
        self.rx.try_recv().ok()
    }

    /// True once the stream has ended: every sink is gone (the thread
    /// closed, was killed or stopped with its ractor host) and every event
    /// was read — no event will ever come again. A host that polls with
    /// [`EventStream::try_recv`] (once a frame) reads here that its
    /// thread is gone.
    pub fn is_ended(&self) -> bool {
        self.rx.is_closed() && self.rx.is_empty()
    }

    /// Events waiting to be read.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// True when no event waits.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

impl futures_util::Stream for EventStream {
    type Item = AgentEvent;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<AgentEvent>> {
        self.rx.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> AgentEvent {
        AgentEvent::Text(s.into())
    }

    #[test]
    fn nested_sinks_wrap_once_per_level() {
        let (root, mut stream) = EventSink::channel();
        let child = root.nested(AgentId::new("a1"));
        let grandchild = child.nested(AgentId::new("a2"));
        assert!(grandchild.emit(text("hi")));
        assert_eq!(
            stream.try_recv(),
            Some(AgentEvent::Child(
                AgentId::new("a1"),
                Box::new(AgentEvent::Child(AgentId::new("a2"), Box::new(text("hi"))))
            ))
        );
    }

    #[test]
    fn close_with_runs_last_once_and_blocks_later_emits() {
        let (root, mut stream) = EventSink::channel();
        let child = root.nested(AgentId::new("a1"));
        assert!(child.close_with(|| {
            root.emit(text("terminal"));
        }));
        assert!(!child.emit(text("late")));
        assert!(!child.close_with(|| panic!("must not run twice")));
        assert_eq!(stream.try_recv(), Some(text("terminal")));
        assert_eq!(stream.try_recv(), None);
    }

    #[test]
    fn closing_a_parent_silences_its_children() {
        let (root, mut stream) = EventSink::channel();
        let turn = root.gated();
        let child = turn.nested(AgentId::new("a1"));
        turn.close_with(|| {});
        assert!(!child.emit(text("x")));
        assert!(root.emit(text("y")));
        assert_eq!(stream.try_recv(), Some(text("y")));
    }

    /// A dropped stream is not a closed sink: the emit is a no-op that
    /// counts as emitted (what emitted it was not cut), while a closed sink
    /// still says no.
    #[test]
    fn emit_after_host_dropped_stream_is_a_no_op_not_a_cut() {
        let (root, stream) = EventSink::channel();
        let child = root.nested(AgentId::new("c"));
        drop(stream);
        assert!(root.emit(text("x")));
        assert!(child.emit(text("y")));
        child.close_with(|| {});
        assert!(!child.emit(text("z")));
    }

    #[test]
    fn concurrent_close_and_emit_never_emit_after_terminal() {
        let mut raced = 0;
        for _ in 0..200 {
            let (root, mut stream) = EventSink::channel();
            let child = root.nested(AgentId::new("c"));
            let emitting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let emitter = {
                let child = child.clone();
                let emitting = emitting.clone();
                std::thread::spawn(move || {
                    while child.emit(text("x")) {
                        emitting.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                })
            };
            // The close comes while the other thread emits (spawned, it
            // had not started yet: the close came first every round, and
            // no emit raced it).
            while !emitting.load(std::sync::atomic::Ordering::SeqCst) {
                std::hint::spin_loop();
            }
            child.close_with(|| {
                root.emit(text("terminal"));
            });
            emitter.join().unwrap();
            let mut seen_terminal = false;
            let mut before = 0;
            while let Some(ev) = stream.try_recv() {
                if ev == text("terminal") {
                    seen_terminal = true;
                } else {
                    assert!(
                        !seen_terminal,
                        "a child event came after its terminal event"
                    );
                    before += 1;
                }
            }
            assert!(seen_terminal);
            raced += usize::from(before > 0);
        }
        assert_eq!(raced, 200, "every round emits before its close");
    }
}
