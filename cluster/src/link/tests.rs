#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use subagents_actors::{
    DelegationBuilder, Placement, Reply, ScriptedModel, ToolRegistry, UseAgentCall,
};
use subagents_messages::{AgentEvent, AgentId, AgentResult, Outcome, SubAgentStatus};
use subagents_supervisor::ThreadHandle;

use super::*;
use crate::wire::encode_report;

/// The token node `b`'s runs are routed under.
const TOKEN: u64 = 77;

/// Node `b` as this node's link sees it: a run started on it is routed
/// to its reports, as `ClusterLink::start` does; its key is kept.
struct NodeB {
    name: &'static str,
    routes: Routes,
    keys: Mutex<Vec<u64>>,
}

impl NodeLink for NodeB {
    fn node(&self) -> &str {
        self.name
    }

    fn start(&self, spec: RunSpec, reports: RunReports) -> Result<(), String> {
        // Its process: incarnation 0.
        (self.routes).insert(spec.key, (self.name.to_owned(), 0), TOKEN, reports);
        self.keys.lock().unwrap().push(spec.key);
        Ok(())
    }

    fn request(&self, _: u64, _: RunRequest) -> Result<(), String> {
        Ok(())
    }

    /// As `ClusterLink::forget`.
    fn forget(&self, key: u64) {
        self.routes.lock().remove(&key);
    }
}

/// Stopped midway, across nodes: a node that sends its run's last
/// reports (its `Result`, its `Ended`) and then goes away. The session
/// casts the reports into the inbox's mailbox, then closes — and the
/// loss failed the run's route at once, before the inbox read them:
/// the child ended `failed: node lost`, its answer dropped. The loss
/// goes through the inbox, after what it had received.
#[tokio::test]
async fn a_node_lost_after_its_last_reports_keeps_the_answer() {
    let (inbox, routes, thread, mut events, key) = a_child_on_b("a-loss", "b").await;
    let result = answered("the answer");
    let reports = [
        ReportBody::Event(AgentEvent::Result(Box::new(result.clone()))),
        ReportBody::Ended {
            result,
            conversation: Vec::new(),
        },
    ];
    for (seq, body) in reports.into_iter().enumerate() {
        let report = RunReport {
            key,
            seq: seq as u64,
            body,
        };
        inbox.cast(encode_report(&report, TOKEN).unwrap()).unwrap();
    }
    // The session closes in the same tick, after the last frames.
    lose_node(&inbox, &routes, ("b", None), "its session closed");
    let agent_1 = AgentId::new("agent_1");
    let status = loop {
        match events.recv().await {
            Some(AgentEvent::ChildStatus(id, status)) if id == agent_1 && status.is_terminal() => {
                break status;
            }
            Some(_) => {}
            None => panic!("the stream ended first"),
        }
    };
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(status, SubAgentStatus::Done, "{envelope:?}");
    assert_eq!(envelope.result.as_deref(), Some("the answer"));
    thread.close_and_wait().await;
    inbox.stop(None);
}

/// Same instant, two links to one node (review: hostile or faulty peers,
/// thirty-ninth session): node `b` restarted, and a newer link started a
/// run on the new process (incarnation 9) while an older link, to the old
/// one (0), was still up. The older link's heartbeat then met the new
/// process under the name and lost the node — every run named `b`, the
/// new process's healthy run too ("it restarted"), its stop never sent.
/// A link loses its own process's runs.
#[tokio::test]
async fn a_link_that_finds_its_node_restarted_loses_only_its_own_runs() {
    let (inbox, routes, thread, mut events, key) = a_child_on_b("a-restart", "b").await;
    // The new process's run, routed as a newer link routes it.
    let newer = key + 1_000;
    let reports = routes.lock()[&key].reports.clone();
    routes.insert(newer, ("b".to_owned(), 9), TOKEN, reports);
    lose_node(&inbox, &routes, ("b", Some(0)), "it restarted");
    let ended = terminal_status(&mut events, &AgentId::new("agent_1"), 30).await;
    assert_eq!(ended, Ok(SubAgentStatus::Failed));
    let kept: Vec<u64> = routes.lock().keys().copied().collect();
    assert_eq!(kept, [newer], "the new process's run is not lost");
    routes.lock().remove(&newer);
    thread.close_and_wait().await;
    inbox.stop(None);
}

/// A run's result: completed, answering `text`.
fn answered(text: &str) -> AgentResult {
    AgentResult {
        text: text.to_owned(),
        outcome: Outcome::Completed,
        model_calls: 1,
        tool_calls: 0,
        usage: Default::default(),
        children_usage: Default::default(),
        elapsed: Duration::from_secs(1),
    }
}

