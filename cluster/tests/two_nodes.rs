//! Two OS processes on 127.0.0.1: this test is node `a` (the parent's),
//! and it starts node `b` as a second process (this same binary, running
//! the ignored helper below). Every wait is bounded; the only process
//! killed is the one the test started, by its handle.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use subagents_actors::{
    DelegationBuilder, EventStream, GateHandle, NodeRunner, ParentStopPolicy, Placement, Reply,
    ScriptedModel, ToolRegistry, UseAgentCall,
};
use subagents_cluster::{ClusterLink, ClusterNode};
use subagents_messages::{
    AgentEvent, AgentId, ApprovalDecision, Outcome, SubAgentStatus, Transcript,
};
use subagents_supervisor::ThreadHandle;

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const COOKIE: &str = "subagents-test";
const PORT_VAR: &str = "SUBAGENTS_NODE_B_PORT";
const NAME_VAR: &str = "SUBAGENTS_NODE_B_NAME";
/// The longest any step may take (real time).
const PATIENCE: Duration = Duration::from_secs(60);

/// One model for both nodes: the parent's script and its children's.
fn model() -> ScriptedModel {
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
        .with_script(
            "Poster\n",
            vec![
                Reply::new().tool_call("http_post", r#"{"url":"https://example.com"}"#),
                Reply::answer("posted"),
            ],
        )
}

fn tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(subagents_demo::Sleep)
        .with(subagents_demo::Post)
}

async fn runner() -> NodeRunner {
    NodeRunner::new(
        vec![model().shared()],
        tools(),
        GateHandle::spawn(1).await.unwrap(),
    )
}

