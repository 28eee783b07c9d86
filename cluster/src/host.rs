//! The node host: an actor in its node's `pg` group that runs children
//! for other nodes — each `Start` becomes a run of the node's
//! [`NodeRunner`], whose reports go to the asking node's inbox — and
//! answers the heartbeat with its live count. Its handler never waits:
//! a run goes on in the runner's task.

use std::collections::HashMap;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use subagents_actors::{NodeRunner, RunHandle};
use subagents_messages::codec::Wire;
use subagents_messages::remote::RunReport;

use crate::wire::{HostMsg, InboxMsg, decode_request, decode_start, host_group, inbox_group};

/// The node host actor.
pub(crate) struct NodeHost;

/// Its state (and arguments).
pub(crate) struct HostState {
    /// This node's name (its `pg` group).
    pub(crate) node: String,
    pub(crate) runner: NodeRunner,
    /// Runs started here, by (asking node, its key).
    pub(crate) runs: HashMap<(String, u64), RunHandle>,
}

impl Actor for NodeHost {
    type Msg = HostMsg;
    type State = HostState;
    type Arguments = HostState;

    async fn pre_start(
        &self,
        myself: ActorRef<HostMsg>,
        state: HostState,
    ) -> Result<HostState, ActorProcessingErr> {
        ractor::pg::join(host_group(&state.node), vec![myself.get_cell()]);
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<HostMsg>,
        message: HostMsg,
        state: &mut HostState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HostMsg::Start(bytes) => match decode_start(&bytes) {
                Ok(start) => {
                    let key = start.spec.key;
                    let group = inbox_group(&start.reply_to);
                    let handle = state
                        .runner
                        .start(start.spec, move |report| send_report(&group, report));
                    state.runs.retain(|_, run| !run.ended());
                    state.runs.insert((start.reply_to, key), handle);
                }
                Err(e) => tracing::warn!(error = %e, "a start this node could not read"),
            },
            HostMsg::Request(bytes) => match decode_request(&bytes) {
                Ok((from, key, request)) => {
                    if let Some(run) = state.runs.get(&(from, key)) {
                        run.request(request);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "a request this node could not read"),
            },
            HostMsg::Live(reply) => {
                let _ = reply.send(state.runner.live() as u64);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<HostMsg>,
        state: &mut HostState,
    ) -> Result<(), ActorProcessingErr> {
        state.runner.stop_all();
        Ok(())
    }
}

/// Sends a report to the inbox of the node that asked; dropped (logged)
/// when that node is gone — its run goes on to its end here (detached).
fn send_report(group: &str, report: RunReport) {
    let bytes = match report.to_wire() {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!(error = %e, "a report that could not be encoded");
            return;
        }
    };
    let Some(inbox) = ractor::pg::get_members(&group.to_owned())
        .into_iter()
        .next()
    else {
        tracing::debug!(group, "no inbox for a report: its node is gone");
        return;
    };
    let inbox: ActorRef<InboxMsg> = inbox.into();
    let _ = inbox.cast(InboxMsg::Report(bytes));
}
