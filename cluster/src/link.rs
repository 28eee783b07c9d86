//! The parent's side: a [`ClusterLink`] to another node's host, the inbox
//! its reports come back to, a heartbeat, and what a lost node does to
//! the runs it had.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use ractor_cluster::NodeServerMessage;
use subagents_actors::{NodeLink, RunReports};
use subagents_messages::remote::{ReportBody, RunReport, RunRequest, RunSpec};

use crate::wire::{
    HostMsg, InboxMsg, UnreadReport, decode_report, encode_request, encode_start, fresh_token,
    host_group, inbox_group, unseal,
};

/// How often a link asks its node how many runs are live (the heartbeat).
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(1);
/// Heartbeats in a row left unanswered before the node counts as lost.
pub(crate) const MISSED_HEARTBEATS: u32 = 3;

/// The runs this node has on others, by key: where each one's reports go.
#[derive(Clone, Default)]
pub(crate) struct Routes(Arc<Mutex<HashMap<u64, Route>>>);

/// One run on another node.
pub(crate) struct Route {
    /// The node it runs on.
    pub(crate) node: String,
    /// That node's incarnation, as the link that started it read it: a
    /// link that finds another process under the name loses its own runs,
    /// not those a newer link started on the new one.
    incarnation: u64,
    /// Its token ([`fresh_token`]): a report without it is not its node's.
    pub(crate) token: u64,
    /// Where its reports go.
    pub(crate) reports: RunReports,
    /// Every report numbered below it came.
    next: u64,
    /// The numbers that came past `next` (ahead of a gap).
    ahead: std::collections::BTreeSet<u64>,
    /// The number of its last report (an `Ended` or a `Refused`), once it
    /// came: the route goes once every report up to it has.
    last: Option<u64>,
}

impl Route {
    /// Report `seq` came before.
    fn came_already(&self, seq: u64) -> bool {
        seq < self.next || self.ahead.contains(&seq)
    }

    /// Report `seq` came; whether every report up to the last has.
    fn came(&mut self, seq: u64, last: bool) -> bool {
        if last {
            self.last = Some(seq);
        }
        if seq >= self.next {
            self.ahead.insert(seq);
        }
        while self.ahead.remove(&self.next) {
            self.next += 1;
        }
        self.last.is_some_and(|last| self.next > last)
    }
}

impl Routes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Route>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Routes the run `key` on `node` (its `incarnation`), under `token`,
    /// to `reports`.
    pub(crate) fn insert(
        &self,
        key: u64,
        (node, incarnation): (String, u64),
        token: u64,
        reports: RunReports,
    ) {
        self.lock().insert(
            key,
            Route {
                node,
                incarnation,
                token,
                reports,
                next: 0,
                ahead: Default::default(),
                last: None,
            },
        );
    }

    /// Node `node` is gone — its process `incarnation`, or (`None`) every
    /// one under its name: each of its runs ends lost, once.
    pub(crate) fn node_lost(&self, node: &str, incarnation: Option<u64>, why: &str) {
        let lost: Vec<RunReports> = {
            let mut routes = self.lock();
            let mut keys: Vec<u64> = routes
                .iter()
                .filter(|(_, route)| {
                    route.node == node && incarnation.is_none_or(|i| route.incarnation == i)
                })
                .map(|(k, _)| *k)
                .collect();
            // In the order they started (keys rise): the parent's stream
            // never depends on a map's order.
            keys.sort_unstable();
            keys.iter()
                .filter_map(|k| routes.remove(k).map(|route| route.reports))
                .collect()
        };
        for reports in lost {
            reports.lost(why);
        }
    }
}

/// A link to another node: a [`NodeLink`] for a hub's
/// [`Placement`](subagents_actors::Placement). Cheap to clone.
#[derive(Clone)]
pub struct ClusterLink {
    pub(crate) inner: Arc<LinkInner>,
}

