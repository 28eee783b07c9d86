//! A stopping hub ends its children (`post_stop`): every one stopped, and
//! each running one waited for — its result, or its death — before its
//! terminal status.

use subagents_messages::SubAgentStatus;

use crate::hub::lifecycle::HubState;
use crate::hub::stop::{STOPPED_QUEUED, STOPPED_RUNNING};

impl HubState {
    /// Stops every child and waits for each running one to end its turn
    /// (its closing events come before its terminal status). Only when the
    /// hub itself stops: its mailbox is closed then, so the results are
    /// taken from each child's `last_result` directly.
    pub(super) async fn stop_all_now(&mut self) {
        let all = self.unfinished();
        let mut running = Vec::new();
        for id in &all {
            // The hub's stop wins over an interrupt under way.
            self.prefer_stop(id);
            if let Some(child) = self.children.get_mut(id)
                && let Some(agent) = &child.agent
            {
                let depth = child.request.requester_depth;
                // Its turn ended already; it waited for its own children.
                if let Some(ending) = child.ending.take() {
                    running.push((depth, id.clone(), Ends::Ended(ending)));
                    continue;
                }
                child.stopping.get_or_insert(STOPPED_RUNNING);
                self.book.mark_going(id);
                crate::hub::finish::mark_stopping_in(&self.book, &self.config.observers, id);
                let _ = agent.stop_turn();
                let last = child.last_result.take();
                running.push((
                    depth,
                    id.clone(),
                    Ends::Reports(last, agent.actor().clone()),
                ));
            } else {
                self.finish_child(
                    id,
                    SubAgentStatus::Stopped,
                    None,
                    Some(STOPPED_QUEUED.into()),
                );
            }
        }
        // Deepest first: a child's own children end inside its row, before
        // its own end closes it.
        running.sort_by_key(|r| std::cmp::Reverse(r.0));
        for (_, id, ends) in running {
            let (status, result, error) = match ends {
                Ends::Ended(ending) => *ending,
                // Its result, or its end: a killed child's state — the
                // result's sender with it — waits in this hub's supervision
                // port, which a stopping hub never reads (the stop waited
                // for ever, the killed turn ran on with its permit). It
                // drops, turn and all, with the hub's ports.
                // Dead without a report, its turn is ended here (`failed`,
                // as its `Result` says): ended as that state dropped, after
                // this stop, its call's answer and `Result` went nowhere.
                Ends::Reports(Some(last), cell) => {
                    let last = tokio::select! {
                        biased;
                        last = last => last.ok(),
                        _ = cell.wait(None) => None,
                    };
                    // Its turn had ended, that report parked with its
                    // dead state (or a remote one's `Ended` not come):
                    // the result it showed.
                    let last = last.or_else(|| self.book.kept_result(&id));
                    match last {
                        None if self.book.end_turn_as_killed(&id) => {
                            (SubAgentStatus::Failed, None, Some(KILLED.to_owned()))
                        }
                        last => self.ending(&id, last),
                    }
                }
                Ends::Reports(None, _) => self.ending(&id, None),
            };
            self.finish_child(&id, status, result, error);
        }
    }
}

/// Why a child killed as its hub stops failed (as a kill is worded).
const KILLED: &str = "the sub-agent stopped before it reported a result (killed)";

/// How a running child ends as the hub stops.
enum Ends {
    /// Its turn reports (or has nothing left to report); its actor.
    Reports(
        Option<tokio::sync::oneshot::Receiver<subagents_messages::AgentResult>>,
        ractor::ActorCell,
    ),
    /// Its turn ended before: how.
    Ended(Box<crate::hub::lifecycle::Ending>),
}