/// Node `b`: runs children for `a` until it is killed. Without its
/// environment it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process of the two-node tests"]
async fn node_b_runs_children_until_killed() {
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

/// A free port on loopback (bound and let go: the helper binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind((LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Node `b` in its own process; killed (SIGKILL) when dropped.
struct NodeB {
    child: Child,
    port: u16,
    name: String,
}

/// Runs the ignored helper test `helper` of this binary as a second
/// process with `env`, once it printed `ready`.
fn helper(helper: &str, env: &[(&str, String)]) -> Child {
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
    fn start(name: &str) -> Self {
        let port = free_port();
        let child = helper(
            "node_b_runs_children_until_killed",
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
    fn freeze(&self) {
        let status = Command::new("kill")
            .args(["-STOP", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NodeB {
    fn drop(&mut self) {
        self.kill();
    }
}

/// pg groups are process-wide: the tests of this binary take turns.
static TURNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn node_a(name: &str, b: &NodeB) -> (ClusterNode, ClusterLink) {
    node_to(name, b.port, &b.name).await
}

/// Node `name` on a free port, connected to node `b_name` at `b_port`.
async fn node_to(name: &str, b_port: u16, b_name: &str) -> (ClusterNode, ClusterLink) {
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

async fn thread(placement: Placement) -> (ThreadHandle, EventStream) {
    ThreadHandle::spawn(
        DelegationBuilder::new(model().shared())
            .system_prompt("You are the parent.")
            .tools(tools())
            .placement(placement),
        None,
    )
    .await
    .unwrap()
}

async fn next(events: &mut EventStream, log: &mut Vec<AgentEvent>) -> AgentEvent {
    let event = tokio::time::timeout(PATIENCE, events.recv())
        .await
        .unwrap_or_else(|_| panic!("no event in {PATIENCE:?}; so far: {log:#?}"))
        .expect("the stream ended");
    log.push(event.clone());
    event
}

async fn until(
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
async fn seen(
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    what: impl Fn(&AgentEvent) -> bool,
) {
    if !log.iter().any(&what) {
        until(events, log, what).await;
    }
}

fn is_result(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Result(_))
}

fn is_wake(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Wake(_))
}

fn in_tool(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted(_)))
}

/// The first turn and one wake per child, folded.
async fn two_workers(placement: Placement) -> (String, Vec<(String, String)>) {
    let (thread, mut events) = thread(placement).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, is_result).await;
    for _ in 0..2 {
        until(&mut events, &mut log, is_wake).await;
        until(&mut events, &mut log, is_result).await;
    }
    let mut transcript = Transcript::new();
    transcript.push_user("go");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_on_another_process_fold_like_local_ones() {
    let _turn = TURNS.lock().await;
    let b = NodeB::start("b1");
    let (node, link) = node_a("a1", &b).await;
    let (local, local_envelopes) = two_workers(Placement::Local).await;
    let (remote, remote_envelopes) = two_workers(Placement::On(Arc::new(link.clone()))).await;
    assert_eq!(link.started(), 2, "both children ran on b");
    assert_eq!(local, remote);
    assert_eq!(local_envelopes, remote_envelopes);
    assert!(remote.contains("worked 2 s"), "{remote}");
    node.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_ends_its_child_lost_with_one_wake() {
    let _turn = TURNS.lock().await;
    let mut b = NodeB::start("b2");
    let (node, link) = node_a("a2", &b).await;
    let (thread, mut events) = thread(Placement::On(Arc::new(link.clone()))).await;
    let mut log = Vec::new();
    // The parent starts Quick (1 s) and Slow (2 s) on b; b dies as soon
    // as one of them is in its tool.
    thread.send_user("go").unwrap();
    until(&mut events, &mut log, is_result).await;
    seen(&mut events, &mut log, in_tool).await;
    b.kill(); // SIGKILL: the process this test started
    let started = std::time::Instant::now();
    // Both children were on b: each ends lost, each wakes the parent once.
    let mut wakes = 0;
    while wakes < 2 {
        until(&mut events, &mut log, is_wake).await;
        wakes += 1;
        until(&mut events, &mut log, is_result).await;
    }
    let seen_within = started.elapsed();
    eprintln!("node loss seen and both children ended within {seen_within:?}");
    // Nothing more: no third wake.
    assert!(
        tokio::time::timeout(Duration::from_secs(3), events.recv())
            .await
            .is_err()
    );
    for id in ["agent_1", "agent_2"] {
        let envelope = thread.hub().status(&AgentId::new(id)).unwrap();
        let error = envelope.error.clone().unwrap_or_default();
        // The quick one may have finished before the kill.
        if envelope.status == SubAgentStatus::Done {
            continue;
        }
        assert_eq!(
            envelope.status,
            SubAgentStatus::Failed,
            "{id}: {envelope:?}"
        );
        assert!(error.starts_with("node lost: node `b2`"), "{id}: {error}");
    }
    assert!(link.is_down());
    // The session's close is seen at once, not after the heartbeats give up.
    assert!(
        seen_within < Duration::from_secs(2),
        "seen only after {seen_within:?}"
    );
    thread.close_and_wait().await;
    node.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_and_a_stop_cross_processes() {
    let _turn = TURNS.lock().await;
    let b = NodeB::start("b3");
    let (node, link) = node_a("a3", &b).await;
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(
                &UseAgentCall::run("Poster\nYou post.", "post it")
                    .tools(["http_post"])
                    .wait(true),
            )
            .use_agent(
                &UseAgentCall::run("Sleeper\nYou sleep.", "sleep")
                    .tools(["sleep"])
                    .wait(false),
            ),
        Reply::answer("Posted."),
        Reply::new().use_agent(&UseAgentCall::stop("agent_2")),
        Reply::answer("Stopped it."),
        Reply::answer("Noted."),
    ]);
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model.named("scripted").shared())
            .system_prompt("You are the parent.")
            .tools(tools())
            .placement(Placement::On(Arc::new(link))),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let asked = until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ApprovalRequested(_)))
    })
    .await;
    let AgentEvent::Child(_, inner) = asked else {
        unreachable!()
    };
    let AgentEvent::ApprovalRequested(request) = *inner else {
        unreachable!()
    };
    thread
        .resolve_approval(request.id, ApprovalDecision::Approve)
        .await
        .unwrap();
    let result = until(&mut events, &mut log, is_result).await;
    assert!(matches!(result, AgentEvent::Result(r) if r.text == "Posted."));
    let poster = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(poster.status, SubAgentStatus::Done);
    assert_eq!(poster.result.as_deref(), Some("posted"));
    // The sleeper is in its tool on b; the parent stops it.
    let sleeping = |e: &AgentEvent| {
        matches!(e, AgentEvent::Child(id, inner)
            if id.as_str() == "agent_2" && matches!(**inner, AgentEvent::ToolStarted(_)))
    };
    seen(&mut events, &mut log, sleeping).await;
    thread.send_user("stop it").unwrap();
    until(&mut events, &mut log, is_result).await;
    let sleeper = thread.hub().status(&AgentId::new("agent_2")).unwrap();
    assert_eq!(sleeper.status, SubAgentStatus::Stopped, "{sleeper:?}");
    thread.close_and_wait().await;
    node.shutdown();
    drop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_is_lost_when_its_heartbeats_go_unanswered() {
    let _turn = TURNS.lock().await;
    let b = NodeB::start("b4");
    let (node, link) = node_a("a4", &b).await;
    let (thread, mut events) = thread(Placement::On(Arc::new(link.clone()))).await;
    let mut log = Vec::new();
    thread.send_user("go").unwrap();
    until(&mut events, &mut log, is_result).await;
    seen(&mut events, &mut log, in_tool).await;
    b.freeze();
    let frozen = std::time::Instant::now();
    let mut wakes = 0;
    while wakes < 2 {
        until(&mut events, &mut log, is_wake).await;
        wakes += 1;
        until(&mut events, &mut log, is_result).await;
    }
    let seen_within = frozen.elapsed();
    eprintln!("a silent node was lost after {seen_within:?}");
    assert!(link.is_down());
    let envelope = thread.hub().status(&AgentId::new("agent_2")).unwrap();
    assert_eq!(envelope.status, SubAgentStatus::Failed);
    let error = envelope.error.unwrap_or_default();
    assert!(
        error.contains("heartbeats in a row went unanswered"),
        "{error}"
    );
    // MISSED_HEARTBEATS × (interval + answer timeout) = 6 s, and a margin.
    assert!(seen_within < Duration::from_secs(12), "{seen_within:?}");
    thread.close_and_wait().await;
    node.shutdown();
    drop(b); // SIGKILL ends a stopped process too
}

const PARENT_VAR: &str = "SUBAGENTS_NODE_A";
const CASCADE_VAR: &str = "SUBAGENTS_NODE_A_CASCADE";

/// Node `a` as a process of its own: a parent whose two children run on
/// node `b` (its address and name in the environment), by the parent-stop
/// policy named there; prints `ready` once one is in its tool, then waits
/// to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process of the two-node tests"]
async fn node_a_runs_a_parent_until_killed() {
    let (Ok(me), Ok(port), Ok(name)) = (
        std::env::var(PARENT_VAR),
        std::env::var(PORT_VAR),
        std::env::var(NAME_VAR),
    ) else {
        return;
    };
    let (node, link) = node_to(&me, port.parse().unwrap(), &name).await;
    let policy = if std::env::var(CASCADE_VAR).is_ok() {
        ParentStopPolicy::Cascade
    } else {
        ParentStopPolicy::Detach
    };
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model().shared())
            .system_prompt("You are the parent.")
            .tools(tools())
            .parent_stop(policy)
            .placement(Placement::On(Arc::new(link))),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    seen(&mut events, &mut log, in_tool).await;
    println!("ready");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    drop(node);
}

