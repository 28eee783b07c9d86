//! One node: ractor_cluster's `NodeServer`, this node's host (running
//! children for others) and its inbox (reports of the children others run
//! for it), and the session events that tell a lost node.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::{NodeEventSubscription, NodeServer, NodeServerMessage};
use subagents_actors::NodeRunner;

use crate::error::ClusterError;
use crate::host::{HostState, NodeHost};
use crate::link::{ClusterLink, Inbox, LinkInner, Routes};
use crate::wire::{HostMsg, InboxMsg, KeptRun, WIRE_VERSION, host_group};

/// The longest frame a session reads: the codec's message limit (64 MiB,
/// `subagents_messages::codec`) and room for ractor_cluster's own framing.
/// ractor_cluster's default, 16 MiB, closed the whole session on a report
/// between the two — every child on the node lost, the link down.
const FRAME_LIMIT: u64 = (64 << 20) + (1 << 20);

/// One node of a cluster: it runs children for other nodes (its host) and
/// places its own children on them (its links).
pub struct ClusterNode {
    name: String,
    /// Drawn at start ([`crate::wire::Hello::incarnation`]).
    incarnation: u64,
    server: ActorRef<NodeServerMessage>,
    host: ActorRef<HostMsg>,
    inbox: ActorRef<InboxMsg>,
    routes: Routes,
    links: Arc<Mutex<HashMap<String, Vec<Weak<LinkInner>>>>>,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Sees sessions close: the node on the other end is lost at once — to
/// the links to it (their runs end lost) and to this node's host (its
/// runs for that node are orphans).
struct Sessions {
    links: Arc<Mutex<HashMap<String, Vec<Weak<LinkInner>>>>>,
    host: ActorRef<HostMsg>,
    book: Arc<Mutex<SessionBook>>,
}

/// How long a peer whose last session known here closed has for another
/// to be told authenticated before it is lost: ractor_cluster may close
/// the older of two sessions between the same nodes as a duplicate before
/// it tells of the newer's authentication — that close read as the loss
/// (a healthy node's child failed "node lost", in CI, under load).
const SESSION_GRACE: Duration = Duration::from_millis(500);

/// How long a connection has to authenticate before it is closed.
/// ractor_cluster sets no deadline on its handshake: a connection that
/// sends nothing, or half a frame, held its session, its actors and its
/// socket for ever — no cookie needed — and once the process ran out of
/// descriptors its listener spun on every accept.
pub(crate) const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

/// How long `connect` waits for the other node's [`HostMsg::Hello`].
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// Which session of each peer is the one in use. ractor_cluster tells of
/// every session that closes under a peer's name — also one that never
/// authenticated (anyone may claim a name before the cookie is checked)
/// and the loser of a second connection between two nodes (one closes as
/// a duplicate). Only the close of the peer's authenticated session, the
/// one ractor_cluster kept, is its loss.
///
/// Which of two authenticated sessions ractor_cluster keeps is its own
/// choice, made after both authenticated: the book keeps every
/// authenticated session of a peer, and the peer is lost when the last of
/// them closes. (It kept only the last one authenticated, so when the
/// duplicate closed was the newer one, that close read as the loss: a
/// healthy node's child failed "node lost", under load, in CI.)
#[derive(Debug, Default)]
pub(crate) struct SessionBook(HashMap<String, Vec<ractor::ActorId>>);

impl SessionBook {
    /// `session` authenticated as `peer`.
    pub(crate) fn authenticated(&mut self, peer: &str, session: ractor::ActorId) {
        let sessions = self.0.entry(peer.to_owned()).or_default();
        if !sessions.contains(&session) {
            sessions.push(session);
        }
    }

    /// Some session of `peer` is authenticated here.
    pub(crate) fn has(&self, peer: &str) -> bool {
        self.0.contains_key(peer)
    }

    /// `session` is authenticated (and has not closed).
    pub(crate) fn knows(&self, session: &ractor::ActorId) -> bool {
        self.0.values().any(|sessions| sessions.contains(session))
    }

