//! The hub actor: moves messages to the lifecycle (`lifecycle.rs`) and
//! overrides ractor's supervision so a child's death fails only that child.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::hub::msg::HubMsg;
use crate::hub::msg::sealed::HubInternal;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, ActorStatus, SupervisionEvent};
use subagents_messages::{AgentId, SubAgentStatus};

use crate::agent::KillHook;
use crate::hub::book::Book;
use crate::hub::config::HubConfig;
use crate::hub::error::Refused;
use crate::hub::lifecycle::HubState;
use crate::hub::slots::Slots;
use crate::hub::steer::Message;
use crate::hub::steer::cut_asker;
use crate::hub::stop::DetachOutcome;
use crate::hub::stop::StopReply;
use crate::sink::EventSink;

/// The hub actor.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Hub;

/// Arguments of [`Hub`].
pub(crate) struct HubArguments {
    pub(crate) config: Arc<HubConfig>,
    pub(crate) parent: AgentId,
    pub(crate) parent_sink: EventSink,
    pub(crate) book: Book,
    /// The hub's supervisor (a thread's), if any.
    pub(crate) supervisor: Option<ActorCell>,
    /// Where the hub leaves its [`kill_hook`] for its parent agent to
    /// share (one `Arc` per hub, not one more per thread).
    pub(crate) hook: Arc<std::sync::OnceLock<KillHook>>,
    /// The archive as its handles hold it: let go when the hub stops.
    pub(crate) archive: Option<Arc<crate::hub::config::ArchiveSlot>>,
}

/// What an agent of a hub's tree runs when it is killed mid-turn (its
/// [`crate::agent::AgentConfig::on_killed`]): if the hub died without its
/// stop, or the thread it belongs to did, every child's turn of the hub
/// ends now, deepest first then by number, before the killed agent's own.
/// ractor kills a dead actor's children in its child map's order (a
/// `HashMap` with a random seed), and each ended its turn on the stream as
/// its task ran. A hub stopping (its `post_stop`) under a live thread
/// stops them itself; a thread killed then (its status `Stopped`) has the
/// hook end them, and the hub's own finish of each records `failed` (a
/// finish whose close the hook took, `HubState::finish_child`).
pub(crate) fn kill_hook(hub: ActorCell, book: Book, supervisor: Option<ActorCell>) -> KillHook {
    Arc::new(move || {
        let dead = |cell: &ActorCell| cell.get_status() == ActorStatus::Stopped;
        if dead(&hub) || supervisor.as_ref().is_some_and(dead) {
            book.end_turns_as_killed();
        }
    })
}

impl Actor for Hub {
    type Msg = HubMsg;
    type State = HubState;
    type Arguments = HubArguments;

