//! The agent actor and its state: the turn queue, the running turn, the
//! approvals it waits on. The handler only moves messages; the turn runs
//! in a task (`turn.rs`).

mod answers;

use crate::agent::running::{AbortOnDrop, RunningTurn, TurnEnds};
use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures_util::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use subagents_messages::{
    AgentEvent, AgentResult, ApprovalDecision, ApprovalId, ApprovalRefusal, ChatMessage, Outcome,
};

use crate::agent::msg::UserTurn;
use tokio::time::Instant;

use crate::agent::config::AgentConfig;
use crate::agent::msg::sealed::AgentInternal;
use crate::agent::msg::{AgentMsg, TurnReply};
use crate::agent::{spans, turn, turn_state};
use crate::panics::panic_text;
use crate::sink::EventSink;
use tracing::Instrument;

/// The agent actor (hosts start one with [`AgentBuilder::new`](crate::AgentBuilder::new)).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AgentActor;

/// Arguments of [`AgentActor`].
#[derive(Debug)]
pub(crate) struct AgentArguments {
    /// Its setup.
    pub(crate) config: Arc<AgentConfig>,
    /// Where its events go.
    pub(crate) events: EventSink,
    /// The conversation it goes on from (empty for a new agent).
    pub(crate) history: Vec<ChatMessage>,
    /// The number its first approval follows.
    pub(crate) approvals_after: u64,
}

/// The agent's state.
#[derive(Debug)]
pub(crate) struct AgentState {
    config: Arc<AgentConfig>,
    events: EventSink,
    /// The conversation so far: shared with the hub's book once a turn
    /// ended (copied only if the agent then writes to it).
    history: Arc<Vec<ChatMessage>>,
    running: Option<RunningTurn>,
    waiting: VecDeque<(UserTurn, Option<TurnReply>)>,
    approvals: FxHashMap<ApprovalId, RpcReplyPort<ApprovalDecision>>,
    /// Approvals no longer pending, and why: answers to them are refused
    /// with that reason.
    closed_approvals: FxHashMap<ApprovalId, ApprovalRefusal>,
    approval_counter: Arc<AtomicU64>,
    next_run: u64,
    turns_finished: u64,
    /// What every finished turn used, in all.
    totals: Totals,
}

/// An agent's use over its finished turns.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    usage: subagents_messages::Usage,
    children_usage: subagents_messages::Usage,
    model_calls: u64,
    tool_calls: u64,
}

impl Drop for AgentState {
    /// An actor killed (no `post_stop`) ends every turn it held on the
    /// stream: the running one first (its own drop), then each queued one
    /// in one failed `Result`, also to whoever awaits it. After a normal
    /// stop the queue is empty already.
    fn drop(&mut self) {
        if self.running.is_some()
            && let Some(hook) = &self.config.on_killed
        {
            hook();
        }
        if let Some(mut running) = self.running.take() {
            // Ended by its task, its notice never read: answered with it.
            let kept = turn_state::lock(&running.shared).kept_end.take();
            if let (Some(kept), Some(reply)) = (kept, running.reply.take()) {
                reply.send(kept.0);
            }
        }
        for (_, reply) in self.waiting.drain(..) {
            let text = "the agent stopped before this turn started";
            end_unstarted(&self.events, reply, text, Outcome::Failed(text.to_owned()));
        }
    }
}

/// Ends a turn that never started: its one `Result` (nothing used) on the
/// stream and to whoever awaits it.
fn end_unstarted(events: &EventSink, reply: Option<TurnReply>, text: &str, outcome: Outcome) {
    let result = turn_state::nothing_done(text, outcome);
    events.emit(AgentEvent::Result(Box::new(result.clone())));
    if let Some(reply) = reply {
        reply.send(result);
    }
}

