//! Forged across processes (any holder of the cookie): the words only a
//! node may say to itself — "the parent's node was lost", "this node is
//! lost" — are variants of enums its actors take from the wire (their
//! `pg` groups are seen by every connected node). Sent by another node,
//! they orphaned a healthy parent's runs or failed its children.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod nodes;

use std::time::Duration;

use nodes::*;
use ractor::ActorRef;
use ractor_cluster::RactorClusterMessage;
use subagents_actors::{Placement, Reply, ScriptedModel, UseAgentCall};
use subagents_cluster::ClusterNode;
use subagents_messages::{AgentId, SubAgentStatus};

/// What a forger casts to a node's host: the variant's name and fields as
/// the host's own enum had them.
#[derive(RactorClusterMessage)]
enum ForgedHost {
    ParentLost(String),
}

/// The same, with the fields of the sealed variant and a guess at the
/// seal.
#[derive(RactorClusterMessage)]
enum ForgedSealedHost {
    ParentLost(String, u64),
}

/// What a forger casts to a node's inbox.
#[derive(RactorClusterMessage)]
enum ForgedInbox {
    NodeLost(String, String),
}

/// The same, sealed with a guess.
#[derive(RactorClusterMessage)]
enum ForgedSealedInbox {
    NodeLost(String, String, u64),
}

const FORGER_PORT_VAR: &str = "SUBAGENTS_FORGED_PORT";

/// Node `c`: connects to node `a` (its port and name in the environment)
/// and casts it the word that node `b8` is lost; prints `ready` once sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process of the forged tests"]
async fn node_c_says_b_is_lost() {
    let (Ok(port), Ok(name)) = (std::env::var(FORGER_PORT_VAR), std::env::var(NAME_VAR)) else {
        return;
    };
    let node = ClusterNode::start("c8", LOCALHOST, free_port(), COOKIE, runner().await)
        .await
        .unwrap();
    let _link = node
        .connect(&format!("127.0.0.1:{port}"), &name, &[], PATIENCE)
        .await
        .unwrap();
    let group = format!("subagents.inbox.{name}");
    let deadline = std::time::Instant::now() + PATIENCE;
    let inbox = loop {
        if let Some(cell) = ractor::pg::get_members(&group).into_iter().next() {
            break cell;
        }
        assert!(std::time::Instant::now() < deadline, "no inbox of {name}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ActorRef::<ForgedInbox>::from(inbox.clone())
        .cast(ForgedInbox::NodeLost("b8".into(), "forged by c".into()))
        .unwrap();
    ActorRef::<ForgedSealedInbox>::from(inbox)
        .cast(ForgedSealedInbox::NodeLost(
            "b8".into(),
            "forged by c".into(),
            7,
        ))
        .unwrap();
    println!("ready");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Node `a` (this test) runs a child on `b8`, tells `b8` itself that `a`
/// was lost, and has node `c` tell it that `b8` was lost: the child ends
/// `done` on its own and wakes the parent. Forged, `b8` kept its reports
/// (the child `running` for ever), and `a` failed it "node lost: forged by
/// c" though `b8` was up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn words_that_a_node_was_lost_from_another_node_are_ignored() {
    let b = NodeB::start("b8");
    let port = free_port();
    let node = ClusterNode::start("a8", LOCALHOST, port, COOKIE, runner().await)
        .await
        .unwrap();
    let link = node
        .connect(&format!("127.0.0.1:{}", b.port), &b.name, &[], PATIENCE)
        .await
        .unwrap();
    let steady = UseAgentCall::run("Steady\nYou work.", "work 8 s")
        .tools(["sleep"])
        .wait(false);
    let turns = vec![
        Reply::new().use_agent(&steady),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::answer("Noted again."),
    ];
    let (thread, mut events) = thread_of(
        ScriptedModel::new(turns),
        Placement::On(std::sync::Arc::new(link)),
    )
    .await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    seen(&mut events, &mut log, in_tool).await;
    // `a` forges `b8`'s own word that `a`'s session closed.
    let host = ractor::pg::get_members(&"subagents.host.b8".to_owned())
        .into_iter()
        .next()
        .expect("b8's host is seen here");
    ActorRef::<ForgedHost>::from(host.clone())
        .cast(ForgedHost::ParentLost("a8".into()))
        .unwrap();
    ActorRef::<ForgedSealedHost>::from(host)
        .cast(ForgedSealedHost::ParentLost("a8".into(), 7))
        .unwrap();
    // `c` forges `a`'s own word that `b8` is lost.
    let mut c = helper(
        "node_c_says_b_is_lost",
        &[
            (FORGER_PORT_VAR, port.to_string()),
            (NAME_VAR, "a8".to_owned()),
        ],
    );
    until(&mut events, &mut log, is_wake).await;
    let envelope = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(
        (
            envelope.status,
            envelope.result.as_deref(),
            envelope.error.as_deref()
        ),
        (SubAgentStatus::Done, Some("worked 8 s"), None)
    );
    let _ = c.kill();
    let _ = c.wait();
    thread.close_and_wait().await;
    node.shutdown();
    drop(b);
}