    async fn pre_start(
        &self,
        myself: ActorRef<HubMsg>,
        args: HubArguments,
    ) -> Result<HubState, ActorProcessingErr> {
        let mut sinks = FxHashMap::default();
        sinks.insert(args.parent.clone(), args.parent_sink);
        let on_child_killed = kill_hook(myself.get_cell(), args.book.clone(), args.supervisor);
        let _ = args.hook.set(on_child_killed.clone());
        Ok(HubState {
            on_child_killed,
            slots: Slots::new(args.config.max_live, args.parent.clone()),
            parent: args.parent,
            config: args.config,
            children: FxHashMap::default(),
            actors: FxHashMap::default(),
            sinks,
            book: args.book,
            requested: 0,
            finished: 0,
            archive: args.archive,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<HubMsg>,
        message: HubMsg,
        state: &mut HubState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HubMsg::Spawn {
                request,
                span,
                call,
                reply,
            } => {
                let stop = request.stop_if_abandoned;
                // Boxed, as `send` below: the spawn path is the hub's
                // largest future, and inline it would size the handler
                // future ractor keeps (boxed) for every hub's whole life.
                let spawned = Box::pin(state.spawn_child(&myself, request, span, call, None)).await;
                let made = spawned.as_ref().ok().cloned();
                if reply.send(spawned).is_err()
                    && let Some(id) = made
                {
                    // Nobody learnt its id: nobody will wait on it.
                    Box::pin(state.abandon(&myself, &id, stop)).await;
                }
            }
            HubMsg::Internal(HubInternal::Abandoned { id, stop }) => {
                Box::pin(state.abandon(&myself, &id, stop)).await
            }
            HubMsg::Subscribe { id, reply } => match state.book.get(&id) {
                Some(envelope) if envelope.status.is_terminal() => {
                    let _ = reply.send(envelope);
                }
                Some(_) => {
                    // A wait that gave up (its timer ran out — at once,
                    // with an inline wait of zero — or its call was cut)
                    // leaves a closed port: kept, each poll of a running
                    // child held one to its end, which cloned the
                    // envelope for every one inside this handler.
                    if let Some(child) = state.children.get_mut(&id) {
                        child.subscribers.retain(|r| !r.is_closed());
                        if !reply.is_closed() {
                            child.subscribers.push(reply);
                        }
                    }
                }
                None => {}
            },
            HubMsg::Internal(HubInternal::Ping(reply)) => {
                let _ = reply.send(());
            }
            #[cfg(test)]
            HubMsg::Internal(HubInternal::Subscribers { id, reply }) => {
                let held = state.children.get(&id).map_or(0, |c| c.subscribers.len());
                let _ = reply.send(held);
            }
            HubMsg::Internal(HubInternal::Claimed { id }) => {
                if let Some(envelope) = state.book.get(&id) {
                    state.tell_observers(&envelope);
                }
            }
            HubMsg::Internal(HubInternal::Cascade { id }) => {
                // A child whose turn is over — its answer given, its own
                // children still stopping — is finished as a stop sees it
                // (a stop after its turn ended changes nothing): to the
                // background, or its answer reached nobody.
                if state.book.is_terminal(&id) || state.turn_over(&id) {
                    let _ = state.detach(&id);
                } else {
                    state.prefer_stop(&id);
                    state.after_end(&id, |a| a.release = true);
                    Box::pin(state.stop(&myself, &id, StopReply::One(None))).await
                }
            }
            HubMsg::Internal(HubInternal::Detach {
                id,
                if_queued,
                reply,
            }) => {
                let queued = state.book.status(&id) == Some(SubAgentStatus::Queued);
                let outcome = if if_queued && !queued {
                    DetachOutcome::Started
                } else {
                    state.detach(&id)
                };
                if let Some(reply) = reply {
                    let _ = reply.send(outcome);
                }
            }
            // A resumed child's newest run, as a message reaches it: a stop
            // of the id the model knows stopped the old, ended run and let
            // the new one run on.
            HubMsg::Stop { id, asking, reply } => {
                let Some(reply) = unless_cut(asking.as_deref(), reply) else {
                    return Ok(());
                };
                let Some((id, reply)) = own_newest_run(state, id, reply) else {
                    return Ok(());
                };
                state.stop_by_name(&id);
                Box::pin(state.stop(&myself, &id, StopReply::One(reply))).await
            }
            // Rare, and their futures are among the largest: boxed.
            HubMsg::Interrupt { id, asking, reply } => {
                let Some(reply) = unless_cut(asking.as_deref(), reply) else {
                    return Ok(());
                };
                let Some((id, reply)) = own_newest_run(state, id, reply) else {
                    return Ok(());
                };
                Box::pin(state.interrupt(&myself, &id, StopReply::One(reply))).await
            }
            HubMsg::StopAll { reply } => Box::pin(state.stop_all(&myself, reply)).await,
            HubMsg::Internal(HubInternal::StopOrphan { id }) => {
                if !state.book.is_terminal(&id) {
                    state.prefer_stop(&id);
                    Box::pin(state.stop(&myself, &id, StopReply::One(None))).await;
                }
            }
            HubMsg::Internal(HubInternal::ChildFinished { id }) => {
                let next = state.child_finished(&myself, &id);
                state.refill(&myself, next).await;
            }
            HubMsg::ResolveApproval {
                id,
                decision,
                reply,
            } => state.resolve_approval(id, decision, reply),
            HubMsg::Send {
                id,
                text,
                call,
                asking,
                span,
                reply,
            } => {
                let message = Message {
                    text,
                    call,
                    asking,
                    span,
                };
                Box::pin(state.send(&myself, &id, message, reply)).await
            }
            HubMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
        }
        Ok(())
    }

    /// Overrides ractor's default, which would stop the hub when any child
    /// stops. A child that dies before reporting its result fails (or, if
    /// it was being stopped, stops); its slot frees and the next queued
    /// child starts.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<HubMsg>,
        event: SupervisionEvent,
        state: &mut HubState,
    ) -> Result<(), ActorProcessingErr> {
        let cell_id = match &event {
            // An actor ending is stopping or stopped when ractor tells its
            // supervisor: one still running is a death written by whoever
            // holds a cell (`ActorCell::notify_supervisor` is public), and
            // ends nothing.
            SupervisionEvent::ActorFailed(cell, _)
            | SupervisionEvent::ActorTerminated(cell, _, _)
                if matches!(
                    cell.get_status(),
                    ActorStatus::Stopping | ActorStatus::Stopped
                ) =>
            {
                cell.get_id()
            }
            _ => return Ok(()),
        };
        // Only a child still running ends here: a finished child's result
        // came first, by its own message (and no sentence is written for
        // it).
        let Some(id) = state.actors.remove(&cell_id) else {
            return Ok(());
        };
        let error = death_sentence(&event);
        // The event may carry the dead child's state: dropping it first
        // lets the child end its turn on the stream (its call in flight
        // answered, its `Result`) before its terminal status closes it.
        drop(event);
        state.prefer_stop_if_closing(&myself, &id);
        // Its turn had ended by its task, the end's notice not yet read
        // (killed in that instant; the drop above sent its result), or a
        // remote turn's `Result` had come and not its `Ended`: it ends
        // with that result, never from its termination — it ended
        // `failed`, its answer on the stream thrown away.
        let kept = (state.children.get_mut(&id))
            .and_then(|c| c.last_result.as_mut())
            .and_then(|last| last.try_recv().ok())
            .or_else(|| state.book.kept_result(&id));
        let stopping = state.children.get(&id).and_then(|c| c.stopping);
        let (status, result, error) = match (kept, stopping) {
            (Some(result), _) => state.ending(&id, Some(result)),
            (None, Some(why)) => (state.stop_status(&id), None, Some(why.to_owned())),
            (None, None) => (SubAgentStatus::Failed, None, Some(error)),
        };
        let next = state.finish_and_orphan(&myself, &id, status, result, error);
        // Boxed although `refill` boxes its start: unboxed, this handler's
        // future grows, and every child's termination (this event comes
        // for each) paid 400 instructions more for its copies than the box
        // costs (docs/performance.md).
        Box::pin(state.refill(&myself, next)).await;
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<HubMsg>,
        state: &mut HubState,
    ) -> Result<(), ActorProcessingErr> {
        // ractor says `Stopping` from here on: a thread that reads it
        // must not take this hub for a dead one and end its children as
        // killed under this stop (`HubHandle::fail_unfinished`).
        let _stopping = state.book.stopping_itself();
        state.stop_all_now().await;
        // A closed thread's handles keep no store open. Here, not only in
        // the state's drop (which a kill reaches): after a stop ractor
        // hands the state to the supervisor in the termination event, so
        // its drop may come after the host saw the thread closed.
        if let Some(archive) = &state.archive {
            archive.let_go();
        }
        // Likewise its sinks: a host that stopped the hub's parent in a
        // handler and then drained the stream waited for ever on them.
        state.sinks = FxHashMap::default();
        Ok(())
    }
}