/// A conversation to go on from, shared: a new agent's empty one is one
/// allocation for every agent, not one each.
fn shared_history(history: Vec<ChatMessage>) -> Arc<Vec<ChatMessage>> {
    static EMPTY: std::sync::OnceLock<Arc<Vec<ChatMessage>>> = std::sync::OnceLock::new();
    if history.is_empty() {
        EMPTY.get_or_init(|| Arc::new(Vec::new())).clone()
    } else {
        Arc::new(history)
    }
}

impl AgentState {
    fn start_next(&mut self, myself: &ActorRef<AgentMsg>) {
        if self.running.is_some() {
            return;
        }
        let Some((turn, reply)) = self.waiting.pop_front() else {
            return;
        };
        if self.waiting.is_empty() {
            // A queue that grew stays grown: give its buffer back.
            self.waiting = VecDeque::new();
        }
        self.start(myself, turn, reply);
    }

    /// A turn that arrives while the agent is idle and nothing waits
    /// starts at once, never queued: the queue allocates nothing.
    fn take_turn(&mut self, myself: &ActorRef<AgentMsg>, turn: UserTurn, reply: Option<TurnReply>) {
        if self.running.is_none() && self.waiting.is_empty() {
            self.start(myself, turn, reply);
        } else {
            self.waiting.push_back((turn, reply));
        }
    }

    fn start(&mut self, myself: &ActorRef<AgentMsg>, turn: UserTurn, reply: Option<TurnReply>) {
        self.next_run += 1;
        let run = self.next_run;
        let sink = self.events.gated();
        // Room for the answer too: a model's reply or, cut short, the
        // turn's closing message always follows.
        let mut history = Vec::with_capacity(self.history.len() + 2 + turn.followups.len());
        history.extend_from_slice(&self.history);
        history.push(ChatMessage::user(turn.text));
        for text in &turn.followups {
            history.push(ChatMessage::user(turn_state::steering_text(text)));
        }

        let span = spans::invoke_agent(&self.config, turn.parent.as_ref());
        if let Some(from) = &turn.follows {
            span.follows_from(from);
        }
        let started = Instant::now();
        let mut state = turn_state::TurnState::new(history);
        // Whoever closes the turn records its end on it (the turn's task,
        // a stop, a kill): once, the winner's result. A child's is also
        // kept (through the probe) for the wake that links to it.
        state.span = Some(span.clone());
        if self.config.probe.is_some() {
            // A child's: what its hub needs to end it if the hub dies.
            state.ends = Some(TurnEnds::Local {
                sink: sink.clone(),
                out: self.events.clone(),
                started,
            });
        }
        let shared: turn_state::Shared = Arc::new(std::sync::Mutex::new(state));
        if let Some(probe) = &self.config.probe {
            probe.publish(&shared);
        }
        let ctx = turn::TurnContext {
            config: self.config.clone(),
            sink: sink.clone(),
            actor: myself.clone(),
            approvals: self.approval_counter.clone(),
            shared: shared.clone(),
            started,
        };
        let events = self.events.clone();
        let actor = myself.clone();
        // Boxed: the turn's future is over a kilobyte, and tokio moves a
        // task's future by value (into the spawn, into its cell, and its
        // stage when it ends): a box makes each of those a pointer.
        let task = tokio::spawn(Box::pin(
            async move {
                let ran = AssertUnwindSafe(turn::run_turn(&ctx)).catch_unwind().await;
                let limits = ctx.config.limits;
                let cut = |outcome: &Outcome| turn_state::cut_sentence(outcome, &limits);
                // `None`: a stop closed the turn first and answered it.
                let closed = match ran {
                    Ok(ran) => {
                        let result = ran.result(limits, started);
                        turn_state::close(&ctx.shared, &ctx.sink, &events, result, &cut)
                    }
                    Err(panic) => {
                        let text = format!("the agent's turn crashed: {}", panic_text(panic));
                        let crashed = |state: &turn_state::TurnState| {
                            turn_state::cut_result(
                                state,
                                |_| text,
                                |text| Outcome::Failed(text.to_owned()),
                                started,
                            )
                        };
                        turn_state::close(&ctx.shared, &ctx.sink, &events, crashed, &cut)
                    }
                };
                if let Some((history, result)) = closed {
                    // Kept in the turn, then the notice: an agent that
                    // never reads it (it drains, a stop through its cell
                    // came first, a kill) answers the caller with it as
                    // it ends (a completed turn's caller read `Dropped`).
                    turn_state::lock(&ctx.shared).kept_end = Some(Box::new((result, history)));
                    let _ = actor.cast(AgentMsg::Internal(AgentInternal::TurnFinished { run }));
                }
            }
            .instrument(span.clone()),
        ));
        self.running = Some(RunningTurn {
            run,
            task: AbortOnDrop(task),
            sink,
            out: self.events.clone(),
            shared,
            started,
            reply,
            stop_queued: 0,
        });
    }

