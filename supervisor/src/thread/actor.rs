//! The **ThreadSupervisor** actor: it only moves messages; the policy is
//! in `state.rs` and the pure `WakeQueue`.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use subagents_actors::EventSink;
use subagents_messages::AgentEvent;

use crate::thread::msg::ThreadMsg;
use crate::thread::msg::sealed::ThreadInternal;

use crate::thread::persist::Writer;
use crate::thread::state::{
    Archive, Observer, ThreadArguments, ThreadState, TurnOrigin, route_approval,
};
use crate::wake::WakeQueue;

/// The supervisor actor.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ThreadSupervisor;

impl Actor for ThreadSupervisor {
    type Msg = ThreadMsg;
    type State = ThreadState;
    type Arguments = ThreadArguments;

    async fn pre_start(
        &self,
        myself: ActorRef<ThreadMsg>,
        args: ThreadArguments,
    ) -> Result<ThreadState, ActorProcessingErr> {
        let config = args.config;
        // The host's, before the thread's own: told of a stop after the
        // hub's death (the hub's state that held them is gone).
        let observers = super::state::HostObservers(config.parent.observers_given());
        let mut builder = config
            .parent
            .observer(Arc::new(Observer(myself.clone())))
            .wakes_parent();
        if let Some(store) = &config.store {
            builder = builder
                .archive(Arc::new(Archive {
                    store: store.clone(),
                    errors: args.errors.clone(),
                    thread: config.id.clone(),
                    approvals_floor: args.approvals_floor.clone(),
                }))
                .child_ids(store.child_ids());
        }
        let parent = builder
            .spawn_into(args.events.clone(), Some(myself.get_cell()))
            .await?;
        if let Some(parts) = args.parts {
            let _ = parts.send(parent.clone());
        }
        let writer = config
            .store
            .clone()
            .map(|store| Writer::start(store, args.errors.clone()));
        let wakes = if args.held {
            WakeQueue::held()
        } else {
            WakeQueue::new()
        };
        if let Some(live) = &args.live {
            // Before its `post_start` takes the store's wakes: a killed
            // thread's state giving them back after that tells this actor.
            let _ = live.actor_slot().set(myself.get_cell());
        }
        let state = ThreadState {
            parent,
            events: args.events,
            wakes,
            turns_in_flight: 0,
            deferred: 0,
            live: args.live,
            store: config.store,
            id: config.id,
            persist_errors: args.errors,
            writer,
            requests: Default::default(),
            restarted: Vec::new(),
            settle_at_end: Vec::new(),
            switched_off: Default::default(),
            woken: Default::default(),
            answered: Default::default(),
            failed_by_death: Default::default(),
            store_wakes_taken: false,
            gave_back: false,
            gave_back_ids: Vec::new(),
            given_back_waiting: Vec::new(),
            observers,
        };
        Ok(state)
    }

