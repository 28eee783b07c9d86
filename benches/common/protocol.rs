//! Case 2's second floor: the hub's *protocol* in bare ractor and tokio,
//! with none of the library's work in it.
//!
//! The hub cycle (`spawn.rs`, `HubCase`) is measured against the bare
//! floor — one `spawn_linked`, one cast, one event, `stop_and_wait` — which
//! has neither a hub nor a turn. This floor sends the messages the hub's
//! design sends, in the same order, and nothing else:
//!
//! - the requester casts `Spawn` to a hub actor with a oneshot for the id;
//!   the hub spawns the child linked under itself, casts it its turn,
//!   emits `ChildStarted` and `ChildStatus(Running)`, replies the id;
//! - the child, on its turn, spawns a task (a turn runs outside the
//!   handler) that emits the child's `Text` and then waits for ever;
//! - the requester waits for that first nested event, then `call!`s
//!   `Stop` on the hub; the hub casts `Stop` to the child; the child aborts
//!   its task, emits its `Result`, sends the result into the hub's oneshot
//!   and casts `Finished`; the hub reads the result, emits
//!   `ChildStatus(Stopped)`, answers the stop and stops the child;
//! - the requester waits for the child's actor to end.
//!
//! Five events on one unbounded channel (the nested ones wrapped by hand),
//! two requests to the hub, three casts, one task: no gate, no model, no
//! book, no limits or wall clock, no spans. What it costs is what the
//! protocol costs in ractor; what the hub costs above it is the library.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use subagents::prelude::*;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

type Events = mpsc::UnboundedSender<AgentEvent>;

/// The floor hub's messages.
pub(crate) enum FloorHubMsg {
    Spawn(RpcReplyPort<AgentId>),
    Stop(AgentId, RpcReplyPort<SubAgentStatus>),
    Finished(AgentId),
}

/// The floor child's messages.
pub(crate) enum FloorChildMsg {
    Turn(String),
    Stop,
}

struct FloorHub;

struct Live {
    id: AgentId,
    actor: ActorRef<FloorChildMsg>,
    result: oneshot::Receiver<AgentResult>,
    stop: Option<RpcReplyPort<SubAgentStatus>>,
}

struct FloorHubState {
    events: Events,
    next: u64,
    /// One live child at a time in this case.
    live: Option<Live>,
}

impl Actor for FloorHub {
    type Msg = FloorHubMsg;
    type State = FloorHubState;
    type Arguments = Events;