pub(crate) struct LinkInner {
    /// The other node's name.
    pub(crate) node: String,
    /// This node's name (where reports come back).
    pub(crate) me: String,
    /// This node's incarnation, sent with every start.
    pub(crate) my_incarnation: u64,
    /// The other node's, as it said at connect: another answering under
    /// its name is a restarted process, and this link's runs are lost.
    pub(crate) incarnation: u64,
    /// The node's host as found at connect; see [`LinkInner::host`].
    pub(crate) host: ActorRef<HostMsg>,
    pub(crate) routes: Routes,
    pub(crate) labels: Vec<String>,
    /// Its live count as last reported; `u64::MAX`: none yet.
    pub(crate) live: AtomicU64,
    pub(crate) down: AtomicBool,
    /// Why it was lost, once it was: said by a request made after (it
    /// read "it was lost", and the child lost with it failed with those
    /// words where its siblings read the loss's).
    pub(crate) why_lost: std::sync::OnceLock<String>,
    /// Runs started through it.
    pub(crate) started: AtomicU64,
    /// This node's server: the session to the other node is closed there
    /// when its heartbeats go unanswered.
    pub(crate) server: ActorRef<NodeServerMessage>,
    /// This node's inbox: a loss goes through it (see [`lose_node`]).
    pub(crate) inbox: ActorRef<InboxMsg>,
}

impl LinkInner {
    /// The node is gone: no more starts, and its runs end lost.
    pub(crate) fn lose(&self, why: &str) {
        let _ = self.why_lost.set(why.to_owned());
        self.down.store(true, Ordering::SeqCst);
        let lost = (self.node.as_str(), Some(self.incarnation));
        lose_node(&self.inbox, &self.routes, lost, why);
    }
}

/// Node `node` is lost: its runs end lost through this node's inbox, after
/// the reports already in its mailbox. Failed at once, a run whose last
/// reports had arrived (its `Result`, its `Ended`, cast in by the session
/// before it closed) ended `failed: node lost`, and those reports were
/// dropped, their route gone. Directly only if the inbox is gone. Its
/// process `incarnation` alone, if named ([`Routes::node_lost`]).
pub(crate) fn lose_node(
    inbox: &ActorRef<InboxMsg>,
    routes: &Routes,
    (node, incarnation): (&str, Option<u64>),
    why: &str,
) {
    let lost = InboxMsg::node_lost(node.to_owned(), incarnation, why.to_owned());
    if inbox.cast(lost).is_err() {
        routes.node_lost(node, incarnation, why);
    }
}

impl std::fmt::Debug for ClusterLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterLink")
            .field("node", &self.inner.node)
            .field("down", &self.inner.down.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl LinkInner {
    /// The node's host as the cluster knows it now. A remote actor's ref
    /// is its session's: a second connection between the two nodes closes
    /// one session as a duplicate, and the host found through it (at
    /// connect) went with it — every heartbeat then went unanswered and a
    /// healthy node was lost. Looked up again each time; the one found at
    /// connect while no other is known.
    pub(crate) fn host(&self) -> ActorRef<HostMsg> {
        ractor::pg::get_members(&host_group(&self.node))
            .into_iter()
            .find(|cell| {
                !cell.get_id().is_local() && cell.get_status() < ractor::ActorStatus::Stopping
            })
            .map_or_else(|| self.host.clone(), ActorRef::from)
    }
}

impl ClusterLink {
    /// The results its node keeps of runs whose parent's node was lost
    /// (with the `Detach` policy): fetched from the node.
    pub async fn kept(&self) -> Result<Vec<crate::KeptRun>, crate::ClusterError> {
        crate::host::kept_of(&self.inner.host(), &self.inner.node).await
    }

    /// How many runs were started on its node through this link.
    pub fn started(&self) -> u64 {
        self.inner.started.load(Ordering::SeqCst)
    }

    /// The node was lost (its session closed, or its heartbeat stopped).
    pub fn is_down(&self) -> bool {
        self.inner.down.load(Ordering::SeqCst)
    }

    /// Starts the heartbeat: every [`HEARTBEAT`] the node's live count;
    /// [`MISSED_HEARTBEATS`] unanswered in a row and the node is lost. It
    /// ends with the link.
    pub(crate) fn beat(&self) {
        let weak: Weak<LinkInner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut missed = 0;
            loop {
                tokio::time::sleep(HEARTBEAT).await;
                let Some(link) = weak.upgrade() else { return };
                if link.down.load(Ordering::SeqCst) {
                    return;
                }
                match crate::host::hello_of(&link.host(), &link.node, HEARTBEAT).await {
                    // Another process under its name (it restarted and
                    // connected again within the half second a closed
                    // session is given): this link's runs are not its.
                    // Taken for the same, they stayed `running` until
                    // their wall clock ran out.
                    Ok(hello) if hello.incarnation != link.incarnation => {
                        link.lose("it restarted: another process answers under its name");
                        return;
                    }
                    Ok(hello) => {
                        missed = 0;
                        link.live.store(hello.live, Ordering::SeqCst);
                    }
                    Err(_) => {
                        missed += 1;
                        if missed >= MISSED_HEARTBEATS {
                            link.lose(&format!("{missed} heartbeats in a row went unanswered"));
                            close_sessions(&link.server, &link.node).await;
                            return;
                        }
                    }
                }
            }
        });
    }
}

