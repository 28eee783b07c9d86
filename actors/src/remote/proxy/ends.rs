//! How a remote turn ends here rather than on its node: its node lost, a
//! report missing past its grace — the closing events a local stop would
//! emit, then its result; and its finish, however it ended.

use subagents_messages::remote::RunRequest;
use subagents_messages::{AgentEvent, AgentResult, Outcome};

use crate::agent::AgentMsg;
use crate::remote::mirror::lost_outcome;
use crate::remote::proxy::{Overdue, ProxyState, RemoteRun, lock};
use crate::sink::EventSink;

impl ProxyState {
    /// The grace of report `missing` of run `key` ran out: still missing
    /// (the reports after it held, the turn open), the run is stopped on
    /// its node and fails here.
    pub(super) fn gap_overdue(&mut self, key: u64, missing: u64) {
        let stuck = self
            .run
            .as_ref()
            .is_some_and(|run| run.key == key && lock(&run.closer.mirror).gap() == Some(missing));
        if !stuck {
            return;
        }
        let _ = self.link.request(key, RunRequest::Stop);
        let text = format!(
            "node `{}`: report {missing} of the run never arrived within {} s of the next",
            self.link.node(),
            crate::defaults::REMOTE_STOP_GRACE.as_secs()
        );
        self.close(&text, Outcome::Failed(text.clone()));
    }

    /// Watches the gap at `missing` with `timer`, in place of the gap
    /// watched before (filled: its timer aborted).
    pub(super) fn watch_gap(
        &mut self,
        missing: u64,
        timer: tokio::task::JoinHandle<Result<(), ractor::MessagingErr<AgentMsg>>>,
    ) {
        match &mut self.run {
            Some(run) => run.watching = Some((missing, Overdue(timer))),
            None => timer.abort(),
        }
    }

    /// Keeps a grace's timer with the run (aborted when it ends).
    pub(super) fn keep_grace(
        &mut self,
        timer: tokio::task::JoinHandle<Result<(), ractor::MessagingErr<AgentMsg>>>,
    ) {
        match &mut self.run {
            Some(run) => run.graces.push(Overdue(timer)),
            None => timer.abort(),
        }
    }

    /// The run's `Result` went by and its `Ended` has no grace yet: its
    /// key, the grace to start. The node sends its `Ended` right after;
    /// lost (the node up), only the run's bound ended it — never, under a
    /// wall clock of `Duration::MAX` (no limit): the child stayed
    /// `running`, its answer on the stream, its slot held.
    pub(super) fn result_unended(&mut self) -> Option<u64> {
        let run = self.run.as_mut()?;
        let seen = lock(&run.closer.mirror).ended();
        (seen && !std::mem::replace(&mut run.result_watched, true)).then_some(run.key)
    }

    /// Run `key` outlived its wall clock and the grace, its node silent
    /// (a last report lost, or none after its start): asked to stop there,
    /// it ends here — with its result if its `Result` went by, else
    /// failed, saying so.
    pub(super) fn run_overdue(&mut self, key: u64) {
        if self.run.as_ref().is_none_or(|run| run.key != key) {
            return;
        }
        let _ = self.link.request(key, RunRequest::Stop);
        let text = format!(
            "node `{}` did not end the run within its wall clock and {} s more",
            self.link.node(),
            crate::defaults::REMOTE_STOP_GRACE.as_secs()
        );
        self.close(&text, Outcome::Failed(text.clone()));
    }

    /// The node or the link is gone: the turn ends failed, here.
    pub(super) fn lost(&mut self, why: &str) {
        // A request that could not go (over the wire's limit) leaves a
        // node that may be well, running the turn for nobody: told to stop
        // (a lost node takes nothing).
        if let Some(run) = &self.run {
            let _ = self.link.request(run.key, RunRequest::Stop);
        }
        let (text, outcome) = lost_outcome(self.link.node(), why);
        self.close(&text, outcome);
    }

    /// Ends the running turn here (not on its node): closing events, then
    /// the result.
    pub(super) fn close(&mut self, text: &str, outcome: Outcome) {
        let Some(run) = self.run.as_mut() else {
            return;
        };
        // A stop was under way: it ends as the stop ends it — `stopped`,
        // no wake — whatever cut it short here (its node lost, a report
        // refused or missing past its grace), as a stop whose node never
        // answered does. It ended `failed` and woke the parent.
        let outcome = match outcome {
            Outcome::Failed(_) if run.stopping => Outcome::Stopped,
            other => other,
        };
        let elapsed = run.started.elapsed();
        let mut mirror = lock(&run.closer.mirror);
        let Some((events, result)) = mirror.close(text, outcome, elapsed) else {
            // Its `Result` went by and its `Ended` will not come (the node
            // was lost in between): it ended with that result. (Or its
            // closer ended it: then that result.)
            let ended = mirror.result().cloned();
            drop(mirror);
            if let Some(result) = ended {
                self.finish(result, None);
            }
            return;
        };
        // Ended here, its node's word on the answers sent on never in (a
        // node lost or silent, a stop it never answered, a gap): each may
        // have been taken there — `Unsettled`, and no longer held as given
        // (a later answer reached no agent here: `Ended`).
        let unsettled = run.verdicts.unsettle(|id| self.answered.get(id).copied());
        for id in &unsettled {
            self.answered.remove(id);
        }
        emit_closing(run, &self.events, events, mirror);
        self.finish(result, None);
    }
}

