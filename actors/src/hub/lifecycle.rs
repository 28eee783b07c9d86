//! The children's lifecycle, as the hub actor runs it: request, admit or
//! queue, start. How a child ends is `finish.rs`; stops, detaches and
//! abandons are `stop.rs`; messages and new runs `steer.rs`.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::hub::msg::HubMsg;
use crate::hub::msg::sealed::HubInternal;
use crate::hub::names::display_name;
use ractor::{ActorId, ActorRef};
use subagents_messages::{AgentEvent, AgentId, ChildRequest, SubAgentInfo, SubAgentStatus};

use crate::agent::UserTurn;

use crate::agent::{AgentConfig, AgentMsg, TurnReply, spawn_numbered};
use crate::hub::book::{Book, Closer, requested};
pub(super) use crate::hub::child::{AfterEnd, Child, Ending};
use crate::hub::config::{HubConfig, approvals_for};
use crate::hub::error::Refused;
use crate::hub::slots::{Admission, Slots};
use crate::sink::EventSink;

/// The hub's state.
pub(crate) struct HubState {
    pub(super) config: Arc<HubConfig>,
    /// The thread's parent agent (depth 0).
    pub(super) parent: AgentId,
    pub(super) slots: Slots,
    /// Boxed: a free bucket of a 300-byte child is 300 bytes held for
    /// nothing.
    pub(super) children: FxHashMap<AgentId, Box<Child>>,
    pub(super) actors: FxHashMap<ActorId, AgentId>,
    pub(super) sinks: FxHashMap<AgentId, EventSink>,
    pub(super) book: Book,
    pub(super) requested: usize,
    pub(super) finished: usize,
    /// Each child's [`AgentConfig::on_killed`]: its children's turns end in
    /// order if the hub dies without its stop.
    pub(super) on_child_killed: crate::agent::KillHook,
    /// The archive as the hub's handles hold it: let go when it stops.
    pub(super) archive: Option<Arc<crate::hub::config::ArchiveSlot>>,
}

impl std::fmt::Debug for HubState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubState")
            .field("slots", &self.slots)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

/// Dropped without its stop — killed: a ractor host's actor stopping kills
/// the thread linked under it, and a dropped runtime kills every actor —
/// the hub does what its death means (what the thread's supervisor does
/// when it sees it, if it lives): every child not ended fails, and the
/// archive is let go. Without it, a host that kept its handle kept the
/// store's directory locked, read its children `running` for ever, and
/// its stream never ended (their sinks were held); its observers are told
/// of each. After its own stop (`post_stop`) there is nothing left to do.
impl Drop for HubState {
    fn drop(&mut self) {
        let failed = self
            .book
            .fail_unfinished(crate::hub::handle::HUB_GONE, self.now_ms());
        // Told of each as a finish tells them ("every child that reaches
        // a terminal status"): a host persisting through its observer
        // kept them `running` for good. Once: the state drops once, and
        // the list is the death's alone (empty after the hub's own stop).
        for envelope in &failed {
            // A call waiting on it reads its end, not "was lost".
            self.answer_waiting(envelope);
            self.tell_observers(envelope);
        }
        if let Some(archive) = &self.archive {
            archive.let_go();
        }
    }
}

impl HubState {
    pub(super) fn now_ms(&self) -> u64 {
        self.config.clock.now_ms()
    }

    /// Records and emits a status move; only strictly forward moves
    /// happen (a repeated or backward one is ignored).
    pub(super) fn set_status(&self, id: &AgentId, child: &Child, status: SubAgentStatus) -> bool {
        if !self.book.advance(id, status) {
            return false;
        }
        child.emit_beside(AgentEvent::ChildStatus(id.clone(), status));
        true
    }

    /// The depth of a live requester as the hub knows it: the parent is 0,
    /// a child one below its own requester.
    fn depth_of(&self, requester: &AgentId) -> Option<u32> {
        if *requester == self.parent {
            return Some(0);
        }
        self.children
            .get(requester)
            .map(|child| child.request.requester_depth + 1)
    }

