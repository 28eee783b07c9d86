//! Two nodes from two terminals (run from the `cluster/` directory):
//!
//! ```sh
//! cargo run --example cluster_node -- serve b 127.0.0.1:7101
//! cargo run --example cluster_node -- parent a 127.0.0.1:7100 b@127.0.0.1:7101
//! ```
//!
//! The first is node `b`: it runs children for other nodes. The second is
//! node `a`: a parent on the scripted model starts three background
//! workers, every one placed on `b`; their events, results and wakes come
//! back into `a`'s one ordered stream. Stop `b` (Ctrl-C) while they run
//! and they end `failed` ("node lost"), each waking the parent once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use subagents_actors::{
    DelegationBuilder, GateHandle, NodeRunner, Placement, Reply, ScriptedModel, ToolRegistry,
    UseAgentCall,
};
use subagents_cluster::ClusterNode;
use subagents_messages::{AgentEvent, Transcript};
use subagents_supervisor::ThreadHandle;

const COOKIE: &str = "subagents-example";

/// The model both nodes run (a node runs a child on its model of the
/// same name): the parent's turns and each worker's.
fn model() -> ScriptedModel {
    let mut first = Reply::new();
    for (i, secs) in [3, 1, 2].iter().enumerate() {
        first = first.use_agent(
            &UseAgentCall::run(
                format!("Worker {}\nYou work.", i + 1),
                format!("work {secs} s"),
            )
            .tools(["sleep"])
            .wait(false),
        );
    }
    let mut turns = vec![first, Reply::answer("Three workers started on node b.")];
    turns.extend((0..3).map(|_| Reply::answer("Noted.")));
    let mut model = ScriptedModel::new(turns);
    for (i, secs) in [3, 1, 2].iter().enumerate() {
        model = model.with_script(
            format!("Worker {}\n", i + 1),
            vec![
                Reply::new().tool_call("sleep", format!(r#"{{"secs":{secs}}}"#)),
                Reply::answer(format!("worked {secs} s")),
            ],
        );
    }
    model
}

async fn runner() -> Result<NodeRunner, Box<dyn std::error::Error>> {
    Ok(NodeRunner::new(
        vec![model().shared()],
        ToolRegistry::new().with(subagents_demo::Sleep),
        GateHandle::spawn(1).await?,
    ))
}

fn usage() -> ! {
    eprintln!(
        "usage: cluster_node serve NAME HOST:PORT\n       cluster_node parent NAME HOST:PORT OTHER@HOST:PORT"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(name), Some(addr)) = (args.first(), args.get(1), args.get(2)) else {
        usage()
    };
    let addr: SocketAddr = addr.parse()?;
    let node = ClusterNode::start(name, addr.ip(), addr.port(), COOKIE, runner().await?).await?;
    match mode.as_str() {
        "serve" => {
            println!("node {name} on {addr}: running children for other nodes (Ctrl-C stops it)");
            tokio::signal::ctrl_c().await?;
        }
        "parent" => {
            let Some((other, other_addr)) = args.get(3).and_then(|o| o.split_once('@')) else {
                usage()
            };
            let link = node
                .connect(other_addr, other, &[], Duration::from_secs(10))
                .await?;
            println!("node {name}: connected to node {other} at {other_addr}");
            let (thread, mut events) = ThreadHandle::spawn(
                DelegationBuilder::new(model().shared())
                    .system_prompt("You are the parent.")
                    .tools(ToolRegistry::new().with(subagents_demo::Sleep))
                    .placement(Placement::On(Arc::new(link))),
                None,
            )
            .await?;
            let question = "Start three workers.";
            thread.send_user(question)?;
            let mut log = Vec::new();
            let mut results = 0;
            while results < 4 {
                let Some(event) = events.recv().await else {
                    break;
                };
                match &event {
                    AgentEvent::Child(id, inner) => match &**inner {
                        AgentEvent::ToolStarted(call) => {
                            println!("  {id} (on node {other}): {} …", call.name);
                        }
                        AgentEvent::Result(result) => {
                            println!("  {id} (on node {other}): {}", result.text);
                        }
                        _ => {}
                    },
                    AgentEvent::Wake { line, .. } => println!("  wake: {}", line),
                    AgentEvent::Result(result) => {
                        results += 1;
                        println!("  parent: {}", result.text);
                    }
                    _ => {}
                }
                log.push(event);
            }
            // The thread's stream has the user's message too.
            let mut transcript = Transcript::new();
            for event in &log {
                transcript.apply(event);
            }
            println!("\ntranscript:\n{}", transcript.render());
            println!("envelopes:");
            for envelope in thread.hub().envelopes() {
                println!(
                    "  {} {:<9} {:<7} {}",
                    envelope.id,
                    envelope.name,
                    envelope.status.as_str(),
                    envelope.result.or(envelope.error).unwrap_or_default()
                );
            }
            thread.close_and_wait().await;
        }
        _ => usage(),
    }
    node.shutdown();
    Ok(())
}
