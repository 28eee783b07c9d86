//! Run with (from `cluster/`): `cargo run --release --example cluster_bench [CYCLES]`
//!
//! What a child on another node costs against a local one: the same hub
//! cycle as the root `bench_report`'s "spawn → first nested event →
//! stopped", once with the child here and once on node `b` — a second
//! process on 127.0.0.1 (this binary, started with `node-b PORT`).
//! Prints the median and the 90th percentile of each, and their ratio.
//! The variants alternate cycle by cycle, so a noisy neighbour slows both.

#![allow(clippy::expect_used)] // a benchmark: a broken cycle may panic

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use subagents_actors::{
    DelegatingAgent, DelegationBuilder, EventStream, GateHandle, NodeRunner, Placement, Reply,
    ScriptedModel, ToolRegistry,
};
use subagents_cluster::ClusterNode;
use subagents_messages::{AgentEvent, AgentId, ChildRequest, ToolUseId};

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const COOKIE: &str = "subagents-bench";

/// A child that says "hi", then waits (until it is stopped).
fn child_model() -> ScriptedModel {
    ScriptedModel::new(vec![Reply::new().text("hi").hang()])
}

async fn runner() -> Result<NodeRunner, Box<dyn std::error::Error>> {
    Ok(NodeRunner::new(
        vec![child_model().shared()],
        ToolRegistry::new(),
        GateHandle::spawn(1).await?,
    ))
}

async fn parent(
    placement: Placement,
) -> Result<(DelegatingAgent, EventStream), Box<dyn std::error::Error>> {
    Ok(DelegationBuilder::new(child_model().shared())
        .placement(placement)
        .spawn()
        .await?)
}

/// One cycle: request a child, read its first nested event, stop it.
async fn cycle(parent: &DelegatingAgent, events: &mut EventStream) -> Duration {
    let started = Instant::now();
    let id = parent
        .hub
        .request(ChildRequest::new(
            AgentId::new("parent"),
            0,
            ToolUseId::new("call_1_1"),
            "Child\nYou are a sub-agent.",
            "go",
        ))
        .await
        .expect("the hub starts the child");
    loop {
        match events.recv().await.expect("the stream is open") {
            AgentEvent::Child(child, _) if child == id => break,
            _ => {}
        }
    }
    parent.hub.stop(&id).await.expect("the hub stops the child");
    let took = started.elapsed();
    while events.try_recv().is_some() {}
    took
}

fn summary(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.9))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("node-b") {
        let port: u16 = args.get(1).ok_or("node-b PORT")?.parse()?;
        let _node = ClusterNode::start("b", LOCALHOST, port, COOKIE, runner().await?).await?;
        println!("ready");
        tokio::time::sleep(Duration::from_secs(3600)).await;
        return Ok(());
    }
    let cycles: usize = args.first().map(|c| c.parse()).transpose()?.unwrap_or(300);
    let free = |_| -> std::io::Result<u16> {
        Ok(std::net::TcpListener::bind((LOCALHOST, 0))?
            .local_addr()?
            .port())
    };
    let b_port = free(())?;
    let mut b = Command::new(std::env::current_exe()?)
        .args(["node-b", &b_port.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = b.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    while let Some(line) = lines.next().transpose()? {
        if line == "ready" {
            break;
        }
    }
    let a = ClusterNode::start("a", LOCALHOST, free(())?, COOKIE, runner().await?).await?;
    let link = a
        .connect(
            &format!("127.0.0.1:{b_port}"),
            "b",
            &[],
            Duration::from_secs(30),
        )
        .await?;
    let (local, mut local_events) = parent(Placement::Local).await?;
    let (remote, mut remote_events) = parent(Placement::On(Arc::new(link))).await?;
    for _ in 0..20 {
        cycle(&local, &mut local_events).await;
        cycle(&remote, &mut remote_events).await;
    }
    let (mut here, mut there) = (Vec::new(), Vec::new());
    for i in 0..cycles {
        if i % 2 == 0 {
            here.push(cycle(&local, &mut local_events).await);
            there.push(cycle(&remote, &mut remote_events).await);
        } else {
            there.push(cycle(&remote, &mut remote_events).await);
            here.push(cycle(&local, &mut local_events).await);
        }
    }
    let (here_median, here_p90) = summary(here);
    let (there_median, there_p90) = summary(there);
    println!("spawn → first nested event → stopped, {cycles} cycles each, loopback:");
    println!("| child | median | p90 |");
    println!("|---|---:|---:|");
    println!("| on this node | {here_median:.1?} | {here_p90:.1?} |");
    println!("| on node b (another process) | {there_median:.1?} | {there_p90:.1?} |");
    println!(
        "ratio (median): {:.2}×",
        there_median.as_secs_f64() / here_median.as_secs_f64()
    );
    local.shutdown();
    remote.shutdown();
    a.shutdown();
    let _ = b.kill();
    let _ = b.wait();
    Ok(())
}