    /// A turn ended with `result`: counted in the totals.
    fn count(&mut self, result: &AgentResult) {
        self.turns_finished += 1;
        self.totals.usage.add(result.usage);
        self.totals.children_usage.add(result.children_usage);
        self.totals.model_calls += u64::from(result.model_calls);
        self.totals.tool_calls += u64::from(result.tool_calls);
    }

    /// The notice of turn `run`'s end: its result, kept in the turn.
    fn finish_kept(&mut self, run: u64) {
        let kept = (self.running.as_ref())
            .filter(|r| r.run == run)
            .and_then(|r| turn_state::lock(&r.shared).kept_end.take());
        if let Some(kept) = kept {
            let (result, history) = *kept;
            self.finish(run, result, history);
        }
    }

    fn finish(&mut self, run: u64, result: AgentResult, history: Arc<Vec<ChatMessage>>) {
        if self.running.as_ref().is_none_or(|r| r.run != run) {
            return;
        }
        if let Some(mut running) = self.running.take() {
            self.history = history;
            self.count(&result);
            self.close_approvals();
            if let Some(reply) = running.reply.take() {
                reply.send(result);
            }
            // A stop came between the turn's close and this notice: the
            // turns queued behind it then end now, after it in the
            // conversation (ended then, they were written into the
            // conversation this notice replaces) — those alone: a turn
            // sent after the stop was ended with them, "stopped before it
            // started", though it came after the stop.
            if running.stop_queued > 0 {
                self.end_queued(running.stop_queued);
            }
        }
    }

    /// Every approval still pending is closed: its turn ended.
    fn close_approvals(&mut self) {
        for (id, _) in self.approvals.drain() {
            self.closed_approvals
                .insert(id.clone(), ApprovalRefusal::Ended(id));
        }
    }

    fn stop(&mut self) {
        self.stop_running();
        // The running turn had ended, its notice not read yet: the queued
        // turns end once it is (`finish`), so the conversation has them
        // after it.
        if let Some(running) = &mut self.running {
            running.stop_queued = self.waiting.len();
            return;
        }
        self.end_queued(usize::MAX);
    }

    /// The first `n` queued turns end too, each with its own stopped
    /// result: every turn sent ends in exactly one `Result`.
    fn end_queued(&mut self, n: usize) {
        let n = n.min(self.waiting.len());
        for (turn, reply) in self.waiting.drain(..n) {
            let text = "Stopped before it started.";
            end_unstarted(&self.events, reply, text, Outcome::Stopped);
            let history = Arc::make_mut(&mut self.history);
            history.push(ChatMessage::user(turn.text));
            history.push(ChatMessage::assistant(text.to_owned(), Vec::new()));
            self.turns_finished += 1;
        }
    }

