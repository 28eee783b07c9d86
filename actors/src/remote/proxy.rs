//! The proxy of a child that runs on another node: an actor on the
//! parent's node that speaks the agent's own protocol, so the hub handles
//! it exactly as a local child (slots, envelopes, nested events, stops,
//! approvals, steering, wakes). It sends each turn to the node as a
//! [`RunSpec`], re-injects the node's reports into the child's stream in
//! order, and — when the node is lost — closes the turn itself, as a
//! local stop would. The handler never waits on the network.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorCell, ActorRef, RpcReplyPort};
use subagents_messages::remote::{ReportBody, RunReport, RunRequest, RunSpec};
use subagents_messages::{AgentEvent, ApprovalDecision, ApprovalId, ChatMessage, Outcome, Usage};
use tokio::time::Instant;

use crate::agent::{
    AgentConfig, AgentError, AgentHandle, AgentMsg, Shared, TurnEnds, TurnReply, TurnState,
    UserTurn,
};
use crate::hub::{Refused, Steered};
use crate::remote::link::{NodeLink, RunReports};
use crate::remote::mirror::Mirror;
use crate::sink::EventSink;

mod actor;
mod closer;
mod ends;
mod requests;
mod verdicts;

use closer::{Closer, lock};
use verdicts::Verdicts;

/// Where a remote child runs, and what its node does if this one is lost.
pub(crate) struct Remote {
    pub(crate) node: Arc<dyn NodeLink>,
    /// [`RunSpec::keep_if_orphaned`].
    pub(crate) keep_if_orphaned: bool,
    /// The delegation tools the hub offers, by name: the node runs no hub,
    /// so they stay here; a host tool named like a front-end the hub does
    /// not offer is an ordinary tool and goes to the node.
    pub(crate) delegation: Vec<String>,
    /// [`RunSpec::approvals_after`].
    pub(crate) approvals_after: u64,
}

/// Spawns the proxy of a child placed on another node: an agent handle
/// like any other.
pub(crate) async fn spawn_remote(
    remote: Remote,
    config: Arc<AgentConfig>,
    events: EventSink,
    history: Vec<ChatMessage>,
    supervisor: Option<ActorCell>,
) -> Result<AgentHandle, AgentError> {
    let id = config.id.clone();
    let args = ProxyState {
        link: Arc::new(crate::remote::link::Guarded(remote.node)),
        keep_if_orphaned: remote.keep_if_orphaned,
        delegation: remote.delegation,
        approvals_after: remote.approvals_after,
        config,
        events,
        history,
        run: None,
        waiting: VecDeque::new(),
        answered: HashMap::new(),
        asked: Default::default(),
        turns_finished: 0,
        usage: Usage::default(),
        tool_calls: 0,
        next_steer: 0,
    };
    let spawned = match supervisor {
        Some(supervisor) => Actor::spawn_linked(None, RemoteAgent, args, supervisor).await,
        None => Actor::spawn(None, RemoteAgent, args).await,
    };
    let (actor, _) = spawned.map_err(|e| AgentError::from_spawn(&e))?;
    Ok(AgentHandle::new(id, actor))
}

/// The proxy actor.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RemoteAgent;

/// The proxy's state (also its arguments).
pub(crate) struct ProxyState {
    link: Arc<dyn NodeLink>,
    keep_if_orphaned: bool,
    /// [`Remote::delegation`].
    delegation: Vec<String>,
    /// [`Remote::approvals_after`].
    approvals_after: u64,
    config: Arc<AgentConfig>,
    events: EventSink,
    /// The conversation so far (each run's, from its node).
    history: Vec<ChatMessage>,
    run: Option<RemoteRun>,
    waiting: VecDeque<(UserTurn, Option<TurnReply>)>,
    /// Approvals answered: a second answer is refused with the first.
    answered: HashMap<ApprovalId, ApprovalDecision>,
    /// Every approval its runs asked for: an answer to any other id is
    /// `Unknown`, as a local agent says, not `Ended`.
    asked: rustc_hash::FxHashSet<ApprovalId>,
    turns_finished: u64,
    usage: Usage,
    tool_calls: u64,
    next_steer: u64,
}