    async fn pre_start(
        &self,
        _myself: ActorRef<FloorHubMsg>,
        events: Events,
    ) -> Result<FloorHubState, ActorProcessingErr> {
        Ok(FloorHubState {
            events,
            next: 0,
            live: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<FloorHubMsg>,
        message: FloorHubMsg,
        state: &mut FloorHubState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            FloorHubMsg::Spawn(reply) => {
                state.next += 1;
                let id = AgentId::new(format!("agent_{}", state.next));
                let (tx, rx) = oneshot::channel();
                let (actor, _) = Actor::spawn_linked(
                    None,
                    FloorChild,
                    (id.clone(), state.events.clone(), tx, myself.clone()),
                    myself.get_cell(),
                )
                .await?;
                actor.cast(FloorChildMsg::Turn("go".into()))?;
                let _ = state
                    .events
                    .send(AgentEvent::ChildStarted(Box::new(SubAgentInfo {
                        id: id.clone(),
                        parent_tool_use_id: ToolUseId::new("call_1_1"),
                        name: "Child".into(),
                        tools: Vec::new(),
                        background: false,
                        resumed_from: None,
                    })));
                let _ = state
                    .events
                    .send(AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Running));
                state.live = Some(Live {
                    id: id.clone(),
                    actor,
                    result: rx,
                    stop: None,
                });
                let _ = reply.send(id);
            }
            FloorHubMsg::Stop(id, reply) => {
                if let Some(live) = state.live.as_mut().filter(|l| l.id == id) {
                    live.stop = Some(reply);
                    live.actor.cast(FloorChildMsg::Stop)?;
                }
            }
            FloorHubMsg::Finished(id) => {
                if let Some(mut live) = state.live.take() {
                    let _ = live.result.try_recv();
                    let _ = state
                        .events
                        .send(AgentEvent::ChildStatus(id, SubAgentStatus::Stopped));
                    if let Some(reply) = live.stop.take() {
                        let _ = reply.send(SubAgentStatus::Stopped);
                    }
                    live.actor.stop(None);
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<FloorHubMsg>,
        _event: SupervisionEvent,
        _state: &mut FloorHubState,
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

struct FloorChild;

struct FloorChildState {
    id: AgentId,
    events: Events,
    result: Option<oneshot::Sender<AgentResult>>,
    hub: ActorRef<FloorHubMsg>,
    task: Option<JoinHandle<()>>,
}

impl Actor for FloorChild {
    type Msg = FloorChildMsg;
    type State = FloorChildState;
    type Arguments = (
        AgentId,
        Events,
        oneshot::Sender<AgentResult>,
        ActorRef<FloorHubMsg>,
    );

    async fn pre_start(
        &self,
        _myself: ActorRef<FloorChildMsg>,
        (id, events, result, hub): Self::Arguments,
    ) -> Result<FloorChildState, ActorProcessingErr> {
        Ok(FloorChildState {
            id,
            events,
            result: Some(result),
            hub,
            task: None,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<FloorChildMsg>,
        message: FloorChildMsg,
        state: &mut FloorChildState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            FloorChildMsg::Turn(_input) => {
                let (id, events) = (state.id.clone(), state.events.clone());
                state.task = Some(tokio::spawn(async move {
                    let _ = events.send(AgentEvent::Child(
                        id,
                        Box::new(AgentEvent::Text("hi".into())),
                    ));
                    std::future::pending::<()>().await;
                }));
            }
            FloorChildMsg::Stop => {
                if let Some(task) = state.task.take() {
                    task.abort();
                }
                let result = AgentResult {
                    text: "Stopped.".into(),
                    outcome: Outcome::Stopped,
                    model_calls: 0,
                    tool_calls: 0,
                    usage: Default::default(),
                    children_usage: Default::default(),
                    elapsed: std::time::Duration::ZERO,
                };
                let _ = state.events.send(AgentEvent::Child(
                    state.id.clone(),
                    Box::new(AgentEvent::Result(Box::new(result.clone()))),
                ));
                if let Some(tx) = state.result.take() {
                    let _ = tx.send(result);
                }
                state.hub.cast(FloorHubMsg::Finished(state.id.clone()))?;
            }
        }
        Ok(())
    }
}

/// The protocol floor of case 2.
pub(crate) struct ProtocolCase {
    hub: ActorRef<FloorHubMsg>,
    rx: mpsc::UnboundedReceiver<AgentEvent>,
}

impl ProtocolCase {
    pub(crate) async fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (hub, _) = Actor::spawn(None, FloorHub, tx)
            .await
            .expect("spawn the floor hub");
        Self { hub, rx }
    }

    /// `n` request → first nested event → stopped cycles.
    pub(crate) async fn run(&mut self, n: usize) {
        for _ in 0..n {
            let (tx, rx) = oneshot::channel();
            self.hub
                .cast(FloorHubMsg::Spawn(tx.into()))
                .expect("the floor hub is alive");
            let id = rx.await.expect("the floor hub spawns the child");
            let cells = self.hub.get_cell().get_children();
            loop {
                match self.rx.recv().await.expect("the stream is open") {
                    AgentEvent::Child(seen, _) => {
                        assert_eq!(seen, id);
                        break;
                    }
                    _ => continue,
                }
            }
            let stopped = ractor::call!(self.hub, |reply| FloorHubMsg::Stop(id.clone(), reply))
                .expect("the floor hub answers");
            assert_eq!(stopped, SubAgentStatus::Stopped);
            for cell in cells {
                cell.wait(None).await.expect("the child terminates");
            }
            while self.rx.try_recv().is_ok() {}
        }
    }

    pub(crate) fn stop(&self) {
        self.hub.stop(None);
    }
}