/// Kills the parent's node mid-run; a third node asks `b` for what it
/// kept of the orphans.
async fn orphans(b_name: &str, a_name: &str, cascade: bool) -> Vec<subagents_cluster::KeptRun> {
    let b = NodeB::start(b_name);
    let mut env = vec![
        (PARENT_VAR, a_name.to_owned()),
        (PORT_VAR, b.port.to_string()),
        (NAME_VAR, b.name.clone()),
    ];
    if cascade {
        env.push((CASCADE_VAR, "1".to_owned()));
    }
    let mut a = helper("node_a_runs_a_parent_until_killed", &env);
    let _ = a.kill(); // SIGKILL: the process this test started
    let _ = a.wait();
    let (c, link) = node_a(&format!("c-{a_name}"), &b).await;
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let kept = link.kept().await.unwrap();
        if kept.len() == 2 {
            c.shutdown();
            assert!(kept.iter().all(|k| k.parent_node == a_name), "{kept:?}");
            return kept;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "b kept {kept:?} after {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_detach_an_orphans_result_is_kept_on_its_node() {
    let _turn = TURNS.lock().await;
    let kept = orphans("b5", "a5", false).await;
    let mut results: Vec<&str> = kept.iter().map(|k| k.result.text.as_str()).collect();
    results.sort_unstable();
    assert_eq!(results, ["worked 1 s", "worked 2 s"]);
    assert!(kept.iter().all(|k| k.result.outcome == Outcome::Completed));
    assert!(kept.iter().all(|k| !k.conversation.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_cascade_an_orphan_is_stopped_on_its_node() {
    let _turn = TURNS.lock().await;
    let kept = orphans("b6", "a6", true).await;
    assert!(
        kept.iter().all(|k| k.result.outcome == Outcome::Stopped),
        "{kept:?}"
    );
}
