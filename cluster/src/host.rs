//! The node host: an actor in its node's `pg` group that runs children
//! for other nodes — each `Start` becomes a run of the node's
//! [`NodeRunner`], whose reports go to the asking node's inbox — and
//! answers the heartbeat with its live count. When an asking node is
//! lost, its runs follow its policy: stopped (`Cascade`), or left to end
//! with their result kept here for fetching (`Detach`). Its handler never
//! waits: a run goes on in the runner's task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use subagents_actors::NodeRunner;
use subagents_messages::AgentId;
use subagents_messages::codec::{CodecError, Wire};
use subagents_messages::remote::{ReportBody, RunReport, RunRequest};

use crate::error::ClusterError;
use crate::wire::{
    Hello, HostMsg, InboxMsg, KeptRun, Unread, UnreadStart, WIRE_VERSION, decode_request,
    decode_start, encode_report, host_group, inbox_group, read_hello, unseal,
};

/// The node host actor.
pub(crate) struct NodeHost;

/// Results kept for fetching, of runs whose parent's node was lost.
pub(crate) type Kept = Arc<Mutex<Vec<KeptRun>>>;

/// How many times each asking node's session closed. A run belongs to
/// the session it was started in (the count then): once that session has
/// closed, its reports are kept here, whatever a later session of a node
/// of the same name does. (A mark per node name, cleared by the node's
/// next start, sent an orphan's reports to the restarted node's new
/// inbox: its kept result was lost, and its reports landed in a new run
/// that had drawn the same key.)
type Lost = Arc<Mutex<HashMap<String, u64>>>;

/// One run this node has for another.
struct HostedRun {
    /// Its number on this node's runner.
    run: u64,
    keep_if_orphaned: bool,
    /// Its token ([`fresh_token`](crate::wire::fresh_token)): a request
    /// without it is not its asker's.
    token: u64,
}

/// Its state (and arguments).
pub(crate) struct HostState {
    /// This node's name (its `pg` group).
    pub(crate) node: String,
    pub(crate) runner: NodeRunner,
    /// Runs started here, by (asking node, its key).
    runs: HashMap<(String, u64), HostedRun>,
    kept: Kept,
    lost: Lost,
    /// This node's incarnation ([`Hello::incarnation`]).
    incarnation: u64,
    /// Each asking node's incarnation its runs here were started by.
    parents: HashMap<String, u64>,
}

impl HostState {
    pub(crate) fn new(node: String, runner: NodeRunner, incarnation: u64) -> Self {
        Self {
            node,
            runner,
            runs: HashMap::new(),
            kept: Kept::default(),
            lost: Lost::default(),
            incarnation,
            parents: HashMap::new(),
        }
    }

    /// Node `node`'s runs here are orphans (its session closed, or it came
    /// back as another process): their reports are kept from here on, and
    /// each follows its policy — stopped (`Cascade`) or left to end, its
    /// result kept (`Detach`).
    fn orphan(&mut self, node: &str) {
        // First: the reports of its runs (those a stop causes now too)
        // are kept from here on, not sent to its stale inbox.
        *lock(&self.lost).entry(node.to_owned()).or_default() += 1;
        self.parents.remove(node);
        // Its runs leave the map: no request of a later session reaches
        // them, and a run that session starts with the same key is a run
        // of its own.
        let keys: Vec<(String, u64)> = self
            .runs
            .keys()
            .filter(|(from, _)| from == node)
            .cloned()
            .collect();
        let mut orphans: Vec<(u64, HostedRun)> = keys
            .into_iter()
            .filter_map(|k| self.runs.remove(&k).map(|run| (k.1, run)))
            .collect();
        orphans.sort_unstable_by_key(|(key, _)| *key);
        for (_, run) in orphans {
            if !run.keep_if_orphaned {
                self.runner.request(run.run, RunRequest::Stop);
            }
        }
    }
}

impl Actor for NodeHost {
    type Msg = HostMsg;
    type State = HostState;
    type Arguments = HostState;