/// A run its node stopped on its own (its host going away:
/// `NodeRunner::stop_all`) was not stopped from here: it failed, waking
/// its parent as its node's crash does — `stopped`, it woke nobody ("on
/// purpose"), and the parent's model never heard of the work again. A
/// stop this side asked for (a host's, an interrupt, a cascade) stays
/// `stopped`. Applied to its `Result` event and to its end alike; true
/// when it said `failed`.
pub(super) fn unasked_stop(node: &str, stopping: bool, result: &mut AgentResult) -> bool {
    if !stopping && matches!(result.outcome, Outcome::Stopped) {
        result.outcome = Outcome::Failed(format!(
            "node `{node}` stopped the run (its host went away)"
        ));
        return true;
    }
    false
}

/// Emits the events that close a turn here (its open calls and approval
/// answered, or its `Result`), folded first into its conversation as the
/// node's own are — a call cut here is answered there too — under the
/// mirror's lock (let go here), then tells of the step if a call was
/// answered.
pub(super) fn emit_closing(
    run: &RemoteRun,
    out: &EventSink,
    events: Vec<AgentEvent>,
    mirror: std::sync::MutexGuard<'_, crate::remote::mirror::Mirror>,
) {
    let step = events
        .iter()
        .any(|e| matches!(e, AgentEvent::ToolResult(_)));
    for event in &events {
        super::actor::progress(&run.shared, event);
    }
    run.closer.sink.close_with(|| {
        for event in events {
            out.emit(event);
        }
    });
    drop(mirror);
    if step {
        out.stepped();
    }
}

impl ProxyState {
    /// The turn ended (on its node, or here): its result goes to whoever
    /// waits, with the conversation it ended on.
    pub(super) fn finish(
        &mut self,
        mut result: AgentResult,
        conversation: Option<Vec<subagents_messages::ChatMessage>>,
    ) {
        let Some(mut run) = self.run.take() else {
            return;
        };
        self.link.forget(run.key);
        // Its `Result` went by: that is how it ended. A local agent's
        // reply is its `Result`; a node whose `Ended` said otherwise (a
        // bug, or a lie) turned a `completed` the stream showed into the
        // envelope's, the wake's and the tool's `failed`.
        if let Some(shown) = lock(&run.closer.mirror).result() {
            result = shown.clone();
        }
        let asked = run.stopping && !run.stopped_by_its_node;
        unasked_stop(self.link.node(), asked, &mut result);
        // Answers whose node's word never came were not taken (`Ended`,
        // as the run's end tells them): not a first answer a later one
        // is refused with.
        for id in run.verdicts.end() {
            self.answered.remove(&id);
        }
        {
            let mut mirror = lock(&run.closer.mirror);
            // The node ended it without its `Result` event: said here,
            // after what it left open is answered.
            let events = mirror.end_with(&result);
            if !events.is_empty() {
                emit_closing(&run, &self.events, events, mirror);
            }
        }
        let conversation = {
            let mut state = crate::agent::turn_state_lock(&run.shared);
            (state.closing, state.replaced) = (true, true);
            (state.ends, state.kept_end) = (None, None);
            // The node's, or (ended here, or its node could not send it:
            // an `Ended` over the wire's limit goes without it) what it
            // started from, and how it ended — never nothing, which a
            // message would resume from the task alone.
            // The node's holds what it took and never read: no longer
            // unread here (read with it, it was written twice).
            let conversation = conversation.filter(|c| !c.is_empty());
            if conversation.is_some() {
                state.steering.clear();
            }
            let conversation = conversation.unwrap_or_else(|| {
                // A message it took and never read (the run ended here
                // first) is in it, after its end, as a local close keeps
                // one: lost, the resumed run lacked an instruction its
                // parent was told it took (read before the end, it sat
                // where no call had read it).
                let mut kept = std::mem::take(&mut state.history);
                kept.push(subagents_messages::ChatMessage::assistant(
                    result.text.clone(),
                    Vec::new(),
                ));
                while let Some(text) = state.steering.pop_front() {
                    kept.push(subagents_messages::ChatMessage::user(
                        crate::agent::steering_text(&text),
                    ));
                }
                kept
            });
            state.history = conversation.clone();
            conversation
        };
        crate::agent::spans::record_remote_end(&run.span, &result);
        self.history = conversation;
        self.turns_finished += 1;
        self.usage.add(result.usage);
        self.tool_calls += u64::from(result.tool_calls);
        // Waiting for a verdict, refused — but one its node read (its
        // `Steered` came first) is in the conversation kept: taken, as a
        // local child's read before its turn ended (refused, it was sent
        // again and read twice by the run that went on).
        for (_, (text, asking, reply)) in std::mem::take(&mut run.steers) {
            let read = run.read_ahead.iter().position(|read| *read == text);
            let _ = reply.send(match read {
                Some(at) => {
                    run.read_ahead.remove(at);
                    asking.note_taken(&crate::hub::Steered::Running);
                    Ok(crate::hub::Steered::Running)
                }
                None => Err(crate::hub::Refused::Finished {
                    id: self.config.id.clone(),
                }),
            });
        }
        if let Some(reply) = run.reply.take() {
            reply.send(result);
        }
    }
}
