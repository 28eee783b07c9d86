//! The children's lifecycle, as the hub actor runs it: request, admit or
//! queue (a start is `starting.rs`). How a child ends is `finish.rs`;
//! stops, detaches and abandons are `stop.rs`; messages and new runs
//! `steer.rs`.

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::hub::msg::HubMsg;
use crate::hub::names::display_name;
use ractor::{ActorId, ActorRef};
use subagents_messages::{AgentEvent, AgentId, ChildRequest, SubAgentInfo, SubAgentStatus};

use crate::hub::book::{Book, Closer, requested};
pub(super) use crate::hub::child::{AfterEnd, Child, Ending};
use crate::hub::config::HubConfig;
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
                // Only under a requester that takes more: one giving its
                // final answer would stop it with itself, the message it
                // was resumed for never read.
                (None, Some(sender)) => {
                    sender.announce_child(&id, depth, || book.while_turn_takes(requester, announce))
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
        let background = child.request.background;
        match admission {
            // Its statuses are said where it starts, under its requester's
            // turn lock (`start_child`): said here, a requester's end on
            // another worker in between left `running` for a child that
            // never ran, with no `Result` of its own.
            Admission::Start => {
                self.book.advance(&id, SubAgentStatus::Running);
                if background {
                    self.book.advance(&id, SubAgentStatus::Background);
                }
            }
            Admission::Queued(_) => {
                // The envelope starts queued; announce it, while its
                // requester's turn is open (ended, it stops unstarted).
                child.queued_at = Some(tokio::time::Instant::now());
                self.book.mark_queued(&id);
                let moved = background && self.book.advance(&id, SubAgentStatus::Background);
                self.book.while_turn_open(&child.request.requester, || {
                    child.emit_beside(AgentEvent::ChildStatus(id.clone(), SubAgentStatus::Queued));
                    if moved {
                        child.emit_beside(AgentEvent::ChildStatus(
                            id.clone(),
                            SubAgentStatus::Background,
                        ));
                    }
                });
            }
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
}
