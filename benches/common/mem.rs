//! Case 4: resident memory. Each measurement wants a fresh process (the
//! report re-runs itself per measurement): freed memory of an earlier case
//! would otherwise be reused and hide the growth.
//!
//! RSS is read from `/proc/self/statm` (resident pages × 4 KiB, x86-64).

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use subagents::actors::DelegationBuilder;
use subagents::actors::{AgentHandle, DelegatingAgent};
use subagents::messages::ChildRequest;
use subagents::prelude::*;

const PAGE: u64 = 4096;

/// Resident set size now, in bytes.
pub(crate) fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let resident: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm's resident field");
    resident * PAGE
}

/// What a memory measurement spawns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemKind {
    /// Idle bare ractor actors (unit state).
    BareActors,
    /// Idle `Agent` actors, each with its own config and nested sink.
    Agents,
    /// Threads: a parent with hub and gate, and 3 children waiting on a
    /// model that never answers (one holds the gate, two queue at it).
    Threads,
    /// The floor of `Threads`: 6 bare actors per thread.
    BareThreads,
    /// What the design itself holds per thread, in bare ractor and tokio:
    /// 6 bare actors, a task per child waiting for ever (a turn runs in a
    /// task), and one event channel the children wrote to (drained).
    ProtocolThreads,
    /// `Threads`, all sharing one gate (`DelegationBuilder::gate`): one
    /// model's weights serve every thread, so one gate orders them all.
    SharedGateThreads,
    /// Idle gates (`GateHandle::spawn(1)`).
    Gates,
    /// Threads without children: parent, hub and gate, idle.
    Parents,
}

