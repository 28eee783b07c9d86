//! Case 3: event forwarding through `EventSink`.
//!
//! The payload is `AgentEvent::Text(String::new())`, which allocates
//! nothing, so every allocation counted is the forwarding's own. The floor
//! is a raw tokio unbounded channel: sending the same event (`raw`), and
//! sending it wrapped by hand in `Child(id, Box<..>)` (`raw_wrapped`, what
//! one nesting level must do at least).

use std::time::{Duration, Instant};

use subagents::prelude::*;
use tokio::sync::mpsc;

/// Events per batch: emitted, then drained, on one thread.
pub(crate) const BATCH: usize = 1024;

/// The event sent.
pub(crate) fn event() -> AgentEvent {
    AgentEvent::Text(String::new())
}

/// Where events go in: a sink of some depth or a raw channel.
pub(crate) enum Path {
    /// `mpsc::UnboundedSender::send(event)`.
    Raw(mpsc::UnboundedSender<AgentEvent>),
    /// `send(Child(id, Box::new(event)))` by hand.
    RawWrapped(mpsc::UnboundedSender<AgentEvent>, AgentId),
    /// `EventSink::emit` on a sink `levels` deep (0: the root).
    Sink(EventSink),
}

/// An input path and its reading end.
pub(crate) struct Pipe {
    pub(crate) path: Path,
    pub(crate) rx: Rx,
}

/// The reading end.
pub(crate) enum Rx {
    Raw(mpsc::UnboundedReceiver<AgentEvent>),
    Stream(EventStream),
}

impl Rx {
    pub(crate) fn try_recv(&mut self) -> Option<AgentEvent> {
        match self {
            Rx::Raw(rx) => rx.try_recv().ok(),
            Rx::Stream(s) => s.try_recv(),
        }
    }

    pub(crate) async fn recv(&mut self) -> Option<AgentEvent> {
        match self {
            Rx::Raw(rx) => rx.recv().await,
            Rx::Stream(s) => s.recv().await,
        }
    }
}

/// The kinds measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Raw,
    RawWrapped,
    /// A sink this many levels below the root.
    Nested(usize),
}

impl Path {
    #[inline]
    pub(crate) fn send(&self, event: AgentEvent) {
        let sent = match self {
            Path::Raw(tx) => tx.send(event).is_ok(),
            Path::RawWrapped(tx, id) => tx
                .send(AgentEvent::Child(id.clone(), Box::new(event)))
                .is_ok(),
            Path::Sink(sink) => sink.emit(event),
        };
        debug_assert!(sent);
    }
}

impl Pipe {
    pub(crate) fn new(kind: Kind) -> Self {
        match kind {
            Kind::Raw => {
                let (tx, rx) = mpsc::unbounded_channel();
                Pipe {
                    path: Path::Raw(tx),
                    rx: Rx::Raw(rx),
                }
            }
            Kind::RawWrapped => {
                let (tx, rx) = mpsc::unbounded_channel();
                Pipe {
                    path: Path::RawWrapped(tx, AgentId::new("agent_1")),
                    rx: Rx::Raw(rx),
                }
            }
            Kind::Nested(levels) => {
                let (root, stream) = EventSink::channel();
                let mut sink = root;
                for level in 0..levels {
                    sink = sink.nested(AgentId::new(format!("agent_{}", level + 1)));
                }
                Pipe {
                    path: Path::Sink(sink),
                    rx: Rx::Stream(stream),
                }
            }
        }
    }

    #[inline]
    pub(crate) fn send(&self, event: AgentEvent) {
        self.path.send(event);
    }

    /// `batches` × (emit `BATCH`, drain `BATCH`), all on this thread.
    pub(crate) fn same_thread(&mut self, batches: usize) -> Duration {
        let start = Instant::now();
        for _ in 0..batches {
            for _ in 0..BATCH {
                self.send(event());
            }
            for _ in 0..BATCH {
                std::hint::black_box(self.rx.try_recv().expect("an event"));
            }
        }
        start.elapsed()
    }
}

/// `n` events from a producer thread to a consumer task on `rt`: the time
/// from the first send to the last event read.
pub(crate) fn cross_thread(rt: &tokio::runtime::Runtime, kind: Kind, n: usize) -> Duration {
    let Pipe { path, mut rx } = Pipe::new(kind);
    let start = Instant::now();
    let producer = std::thread::spawn(move || {
        for _ in 0..n {
            path.send(event());
        }
    });
    rt.block_on(async {
        for _ in 0..n {
            std::hint::black_box(rx.recv().await.expect("an event"));
        }
    });
    let elapsed = start.elapsed();
    producer.join().expect("the producer");
    elapsed
}