/// Node `a`'s inbox (its group `name`) and a thread whose background
/// child runs on `node`, its parent's turn over: the inbox, the routes,
/// the thread, its events and the run's key.
async fn a_child_on_b(
    name: &str,
    node: &'static str,
) -> (
    ActorRef<InboxMsg>,
    Routes,
    ThreadHandle,
    subagents_actors::EventStream,
    u64,
) {
    let routes = Routes::default();
    let (inbox, _) = Actor::spawn(None, Inbox, (name.to_owned(), routes.clone()))
        .await
        .unwrap();
    let b = Arc::new(NodeB {
        name: node,
        routes: routes.clone(),
        keys: Mutex::new(Vec::new()),
    });
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Worker\nYou work.", "work").wait(false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ]);
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .tools(ToolRegistry::new())
            .placement(Placement::On(b.clone())),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    while !matches!(events.recv().await, Some(AgentEvent::Result(_))) {}
    let key = b.keys.lock().unwrap()[0];
    (inbox, routes, thread, events, key)
}

/// Foreign input (another version's node): a report whose body this
/// node could not read (an event it does not know) was logged and
/// dropped — a gap in the run's reports, which are taken in order: the
/// child's later reports, its end among them, never reached it, and it
/// stayed `running` for ever. Its header says which run and place: the
/// run ends there, refused, saying why, and its node is asked to stop it.
#[tokio::test]
async fn a_report_this_node_cannot_read_ends_the_run_saying_why() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (host, _) = Actor::spawn(None, HostOfB, ("b-unread", asked.clone()))
        .await
        .unwrap();
    let (inbox, _routes, thread, mut events, key) = a_child_on_b("a-unread", "b-unread").await;
    let thinking = RunReport {
        key,
        seq: 0,
        body: ReportBody::Event(AgentEvent::Text("thinking".into())),
    };
    inbox
        .cast(encode_report(&thinking, TOKEN).unwrap())
        .unwrap();
    let InboxMsg::Report(header, _) =
        encode_report(&RunReport { seq: 1, ..thinking }, TOKEN).unwrap()
    else {
        unreachable!("a report")
    };
    // An event variant this version does not have.
    inbox
        .cast(InboxMsg::Report(header, vec![0, 250, 1]))
        .unwrap();
    let agent_1 = AgentId::new("agent_1");
    let ended = terminal_status(&mut events, &agent_1, 60).await;
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(ended, Ok(SubAgentStatus::Failed), "{envelope:?}");
    let error = envelope.error.unwrap_or_default();
    assert!(error.contains("could not be read here"), "{error}");
    // Not the codec's `Debug` (bincode's type names) the model would read.
    assert!(
        !error.contains("OtherString") && !error.contains(" { "),
        "{error}"
    );
    until_asked(&asked).await;
    assert_eq!(
        *asked.lock().unwrap(),
        [("a-unread".to_owned(), key, TOKEN, RunRequest::Stop)]
    );
    thread.close_and_wait().await;
    inbox.stop(None);
    host.stop(None);
}

/// Waits (a minute at most) until a host stand-in has been asked
/// something: the run was asked to stop.
async fn until_asked(asked: &Mutex<Vec<crate::wire::Request>>) {
    let stopped = tokio::time::timeout(Duration::from_secs(60), async {
        while asked.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(stopped.is_ok(), "the run was never asked to stop");
}

/// The first terminal status of child `id` on the stream, within `secs`.
async fn terminal_status(
    events: &mut subagents_actors::EventStream,
    id: &AgentId,
    secs: u64,
) -> Result<SubAgentStatus, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(secs), async {
        loop {
            match events.recv().await {
                Some(AgentEvent::ChildStatus(child, status))
                    if child == *id && status.is_terminal() =>
                {
                    break status;
                }
                Some(_) => {}
                None => panic!("the stream ended first"),
            }
        }
    })
    .await
}

/// Stands for a node's host (the node named): keeps the requests it is
/// sent.
struct HostOfB;