/// Why a child's actor ended before it reported, as its envelope says.
fn death_sentence(event: &SupervisionEvent) -> String {
    match event {
        SupervisionEvent::ActorFailed(_, error) => format!("the sub-agent crashed: {error}"),
        SupervisionEvent::ActorTerminated(_, _, Some(reason)) => {
            format!("the sub-agent stopped before it reported a result ({reason})")
        }
        _ => "the sub-agent stopped before it reported a result".to_owned(),
    }
}

/// A stop's or an interrupt's reply port.
/// `reply`, unless the asking call (`use_agent stop`/`interrupt`) was
/// cut before the hub read its request ([`cut_asker`]): then nothing is
/// done and `None` — stopped or interrupted anyway, the child ended for
/// good, or waited for a message the model never knew to send.
fn unless_cut(
    asking: Option<&(AgentId, crate::agent::CallSlot)>,
    reply: StopPort,
) -> Option<StopPort> {
    let Some(refused) = cut_asker(asking) else {
        return Some(reply);
    };
    if let Some(reply) = reply {
        let _ = reply.send(Err(refused));
    }
    None
}

type StopPort = Option<ractor::RpcReplyPort<Result<SubAgentStatus, Refused>>>;

/// The newest run of `id`, with the reply port, if this thread may reach
/// it. Another thread's run (it resumed an earlier session's child) is
/// not this thread's to stop or interrupt: the reply says so of the child
/// asked about, as a message's refusal does (it read "no sub-agent with
/// id" a run the caller never heard of).
fn own_newest_run(state: &HubState, id: AgentId, reply: StopPort) -> Option<(AgentId, StopPort)> {
    let newest = state.newest_run(&id);
    if (newest != id && state.status_of(&newest).is_none()) || state.resumed_elsewhere(&newest) {
        if let Some(reply) = reply {
            let _ = reply.send(Err(Refused::ResumedElsewhere { id }));
        }
        return None;
    }
    Some((newest, reply))
}

#[cfg(test)]
mod tests;