/// Numbers the runs this node starts elsewhere (a run's key).
static NEXT_KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A message sent on to the node: its text (in the conversation once
/// taken), the call that sent it, and who waits for the node's answer.
type SentMessage = (
    String,
    crate::agent::CallSlot,
    RpcReplyPort<Result<Steered, Refused>>,
);

/// The turn running on the node.
struct RemoteRun {
    /// Its key ([`RunSpec::key`]): requests and reports name it.
    key: u64,
    /// Its mirror and its own sink, and how it ends from outside: shared
    /// with the turn's state, where its hub finds it if it dies without
    /// its stop.
    closer: Arc<Closer>,
    reply: Option<TurnReply>,
    /// Published through the child's probe (its `status`, its
    /// conversation once it ended, its span for the wake).
    shared: Shared,
    started: Instant,
    span: tracing::Span,
    /// Messages sent on, waiting for the node's answer; by number, so a
    /// run that ends answers them in the order they were asked (never in a
    /// hash map's order).
    steers: BTreeMap<u64, SentMessage>,
    /// Approvals the hub's policy answered: the parent never sees them.
    silenced: Vec<ApprovalId>,
    /// The host's answers sent on, until the node says they were taken.
    verdicts: Verdicts,
    /// A stop was sent: the node cuts the turn before any answer sent
    /// after it, so such an answer is `Ended`, as a local agent's.
    stopping: bool,
    /// Its node stopped it unasked, and its `Result` said so (`failed`):
    /// a stop from here read after it changes nothing (it ended
    /// `stopped`, no wake, while the stream said `failed`).
    stopped_by_its_node: bool,
    /// Messages its node read (`Steered`) before their verdict came: a
    /// report the agent's read sent can overtake the one its take sent.
    read_ahead: Vec<String>,
    /// The missing report whose grace runs ([`ProxyState::gap_overdue`]),
    /// and its timer: one at a time (kept with the others, a report far
    /// ahead held one more timer per report in order after it).
    watching: Option<(u64, Overdue)>,
    /// Its bound's timer, aborted with the run.
    _overdue: Overdue,
    /// Its graces' timers (a stop's, its `Ended`'s after its `Result`),
    /// aborted with the run: let run, each held a task and the
    /// proxy's cell 30 s past the run.
    graces: Vec<Overdue>,
    /// Its `Result` went by and its `Ended` is given a grace.
    result_watched: bool,
}

/// A run's overdue timer (its wall clock and a grace): a task holding the
/// proxy's cell. Let run to its end, each remote run left one behind for
/// its wall clock — for ever under `Duration::MAX` (no limit) — after
/// the child had ended and its thread closed.
struct Overdue(tokio::task::JoinHandle<Result<(), ractor::MessagingErr<AgentMsg>>>);

impl Drop for Overdue {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ProxyState {
    fn start_next(&mut self, myself: &ActorRef<AgentMsg>) {
        if self.run.is_some() {
            return;
        }
        let Some((turn, reply)) = self.waiting.pop_front() else {
            return;
        };
        let config = &self.config;
        let mut conversation = self.history.clone();
        conversation.push(ChatMessage::user(turn.text.clone()));
        // Messages sent while it was queued, as a local start writes them:
        // part of what it started from (a lost run's kept conversation
        // lacked them, and a message resumed it without them).
        conversation.extend(
            turn.followups
                .iter()
                .map(|text| ChatMessage::user(crate::agent::steering_text(text))),
        );
        let span = crate::agent::spans::invoke_agent(config, turn.parent.as_ref());
        // Its conversation so far (what it started from and its input):
        // what a lost run ends on.
        let mut state = TurnState::new(conversation);
        state.span = Some(span.clone());
        let key = NEXT_KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let started = Instant::now();
        let shared: Shared = Arc::new(Mutex::new(state));
        let closer = Arc::new(Closer {
            mirror: Mutex::new(Mirror::default()),
            sink: self.events.gated(),
            out: self.events.clone(),
            link: self.link.clone(),
            key,
            started,
            span: span.clone(),
            shared: Arc::downgrade(&shared),
        });
        if config.probe.is_some() {
            // A child's: what its hub needs to end it if the hub dies.
            let closer = closer.clone();
            crate::agent::turn_state_lock(&shared).ends =
                Some(TurnEnds::Remote(Arc::new(move || closer.close_killed())));
        }
        if let Some(probe) = &config.probe {
            probe.publish(&shared);
        }
        let spec = RunSpec {
            key,
            id: config.id.clone(),
            system_prompt: config.system_prompt.clone(),
            input: turn.text,
            followups: turn.followups,
            conversation: self.history.clone(),
            model: config.model.name().to_owned(),
            // The node runs no hub: a remote child does not delegate.
            tools: config
                .tool_names
                .iter()
                .filter(|t| !self.delegation.contains(t))
                .cloned()
                .collect(),
            limits: config.limits,
            depth: config.depth,
            options: config.options.clone(),
            keep_if_orphaned: self.keep_if_orphaned,
            approvals_after: self.approvals_after,
        };
        // Bounded here too: its wall clock runs on its node, and a run
        // whose last report was lost (or that never reported, its node up)
        // held the child `running`, its slot taken, for ever.
        let bound = config
            .limits
            .wall_clock
            .saturating_add(crate::defaults::REMOTE_STOP_GRACE);
        let overdue = Overdue(myself.send_after(bound, move || {
            AgentMsg::Internal(crate::agent::sealed::AgentInternal::RunOverdue(key))
        }));
        self.run = Some(RemoteRun {
            key,
            closer,
            reply,
            shared,
            started,
            span,
            steers: BTreeMap::new(),
            silenced: Vec::new(),
            verdicts: Verdicts::default(),
            stopping: false,
            stopped_by_its_node: false,
            watching: None,
            read_ahead: Vec::new(),
            _overdue: overdue,
            graces: Vec::new(),
            result_watched: false,
        });
        if let Err(why) = self.link.start(spec, RunReports::new(myself.clone())) {
            self.lost(&why);
        }
    }

    /// Applies a report. Returns the report now missing ahead of those
    /// held (its key and number), when its grace is to start.
    fn report(&mut self, report: RunReport) -> Option<(u64, u64)> {
        let run = self.run.as_mut().filter(|r| r.key == report.key)?;
        let report_key = report.key;
        let ready = lock(&run.closer.mirror).accept(report);
        for body in ready {
            match body {
                ReportBody::Event(event) => self.event(event),
                ReportBody::Steered { n, taken } => self.steered(n, taken),
                ReportBody::Ended {
                    result,
                    conversation,
                } => self.finish(result, Some(conversation)),
                ReportBody::Refused(why) => {
                    // Refused midway (a report it could not send), the run
                    // goes on there: stopped, nothing runs unowned. One
                    // refused at its start is no run: the stop finds none.
                    let _ = self.link.request(report_key, RunRequest::Stop);
                    let text = format!("node `{}` could not run it: {why}", self.link.node());
                    self.close(&text, Outcome::Failed(text.clone()));
                }
            }
        }
        // A report missing while later ones wait: watched from now.
        let run = self.run.as_mut().filter(|r| r.key == report_key)?;
        let missing = lock(&run.closer.mirror).gap()?;
        (run.watching.as_ref().map(|(m, _)| *m) != Some(missing)).then_some((report_key, missing))
    }

    fn event(&mut self, mut event: AgentEvent) {
        // What the node's agent cannot have emitted here (an approval in
        // another agent's name — the thread routes an answer by the id's
        // agent, so the host's answer to what it saw in this row would
        // reach another call —, a call answered that never started, a
        // sub-agent's events, nested or not): the run is stopped and the
        // child fails. A request the hub's policy answered is its own.
        let why = self.run.as_ref().and_then(|run| {
            let silenced = matches!(&event, AgentEvent::ApprovalResolved { id, .. }
                if run.silenced.contains(id));
            let mirror = lock(&run.closer.mirror);
            let why = mirror.incoherent(&event, &self.config.id);
            let open = !mirror.ended();
            drop(mirror);
            (!silenced)
                .then(|| why.or_else(|| open.then(|| self.not_given(run, &event)).flatten()))
                .flatten()
                .map(|why| (run.key, why))
        });
        if let Some((key, why)) = why {
            let _ = self.link.request(key, RunRequest::Stop);
            let text = format!("node `{}` {why}", self.link.node());
            self.close(&text, Outcome::Failed(text.clone()));
            return;
        }
        let Some(run) = self.run.as_mut() else {
            return;
        };
        if let AgentEvent::Result(result) = &mut event {
            run.stopped_by_its_node = ends::unasked_stop(self.link.node(), run.stopping, result);
        }
        match &event {
            AgentEvent::ApprovalRequested(request) => {
                let decided = (self.config).policy_decides(&request.tool_name, &request.arguments);
                // Asked of the host only when the policy does not answer
                // it: one it answered is never seen, and an answer to its
                // id read `Ended` while the child ran, `Unknown` after
                // (a local child's: `Unknown` throughout).
                if decided.is_none() {
                    self.asked.insert(request.id.clone());
                }
                if let Some(decision) = decided {
                    // The hub's policy answers it: the parent never sees it.
                    run.silenced.push(request.id.clone());
                    let sent = self.link.request(
                        run.key,
                        RunRequest::Approve {
                            id: request.id.clone(),
                            decision,
                        },
                    );
                    // Not sent, it was answered by nobody and shown to
                    // nobody: the node's turn waited to its wall clock.
                    // A request that cannot go loses the node, as the
                    // host's own answer does.
                    if let Err(why) = sent {
                        self.lost(&why);
                    }
                    return;
                }
            }
            AgentEvent::ApprovalResolved { id: resolved, .. } => {
                if let Some(at) = run.silenced.iter().position(|id| id == resolved) {
                    run.silenced.remove(at);
                    return;
                }
            }
            _ => {}
        }
        // Noted and passed on under the mirror's lock: a closer from
        // outside closes what was passed on, and nothing after it.
        let mut mirror = lock(&run.closer.mirror);
        if !mirror.note(&event) {
            return;
        }
        {
            // Taken off the unread and folded in one hold of the turn's
            // lock: a step's write between the two found it in neither.
            let mut state = crate::agent::turn_state_lock(&run.shared);
            if let AgentEvent::Steered(text) = &event {
                requests::read(&mut state, &mut run.read_ahead, text);
            }
            actor::progress_held(&mut state, &event);
        }
        let resolved = match &event {
            AgentEvent::ApprovalResolved { id, outcome, .. } => Some((id.clone(), outcome.clone())),
            _ => None,
        };
        // A call started: its answer is in the fold (written now, as a
        // local child's answer is as it is given); a message read (folded
        // with the answer before it: its verdict, come after, wrote none).
        let step = matches!(
            event,
            AgentEvent::ToolResult(_) | AgentEvent::ToolStarted(_) | AgentEvent::Steered(_)
        );
        let asked = match &event {
            AgentEvent::ApprovalRequested(request) if self.config.approvals_recheck => {
                Some(request.clone())
            }
            _ => None,
        };
        run.closer.sink.emit(event);
        drop(mirror);
        if step {
            run.closer.sink.stepped();
        }
        // The host learns how its answer went once the stream said it.
        if let Some((id, outcome)) = resolved
            && !run.verdicts.settle(&id, &outcome)
        {
            self.answered.remove(&id);
        }
        if let Some(request) = asked {
            self.answer_if_the_policy_now_does(&request);
        }
    }
}

#[cfg(test)]
mod tests;