    async fn pre_start(
        &self,
        myself: ActorRef<HostMsg>,
        state: HostState,
    ) -> Result<HostState, ActorProcessingErr> {
        ractor::pg::join(host_group(&state.node), vec![myself.get_cell()]);
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<HostMsg>,
        message: HostMsg,
        state: &mut HostState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HostMsg::Start(header, spec) => match decode_start(&header, &spec) {
                Ok(start) => {
                    // A start from another process of a node whose runs
                    // are here (it restarted under its name, and came
                    // back before its old session's close was read, or
                    // over a half-open one that never closes): those runs
                    // are orphans. Taken for the same process, a Detach
                    // run's result went to the new process and was lost,
                    // a Cascade run was never stopped, and the new
                    // process's keys (from 1 again) were refused as live.
                    match state.parents.get(&start.reply_to) {
                        // (0: an earlier version's, which does not say.)
                        Some(&known) if known != start.incarnation && start.incarnation != 0 => {
                            tracing::warn!(node = %start.reply_to, "a node came back as another process: its runs here are orphans");
                            state.orphan(&start.reply_to.clone());
                        }
                        _ => {}
                    }
                    state
                        .parents
                        .insert(start.reply_to.clone(), start.incarnation);
                    let key = start.spec.key;
                    let runner = &state.runner;
                    state.runs.retain(|_, hosted| !runner.ended(hosted.run));
                    // A second start of a run still live here (a retry, a
                    // forgery) starts nothing: it took the first's place,
                    // which went on unowned — no request or loss reached
                    // it, and both sent their reports under one key.
                    if let Some(live) = state.runs.get(&(start.reply_to.clone(), key)) {
                        tracing::warn!(node = %start.reply_to, key, "a start of a run already live here");
                        // Under another token (the asker's process is
                        // new and drew the key again, or the live run was
                        // forged): refused to it, or its child, whose
                        // reports the live run's token never matches,
                        // waited for ever.
                        if live.token != start.token {
                            let header = (start.reply_to, key, start.token);
                            refuse(state, header, "a run of that key is live here already");
                        }
                        return Ok(());
                    }
                    let keep_if_orphaned = start.spec.keep_if_orphaned;
                    let session = lost_sessions(&state.lost, &start.reply_to);
                    let to = Destination {
                        inbox: inbox_group(&start.reply_to),
                        parent_node: start.reply_to.clone(),
                        session,
                        id: start.spec.id.clone(),
                        token: start.token,
                        kept: state.kept.clone(),
                        lost: state.lost.clone(),
                    };
                    let run = state
                        .runner
                        .start(start.spec, move |report| to.send(report));
                    state.runs.insert(
                        (start.reply_to, key),
                        HostedRun {
                            run,
                            keep_if_orphaned,
                            token: start.token,
                        },
                    );
                }
                Err(unread) => refuse_unread(state, unread),
            },
            HostMsg::Request(bytes) => match decode_request(&bytes) {
                Ok((from, key, token, request)) => match state.runs.get(&(from, key)) {
                    Some(run) if run.token == token => state.runner.request(run.run, request),
                    // Not its asker's (a forgery, a request of another
                    // run under a reused key): nothing is done.
                    Some(_) => tracing::warn!(key, "a request without its run's token"),
                    None => {}
                },
                Err(e) => tracing::warn!(error = %e, "a request this node could not read"),
            },
            HostMsg::Live(reply) => {
                let _ = reply.send(state.runner.live() as u64);
            }
            HostMsg::Hello(reply) => {
                let hello = Hello {
                    version: WIRE_VERSION,
                    incarnation: state.incarnation,
                    live: state.runner.live() as u64,
                };
                match hello.to_wire() {
                    Ok(bytes) => {
                        let _ = reply.send(bytes);
                    }
                    Err(e) => tracing::warn!(error = %e, "a hello that could not be encoded"),
                }
            }
            // Copied and encoded off this actor, which answers the
            // heartbeats: a kept list of hundreds of MiB (it has no bound),
            // fetched a few times, held each `Hello` behind it past its
            // second — three in a row, and every parent lost this node.
            HostMsg::Kept(reply) => {
                let kept = state.kept.clone();
                drop(tokio::task::spawn_blocking(move || {
                    let kept = lock(&kept).clone();
                    match encode_kept(kept) {
                        Ok(bytes) => {
                            let _ = reply.send(bytes);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "kept results that could not be encoded")
                        }
                    }
                }));
            }
            HostMsg::ParentLost(sealed) => {
                if let Some(node) = unseal::<String>(&sealed) {
                    state.orphan(&node);
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<HostMsg>,
        state: &mut HostState,
    ) -> Result<(), ActorProcessingErr> {
        state.runner.stop_all();
        Ok(())
    }
}

/// A report that could not be encoded (over the wire's limit: a tool's
/// huge output, a conversation past 64 MiB), made one that can, under the
/// same number: dropped, its number was a gap the asking node waited on
/// for ever — the run never ended there, nor did a stop of it. An `Ended`
/// goes without its conversation (the run cannot resume; its result
/// stands); anything else, or an `Ended` still too large, says why the run
/// cannot be followed (`Refused`: the asking node fails the child with it).
fn fit(report: RunReport, error: &CodecError) -> RunReport {
    let RunReport { key, seq, body } = report;
    let body = match body {
        ReportBody::Ended {
            result,
            conversation,
        } if !conversation.is_empty() => {
            let trimmed = RunReport {
                key,
                seq,
                body: ReportBody::Ended {
                    result,
                    conversation: Vec::new(),
                },
            };
            if trimmed.to_wire().is_ok() {
                return trimmed;
            }
            ReportBody::Refused(format!("its last report could not be sent ({error})"))
        }
        _ => ReportBody::Refused(format!("a report of the run could not be sent ({error})")),
    };
    RunReport { key, seq, body }
}

/// A start whose spec this node could not read (another version's, a
/// forged one) started nothing, and the asking node — its child
/// `running`, waiting for reports — was never told: its child ran for
/// ever there. When the header says who asked, the run is refused to it,
/// saying why; a start without a readable header is only logged.
fn refuse_unread(state: &HostState, unread: UnreadStart) {
    let UnreadStart { header, error } = unread;
    tracing::warn!(%error, "a start this node could not read");
    // The codec's words stay in the log: they are its `Debug` (bincode's
    // type names), and the refusal reaches a model.
    if let Some(header) = header {
        let why = "the node could not read the run's request (another version of the runtime?)";
        refuse(state, header, why);
    }
}

/// Refuses the run `(asking node, key, token)` to its asker, saying why.
fn refuse(state: &HostState, (reply_to, key, token): (String, u64, u64), why: &str) {
    let to = Destination {
        inbox: inbox_group(&reply_to),
        session: lost_sessions(&state.lost, &reply_to),
        parent_node: reply_to,
        // Unread: a refusal is never kept, so no id is needed.
        id: AgentId::new(""),
        token,
        kept: state.kept.clone(),
        lost: state.lost.clone(),
    };
    to.send(RunReport {
        key,
        seq: 0,
        body: ReportBody::Refused(why.to_owned()),
    });
}

/// Where a run's reports go: the asking node's inbox; once that node is
/// gone, its last report is kept here.
struct Destination {
    inbox: String,
    parent_node: String,
    /// The parent node's session the run was started in.
    session: u64,
    id: AgentId,
    /// The run's token, carried by each report.
    token: u64,
    kept: Kept,
    lost: Lost,
}

impl Destination {
    fn send(&self, report: RunReport) {
        if lost_sessions(&self.lost, &self.parent_node) > self.session {
            self.keep(report);
            return;
        }
        let inbox = ractor::pg::get_members(&self.inbox).into_iter().next();
        let Some(inbox) = inbox else {
            self.keep(report);
            return;
        };
        let (report, message) = match encode_report(&report, self.token) {
            Ok(message) => (report, message),
            Err(error) => {
                let fitted = fit(report, &error);
                match encode_report(&fitted, self.token) {
                    Ok(message) => (fitted, message),
                    Err(error) => {
                        tracing::warn!(%error, "a report that could not be encoded");
                        return;
                    }
                }
            }
        };
        let inbox: ActorRef<InboxMsg> = inbox.into();
        if inbox.cast(message).is_err() {
            // Its node went away just now.
            self.keep(report);
        }
    }

