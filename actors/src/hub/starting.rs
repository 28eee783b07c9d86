//! A child's start, its slot reserved: said on the stream under its
//! requester's turn lock, spawned here or placed on a node, its turn sent.

use std::sync::Arc;

use ractor::ActorRef;
use subagents_messages::{AgentEvent, AgentId, SubAgentStatus};

use crate::agent::{AgentConfig, AgentMsg, TurnReply, UserTurn, spawn_numbered};
use crate::hub::config::approvals_for;
use crate::hub::lifecycle::HubState;
use crate::hub::msg::HubMsg;
use crate::hub::msg::sealed::HubInternal;

impl HubState {
    /// Starts a child whose slot is reserved. The slot is released on
    /// every path that does not start it: a child that cannot be started
    /// fails at once, and the children its slot now admits are returned
    /// for the caller to start.
    #[must_use = "the children admitted by a failed start must be started"]
    async fn start_child(&mut self, myself: &ActorRef<HubMsg>, id: &AgentId) -> Vec<AgentId> {
        let Some(child) = self.children.get(id) else {
            // Gone already: its slot goes to the next in the queue.
            return self.slots.release(id);
        };
        // Its requester's turn ended while it waited (also unread: closed
        // in the tick this slot freed, as `spawn_child` refuses it): it
        // stops with its siblings, before it started. Or the hub closes (a
        // finish read drained freed the slot): started, it failed then.
        let requester = &child.request.requester;
        let refused = self.takes_no_children(requester)
            || myself.get_status() >= ractor::ActorStatus::Draining;
        // Started and said under its requester's turn lock, only while
        // that turn is open (as a request's `ChildStarted` is): its end on
        // another worker since the check above would otherwise leave
        // `ChildRunning` after its `Result`, a child started for nobody.
        let now_ms = self.config.clock.now_ms();
        let book = &self.book;
        let mut started = None;
        let mut start = || {
            let now = book.start(id, now_ms);
            if now.was_queued {
                // It waited in the queue: its start is marked on the stream.
                child.emit_beside(AgentEvent::ChildRunning(id.clone()));
            } else if now.known {
                // Admitted at its request: the statuses its request set
                // in the book are said now, as it starts.
                child.emit_beside(AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Running));
                if now.background {
                    let status = SubAgentStatus::Background;
                    child.emit_beside(AgentEvent::ChildStatus(id.clone(), status));
                }
            }
            if now.now_running {
                child.emit_beside(AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Running));
            }
            started = Some(now);
        };
        // A requester among the hub's children has a turn to hold (a child
        // stays in the map while it has children); the thread's parent has
        // none here: the book's look-up for it is skipped.
        if !refused {
            if self.children.contains_key(requester) {
                book.while_turn_open(requester, start);
            } else {
                start();
            }
        }
        let Some(started) = started else {
            return self.finish_child(
                id,
                SubAgentStatus::Stopped,
                None,
                Some(crate::hub::stop::STOPPED_QUEUED.into()),
            );
        };
        let mut system_prompt = child.request.system_prompt.clone();
        if let Some(instructions) = &self.config.instructions {
            system_prompt.push_str("\n\n");
            system_prompt.push_str(instructions);
        }
        let config = AgentConfig {
            id: id.clone(),
            system_prompt,
            model: child.model.clone(),
            gate: child.gate.clone(),
            tool_names: child.tools.shared_names(),
            tools: child.tools.clone(),
            limits: child.limits_now(started.background),
            depth: child.request.requester_depth + 1,
            delegation_denied: child.request.no_delegation
                && child.request.requester_depth + 1 < self.config.max_depth,
            approvals: approvals_for(self.config.background_approvals, &self.book, id),
            approvals_recheck: true,
            options: match &child.request.options {
                Some(own) => self.config.child_options.overridden_by(own),
                None => self.config.child_options.clone(),
            },
            probe: Some(started.probe),
            on_killed: Some(self.on_child_killed.clone()),
            trace: crate::agent::spans::TraceParent {
                span: Some(child.span.clone()),
                parent_agent: Some(child.request.requester.clone()),
                mode: if child.request.background {
                    "background"
                } else {
                    "inline"
                },
                settings: self.config.trace.clone(),
            },
        };
        // A resumed run reads its message as one from its requester, after
        // its conversation so far.
        let input = match child.request.resumed_from {
            Some(_) => crate::agent::steering_text(&child.request.input),
            None => child.request.input.clone(),
        };
        let followups = child.followups.clone();
        let sink = child.sink.clone();
        // Labels match its profile's name (one written in the call has
        // none: its shown name, the model's first line, placed it anywhere).
        let profile = child.request.name.clone();
        let name = move || profile.unwrap_or_default();
        // This node's own: started here (the one being placed has no
        // agent yet; those on other nodes count there).
        let here = || {
            self.children
                .values()
                .filter(|c| c.agent.is_some() && !c.remote)
                .count()
        };
        let placed = match self.config.placement.choose(name, here) {
            Ok(placed) => placed,
            Err(why) => return self.finish_child(id, SubAgentStatus::Failed, None, Some(why)),
        };
        let history = child.request.conversation.clone();
        let supervisor = Some(myself.get_cell());
        // Both spawns are boxed: a spawn's future (ractor's, awaiting the
        // child's `pre_start`) would otherwise widen the futures of every
        // path that may start a child (a finish refills a slot, a stop
        // admits the next) and so the hub's handler future, which ractor
        // keeps for every hub's whole life (docs/performance.md).
        let remote = placed.is_some();
        let spawned = match placed {
            None => {
                Box::pin(spawn_numbered(
                    Arc::new(config),
                    sink.clone(),
                    history,
                    supervisor,
                    self.config.approvals_after,
                ))
                .await
            }
            Some(node) => {
                Box::pin(crate::remote::spawn_remote(
                    self.remote_on(node, config.depth),
                    Arc::new(config),
                    sink.clone(),
                    history,
                    supervisor,
                ))
                .await
            }
        };
        let agent = match spawned {
            Ok(agent) => agent,
            Err(e) => {
                return self.finish_child(id, SubAgentStatus::Failed, None, Some(e.to_string()));
            }
        };
        // The child's turn result goes into `last` from the child's own
        // handler (no task waits on it), and then the hub is told
        // (`TurnReply::kept_then` keeps that order): it takes the result from
        // there, as its own stop does once its mailbox is closed.
        let (last, last_rx) = tokio::sync::oneshot::channel();
        let hub = myself.clone();
        let finished = id.clone();
        let notice = move || {
            let _ = hub.cast(HubMsg::Internal(HubInternal::ChildFinished {
                id: finished,
            }));
        };
        let sent = agent.actor_ref().cast(AgentMsg::Turn {
            turn: UserTurn {
                text: input,
                followups,
                follows: None,
                parent: None,
            },
            reply: Some(TurnReply::kept_then(last, notice)),
        });
        if sent.is_err() {
            return self.finish_child(
                id,
                SubAgentStatus::Failed,
                None,
                Some("the sub-agent stopped before it could start".into()),
            );
        }
        self.actors.insert(agent.actor().get_id(), id.clone());
        self.sinks.insert(id.clone(), sink);
        if let Some(child) = self.children.get_mut(id) {
            child.agent = Some(agent);
            child.remote = remote;
            child.last_result = Some(last_rx);
            // Read: its weak hold would keep the asking turn's state.
            child.call = None;
        }
        Vec::new()
    }

    /// Starts `ids` (their slots reserved), in order, and whoever a failed
    /// start admits after them.
    pub(super) async fn start_all(&mut self, myself: &ActorRef<HubMsg>, ids: Vec<AgentId>) {
        let mut todo: std::collections::VecDeque<AgentId> = ids.into();
        while let Some(next) = todo.pop_front() {
            todo.extend(self.start_child(myself, &next).await);
        }
    }
}
