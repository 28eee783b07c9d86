//! Case 2: spawn a child → its first event seen on the parent's stream →
//! the child stopped (its actor terminated).
//!
//! - *bare*: ractor `spawn_linked` under a parent actor, one cast, the child
//!   sends one event on a tokio unbounded channel, `stop_and_wait`.
//! - *agent*: the lowest public layer that does spawn + nested sink +
//!   stop: `AgentBuilder::spawn_into` linked under the same parent with
//!   `sink.nested(id)`, one `Reply` (scripted: a text delta, then the model
//!   hangs), wait for the first `Child(id, ..)` on the stream,
//!   `stop_and_wait`. The turn takes a gate permit and a model stream on
//!   the way.
//! - *hub*: `HubHandle::request` (what `use_agent` calls) on the hub of a
//!   `DelegationBuilder` parent (idle meanwhile), the first
//!   `Child(id, ..)` on the stream, `HubHandle::stop`, then wait for the
//!   child's actor to terminate.

use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use subagents::actors::{DelegatingAgent, HubHandle};
use subagents::messages::ChildRequest;
use subagents::prelude::*;
use tokio::sync::mpsc;

/// A parent that ignores its children's supervision events.
pub(crate) struct Parent;

impl Actor for Parent {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<()>, _args: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        _event: SupervisionEvent,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// A bare child: on its one cast, sends one event to the stream.
pub(crate) struct BareChild;

/// The bare child's state: its id and the parent's stream.
pub(crate) struct BareChildState {
    id: AgentId,
    events: mpsc::UnboundedSender<AgentEvent>,
}

impl Actor for BareChild {
    type Msg = ();
    type State = BareChildState;
    type Arguments = (AgentId, mpsc::UnboundedSender<AgentEvent>);

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        (id, events): Self::Arguments,
    ) -> Result<BareChildState, ActorProcessingErr> {
        Ok(BareChildState { id, events })
    }

    async fn handle(
        &self,
        _myself: ActorRef<()>,
        _message: (),
        state: &mut BareChildState,
    ) -> Result<(), ActorProcessingErr> {
        let _ = state.events.send(AgentEvent::Child(
            state.id.clone(),
            Box::new(AgentEvent::Text("hi".into())),
        ));
        Ok(())
    }
}

async fn spawn_parent() -> ActorRef<()> {
    Actor::spawn(None, Parent, ())
        .await
        .expect("spawn parent")
        .0
}

/// The bare floor.
pub(crate) struct BareCase {
    parent: ActorRef<()>,
    id: AgentId,
    tx: mpsc::UnboundedSender<AgentEvent>,
    rx: mpsc::UnboundedReceiver<AgentEvent>,
}

impl BareCase {
    pub(crate) async fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            parent: spawn_parent().await,
            id: AgentId::new("agent_1"),
            tx,
            rx,
        }
    }

    /// `n` spawn → first event → stopped cycles.
    pub(crate) async fn run(&mut self, n: usize) {
        for _ in 0..n {
            let (child, _) = Actor::spawn_linked(
                None,
                BareChild,
                (self.id.clone(), self.tx.clone()),
                self.parent.get_cell(),
            )
            .await
            .expect("spawn child");
            child.cast(()).expect("child alive");
            let event = self.rx.recv().await.expect("an event");
            assert!(matches!(event, AgentEvent::Child(..)));
            child.stop_and_wait(None, None).await.expect("child stops");
        }
    }

    pub(crate) fn stop(&self) {
        self.parent.stop(None);
    }
}

fn child_model() -> Arc<dyn Model> {
    // A text delta, then the model hangs until the turn is stopped.
    ScriptedModel::new(vec![Reply::new().text("hi").hang()]).shared()
}

async fn first_child_event(stream: &mut EventStream) -> AgentId {
    loop {
        match stream.recv().await.expect("the stream is open") {
            AgentEvent::Child(id, _) => return id,
            _ => continue,
        }
    }
}

fn drain(stream: &mut EventStream) {
    while stream.try_recv().is_some() {}
}

/// Ours at the agent layer.
pub(crate) struct AgentCase {
    parent: ActorRef<()>,
    gate: GateHandle,
    sink: EventSink,
    stream: EventStream,
    id: AgentId,
}

impl AgentCase {
    pub(crate) async fn new() -> Self {
        let gate = GateHandle::spawn(1).await.expect("spawn gate");
        let (sink, stream) = EventSink::channel();
        Self {
            parent: spawn_parent().await,
            gate,
            sink,
            stream,
            id: AgentId::new("agent_1"),
        }
    }

    pub(crate) async fn run(&mut self, n: usize) {
        for _ in 0..n {
            let child = AgentBuilder::new(child_model())
                .id("agent_1")
                .system_prompt("Child\nYou are a sub-agent.")
                .gate(self.gate.clone())
                .depth(1)
                .spawn_into(
                    self.sink.nested(self.id.clone()),
                    Some(self.parent.get_cell()),
                )
                .await
                .expect("spawn agent");
            child.send_user("go").expect("agent alive");
            first_child_event(&mut self.stream).await;
            child
                .actor()
                .stop_and_wait(None, None)
                .await
                .expect("agent stops");
            drain(&mut self.stream);
        }
    }

    pub(crate) fn stop(&self) {
        self.parent.stop(None);
    }
}

/// Ours through the hub.
pub(crate) struct HubCase {
    parent: DelegatingAgent,
    hub: HubHandle,
    stream: EventStream,
}

impl HubCase {
    pub(crate) async fn new() -> Self {
        let gate = GateHandle::spawn(1).await.expect("spawn gate");
        let (parent, stream) = DelegationBuilder::new(child_model())
            .gate(gate)
            .spawn()
            .await
            .expect("spawn parent and hub");
        let hub = parent.hub.clone();
        Self {
            parent,
            hub,
            stream,
        }
    }

    pub(crate) async fn run(&mut self, n: usize) {
        for _ in 0..n {
            let id = self
                .hub
                .request(ChildRequest::new(
                    AgentId::new("parent"),
                    0,
                    ToolUseId::new("call_1_1"),
                    "Child\nYou are a sub-agent.",
                    "go",
                ))
                .await
                .expect("the hub spawns the child");
            let cells: Vec<ActorCell> = self.hub.actor().get_children();
            let seen = first_child_event(&mut self.stream).await;
            assert_eq!(seen, id);
            self.hub.stop(&id).await.expect("the hub stops the child");
            for cell in cells {
                cell.wait(None).await.expect("the child terminates");
            }
            drain(&mut self.stream);
        }
    }

    pub(crate) fn stop(&self) {
        self.parent.shutdown();
    }
}