impl Actor for HostOfB {
    type Msg = HostMsg;
    type State = Arc<Mutex<Vec<crate::wire::Request>>>;
    type Arguments = (&'static str, Self::State);

    async fn pre_start(
        &self,
        myself: ActorRef<HostMsg>,
        (node, asked): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(host_group(node), vec![myself.get_cell()]);
        Ok(asked)
    }

    async fn handle(
        &self,
        _myself: ActorRef<HostMsg>,
        message: HostMsg,
        asked: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let HostMsg::Request(bytes) = message {
            let request = crate::wire::decode_request(&bytes).unwrap();
            asked.lock().unwrap().push(request);
        }
        Ok(())
    }
}

/// Forged (any holder of the cookie), or a report of an earlier process's
/// run under a reused key: an inbox routed a report by its key alone, so
/// any node could end this node's child on `b` with an answer of its
/// own. A report carries its run's token; one without it is dropped.
#[tokio::test]
async fn a_report_without_its_runs_token_is_dropped() {
    let (inbox, _routes, thread, mut events, key) = a_child_on_b("a-forged", "b-forged").await;
    let ended = |text: &str, seq| {
        let result = answered(text);
        let body = ReportBody::Ended {
            result,
            conversation: Vec::new(),
        };
        RunReport { key, seq, body }
    };
    inbox
        .cast(encode_report(&ended("a forged answer", 0), TOKEN + 1).unwrap())
        .unwrap();
    inbox
        .cast(encode_report(&ended("the answer", 0), TOKEN).unwrap())
        .unwrap();
    let agent_1 = AgentId::new("agent_1");
    loop {
        match events.recv().await {
            Some(AgentEvent::ChildStatus(id, status)) if id == agent_1 && status.is_terminal() => {
                break;
            }
            Some(_) => {}
            None => panic!("the stream ended first"),
        }
    }
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(
        envelope.result.as_deref(),
        Some("the answer"),
        "{envelope:?}"
    );
    thread.close_and_wait().await;
    inbox.stop(None);
}

/// Stands for a node's host that restarted: it answers the hello as
/// another process (incarnation 5).
struct RestartedHost;

impl Actor for RestartedHost {
    type Msg = HostMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<HostMsg>,
        (): (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<HostMsg>,
        message: HostMsg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        use subagents_messages::codec::Wire;
        if let HostMsg::Hello(reply) = message {
            let hello = crate::wire::Hello {
                version: crate::wire::WIRE_VERSION,
                incarnation: 5,
                live: 0,
            };
            let _ = reply.send(hello.to_wire().unwrap());
        }
        Ok(())
    }
}

/// A node restarted under its name and reachable again within the half
/// second a closed session is given (a cluster where each node connects
/// to its peers): the link's heartbeat found the new process's host and
/// took it for the old one — its children there stayed `running` until
/// their wall clock and 30 s more. A heartbeat answered by another
/// incarnation than the one met at connect loses the link.
#[tokio::test]
async fn a_heartbeat_answered_by_another_process_loses_the_link() {
    let (inbox, routes, thread, mut events, key) = a_child_on_b("a-restart", "b-restart").await;
    let (host, _) = Actor::spawn(None, RestartedHost, ()).await.unwrap();
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = ractor_cluster::NodeServer::new(
        port,
        "cookie".into(),
        "a-restart".into(),
        "127.0.0.1".into(),
        None,
        None,
    );
    let (server, _) = Actor::spawn(None, server, ()).await.unwrap();
    let link = ClusterLink {
        inner: Arc::new(LinkInner {
            node: "b-restart".into(),
            me: "a-restart".into(),
            my_incarnation: 1,
            // The process its run was started on (`NodeB` routes under 0);
            // another (5) answers the heartbeat.
            incarnation: 0,
            host: host.clone(),
            routes,
            labels: Vec::new(),
            live: AtomicU64::new(0),
            down: AtomicBool::new(false),
            why_lost: std::sync::OnceLock::new(),
            started: AtomicU64::new(0),
            server: server.clone(),
            inbox: inbox.clone(),
        }),
    };
    link.beat();
    let agent_1 = AgentId::new("agent_1");
    let ended = terminal_status(&mut events, &agent_1, 30).await;
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(ended, Ok(SubAgentStatus::Failed), "{envelope:?}");
    let error = envelope.error.unwrap_or_default();
    assert!(error.contains("restarted"), "{error}");
    assert!(link.is_down());
    // A host's request after the loss (review: the cluster) says why,
    // as the children lost with it read: it said "it was lost", and a
    // child stopped in that tick failed with other words than its
    // siblings'.
    let asked = link.request(key, RunRequest::Stop).unwrap_err();
    assert!(asked.contains("restarted"), "{asked}");
    thread.close_and_wait().await;
    inbox.stop(None);
    host.stop(None);
    server.stop(None);
}

/// Stopped midway, across nodes (review: the cluster as foreign input):
/// a report its node could not send (a tool's output over the wire's
/// limit) reaches this node as `Refused` under its number, and the child
/// fails — but the run went on, on its node, for nobody: a run's last
/// report took its route, so the proxy's stop found no token and sent
/// nothing (the loopback transport, which the docs' test ran on, kept
/// its runs apart from its routes). The inbox asks the node to stop it.
#[tokio::test]
async fn a_run_refused_midway_is_stopped_on_its_node_through_the_cluster() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (host, _) = Actor::spawn(None, HostOfB, ("b-refused", asked.clone()))
        .await
        .unwrap();
    let (inbox, _routes, thread, mut events, key) = a_child_on_b("a-refused", "b-refused").await;
    let why = "a report of the run could not be sent (over the wire's limit)";
    let reports = [
        ReportBody::Event(AgentEvent::Text("thinking".into())),
        ReportBody::Refused(why.into()),
    ];
    for (seq, body) in reports.into_iter().enumerate() {
        let report = RunReport {
            key,
            seq: seq as u64,
            body,
        };
        inbox.cast(encode_report(&report, TOKEN).unwrap()).unwrap();
    }
    let agent_1 = AgentId::new("agent_1");
    let ended = terminal_status(&mut events, &agent_1, 60).await;
    assert_eq!(ended, Ok(SubAgentStatus::Failed));
    until_asked(&asked).await;
    assert_eq!(
        *asked.lock().unwrap(),
        [("a-refused".to_owned(), key, TOKEN, RunRequest::Stop)]
    );
    thread.close_and_wait().await;
    inbox.stop(None);
    host.stop(None);
}

/// A run's route: kept until every report up to its last came, let go
/// when the run ends here.
mod routes;
