//! A parent agent with its hub and gate, as a
//! [`DelegationBuilder`](crate::DelegationBuilder) spawned them.

use crate::agent::AgentHandle;
use crate::gate::GateHandle;
use crate::hub::HubHandle;

/// A parent agent with its hub and gate.
///
/// A handle, not an owner: dropped (every clone) without
/// [`DelegatingAgent::shutdown`], the parent, hub, children and a gate
/// the builder made run on, and the event stream never ends. Shut it
/// down, or link it under an actor of yours (`spawn_into`) whose stop
/// stops it.
#[derive(Debug, Clone)]
pub struct DelegatingAgent {
    /// The parent.
    pub agent: AgentHandle,
    /// Its children.
    pub hub: HubHandle,
    /// The gate parent and children share.
    pub gate: GateHandle,
    /// The builder spawned the gate (none was given), on this runtime:
    /// it goes with them, stopped from there once they have (a shutdown
    /// called from a thread outside the runtime waits for them too).
    pub(super) owns_gate: Option<tokio::runtime::Handle>,
    /// The parent has `use_agent` (see [`DelegatingAgent::offers_use_agent`]).
    pub(super) use_agent: bool,
}

impl DelegatingAgent {
    /// Stops the parent (its turn ends as stopped), the hub (every child
    /// stops) and the gate if the builder made it (one the host gave, or
    /// its registry's, runs on). Parent and hub are drained ([`AgentHandle::shutdown`]): what
    /// reached them first (a turn, an approval answer) is handled; a turn
    /// sent after comes back. The gate stops once both have: stopped at
    /// once, a call waiting for a permit read "the model gate is closed"
    /// and its turn ended `failed` before the hub's stop reached it.
    pub fn shutdown(&self) {
        self.agent.shutdown();
        if self.hub.actor().drain().is_err() {
            self.hub.actor().stop(None);
        }
        // No wake comes from an agent shut down: the run spans kept for
        // them go (held, with the turns that started them, for as long as
        // the host kept this handle). Not at the hub's own stop: a thread
        // goes on delivering wakes after its hub stopped, each following
        // from its child's run.
        self.hub.drop_run_spans();
        if let Some(runtime) = &self.owns_gate {
            let gate = self.gate.actor().clone();
            let (agent, hub) = (self.agent.actor().clone(), self.hub.actor().clone());
            // On the actors' runtime, not the caller's: called from a
            // thread outside it (a UI's, a `Drop` there) the gate stopped
            // at once, and a call waiting for a permit ended `failed`. A
            // runtime shut down drops the task, and the gate with it.
            runtime.spawn(async move {
                agent.wait(None).await.ok();
                hub.wait(None).await.ok();
                gate.stop(None);
            });
        }
    }

    /// Whether the parent has the `use_agent` tool: what the runtime
    /// tells it (a wake's marker for the rest of a long answer, the
    /// restart's note on resuming) names the tool only then.
    pub fn offers_use_agent(&self) -> bool {
        self.use_agent
    }

    /// Like [`DelegatingAgent::shutdown`], returning once they have
    /// stopped. None of them awaits long work in a handler, so this is
    /// prompt — but for a child on another node, whose stop waits for its
    /// node's word up to a grace of 30 s.
    ///
    /// The stop is sent when this is called, not when first polled (as a
    /// thread's `close_and_wait`): a future dropped unpolled (a `select!`
    /// that took another branch) still stopped them.
    pub fn shutdown_and_wait(
        &self,
    ) -> impl std::future::Future<Output = ()> + Send + 'static + use<> {
        self.shutdown();
        let agent = self.agent.actor().clone();
        let hub = self.hub.actor().clone();
        let gate = self.owns_gate.is_some().then(|| self.gate.actor().clone());
        let spans = self.hub.clone();
        async move {
            agent.wait(None).await.ok();
            hub.wait(None).await.ok();
            // And any a child finishing as they stopped kept.
            spans.drop_run_spans();
            if let Some(gate) = gate {
                gate.wait(None).await.ok();
            }
        }
    }
}
