//! Who is on the other end: a node of an earlier version is refused at
//! `connect`, and a connection that never authenticates is closed.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod nodes;

use std::io::Read;
use std::time::Duration;

use nodes::*;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ractor_cluster::{NodeServer, RactorClusterMessage};
use subagents_cluster::{ClusterError, ClusterNode};

/// A node host as an earlier version wrote it (one field to `Start`, no
/// `Hello`): it answers the heartbeat's `Live`, and drops what it cannot
/// decode at `debug`.
#[derive(RactorClusterMessage)]
enum OldHostMsg {
    Start(Vec<u8>),
    Request(Vec<u8>),
    #[rpc]
    Live(RpcReplyPort<u64>),
}

struct OldHost;

impl Actor for OldHost {
    type Msg = OldHostMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<OldHostMsg>,
        (): (),
    ) -> Result<(), ActorProcessingErr> {
        ractor::pg::join("subagents.host.old".to_owned(), vec![myself.get_cell()]);
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<OldHostMsg>,
        message: OldHostMsg,
        (): &mut (),
    ) -> Result<(), ActorProcessingErr> {
        if let OldHostMsg::Live(reply) = message {
            let _ = reply.send(0);
        }
        Ok(())
    }
}

/// Node `old`: a bare ractor_cluster node with an earlier version's host
/// (its port in the environment); prints `ready` once listening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper process of the version tests"]
async fn an_earlier_versions_node_until_killed() {
    let Ok(port) = std::env::var(PORT_VAR) else {
        return;
    };
    let port: u16 = port.parse().unwrap();
    let server = NodeServer::new(
        port,
        COOKIE.to_owned(),
        "old".to_owned(),
        "127.0.0.1".to_owned(),
        None,
        None,
    )
    .with_listen_addr(LOCALHOST);
    let (_server, _) = Actor::spawn(None, server, ()).await.unwrap();
    let (_host, _) = Actor::spawn(None, OldHost, ()).await.unwrap();
    println!("ready");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Mixed versions (a rolling upgrade): a node of an earlier version
/// answered every heartbeat and dropped every start in silence (ractor
/// logs an undecodable message at `debug`): each child placed there hung
/// for its wall clock and 30 s more, failing in words that hid the cause,
/// and `LeastLoaded`, reading its 0 live, chose it first. `connect` asks
/// the node's version and refuses another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_an_earlier_version_is_refused_at_connect() {
    let port = free_port();
    let mut old = helper(
        "an_earlier_versions_node_until_killed",
        &[(PORT_VAR, port.to_string())],
    );
    let node = ClusterNode::start("a13", LOCALHOST, free_port(), COOKIE, runner().await)
        .await
        .unwrap();
    let refused = node
        .connect(&format!("127.0.0.1:{port}"), "old", &[], PATIENCE)
        .await;
    match refused {
        Err(ClusterError::Version {
            node, theirs: None, ..
        }) => assert_eq!(node, "old"),
        other => panic!("{other:?}"),
    }
    let _ = old.kill();
    let _ = old.wait();
    node.shutdown();
}

/// A connection that never authenticates (anything that reaches the
/// port: no cookie is needed to open one) held its session, its actors
/// and its socket for ever — ractor_cluster sets its handshake no
/// deadline. Closed once the deadline (10 s) passes: the read ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_authenticates_is_closed() {
    let port = free_port();
    let node = ClusterNode::start("a14", LOCALHOST, port, COOKIE, runner().await)
        .await
        .unwrap();
    let ended = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(40)))
            .unwrap();
        let mut buf = [0u8; 64];
        // Whatever the node says first, until it closes.
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(()),
                Err(e) => return Err(e.to_string()),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(ended, Ok(()), "the idle connection was not closed");
    node.shutdown();
}