    /// `session` of `peer` closed: `true` if it was the peer's last
    /// authenticated one (the peer is lost), `false` for any other.
    pub(crate) fn closed(&mut self, peer: &str, session: ractor::ActorId) -> bool {
        let Some(sessions) = self.0.get_mut(peer) else {
            return false;
        };
        let Some(at) = sessions.iter().position(|s| *s == session) else {
            return false;
        };
        sessions.remove(at);
        if sessions.is_empty() {
            self.0.remove(peer);
            true
        } else {
            false
        }
    }
}

impl Sessions {
    fn book(&self) -> std::sync::MutexGuard<'_, SessionBook> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Keeps `link` among the links to `node`, letting go of those no handle
/// holds (one per node name ever connected to was kept for the node's
/// life). Every link, not the last alone: a node's loss reached only the
/// newest, and the older, up, failed each child it was given.
fn remember<T>(links: &mut HashMap<String, Vec<Weak<T>>>, node: &str, link: Weak<T>) {
    links.retain(|_, kept| {
        kept.retain(|link| link.strong_count() > 0);
        !kept.is_empty()
    });
    links.entry(node.to_owned()).or_default().push(link);
}

/// `peer` is lost: to every link to it (their runs end lost) and to this
/// node's host (its runs for that node are orphans).
fn lose_peer(
    links: &Mutex<HashMap<String, Vec<Weak<LinkInner>>>>,
    host: &ActorRef<HostMsg>,
    peer: String,
    why: &str,
) {
    let lost: Vec<Arc<LinkInner>> = links
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&peer)
        .map(|kept| kept.iter().filter_map(Weak::upgrade).collect())
        .unwrap_or_default();
    for link in lost {
        link.lose(why);
    }
    let _ = host.cast(HostMsg::parent_lost(peer));
}

impl NodeEventSubscription for Sessions {
    fn node_session_opened(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let book = self.book.clone();
        drop(runtime.spawn(async move {
            tokio::time::sleep(HANDSHAKE_DEADLINE).await;
            let session = ses.actor.get_id();
            if !book
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .knows(&session)
            {
                tracing::warn!(addr = %ses.peer_addr, "a connection that did not authenticate in time: closed");
                ses.actor.stop(Some(format!(
                    "no handshake within {} s",
                    HANDSHAKE_DEADLINE.as_secs()
                )));
            }
        }));
    }

    fn node_session_disconnected(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        let Some(peer) = ses.peer_name.map(|p| peer_node(&p.name).to_owned()) else {
            return;
        };
        if !self.book().closed(&peer, ses.actor.get_id()) {
            tracing::debug!(%peer, addr = %ses.peer_addr, "a session that was not the peer's closed");
            return;
        }
        // Its address stays in the log: the loss reaches the parent
        // model (and its provider) in the child's failure.
        tracing::info!(%peer, addr = %ses.peer_addr, "a peer's session closed");
        let why = "its session closed".to_owned();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return lose_peer(&self.links, &self.host, peer, &why);
        };
        let (links, host, book) = (self.links.clone(), self.host.clone(), self.book.clone());
        // Lost unless another of its sessions is told authenticated
        // within the grace (the duplicate's twin).
        drop(runtime.spawn(async move {
            tokio::time::sleep(SESSION_GRACE).await;
            if !book
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .has(&peer)
            {
                lose_peer(&links, &host, peer, &why);
            }
        }));
    }

    fn node_session_authenticated(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        if let Some(peer) = &ses.peer_name {
            self.book()
                .authenticated(peer_node(&peer.name), ses.actor.get_id());
        }
    }
}

/// The node's own name in a peer's session name: ractor_cluster names a
/// peer `name@host`, and `host` is an address (no `@`), but `name` may
/// hold one — cut at the first, `gpu@2`'s loss was read as `gpu`'s: the
/// healthy node's runs were stopped or orphaned, the lost one's left.
pub(crate) fn peer_node(session_name: &str) -> &str {
    session_name
        .rsplit_once('@')
        .map_or(session_name, |(name, _host)| name)
}