    fn stop_running(&mut self) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        running.task.0.abort();
        // What it did is read as the turn closes, under its lock: the
        // aborted task may still be running on another worker.
        let started = running.started;
        let stopped = |state: &turn_state::TurnState| {
            turn_state::cut_result(
                state,
                // What it wrote last is quoted: the result takes its place
                // in the conversation (an answer written in the instant
                // of the stop was lost, with the text the host saw).
                crate::agent::answer::stopped_result,
                |_| Outcome::Stopped,
                started,
            )
        };
        let limits = self.config.limits;
        let cut = |outcome: &Outcome| turn_state::cut_sentence(outcome, &limits);
        let Some((history, result)) =
            turn_state::close(&running.shared, &running.sink, &self.events, stopped, &cut)
        else {
            // The turn had already ended: its TurnFinished is in the mailbox.
            self.running = Some(running);
            return;
        };
        self.close_approvals();
        self.history = history;
        self.count(&result);
        if let Some(reply) = running.reply.take() {
            reply.send(result);
        }
    }
}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = AgentArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        args: AgentArguments,
    ) -> Result<AgentState, ActorProcessingErr> {
        let approvals_after = args.approvals_after;
        Ok(AgentState {
            config: args.config,
            events: args.events,
            history: shared_history(args.history),
            running: None,
            waiting: VecDeque::new(),
            approvals: FxHashMap::default(),
            closed_approvals: FxHashMap::default(),
            approval_counter: Arc::new(AtomicU64::new(approvals_after)),
            next_run: 0,
            turns_finished: 0,
            totals: Totals::default(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<AgentMsg>,
        message: AgentMsg,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AgentMsg::Turn { turn, reply } => state.take_turn(&myself, turn, reply),
            AgentMsg::Internal(AgentInternal::TurnFinished { run }) => state.finish_kept(run),
            AgentMsg::Stop => state.stop(),
            AgentMsg::Internal(AgentInternal::ApprovalPending {
                id,
                responder,
                turn,
            }) => {
                // Pending only while its turn runs: a stop in the tick it
                // was asked reached the agent first, closed the request on
                // the stream (cancelled) and ended the turn.
                if state
                    .running
                    .as_ref()
                    .is_some_and(|r| Arc::ptr_eq(&r.shared, &turn))
                {
                    state.approvals.insert(id, responder);
                } else {
                    state
                        .closed_approvals
                        .insert(id.clone(), ApprovalRefusal::Ended(id));
                }
            }
            AgentMsg::ResolveApproval {
                id,
                decision,
                reply,
            } => {
                let _ = reply.send(state.resolve_approval(id, decision));
            }
            AgentMsg::Steer {
                text,
                asking,
                reply,
            } => super::running::steer(
                state.running.as_ref(),
                &state.config.id,
                text,
                &asking,
                reply,
            ),
            AgentMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            // Only a remote child's proxy is sent these (crate/remote).
            AgentMsg::Internal(
                AgentInternal::Report(_)
                | AgentInternal::Lost(_)
                | AgentInternal::StopOverdue(_)
                | AgentInternal::GapOverdue { .. }
                | AgentInternal::RunOverdue(_),
            ) => {}
        }
        state.start_next(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<AgentMsg>,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        // An agent that goes away ends its turn: nothing runs unowned. A
        // turn's end notice not read yet never will be: the queued turns
        // end now.
        state.stop_running();
        if let Some(running) = &mut state.running {
            // The turn was closed before this stop (by its own task, its
            // notice never read, or from outside): its task, aborted above,
            // ends at its next wait at the latest, and leaves its result.
            let _ = (&mut running.task.0).await;
            let run = running.run;
            let kept = turn_state::lock(&running.shared).kept_end.take();
            if let Some(kept) = kept {
                let (result, history) = *kept;
                state.finish(run, result, history);
            }
        }
        state.end_queued(usize::MAX);
        // After a stop ractor hands this state to the supervisor inside
        // the termination event, which a host's actor reads only between
        // its handlers: a host that stopped its agent in a handler and
        // then drained the stream waited for ever on this sender — and on
        // a closed turn's sinks, kept when its end notice was still in the
        // mailbox (a stop is read before it; its end is on the stream).
        state.running = None;
        state.events = EventSink::unread();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