/// Closes this node's sessions with node `node`. A node found lost by its
/// heartbeat (hung, or behind a silent network) kept its session open: it
/// was never told, and when it woke its runs went on unowned — a Cascade
/// run not stopped, a Detach run's end sent to an inbox that no longer
/// routes it instead of kept for fetching. With its session closed, it
/// applies the parent's policy as for any lost session.
async fn close_sessions(server: &ActorRef<NodeServerMessage>, node: &str) {
    let Ok(sessions) = ractor::call_t!(server, NodeServerMessage::GetSessions, 1000) else {
        return;
    };
    let mut ours: Vec<_> = sessions
        .into_values()
        .filter(|s| {
            s.peer_name
                .as_ref()
                .is_some_and(|p| crate::node::peer_node(&p.name) == node)
        })
        .collect();
    ours.sort_unstable_by_key(|s| s.node_id);
    for session in ours {
        session
            .actor
            .stop(Some("its heartbeats went unanswered".to_owned()));
    }
}

impl NodeLink for ClusterLink {
    fn node(&self) -> &str {
        &self.inner.node
    }

    fn labels(&self) -> &[String] {
        &self.inner.labels
    }

    /// `None` once the node is lost: its last load is not a load
    /// (`LeastLoaded` chose a dead node by it, and failed every child).
    fn live(&self) -> Option<usize> {
        if self.inner.down.load(Ordering::SeqCst) {
            return None;
        }
        let live = self.inner.live.load(Ordering::SeqCst);
        (live != u64::MAX).then(|| usize::try_from(live).unwrap_or(usize::MAX))
    }

    /// Lost: `Placement::Labels` passes over it.
    fn is_lost(&self) -> bool {
        self.is_down()
    }

    fn start(&self, spec: RunSpec, reports: RunReports) -> Result<(), String> {
        let inner = &self.inner;
        if inner.down.load(Ordering::SeqCst) {
            return Err("it was lost before".into());
        }
        let key = spec.key;
        let token = fresh_token();
        let start = encode_start(&spec, &inner.me, token, inner.my_incarnation)
            .map_err(|e| e.to_string())?;
        let on = (inner.node.clone(), inner.incarnation);
        inner.routes.insert(key, on, token, reports);
        if inner.host().cast(start).is_err() {
            inner.routes.lock().remove(&key);
            return Err("its host is gone".into());
        }
        inner.started.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn request(&self, key: u64, request: RunRequest) -> Result<(), String> {
        let inner = &self.inner;
        if inner.down.load(Ordering::SeqCst) {
            return Err(inner
                .why_lost
                .get()
                .map_or("it was lost", String::as_str)
                .to_owned());
        }
        // Its token; a run with no route here has ended (nothing to ask).
        let Some(token) = inner.routes.lock().get(&key).map(|route| route.token) else {
            return Ok(());
        };
        let bytes = encode_request(&inner.me, key, token, &request).map_err(|e| e.to_string())?;
        inner
            .host()
            .cast(HostMsg::Request(bytes))
            .map_err(|_| "its host is gone".to_owned())
    }

    /// Its route goes: a run that ended here without its last report (a
    /// gap past its grace, a start that never arrived) kept it — and the
    /// numbers ahead of the gap, and the dead child's reports port — until
    /// the node was lost.
    fn forget(&self, key: u64) {
        self.inner.routes.lock().remove(&key);
    }
}

/// The inbox actor: where other nodes' hosts send the reports of the runs
/// they have for this node.
pub(crate) struct Inbox;

impl Actor for Inbox {
    type Msg = InboxMsg;
    type State = (String, Routes);
    type Arguments = (String, Routes);