impl MemKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            MemKind::BareActors => "bare-actors",
            MemKind::Agents => "agents",
            MemKind::Threads => "threads",
            MemKind::BareThreads => "bare-threads",
            MemKind::ProtocolThreads => "protocol-threads",
            MemKind::SharedGateThreads => "shared-gate-threads",
            MemKind::Gates => "gates",
            MemKind::Parents => "parents",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Self> {
        [
            MemKind::BareActors,
            MemKind::Agents,
            MemKind::Threads,
            MemKind::BareThreads,
            MemKind::ProtocolThreads,
            MemKind::SharedGateThreads,
            MemKind::Gates,
            MemKind::Parents,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// An idle actor.
pub(crate) struct Idle;

impl Actor for Idle {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<()>, _args: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

async fn bare_actors(n: usize) -> Vec<ActorRef<()>> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        all.push(Actor::spawn(None, Idle, ()).await.expect("spawn").0);
    }
    all
}

/// Everything a measurement keeps alive until RSS is read.
pub(crate) enum Kept {
    Bare(Vec<ActorRef<()>>),
    Gates(Vec<GateHandle>),
    Agents(Vec<AgentHandle>, EventStream),
    Threads(Vec<(DelegatingAgent, EventStream)>),
    Protocol(Vec<ProtocolThread>),
}

/// One thread of [`MemKind::ProtocolThreads`].
pub(crate) struct ProtocolThread {
    actors: Vec<ActorRef<()>>,
    turns: Vec<tokio::task::JoinHandle<()>>,
    events: (
        tokio::sync::mpsc::UnboundedSender<AgentEvent>,
        tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
    ),
}

async fn protocol_thread() -> ProtocolThread {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let actors = bare_actors(6).await;
    let turns = (1..=3)
        .map(|c| {
            let tx = tx.clone();
            let id = AgentId::new(format!("agent_{c}"));
            tokio::spawn(async move {
                let _ = tx.send(AgentEvent::Child(
                    id,
                    Box::new(AgentEvent::Text("…".into())),
                ));
                std::future::pending::<()>().await;
            })
        })
        .collect();
    tokio::task::yield_now().await;
    while rx.try_recv().is_ok() {}
    ProtocolThread {
        actors,
        turns,
        events: (tx, rx),
    }
}

/// Spawns `n` of `kind` (agents, actors or threads) and returns them.
pub(crate) async fn spawn_many(kind: MemKind, n: usize) -> Kept {
    match kind {
        MemKind::BareActors => Kept::Bare(bare_actors(n).await),
        MemKind::BareThreads => Kept::Bare(bare_actors(6 * n).await),
        MemKind::ProtocolThreads => {
            let mut all = Vec::with_capacity(n);
            for _ in 0..n {
                all.push(protocol_thread().await);
            }
            Kept::Protocol(all)
        }
        MemKind::Gates => {
            let mut all = Vec::with_capacity(n);
            for _ in 0..n {
                all.push(GateHandle::spawn(1).await.expect("spawn gate"));
            }
            Kept::Gates(all)
        }
        MemKind::Agents => {
            let model = ScriptedModel::new(vec![]).shared();
            let gate = GateHandle::spawn(1).await.expect("spawn gate");
            let (root, stream) = EventSink::channel();
            let mut all = Vec::with_capacity(n);
            for i in 0..n {
                let id = AgentId::new(format!("agent_{i}"));
                let sink = root.nested(id.clone());
                all.push(
                    AgentBuilder::new(model.clone())
                        .id(id)
                        .system_prompt("Child\nYou are a sub-agent.")
                        .gate(gate.clone())
                        .depth(1)
                        .spawn_into(sink, None)
                        .await
                        .expect("spawn agent"),
                );
            }
            Kept::Agents(all, stream)
        }
        MemKind::Threads | MemKind::SharedGateThreads | MemKind::Parents => {
            let children = if kind == MemKind::Parents { 0 } else { 3 };
            let model = ScriptedModel::new(vec![Reply::new().hang()]).shared();
            let shared = match kind {
                MemKind::SharedGateThreads => Some(GateHandle::spawn(1).await.expect("spawn gate")),
                _ => None,
            };
            let mut all = Vec::with_capacity(n);
            for _ in 0..n {
                let mut builder =
                    DelegationBuilder::new(model.clone()).system_prompt("You are the parent.");
                if let Some(gate) = &shared {
                    builder = builder.gate(gate.clone());
                }
                let (parent, mut stream) = builder.spawn().await.expect("spawn a thread");
                for c in 1..=children {
                    parent
                        .hub
                        .request(ChildRequest {
                            background: true,
                            ..ChildRequest::new(
                                parent.agent.id().clone(),
                                0,
                                ToolUseId::new(format!("call_1_{c}")),
                                format!("Child {c}\nYou are a sub-agent."),
                                "work",
                            )
                        })
                        .await
                        .expect("a child starts");
                }
                while stream.try_recv().is_some() {}
                all.push((parent, stream));
            }
            Kept::Threads(all)
        }
    }
}

/// In a fresh process: RSS growth in bytes from spawning `n` of `kind`,
/// after a warm-up of the same kind (lazy statics, the runtime's pools).
pub(crate) fn measure(kind: MemKind, n: usize) -> u64 {
    let rt = super::runtime(super::Flavor::Multi);
    rt.block_on(async {
        let warm = spawn_many(kind, 16).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(warm);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let before = rss_bytes();
        let kept = spawn_many(kind, n).await;
        // Let every child reach its steady state (waiting at the gate or
        // in the model call).
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Kept::Threads(threads) = &kept {
            match kind {
                MemKind::Threads => {
                    let mut queued = 0;
                    for (parent, _) in threads {
                        queued += parent.gate.snapshot().await.expect("gate").queued;
                    }
                    assert_eq!(queued, 2 * threads.len(), "two children queue per gate");
                }
                MemKind::SharedGateThreads => {
                    let gate = &threads[0].0.gate;
                    let queued = gate.snapshot().await.expect("gate").queued;
                    // The warm-up's threads hold the gate: all of these queue.
                    assert!(queued >= 3 * threads.len() - 1, "every child queues");
                }
                _ => {}
            }
        }
        let after = rss_bytes();
        std::hint::black_box(&kept);
        after.saturating_sub(before)
    })
}
