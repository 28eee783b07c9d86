//! Two OS processes on 127.0.0.1: this test is node `a` (the parent's),
//! and it starts node `b` as a second process (this same binary, running
//! the ignored helper below). Every wait is bounded; the only processes
//! killed are those the test started, by their handles.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod nodes;

use std::sync::Arc;
use std::time::Duration;

use nodes::*;
use subagents_actors::{
    DelegationBuilder, ParentStopPolicy, Placement, Reply, ScriptedModel, UseAgentCall,
};
use subagents_messages::{AgentEvent, AgentId, ApprovalDecision, Outcome, SubAgentStatus};
use subagents_supervisor::ThreadHandle;

/// pg groups are process-wide: the tests of this binary take turns.
static TURNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    // Its load was reported (a heartbeat's answer) before it dies.
    while subagents_actors::NodeLink::live(&link).is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
        // Not its address: the parent model (and its provider) reads it.
        assert!(!error.contains("127.0.0.1"), "{id}: {error}");
    }
    assert!(link.is_down());
    // Its last load is not read as a load: `LeastLoaded` would choose it.
    assert_eq!(subagents_actors::NodeLink::live(&link), None);
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
    let (thread, mut events) = thread_of(model, Placement::On(Arc::new(link))).await;
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

/// Foreign (a long answer): the codec takes a message up to 64 MiB, but
/// ractor_cluster reads a frame up to 16 MiB by default and closes the
/// whole session on a longer one — a child on `b` that answered 17 MiB
/// (a few files read back) failed "node lost", and so did every other
/// child there, the link down for good. The session reads what the codec
/// writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_ractors_default_frame_arrives_whole() {
    let _turn = TURNS.lock().await;
    let b = NodeB::start("b9");
    let (node, link) = node_a("a9", &b).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Verbose\nYou talk.", "talk").wait(true)),
        Reply::answer("Read it."),
    ]);
    // 17 MiB is some 4.5 M tokens: past the default budget, which holds
    // streamed text (the scripted model reports no usage) — this child's
    // budget has room for it.
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model.named("scripted").shared())
            .system_prompt("You are the parent.")
            .tools(tools())
            .child_limits(subagents_messages::Limits {
                token_budget: u64::MAX,
                ..subagents_messages::Limits::default()
            })
            .placement(Placement::On(Arc::new(link.clone()))),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, is_result).await;
    let child = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(child.status, SubAgentStatus::Done, "{:?}", child.error);
    assert_eq!(child.result.map(|r| r.len()), Some(17 << 20));
    assert!(!link.is_down(), "the session stays up");
    thread.close_and_wait().await;
    node.shutdown();
    drop(b);
}

/// Repeated: a second connection to a node already connected (a retry,
/// a second hub's link) — ractor_cluster keeps one session and closes the
/// other as a duplicate, and that close was read as the node's loss: the
/// child running there failed "node lost" though its node was fine. And
/// when the new session was the one kept, the host the link had found
/// through the old one was gone with it: its heartbeats went unanswered
/// and the node was lost 6 s later. The child works 8 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_connection_to_a_node_does_not_lose_it() {
    let _turn = TURNS.lock().await;
    let b = NodeB::start("b10");
    let (node, link) = node_a("a10", &b).await;
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Steady\nYou work.", "work 8 s")
                .tools(["sleep"])
                .wait(true),
        ),
        Reply::answer("Worked."),
    ]);
    let (thread, mut events) = thread_of(model, Placement::On(Arc::new(link.clone()))).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    seen(&mut events, &mut log, in_tool).await;
    let again = node
        .connect(&format!("127.0.0.1:{}", b.port), "b10", &[], PATIENCE)
        .await
        .unwrap();
    // A wait with no end ("as long as it takes") is no overflow.
    let patient = node
        .connect(&format!("127.0.0.1:{}", b.port), "b10", &[], Duration::MAX)
        .await
        .unwrap();
    until(&mut events, &mut log, is_result).await;
    let child = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(child.status, SubAgentStatus::Done, "{:?}", child.error);
    assert!(!link.is_down() && !again.is_down() && !patient.is_down());
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
/// policy named there; prints `ready` once both are in their tools (with
/// one, the other's start could still be on its way when the test killed
/// this process: `b` then kept one orphan, and the test waited for two),
/// then waits to be killed.
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
    for child in ["agent_1", "agent_2"] {
        let its_tool = |e: &AgentEvent| {
            matches!(e, AgentEvent::Child(id, inner)
                if id.as_str() == child && matches!(**inner, AgentEvent::ToolStarted(_)))
        };
        seen(&mut events, &mut log, its_tool).await;
    }
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

/// Stopped midway, across processes: a node found lost by its heartbeat
/// (hung, or behind a silent network) was never told — its session stayed
/// open — so when it woke its runs went on unowned: by the Cascade policy
/// they should stop, but they ran on (here for their whole 600 s), their
/// ends sent to an inbox that no longer routed them. The lost node's
/// session is closed: when it wakes it stops them and keeps their ends, as
/// for any lost parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lost_by_its_heartbeat_stops_its_orphans_when_it_wakes() {
    let _turn = TURNS.lock().await;
    let b = NodeB::start("b7");
    let (node, link) = node_a("a7", &b).await;
    let sleeper = UseAgentCall::run("Sleeper\nYou work.", "work 600 s")
        .tools(["sleep"])
        .wait(false);
    let mut turns = vec![
        Reply::new().use_agent(&sleeper).use_agent(&sleeper),
        Reply::answer("Started."),
    ];
    turns.extend((0..4).map(|_| Reply::answer("Noted.")));
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(ScriptedModel::new(turns).shared())
            .system_prompt("You are the parent.")
            .tools(tools())
            .parent_stop(ParentStopPolicy::Cascade)
            .placement(Placement::On(Arc::new(link.clone()))),
        None,
    )
    .await
    .unwrap();
    let mut log = Vec::new();
    thread.send_user("go").unwrap();
    until(&mut events, &mut log, is_result).await;
    seen(&mut events, &mut log, in_tool).await;
    b.freeze();
    let mut wakes = 0;
    while wakes < 2 {
        until(&mut events, &mut log, is_wake).await;
        wakes += 1;
        until(&mut events, &mut log, is_result).await;
    }
    assert!(link.is_down());
    b.thaw();
    let (c, asking) = node_a("c7", &b).await;
    let deadline = std::time::Instant::now() + PATIENCE;
    let kept = loop {
        let kept = asking.kept().await.unwrap();
        if kept.len() == 2 || std::time::Instant::now() >= deadline {
            break kept;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(kept.len(), 2, "b kept {kept:?} after {PATIENCE:?}");
    assert!(
        kept.iter()
            .all(|k| k.parent_node == "a7" && k.result.outcome == Outcome::Stopped),
        "{kept:?}"
    );
    c.shutdown();
    thread.close_and_wait().await;
    node.shutdown();
    drop(b);
}