    async fn pre_start(
        &self,
        myself: ActorRef<InboxMsg>,
        args: (String, Routes),
    ) -> Result<(String, Routes), ActorProcessingErr> {
        ractor::pg::join(inbox_group(&args.0), vec![myself.get_cell()]);
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<InboxMsg>,
        message: InboxMsg,
        (me, routes): &mut (String, Routes),
    ) -> Result<(), ActorProcessingErr> {
        match message {
            InboxMsg::Report(header, body) => match decode_report(&header, &body) {
                Ok((report, token)) => route(me, routes, report, token),
                Err(unread) => route_unread(me, routes, unread),
            },
            InboxMsg::NodeLost(sealed) => {
                if let Some((node, incarnation, why)) =
                    unseal::<(String, Option<u64>, String)>(&sealed)
                {
                    routes.node_lost(&node, incarnation, &why);
                }
            }
        }
        Ok(())
    }
}

/// Hands `report` to its run's reports; once its last and every one
/// before it have come, the route goes. A report without its run's
/// `token` (a forgery, a report of an earlier process's run under a
/// reused key) is not its run's: dropped. A `Refused` (a report its node
/// could not send, one this node could not read) ends the run here while
/// it goes on there: its node is asked to stop it. `me` is this node.
fn route(me: &str, routes: &Routes, report: RunReport, token: u64) {
    let mut held = routes.lock();
    let Some(route) = held.get_mut(&report.key) else {
        return;
    };
    if route.token != token {
        tracing::warn!(key = report.key, "a report without its run's token");
        return;
    }
    // A number that came already (a frame twice): dropped, read or not —
    // an unread copy, read as a refusal at its old number, took the route
    // and stopped the run on its node.
    if route.came_already(report.seq) {
        return;
    }
    let last = matches!(
        report.body,
        ReportBody::Ended { .. } | ReportBody::Refused(_)
    );
    // Taken away when the last came, an earlier one that came after it
    // (another session's frame, a reordering) found no route: dropped,
    // and the child, its answer sent whole, failed at the gap's grace.
    // By number, not by count: a report past the last (the run goes on
    // there until its stop lands) fills no gap.
    let done = route.came(report.seq, last);
    let node = route.node.clone();
    let reports = match done {
        true => held.remove(&report.key).map(|route| route.reports),
        false => Some(route.reports.clone()),
    };
    drop(held);
    let (key, refused) = (report.key, matches!(report.body, ReportBody::Refused(_)));
    if let Some(reports) = reports {
        reports.report(report);
    }
    // The proxy's own stop finds no token once the refusal has taken the
    // route (it sent nothing, and the run went on there for nobody); a
    // second stop, if it does, is one the node has already obeyed.
    if refused {
        let stop = encode_request(me, key, token, &RunRequest::Stop);
        let host = ractor::pg::get_members(&host_group(&node))
            .into_iter()
            .find(|cell| cell.get_status() < ractor::ActorStatus::Stopping);
        if let (Ok(stop), Some(host)) = (stop, host) {
            let _ = ActorRef::<HostMsg>::from(host).cast(HostMsg::Request(stop));
        }
    }
}

/// A report whose body this node could not read (another version's
/// event) was logged and dropped: a gap in the run's reports, which are
/// taken in order — nothing after it reached the child, and it never
/// ended here. When its header says which run and place, it ends the run
/// there, refused, saying why (as a report too large to send does), and
/// the run is asked to stop on its node: none of what it does would be
/// read. `me` is this node.
fn route_unread(me: &str, routes: &Routes, unread: UnreadReport) {
    let UnreadReport { header, error } = unread;
    tracing::warn!(%error, "a report this node could not read");
    let Some((key, seq, token)) = header else {
        return;
    };
    // The codec's words (its `Debug`, bincode's type names) stay in the
    // log above: the refusal reaches the parent model.
    let why =
        "a report of the run could not be read here (another version of the runtime?)".to_owned();
    let body = ReportBody::Refused(why);
    route(me, routes, RunReport { key, seq, body }, token);
}

#[cfg(test)]
mod tests;