    /// A restart's wake (children the store found unfinished) goes out as
    /// soon as the thread runs, after what the host sent in `spawn`'s tick
    /// (a user turn first, a hidden tab's `on_screen(false)` before it).
    /// Taken here, not in `pre_start`: ractor
    /// links a thread to its host after `pre_start`, and a link refused (a
    /// host stopping or draining) failed the spawn with the store's wakes
    /// taken, for nobody. An opening thread takes them once it is shown:
    /// one given up before then took nothing, and an open tried again at
    /// once (before the first had given them back) got none.
    async fn post_start(
        &self,
        myself: ActorRef<ThreadMsg>,
        state: &mut ThreadState,
    ) -> Result<(), ActorProcessingErr> {
        if !state.wakes.is_held() {
            state.take_store_wakes();
        }
        // After what the host sent as `spawn` returned: a tab restored
        // hidden (`on_screen(false)` in that tick) had its first earlier
        // wake go out, hidden — ractor runs this before any message.
        state.defer_wakes(&myself);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ThreadMsg>,
        message: ThreadMsg,
        state: &mut ThreadState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ThreadMsg::UserTurn { text, span } => {
                state.events.emit(AgentEvent::UserMessage(text.clone()));
                state.send_turn(&myself, text, TurnOrigin::User, span, None);
            }
            ThreadMsg::Typing(typing) => {
                state.wakes.set_typing(typing);
                if !typing {
                    // What the typing held goes out after what the host
                    // sent in this tick: stopped typing and sent at once
                    // (a chat box submitted), the wake went first and the
                    // model answered it before the user's message.
                    state.defer_wakes(&myself);
                    return Ok(());
                }
            }
            ThreadMsg::OnScreen(on) => {
                // A leave given up: what it held goes after the store's.
                let held = if on {
                    state.wakes.take_held()
                } else {
                    Vec::new()
                };
                let dropped = state.wakes.set_on_screen(on);
                state.put_back_or_drop(dropped);
                if on {
                    state.take_store_wakes();
                    for (at, child) in held {
                        state.wakes.push_finished(child, at);
                    }
                    // Shown: what waited (an opened thread's wakes) goes
                    // out after what the host sent in this tick — a tab
                    // opened or switched to, then written to at once: the
                    // restart wake's turn went first, listing a child the
                    // user's message then stopped or resumed.
                    state.defer_wakes(&myself);
                    return Ok(());
                }
                state.deliver_wakes(&myself);
            }
            ThreadMsg::SwitchAway { reply, forget } => {
                let dropped = state.wakes.clear();
                if forget {
                    state.forget_wakes(dropped);
                } else {
                    state.put_back_or_drop(dropped);
                    // Those given back wait for the thread's next showing;
                    // one that stays on screen (a switch not followed by
                    // `on_screen(false)`: a standalone thread's "stop all")
                    // has none, and its close settled them undelivered.
                    // Read once what the host sent with the switch is.
                    let _ = myself.cast(ThreadMsg::Internal(ThreadInternal::ShownAfterSwitch));
                }
                // Emitted first, then the children are read: every child
                // whose `ChildStarted` precedes this event is in the set,
                // so none of them wakes the parent afterwards — even one
                // that finishes at this instant and reports after.
                state.events.emit(AgentEvent::SwitchedAway);
                state.switched_off.extend(state.parent.hub.child_ids());
                // The hub stops children in its own handler; the reply,
                // if asked for, comes from it — from here if it is gone
                // or stopping (its children end with it: none left for
                // the switch to stop), once it has stopped.
                match reply {
                    Some(reply) => {
                        let ask = |hub: &subagents_actors::hub::HubHandle, port| {
                            let _ = hub.stop_all_replying(Some(port));
                        };
                        state.ask_hub(&myself, reply, ask, |_| 0);
                    }
                    None if !state.hub_gone(&myself) => {
                        let _ = state.parent.hub.stop_all_replying(None);
                    }
                    None => {}
                }
            }
            ThreadMsg::StopParent => {
                let _ = state.parent.agent.stop_turn();
            }
            ThreadMsg::ResolveApproval {
                id,
                decision,
                reply,
            } => route_approval(state, id, decision, reply),
            ThreadMsg::StopChild { id, reply } => {
                // A gone (or, unread, stopping) hub ended its children:
                // the status each ended with, cancelled as a live hub's
                // stop of an ended child cancels it — the newest run of a
                // resumed chain, this session's or an earlier one's, read
                // through the store (the archive went with the hub: it
                // read "unknown", and the next session resumed the child).
                let to = id.clone();
                let archive = state.store.clone().map(|store| Archive {
                    store,
                    errors: state.persist_errors.clone(),
                    thread: state.id.clone(),
                    approvals_floor: None,
                });
                let thread = myself.clone();
                let observers = state.observers.clone();
                let ended = move |hub: &subagents_actors::hub::HubHandle| {
                    let store = archive.as_ref().map(|a| a.store.clone());
                    let shared = archive
                        .map(|a| Arc::new(a) as Arc<dyn subagents_actors::hub::EnvelopeArchive>);
                    let Some(envelope) = hub.cancel_after_death(&id, shared, &observers.0) else {
                        return Err(subagents_actors::hub::Refused::UnknownChild(id));
                    };
                    // This session's run, changed: through the thread, as
                    // the hub's own observer would be told — its writes go in
                    // order, after the dead hub's failed copies (written
                    // here, the cancel could land first and be overwritten).
                    if envelope.cancelled
                        && store.is_some_and(|s| !s.is_from_earlier_session(&envelope.id))
                    {
                        let changed = ThreadInternal::ChildFinished(Box::new(envelope.clone()));
                        let _ = thread.cast(ThreadMsg::Internal(changed));
                    }
                    Ok(envelope.status)
                };
                let ask = move |hub: &subagents_actors::hub::HubHandle, port| {
                    let _ = hub.stop_replying(&to, port);
                };
                state.ask_hub(&myself, reply, ask, ended);
            }
            ThreadMsg::Envelope { id, reply } => {
                let _ = reply.send(state.envelope(&id));
            }
            ThreadMsg::FlushPersistence(reply) => match &state.writer {
                Some(writer) => {
                    writer.flush_through_hub(state.parent.hub.clone(), myself.clone(), reply);
                }
                None => {
                    let _ = reply.send(());
                }
            },
            ThreadMsg::Internal(ThreadInternal::FlushNow(reply)) => {
                // Answered from the writer's side: the writes before it
                // have recorded their errors by then, and a close read
                // meanwhile (which ends the writer only once its queue is
                // done) does not drop the answer.
                let flushed = state.writer.as_ref().map(Writer::flushed);
                tokio::spawn(async move {
                    if let Some(flushed) = flushed {
                        let _ = flushed.await;
                    }
                    let _ = reply.send(());
                });
            }
            ThreadMsg::Ping(reply) => {
                let _ = reply.send(());
            }
            ThreadMsg::Close => {
                // Nothing delivered after it: a wake released in this tick
                // (the typing stopped) went out behind the close, a parent
                // turn on a thread being closed. Its stop settles it.
                myself.stop(None);
                return Ok(());
            }
            #[cfg(test)]
            ThreadMsg::Internal(ThreadInternal::HeldRequests(reply)) => {
                let _ = reply.send(state.requests.len());
            }
            ThreadMsg::Internal(ThreadInternal::ChildStarted(started)) => {
                let (envelope, request) = *started;
                // Kept only for its run file: with no store, nothing
                // would ever take it out again.
                if state.writer.is_some() {
                    state
                        .requests
                        .insert(envelope.id.clone(), Arc::new(request));
                }
                state.persist_with_run(&envelope, false);
            }
            ThreadMsg::Internal(ThreadInternal::ChildStepped(id)) => {
                state.persist_run(&id, false);
            }
            ThreadMsg::Internal(ThreadInternal::ChildStopping(id)) => {
                // As the book has it now, only while it has not ended: its
                // end, told after, writes its final envelope; told before
                // (a kill's end on another worker), this write would have
                // put a running envelope over it.
                let envelope = state.parent.hub.status(&id);
                if let Some(envelope) = envelope.filter(|e| !e.status.is_terminal()) {
                    state.persist(&myself, &envelope);
                }
            }
            ThreadMsg::Internal(ThreadInternal::ChildFinished(mut envelope)) => {
                // Only a child that finished (done or failed) wakes the
                // parent; a stopped one was stopped on purpose.
                let finished = matches!(
                    envelope.status,
                    subagents_messages::SubAgentStatus::Done
                        | subagents_messages::SubAgentStatus::Failed
                );
                // Only the parent's own children wake it; a child's
                // children report to that child (and stop with it). A
                // child a message resumed is told again for the link; the
                // run it goes on as wakes the parent, not this one. An
                // earlier session's child (a message or a stop brought it
                // into the hub's book) had its wake in that session: a
                // stop's notice of it here woke the parent again.
                let earlier = state
                    .store
                    .as_ref()
                    .is_some_and(|store| store.is_from_earlier_session(&envelope.id));
                if finished
                    && !earlier
                    && envelope.depth == 1
                    && envelope.continued_as.is_none()
                    && envelope.background
                    && !envelope.claimed
                    && !state.switched_off.contains(&envelope.id)
                    && !state.failed_by_death.contains(&envelope.id)
                    && state.woken.insert(envelope.id.clone())
                {
                    let stamp = envelope.finished_at_ms.unwrap_or(u64::MAX);
                    if !state.wakes.push_finished(envelope.id.clone(), stamp) {
                        // Off screen: dropped, and its span with it.
                        drop(state.parent.hub.take_run_span(&envelope.id));
                    }
                    // A wake not yet read to its end — waiting, or going
                    // out now — is on disk with the finish: a restart
                    // before its turn has ended delivers it (settled then).
                    state.deliver_wakes(&myself);
                    envelope.wake_owed = state.wakes.is_owed(&envelope.id);
                } else if state.woken.contains(&envelope.id)
                    && envelope.continued_as.is_none()
                    && !envelope.claimed
                {
                    // A later notice of a child whose wake was queued (a
                    // stop cancelled it after it ended): the hub's copy
                    // says nothing of the wake, and written as it came it
                    // cleared the owed wake on disk.
                    envelope.wake_owed = state.wakes.is_owed(&envelope.id);
                } else if earlier && let Some(store) = &state.store {
                    // An earlier session's wake is the store's (settled
                    // there when its turn ended): the hub's copy, taken
                    // when a message brought the child in, said it was
                    // owed still, and a stop's notice wrote that back.
                    envelope.wake_owed = store.get(&envelope.id).is_some_and(|e| e.wake_owed);
                }
                if state.switched_off.contains(&envelope.id) {
                    // Switched away from: it wakes nobody.
                    drop(state.parent.hub.take_run_span(&envelope.id));
                }
                state.persist_with_run(&envelope, true);
            }
            // Delivered below, as after every message, once no other
            // deferral is still to be read.
            ThreadMsg::Internal(ThreadInternal::DeliverWakes) => {
                state.deferred = state.deferred.saturating_sub(1);
            }
            ThreadMsg::Internal(ThreadInternal::Leaving) => {
                let dropped = state.wakes.set_leaving();
                state.put_back_or_drop(dropped);
            }
            ThreadMsg::Internal(ThreadInternal::ShownAfterSwitch) => {
                if state.wakes.is_on_screen() && !state.wakes.is_held() {
                    state.take_store_wakes();
                }
            }
            ThreadMsg::Internal(ThreadInternal::StoreWakesBack(ids)) => {
                state.take_given_back(ids);
                state.deliver_wakes(&myself);
            }
            ThreadMsg::Internal(ThreadInternal::TurnEnded { wake }) => {
                state.turns_in_flight = state.turns_in_flight.saturating_sub(1);
                // A wake's turn ended by its parent's death (killed, or
                // stopped under the thread) was read by no model to its
                // end: owed still, in flight — a close settles it, a kill
                // gives it back; settled here, a restart never told the
                // next parent (a restart list was lost whole).
                if wake && !state.parent_gone() {
                    state.settle_delivered();
                    state.wakes.finished();
                }
                if state.turns_in_flight == 0 {
                    state.wakes.set_generating(false);
                    // What waited goes out after what the turn's end set
                    // going: a turn cut as an inline child finished hands
                    // it to the background as it ends (the close casts to
                    // the hub before the turn's result goes out), and its
                    // wake — queued in finish order — went after one that
                    // finished after it but was queued first. Through the
                    // hub: its notice of that child is read first, on any
                    // worker.
                    state.defer_wakes_through_hub(&myself);
                    return Ok(());
                }
            }
        }
        state.deliver_wakes(&myself);
        Ok(())
    }

    /// Overrides ractor's default (which stops the supervisor when any
    /// linked actor stops): children of the hub come and go; a crash of
    /// the parent or hub is logged and the thread stays answerable. A hub
    /// that dies takes its children with it: each one that had not ended
    /// gets a final `failed` envelope, persisted.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<ThreadMsg>,
        event: SupervisionEvent,
        state: &mut ThreadState,
    ) -> Result<(), ActorProcessingErr> {
        let cell = match &event {
            SupervisionEvent::ActorFailed(cell, error) => {
                tracing::error!(actor = %cell.get_id(), %error, "an actor of the thread crashed");
                cell
            }
            SupervisionEvent::ActorTerminated(cell, ..) => cell,
            _ => return Ok(()),
        };
        if cell.get_id() == state.parent.hub.actor().get_id() {
            state.hub_gone_as(&myself, true);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ThreadMsg>,
        state: &mut ThreadState,
    ) -> Result<(), ActorProcessingErr> {
        // The parent, the hub (and so every child) and the gate if the
        // thread made it: nothing of a closed thread keeps running.
        state.parent.shutdown_and_wait().await;
        // A closed thread owes no wake (a restart does; a close is meant).
        // One nobody kept (an open given up) took none from its store: an
        // opening thread takes them once it is shown.
        let dropped = state.wakes.clear();
        state.forget_wakes(dropped);
        // Nor will one come for a child whose end the hub told this
        // stopped actor: its run span, kept for the wake, goes.
        state.parent.hub.drop_run_spans();
        // A wake being read as the thread closes: a close is meant.
        state.settle_delivered();
        // Every child ever started leaves a final envelope in the store:
        // the notices the hub sent while stopping never reach this
        // stopped actor, so the envelopes are written from the hub's map.
        state.persist_remaining().await;
        state.forget_if_deleted().await;
        // After a stop ractor hands this state to the thread's supervisor
        // inside the termination event, which a host's actor reads only
        // between its handlers: a host closing the thread in a handler or
        // its `post_stop` waited for ever on a stream whose last sender
        // was here, and the store stayed locked. Both go now.
        state.events = EventSink::channel().0;
        state.store = None;
        // Its id, live on the store: a thread of that id may open now,
        // and reads the children this one finished.
        if let Some(live) = state.live.take() {
            live.close(state.parent.hub.child_ids());
        }
        Ok(())
    }
}
