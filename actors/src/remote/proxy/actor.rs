//! The proxy actor: moves the agent's messages to its state (`proxy.rs`),
//! and keeps the probe's view of the remote turn.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use subagents_messages::AgentEvent;
use subagents_messages::remote::RunRequest;

use super::{ProxyState, RemoteAgent};
use crate::agent::sealed::AgentInternal;
use crate::agent::{AgentMsg, Shared};
use subagents_messages::Outcome;

/// Keeps the probe's view of the turn (what `status` shows) up to date,
/// and its conversation as the node's turn writes it, folded from its
/// events: each call the answer it came with (a call after another's
/// result, an answer of its own — the same calls and results, answered
/// in order), each result its tool message. What the thread saves after
/// each step, and a restart resumes from: it held the task alone until
/// the run's end, and a resume ran every tool call again.
pub(super) fn progress(shared: &Shared, event: &AgentEvent) {
    progress_held(&mut crate::agent::turn_state_lock(shared), event);
}

/// [`progress`], the turn's lock held by the caller.
pub(super) fn progress_held(state: &mut crate::agent::TurnState, event: &AgentEvent) {
    use crate::agent::Activity;
    use subagents_messages::{ChatMessage, ToolCall};
    match event {
        // Its node read a message (its event's text) where the event
        // stands: after the answer before it — one with no call reaches
        // the conversation here, else only with its first call, and the
        // answers either side were one — and before the next. (Folded as
        // the next answer began, it landed before the answer that never
        // read it.)
        AgentEvent::Steered(text) => {
            let answer = std::mem::take(&mut state.streaming);
            if !answer.is_empty() {
                state
                    .history
                    .push(ChatMessage::assistant(answer, Vec::new()));
            }
            state
                .history
                .push(ChatMessage::user(crate::agent::steering_text(text)));
        }
        AgentEvent::ToolStarted(started) => {
            state.doing(Activity::InTool(started.name.clone()));
            let text = std::mem::take(&mut state.streaming);
            let call = ToolCall {
                id: started.tool_use_id.clone(),
                name: started.name.clone(),
                arguments: started.arguments.clone(),
                extra_content: None,
            };
            state.history.push(ChatMessage::assistant(text, vec![call]));
        }
        AgentEvent::ApprovalRequested(request) => {
            state.doing(Activity::AwaitingApproval(request.tool_name.clone()));
        }
        // Answered: back in the tool that asked, as a local child is at
        // once (it said `awaiting_approval` for as long as the approved
        // tool ran, `for_s` counted from the request).
        AgentEvent::ApprovalResolved { .. } => {
            if let Activity::AwaitingApproval(tool) = &state.activity {
                let tool = tool.clone();
                state.doing(Activity::InTool(tool));
            }
        }
        AgentEvent::ToolResult(result) => {
            state.progress.tool_calls += 1;
            state.progress.tools_used.push(result.name.clone());
            state.doing(Activity::Thinking);
            let message = ChatMessage::tool(result.tool_use_id.clone(), result.output.clone());
            state.history.push(message);
        }
        // The last answer's text, as a local turn keeps it (it was every
        // answer's appended; read by no path yet: a remote run's partial
        // and stopped results are its node's words).
        AgentEvent::Text(text) => {
            if state.streaming.is_empty() {
                state.progress.last_text.clear();
            }
            state.progress.last_text.push_str(text);
            state.streaming.push_str(text);
        }
        // Shown, its end's report (`Ended`) not yet read: kept where a
        // hub finds it if the proxy dies first, as a local turn closed by
        // its task keeps its result (`Probe::kept_result`) — killed in
        // between, the child ended `failed`, its answer thrown away.
        AgentEvent::Result(result) => {
            state.kept_end = Some(Box::new(((**result).clone(), Default::default())));
        }
        _ => {}
    }
}

impl Actor for RemoteAgent {
    type Msg = AgentMsg;
    type State = ProxyState;
    type Arguments = ProxyState;

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        args: ProxyState,
    ) -> Result<ProxyState, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ActorRef<AgentMsg>,
        message: AgentMsg,
        state: &mut ProxyState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AgentMsg::Turn { turn, reply } => state.waiting.push_back((turn, reply)),
            AgentMsg::Stop => {
                // Its node ends it; if it has not within the grace (a
                // report lost on the way holds the turn open), it ends
                // here.
                if let Some(key) = state.stop() {
                    let timer = myself.send_after(crate::defaults::REMOTE_STOP_GRACE, move || {
                        AgentMsg::Internal(AgentInternal::StopOverdue(key))
                    });
                    state.keep_grace(timer);
                }
            }
            AgentMsg::Internal(AgentInternal::StopOverdue(key)) => state.stop_overdue(key),
            AgentMsg::ResolveApproval {
                id,
                decision,
                reply,
            } => state.resolve_approval(id, decision, reply),
            AgentMsg::Steer {
                text,
                asking,
                reply,
            } => state.steer(text, asking, reply),
            AgentMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            AgentMsg::Internal(AgentInternal::Report(report)) => {
                // A report missing while later ones arrived: its node
                // has the grace to send it, then the run fails here.
                if let Some((key, missing)) = state.report(report) {
                    let timer = myself.send_after(crate::defaults::REMOTE_STOP_GRACE, move || {
                        AgentMsg::Internal(AgentInternal::GapOverdue { key, missing })
                    });
                    state.watch_gap(missing, timer);
                }
                // Its `Result` went by: its `Ended` has the grace (ended
                // then with that result, as a run past its bound is).
                if let Some(key) = state.result_unended() {
                    let timer = myself.send_after(crate::defaults::REMOTE_STOP_GRACE, move || {
                        AgentMsg::Internal(AgentInternal::RunOverdue(key))
                    });
                    state.keep_grace(timer);
                }
            }
            AgentMsg::Internal(AgentInternal::GapOverdue { key, missing }) => {
                state.gap_overdue(key, missing)
            }
            AgentMsg::Internal(AgentInternal::Lost(why)) => state.lost(&why),
            AgentMsg::Internal(AgentInternal::RunOverdue(key)) => state.run_overdue(key),
            // A local agent's own messages: a proxy runs no turn task.
            AgentMsg::Internal(
                AgentInternal::ApprovalPending { .. } | AgentInternal::TurnFinished { .. },
            ) => {}
        }
        state.start_next(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AgentMsg>,
        state: &mut ProxyState,
    ) -> Result<(), ActorProcessingErr> {
        // A proxy that goes away ends its turn: asked to stop on its node,
        // closed here (nothing runs unowned).
        if let Some(key) = state.run.as_ref().map(|r| r.key) {
            let _ = state.link.request(key, RunRequest::Stop);
            let text = "stopped: the agent that stood for it on this node went away".to_owned();
            state.close(&text, Outcome::Stopped);
        }
        Ok(())
    }
}