    pub(super) async fn spawn_child(
        &mut self,
        myself: &ActorRef<HubMsg>,
        mut request: Arc<ChildRequest>,
        span: tracing::Span,
        call: Option<crate::agent::CallSlot>,
        sender: Option<crate::agent::CallSlot>,
    ) -> Result<AgentId, Refused> {
        // The depth the hub knows, not the one the request claims (a
        // host's request could claim any): the child's tools, its limit
        // and its envelope all follow from it.
        let (Some(requester_sink), Some(requester_depth)) = (
            self.sinks.get(&request.requester).cloned(),
            self.depth_of(&request.requester),
        ) else {
            // A child of the book that ended is known, not "unknown"; one
            // still queued has not started (nor ended).
            return Err(match self.book.status(&request.requester) {
                Some(s) if s.is_terminal() => Refused::RequesterEnded {
                    id: request.requester.clone(),
                },
                Some(_) => Refused::RequesterNotStarted {
                    id: request.requester.clone(),
                },
                None => Refused::UnknownRequester(request.requester.clone()),
            });
        };
        // A requester whose turn ended waits only for its children to
        // stop: none is added under it (nothing would stop it). Nor under
        // a call cut before the hub read it (the parent's too).
        let cut = call.as_ref().is_some_and(|call| !call.is_open());
        if cut || self.takes_no_children(&request.requester) {
            return Err(Refused::RequesterEnded {
                id: request.requester.clone(),
            });
        }
        if request.requester_depth != requester_depth {
            Arc::make_mut(&mut request).requester_depth = requester_depth;
        }
        let depth = requester_depth + 1;
        if depth > self.config.max_depth {
            return Err(Refused::TooDeep {
                max_depth: self.config.max_depth,
            });
        }
        // A host's request and a stored run are checked as a builder's
        // options are: they reached the server unchecked.
        if let Some(options) = &request.options
            && let Err(crate::agent::AgentError::Options { field, why }) =
                crate::agent::check_options(options)
        {
            return Err(Refused::Options { field, why });
        }
        // What the requester may hand on: the host's tools for the
        // parent, a child's own (less the delegation tools) for a child —
        // held here for every request, a host's in a child's name too, not
        // only for a child's own call (the engine's `check_tools`).
        let requester = self.children.get(&request.requester);
        let handable = match requester {
            None => self.config.tools.clone(),
            Some(requester) => self
                .config
                .delegation_tools
                .get()
                .into_iter()
                .flatten()
                .fold(requester.tools.clone(), |t, d| t.without(d.name())),
        };
        let mut tools = match &request.tools {
            None => handable,
            Some(names) => handable.subset(names).map_err(Refused::UnknownTool)?,
        };
        // A child that may still delegate gets the delegation tools,
        // whatever its requester listed: the depth rule decides, not the
        // list (it names the requester's own tools) — unless its profile
        // denies delegation.
        if depth < self.config.max_depth && !request.no_delegation {
            for tool in self.config.delegation_tools.get().into_iter().flatten() {
                tools = tools.with_shared(tool.clone());
            }
        }
        let (model, gate) = match self
            .config
            .models
            .resolve(request.provider.as_deref(), request.model.as_deref())?
        {
            Some(found) => (found.model.clone(), found.gate.clone()),
            // None named (or `inherit`): its requester's — a sub-agent's
            // own ran on the thread parent's, told "runs on your model".
            None => requester.map_or_else(
                || (self.config.model.clone(), self.config.gate.clone()),
                |r| (r.model.clone(), r.gate.clone()),
            ),
        };
        let mut limits = self.config.child_limits;
        if let Some(cap) = request.max_iterations {
            limits.max_model_calls = cap;
        }
        // Clamped to the parent's own cap (openheim documents it; enforced).
        limits.max_model_calls = limits
            .max_model_calls
            .min(self.config.parent_max_model_calls)
            .max(1);
        // And to its requester's, when a child asks (it cannot give more
        // than it has).
        if let Some(requester) = requester {
            limits.max_model_calls = limits.max_model_calls.min(requester.limits.max_model_calls);
        }
        // Inside what a requester that waits to the end has left: at its
        // start (`Child::limits_now`).
        let id = self.config.ids.next().ok_or(Refused::IdsExhausted)?;
        self.requested += 1;
        let info = SubAgentInfo {
            id: id.clone(),
            parent_tool_use_id: request.parent_tool_use_id.clone(),
            name: display_name(request.name.as_deref(), &request.system_prompt),
            tools: tools.names(),
            background: request.background,
            resumed_from: request.resumed_from.clone(),
        };
        let sink = requester_sink.nested_with_tap(
            id.clone(),
            self.book.tap(id.clone(), self.config.observers.clone()),
        );
        let closer = Closer {
            child: sink.clone(),
            requester: requester_sink.clone(),
        };
        let requested_at = self.now_ms();
        let mut child = Child {
            request,
            tools,
            model,
            gate,
            limits,
            sink,
            requester_sink,
            agent: None,
            remote: false,
            last_result: None,
            subscribers: Vec::new(),
            stopping: None,
            interrupted: false,
            after_end: AfterEnd::default(),
            stop_replies: Vec::new(),
            ending: None,
            followups: Vec::new(),
            span,
            queued_at: None,
            call,
        };
        // In the book and announced while no kill's ends run (see
        // `Book::while_no_kill_ends`); said only while the requester's
        // turn is open, under its lock: its end on another worker since
        // the check above would otherwise leave `ChildStarted` after its
        // `Result`, a child for nobody.
        let book = &self.book;
        let said = book.while_no_kill_ends(|| {
            let record = requested(
                id.clone(),
                info.name.clone(),
                &child.request,
                info.tools.clone(),
                requested_at,
            );
            // One copy, shared with the book (kept to resume the child).
            book.insert(record, Some(closer), Some(child.request.clone()));
            let sink = &child.requester_sink;
            let announce = || {
                sink.emit(AgentEvent::ChildStarted(Box::new(info)));
            };
            // Under the asking call's lock (its turn's), or the requester's
            // turn's for a host's request: one, never both (the same lock).
            // A run another agent's message resumed (the parent's, to its
            // grandchild): under the requester's turn and, around it, the
            // sending call's, whose cut note then names the run.
            let requester = &child.request.requester;
            let said = match (&child.call, &sender) {
                (Some(call), _) => call.announce_child(&id, depth, || {
                    announce();
                    true
                }),
                (None, Some(sender)) => {
                    sender.announce_child(&id, depth, || book.while_turn_open(requester, announce))
                }
                (None, None) => book.while_turn_open(requester, announce),
            };
            // Forgotten under the same lock: let go first, a kill's ends
            // could close it `failed`, a child never announced.
            if !said {
                book.forget_unannounced(&id);
            }
            said
        });
        if !said {
            self.requested -= 1;
            return Err(Refused::RequesterEnded {
                id: child.request.requester.clone(),
            });
        }
        let admission = self.slots.admit(id.clone(), &child.request.requester);
        match admission {
            Admission::Start => {
                self.set_status(&id, &child, SubAgentStatus::Running);
            }
            Admission::Queued(_) => {
                // The envelope starts queued; announce it.
                child.queued_at = Some(tokio::time::Instant::now());
                self.book.mark_queued(&id);
                child.emit_beside(AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Queued));
            }
        }
        if child.request.background {
            self.set_status(&id, &child, SubAgentStatus::Background);
        }
        if !self.config.observers.is_empty()
            && let Some(envelope) = self.book.get(&id)
        {
            crate::hub::config::tell_each(&self.config.observers, "started", &id, |o| {
                o.started(&envelope, &child.request)
            });
        }
        self.children.insert(id.clone(), Box::new(child));
        if admission == Admission::Start {
            self.start_all(myself, vec![id.clone()]).await;
        }
        Ok(id)
    }

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
        if self.takes_no_children(&child.request.requester)
            || myself.get_status() >= ractor::ActorStatus::Draining
        {
            return self.finish_child(
                id,
                SubAgentStatus::Stopped,
                None,
                Some(crate::hub::stop::STOPPED_QUEUED.into()),
            );
        }
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
            }
            if now.now_running {
                child.emit_beside(AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Running));
            }
            started = Some(now);
        };
        // The thread's parent (no child of this hub) has no turn here.
        match self.children.contains_key(&child.request.requester) {
            true => {
                book.while_turn_open(&child.request.requester, start);
            }
            false => start(),
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
