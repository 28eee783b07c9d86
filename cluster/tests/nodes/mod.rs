//! What the two-node tests share: the model and tools both nodes run,
//! node `b` as a process of its own, node `a` in the test, and bounded
//! event waits.

// Shared by more than one test binary, each using a part.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use subagents_actors::{
    DelegationBuilder, EventStream, GateHandle, NodeRunner, Placement, Reply, ScriptedModel,
    ToolRegistry, UseAgentCall,
};
use subagents_cluster::{ClusterLink, ClusterNode};
use subagents_messages::{AgentEvent, Transcript};
use subagents_supervisor::ThreadHandle;

pub(crate) const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
pub(crate) const COOKIE: &str = "subagents-test";
pub(crate) const PORT_VAR: &str = "SUBAGENTS_NODE_B_PORT";
pub(crate) const NAME_VAR: &str = "SUBAGENTS_NODE_B_NAME";
/// The longest any step may take (real time).
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// One model for both nodes: the parent's script and its children's.
pub(crate) fn model() -> ScriptedModel {
    let worker = |name: &str, secs: u64| {
        UseAgentCall::run(format!("{name}\nYou work."), format!("work {secs} s"))
            .tools(["sleep"])
            .wait(false)
    };
    let mut turns = vec![
        Reply::new()
            .use_agent(&worker("Quick", 1))
            .use_agent(&worker("Slow", 2)),
        Reply::answer("Started."),
    ];
    turns.extend((0..8).map(|_| Reply::answer("Noted.")));
    let sleeper = |secs: u64| {
        vec![
            Reply::new().tool_call("sleep", format!(r#"{{"secs":{secs}}}"#)),
            Reply::answer(format!("worked {secs} s")),
        ]
    };
    ScriptedModel::new(turns)
        .with_script("Quick\n", sleeper(1))
        .with_script("Slow\n", sleeper(2))
        .with_script("Sleeper\n", sleeper(600))
        // Past the heartbeat's verdict (3 missed: 6 s).
        .with_script("Steady\n", sleeper(8))
        // An answer over ractor_cluster's default frame (16 MiB).
        .with_script("Verbose\n", vec![Reply::answer("x".repeat(17 << 20))])
        .with_script(
            "Poster\n",
            vec![
                Reply::new().tool_call("http_post", r#"{"url":"https://example.com"}"#),
                Reply::answer("posted"),
            ],
        )
}

pub(crate) fn tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(subagents_demo::Sleep)
        .with(subagents_demo::Post)
}

pub(crate) async fn runner() -> NodeRunner {
    NodeRunner::new(
        vec![model().shared()],
        tools(),
        GateHandle::spawn(1).await.unwrap(),
    )
}

/// A free port on loopback (bound and let go: the helper binds it next).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind((LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Node `b` in its own process; killed (SIGKILL) when dropped.
pub(crate) struct NodeB {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) name: String,
}

/// Runs the ignored helper test `helper` of this binary as a second
/// process with `env`, once it printed `ready`.
pub(crate) fn helper(helper: &str, env: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            helper,
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("ready") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(PATIENCE).is_err() {
        let _ = child.kill();
        panic!("{helper} never became ready");
    }
    child
}

impl NodeB {
    pub(crate) fn start(name: &str) -> Self {
        let port = free_port();
        let child = helper(
            "nodes::node_b_runs_children_until_killed",
            &[(PORT_VAR, port.to_string()), (NAME_VAR, name.to_owned())],
        );
        Self {
            child,
            port,
            name: name.into(),
        }
    }

    /// SIGSTOP: the process stays, its connection open, and answers
    /// nothing (a hung node, or a silent network).
    pub(crate) fn freeze(&self) {
        let status = Command::new("kill")
            .args(["-STOP", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGCONT: a frozen node goes on where it was.
    pub(crate) fn thaw(&self) {
        let status = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NodeB {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) async fn node_a(name: &str, b: &NodeB) -> (ClusterNode, ClusterLink) {
    node_to(name, b.port, &b.name).await
}

/// Node `name` on a free port, connected to node `b_name` at `b_port`.
pub(crate) async fn node_to(name: &str, b_port: u16, b_name: &str) -> (ClusterNode, ClusterLink) {
    let port = free_port();
    let node = ClusterNode::start(name, LOCALHOST, port, COOKIE, runner().await)
        .await
        .unwrap();
    let link = node
        .connect(&format!("127.0.0.1:{b_port}"), b_name, &[], PATIENCE)
        .await
        .unwrap();
    (node, link)
}

pub(crate) async fn thread(placement: Placement) -> (ThreadHandle, EventStream) {
    thread_of(model(), placement).await
}

/// A thread whose parent runs on `model` (named `scripted`, as the nodes'
/// model is), its children placed by `placement`.
pub(crate) async fn thread_of(
    model: ScriptedModel,
    placement: Placement,
) -> (ThreadHandle, EventStream) {
    ThreadHandle::spawn(
        DelegationBuilder::new(model.named("scripted").shared())
            .system_prompt("You are the parent.")
            .tools(tools())
            .placement(placement),
        None,
    )
    .await
    .unwrap()
}

pub(crate) async fn next(events: &mut EventStream, log: &mut Vec<AgentEvent>) -> AgentEvent {
    let event = tokio::time::timeout(PATIENCE, events.recv())
        .await
        .unwrap_or_else(|_| panic!("no event in {PATIENCE:?}; so far: {log:#?}"))
        .expect("the stream ended");
    log.push(event.clone());
    event
}

pub(crate) async fn until(
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    what: impl Fn(&AgentEvent) -> bool,
) -> AgentEvent {
    loop {
        let event = next(events, log).await;
        if what(&event) {
            return event;
        }
    }
}

/// Returns once an event matching `what` was read: at once if one is in
/// the log already (events of children and of the parent interleave as
/// the two processes run).
pub(crate) async fn seen(
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    what: impl Fn(&AgentEvent) -> bool,
) {
    if !log.iter().any(&what) {
        until(events, log, what).await;
    }
}

pub(crate) fn is_result(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Result(_))
}

pub(crate) fn is_wake(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Wake { .. })
}

pub(crate) fn in_tool(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
}

/// The first turn and one wake per child, folded.
pub(crate) async fn two_workers(placement: Placement) -> (String, Vec<(String, String)>) {
    let (thread, mut events) = thread(placement).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, is_result).await;
    for _ in 0..2 {
        until(&mut events, &mut log, is_wake).await;
        until(&mut events, &mut log, is_result).await;
    }
    // The thread's stream says the user's turn: not pushed again.
    let mut transcript = Transcript::new();
    for event in &log {
        transcript.apply(event);
    }
    let envelopes = thread
        .hub()
        .envelopes()
        .into_iter()
        .map(|e| (e.status.as_str().to_owned(), e.result.unwrap_or_default()))
        .collect();
    thread.close_and_wait().await;
    (transcript.render(), envelopes)
}

/// Node `b`: runs children for `a` until it is killed. Without its
/// environment it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process of the two-node tests"]
pub(crate) async fn node_b_runs_children_until_killed() {
    let (Ok(port), Ok(name)) = (std::env::var(PORT_VAR), std::env::var(NAME_VAR)) else {
        return;
    };
    let node = ClusterNode::start(
        &name,
        LOCALHOST,
        port.parse().unwrap(),
        COOKIE,
        runner().await,
    )
    .await
    .unwrap();
    println!("ready {}", node.name());
    tokio::time::sleep(Duration::from_secs(3600)).await;
}