impl ClusterNode {
    /// Starts node `name` listening on `addr:port` (use a loopback
    /// address unless other machines must reach it), with `cookie` shared
    /// by the cluster's nodes, running children for others with `runner`
    /// — its own: its shutdown stops the runner's runs, and its load (in
    /// its hello and heartbeats) is the runner's, so a runner (or a clone)
    /// shared by two nodes is stopped by either and counted by both.
    pub async fn start(
        name: &str,
        addr: IpAddr,
        port: u16,
        cookie: &str,
        runner: NodeRunner,
    ) -> Result<Self, ClusterError> {
        let spawn = |what| {
            move |e: ractor::SpawnErr| ClusterError::Spawn {
                what,
                why: e.to_string(),
            }
        };
        let server = NodeServer::new(
            port,
            cookie.to_owned(),
            name.to_owned(),
            addr.to_string(),
            None,
            None,
        )
        .with_listen_addr(addr)
        .with_max_inbound_frame_size(FRAME_LIMIT);
        let (server, _) = Actor::spawn(None, server, ())
            .await
            .map_err(spawn("node server"))?;
        let routes = Routes::default();
        let (inbox, _) = Actor::spawn(None, Inbox, (name.to_owned(), routes.clone()))
            .await
            .map_err(spawn("inbox"))?;
        let incarnation = crate::wire::fresh_token();
        let (host, _) = Actor::spawn(
            None,
            NodeHost,
            HostState::new(name.to_owned(), runner, incarnation),
        )
        .await
        .map_err(spawn("host"))?;
        let links: Arc<Mutex<HashMap<String, Vec<Weak<LinkInner>>>>> = Arc::default();
        let _ = server.cast(NodeServerMessage::SubscribeToEvents {
            id: "subagents".into(),
            subscription: Box::new(Sessions {
                links: links.clone(),
                host: host.clone(),
                book: Arc::default(),
            }),
        });
        Ok(Self {
            name: name.to_owned(),
            incarnation,
            server,
            host,
            inbox,
            routes,
            links,
        })
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Connects to node `node` at `addr` (`host:port`) and waits, at most
    /// `wait`, for its host to show up; `labels` are what
    /// `Placement::Labels` matches children's profile names against.
    pub async fn connect(
        &self,
        addr: &str,
        node: &str,
        labels: &[&str],
        wait: Duration,
    ) -> Result<ClusterLink, ClusterError> {
        let connect_error = |why: String| ClusterError::Connect {
            addr: addr.to_owned(),
            why,
        };
        ractor_cluster::client_connect(&self.server, addr)
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        let group = host_group(node);
        // A wait past what an `Instant` holds (`Duration::MAX`: as long as
        // it takes) has no deadline; adding it panicked.
        let deadline = tokio::time::Instant::now().checked_add(wait);
        let host = loop {
            let remote = ractor::pg::get_members(&group)
                .into_iter()
                .find(|cell| !cell.get_id().is_local());
            if let Some(cell) = remote {
                break ActorRef::<HostMsg>::from(cell);
            }
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                return Err(ClusterError::NoHost {
                    node: node.to_owned(),
                    addr: addr.to_owned(),
                    waited: wait,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Its wire's version, and which process it is. A node of another
        // version kept every heartbeat and dropped every start in silence:
        // each child placed there hung for its wall clock, and
        // `LeastLoaded`, reading its 0 live, chose it first.
        let version_error = |theirs| ClusterError::Version {
            node: node.to_owned(),
            ours: WIRE_VERSION,
            theirs,
        };
        // Asked again (the host looked up anew) until it answers: the
        // host found may be a stub of a session ractor_cluster is closing
        // as a duplicate (a second connection to the node).
        let asked_until = tokio::time::Instant::now() + HELLO_WAIT;
        let (host, hello) = loop {
            let host = ractor::pg::get_members(&group)
                .into_iter()
                .find(|cell| {
                    !cell.get_id().is_local() && cell.get_status() < ractor::ActorStatus::Stopping
                })
                .map_or(host.clone(), ActorRef::<HostMsg>::from);
            match crate::host::hello_of(&host, node, Duration::from_secs(1)).await {
                Ok(hello) => break (host, hello),
                // Said, in a hello of another shape: no use asking again.
                Err(said @ ClusterError::Version { .. }) => return Err(said),
                Err(_) if tokio::time::Instant::now() < asked_until => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => return Err(version_error(None)),
            }
        };
        if hello.version != WIRE_VERSION {
            return Err(version_error(Some(hello.version)));
        }
        let link = ClusterLink {
            inner: Arc::new(LinkInner {
                node: node.to_owned(),
                me: self.name.clone(),
                my_incarnation: self.incarnation,
                incarnation: hello.incarnation,
                host,
                routes: self.routes.clone(),
                labels: labels.iter().map(|l| (*l).to_owned()).collect(),
                live: AtomicU64::new(hello.live),
                down: AtomicBool::new(false),
                why_lost: std::sync::OnceLock::new(),
                started: AtomicU64::new(0),
                server: self.server.clone(),
                inbox: self.inbox.clone(),
            }),
        };
        remember(
            &mut self.links.lock().unwrap_or_else(PoisonError::into_inner),
            node,
            Arc::downgrade(&link.inner),
        );
        link.beat();
        Ok(link)
    }

    /// The results this node keeps of runs whose parent's node was lost
    /// (see [`ClusterLink::kept`] to ask another node for its own).
    pub async fn kept(&self) -> Result<Vec<KeptRun>, ClusterError> {
        crate::host::kept_of(&self.host, &self.name).await
    }

    /// Stops this node: its host (whose runs stop), its inbox, its server.
    pub fn shutdown(&self) {
        self.host.stop(None);
        self.inbox.stop(None);
        self.server.stop(None);
    }
}

#[cfg(test)]
mod tests {
    use super::{SessionBook, peer_node};

    /// Forged or repeated: a session that closed under a peer's name was
    /// that peer's loss whatever it was — a client that claimed the name
    /// and never knew the cookie, or the loser of a second connection
    /// (ractor_cluster closes one as a duplicate) — and every child on the
    /// healthy node failed "node lost", or its runs were orphaned while
    /// its session lived. Only the kept, authenticated session's close is.
    #[test]
    fn only_the_peers_kept_session_closing_loses_it() {
        let id = |n| ractor::ActorId::Local(n);
        let mut book = SessionBook::default();
        assert!(!book.closed("b", id(1)), "never authenticated");
        book.authenticated("b", id(2));
        assert!(!book.closed("b", id(3)), "another session under b's name");
        book.authenticated("b", id(4));
        assert!(!book.closed("b", id(2)), "the duplicate replaced");
        assert!(book.closed("b", id(4)), "the kept one: b is lost");
        assert!(!book.closed("b", id(4)), "once");
        // The newer of two closed as the duplicate (ractor_cluster's own
        // choice): the older is kept, b is not lost. Read as the loss, a
        // healthy node's child failed "node lost" (CI, under load).
        book.authenticated("b", id(5));
        book.authenticated("b", id(6));
        assert!(
            !book.closed("b", id(6)),
            "the newer closed as the duplicate"
        );
        assert!(book.closed("b", id(5)), "then the kept one");
        // The older closed as the duplicate before the newer was told
        // authenticated here (ractor_cluster's order, under load): the
        // book is empty for a moment, and the newer's word within the
        // grace keeps b (`Sessions` looks again after it).
        book.authenticated("b", id(7));
        assert!(book.closed("b", id(7)), "the last one known here");
        assert!(!book.has("b"));
        book.authenticated("b", id(8));
        assert!(book.has("b"), "its twin, told within the grace: not lost");
    }

    /// Shared: nodes `gpu` and `gpu@2` on one cluster. The session of
    /// `gpu@2` is named `gpu@2@10.0.0.5`; cut at its first `@`, its loss
    /// was `gpu`'s — every run of the healthy node stopped or orphaned on
    /// the nodes it used, its children `running` for ever, while the lost
    /// node's runs went on unowned.
    #[test]
    fn a_node_name_with_an_at_sign_is_its_own_nodes() {
        assert_eq!(peer_node("gpu@2@10.0.0.5"), "gpu@2");
        assert_eq!(peer_node("gpu@::1"), "gpu");
        assert_eq!(peer_node("gpu@127.0.0.1"), "gpu");
        assert_eq!(peer_node("gpu"), "gpu");
    }

    /// Unbounded growth (review: a process open for weeks, thirty-eighth
    /// session): a link's entry was kept for the node's life, its handle
    /// long dropped — one per node name ever connected to. Those no
    /// handle holds go as the next link is kept.
    #[test]
    fn links_no_handle_holds_are_let_go() {
        let mut links = std::collections::HashMap::new();
        let mut held = Vec::new();
        for n in 0..100 {
            let link = std::sync::Arc::new(n);
            super::remember(
                &mut links,
                &format!("worker-{n}"),
                std::sync::Arc::downgrade(&link),
            );
            if n % 10 == 0 {
                held.push(link);
            }
        }
        // The ten held, and the last kept (dropped after its insert).
        assert_eq!(links.len(), 11, "{:?}", links.keys().collect::<Vec<_>>());
        assert!(links.contains_key("worker-90") && links.contains_key("worker-99"));
        // Two links to one node: both kept (a loss reaches each).
        let (first, second) = (std::sync::Arc::new(1), std::sync::Arc::new(2));
        super::remember(&mut links, "gpu", std::sync::Arc::downgrade(&first));
        super::remember(&mut links, "gpu", std::sync::Arc::downgrade(&second));
        assert_eq!(links["gpu"].len(), 2);
    }
}