    /// The asking node is gone: its run's end is kept for fetching.
    fn keep(&self, report: RunReport) {
        let ReportBody::Ended {
            result,
            conversation,
        } = report.body
        else {
            return;
        };
        tracing::debug!(parent = %self.parent_node, id = %self.id, "kept the result of an orphaned run");
        lock(&self.kept).push(kept_run(
            self.parent_node.clone(),
            self.id.clone(),
            result,
            conversation,
        ));
    }
}

/// A kept run as it can be fetched: one that would not fit the wire by
/// itself is kept without its conversation, as its live report goes
/// (`fit`) — kept whole, it made every later fetch of the list fail.
fn kept_run(
    parent_node: String,
    id: AgentId,
    result: subagents_messages::AgentResult,
    conversation: Vec<subagents_messages::ChatMessage>,
) -> KeptRun {
    let mut run = KeptRun {
        parent_node,
        id,
        result,
        conversation,
    };
    if matches!(run.to_wire(), Err(CodecError::TooLarge { .. })) {
        run.conversation = Vec::new();
    }
    run
}

/// The kept runs as bytes: all of them, or — past the wire's limit, where
/// the reply was dropped and every later fetch failed for good — the
/// newest that fit (each fits alone: [`kept_run`]).
fn encode_kept(mut kept: Vec<KeptRun>) -> Result<Vec<u8>, CodecError> {
    let limit = match kept.to_wire() {
        Err(CodecError::TooLarge { limit, .. }) => limit,
        encoded => return encoded,
    };
    let sizes: Vec<usize> = kept
        .iter()
        .map(|run| run.to_wire().map_or(usize::MAX, |b| b.len()))
        .collect();
    // The list's own length prefix, at most ten bytes.
    let (mut start, mut total) = (kept.len(), 10usize);
    while start > 0 && total.saturating_add(sizes[start - 1]) <= limit {
        start -= 1;
        total += sizes[start];
    }
    tracing::warn!(
        left_out = start,
        "kept results past the wire's limit: the newest that fit are sent"
    );
    kept.drain(..start);
    kept.to_wire()
}

/// How many sessions of `node` have closed so far.
fn lost_sessions(lost: &Lost, node: &str) -> u64 {
    lock(lost).get(node).copied().unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Asks `host` (of node `node`) for the results it keeps.
pub(crate) async fn kept_of(
    host: &ActorRef<HostMsg>,
    node: &str,
) -> Result<Vec<KeptRun>, ClusterError> {
    use subagents_messages::codec::Wire;
    let no_answer = |why: String| ClusterError::NoAnswer {
        node: node.to_owned(),
        why,
    };
    let bytes = ractor::call_t!(host, HostMsg::Kept, 5000).map_err(|e| no_answer(e.to_string()))?;
    Vec::<KeptRun>::from_wire(&bytes).map_err(|e| no_answer(e.to_string()))
}

/// What node `node`'s host answers to [`HostMsg::Hello`] within `wait`.
pub(crate) async fn hello_of(
    host: &ActorRef<HostMsg>,
    node: &str,
    wait: std::time::Duration,
) -> Result<Hello, ClusterError> {
    let no_answer = |why: String| ClusterError::NoAnswer {
        node: node.to_owned(),
        why,
    };
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    let bytes = ractor::call_t!(host, HostMsg::Hello, ms).map_err(|e| no_answer(e.to_string()))?;
    read_hello(&bytes).map_err(|unread| match unread {
        Unread::Version(theirs) => ClusterError::Version {
            node: node.to_owned(),
            ours: WIRE_VERSION,
            theirs: Some(theirs),
        },
        Unread::Bytes(e) => no_answer(e.to_string()),
    })
}

#[cfg(test)]
mod tests;
