//! Run with: cargo run --example chat_host
//!
//! A chat app's engine driving three threads on the scripted model, in
//! virtual time: background children, an approval from a child, the user
//! typing (wakes wait), wakes arriving in order, a thread switch (stop-all),
//! a parent stopped while it waits inline (the child is detached and wakes
//! the parent later), and a child steered while it runs, then resumed
//! after it finished (a new run from its conversation), and a restart: a
//! second process runs a child on a store and is killed (`kill -9`) while
//! the child works; this process opens the store, its parent is woken once
//! with the interrupted child, and a message resumes it from its saved
//! conversation.

use std::time::Duration;

use std::sync::Arc;
use subagents::actors::DelegationBuilder;
use subagents::messages::{ThreadId, Transcript};
use subagents::prelude::*;

use subagents::actors::clock::SystemClock;
use subagents::supervisor::store::EnvelopeStore;
use subagents::supervisor::{ThreadConfig, ThreadHandle, Threads};
use subagents_demo::{Post, Sleep};

fn run(name: &str, input: &str, tools: &[&str], wait: bool) -> UseAgentCall {
    UseAgentCall::run(format!("{name}\nDo the task."), input)
        .tools(tools.iter().copied())
        .wait(wait)
}

fn work_model() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new()
            .text("Starting three helpers. ")
            .use_agent(&run("Researcher", "research for 20 s", &["sleep"], false))
            .use_agent(&run("Announcer", "post the news", &["http_post"], false))
            .use_agent(&run("Archivist", "archive for 500 s", &["sleep"], false)),
        Reply::answer("Three helpers are on it."),
        Reply::answer("The announcement is out."),
        Reply::answer("Research is in."),
    ])
    .with_script(
        "Researcher",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":20}"#),
            Reply::answer("three sources found"),
        ],
    )
    .with_script(
        "Announcer",
        vec![
            Reply::new().tool_call("http_post", "{}"),
            Reply::answer("announced"),
        ],
    )
    .with_script(
        "Archivist",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":500}"#),
            Reply::answer("archived"),
        ],
    )
}

fn chat_model() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Summarizer", "summarize for 60 s", &["sleep"], true)),
        // The stopped turn's place: its result is its answer in the
        // conversation (the scripted model counts answers).
        Reply::answer("(the stopped turn's)"),
        Reply::answer("The summary arrived after all: a short summary."),
    ])
    .with_script(
        "Summarizer",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":60}"#),
            Reply::answer("a short summary"),
        ],
    )
}

/// The Drafter's id: children are numbered across the registry's threads
/// (`work` started `agent_1`–`agent_3`, `chat` `agent_4`), so an id read
/// in one thread never names another's child.
const DRAFTER: &str = "agent_5";

fn steer_model() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(&run(
            "Drafter",
            "draft the release notes",
            &["sleep"],
            false,
        )),
        Reply::answer("The drafter is on it."),
        Reply::new().use_agent(&UseAgentCall::send(DRAFTER, "keep it under 100 words")),
        Reply::answer("Told the drafter."),
        Reply::answer("The notes are in, short."),
        Reply::new().use_agent(&UseAgentCall::send(DRAFTER, "now add a title")),
        Reply::answer("Asked the drafter for a title."),
        Reply::answer("The titled notes are in."),
    ])
    .with_script(
        "Drafter",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":30}"#),
            Reply::answer("notes, short (it read: under 100 words)"),
            Reply::answer("# Release 1.2\nnotes, short"),
        ],
    )
}

fn builder(model: ScriptedModel) -> DelegationBuilder {
    DelegationBuilder::new(model.shared())
        .system_prompt("You are a helpful assistant.")
        .tools(ToolRegistry::new().with(Sleep).with(Post))
}

fn show(thread: &str, event: &AgentEvent) {
    let line = match event {
        AgentEvent::ChildStarted(info) => match &info.resumed_from {
            Some(from) => format!(
                "child {} \"{}\" started, going on from {from}",
                info.id, info.name
            ),
            None => format!("child {} \"{}\" started", info.id, info.name),
        },
        AgentEvent::ChildStatus(id, status) => format!("child {id}: {status}"),
        AgentEvent::Child(id, inner) => match &**inner {
            AgentEvent::ApprovalRequested(r) => {
                format!("child {id} asks to run `{}` ({})", r.tool_name, r.id)
            }
            AgentEvent::ToolResult(r) => format!("child {id}: {} → {}", r.name, r.output),
            _ => return,
        },
        AgentEvent::ToolStarted(call) if call.arguments.contains(r#""action":"send""#) => {
            format!("parent: use_agent {}", call.arguments)
        }
        AgentEvent::Wake { line, .. } => format!("WAKE  {}", line),
        AgentEvent::Result(r) => format!("assistant: {} [{:?}]", r.text, r.outcome),
        _ => return,
    };
    let now = tokio::time::Instant::now();
    println!(
        "[{thread:>4}] {line}  (t={}s)",
        (now - START.with(|s| *s)).as_secs()
    );
}

thread_local! {
    static START: tokio::time::Instant = tokio::time::Instant::now();
}

/// Reads a thread's stream for `secs` of virtual time, answering approvals.
async fn pump(
    threads: &Threads,
    id: &ThreadId,
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    secs: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        show(id.as_str(), &event);
        if let AgentEvent::Child(_, inner) = &event
            && let AgentEvent::ApprovalRequested(request) = &**inner
        {
            threads
                .get(id)?
                .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
                .await?;
            println!("[host] approved {}", request.id);
        }
        log.push(event);
    }
    Ok(())
}

/// Set in the process `restart` starts (and kills).
const CRASH_DIR: &str = "CHAT_HOST_CRASHING_PROCESS_STORE";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut runtime = tokio::runtime::Builder::new_current_thread();
    runtime.enable_all();
    if let Ok(dir) = std::env::var(CRASH_DIR) {
        // Real time: its child must still be in its tool when it is killed.
        return runtime.build()?.block_on(crashing_process(&dir));
    }
    runtime.start_paused(true).build()?.block_on(demo())
}

async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    START.with(|_| ());
    let (work, chat) = (ThreadId::new("work"), ThreadId::new("chat"));
    let mut threads = Threads::new();
    let mut work_events = threads.open(work.clone(), builder(work_model())).await?;
    let (mut work_log, mut chat_log) = (Vec::new(), Vec::new());

    threads
        .get(&work)?
        .send_user("Research, announce and archive, please.")?;
    pump(&threads, &work, &mut work_events, &mut work_log, 5).await?;

    println!("[host] the user starts typing: wakes wait");
    threads.get(&work)?.typing(true)?;
    pump(&threads, &work, &mut work_events, &mut work_log, 30).await?;
    println!("[host] the user stops typing: wakes arrive, one at a time, in order");
    threads.get(&work)?.typing(false)?;
    pump(&threads, &work, &mut work_events, &mut work_log, 10).await?;

    println!("[host] the user opens another thread: `work` stops its children");
    let mut chat_events = threads.open(chat.clone(), builder(chat_model())).await?;
    pump(&threads, &work, &mut work_events, &mut work_log, 1).await?;

    threads.get(&chat)?.send_user("Summarize the meeting.")?;
    pump(&threads, &chat, &mut chat_events, &mut chat_log, 10).await?;
    println!("[host] the user presses stop while the parent waits inline: the child is detached");
    threads.get(&chat)?.stop_parent()?;
    pump(&threads, &chat, &mut chat_events, &mut chat_log, 120).await?;

    let steer = ThreadId::new("steer");
    let mut steer_events = threads.open(steer.clone(), builder(steer_model())).await?;
    let mut steer_log = Vec::new();
    threads.get(&steer)?.send_user("Draft the release notes.")?;
    pump(&threads, &steer, &mut steer_events, &mut steer_log, 5).await?;
    println!("[host] the user adds a constraint: the parent steers the running child");
    threads.get(&steer)?.send_user("Keep them short.")?;
    pump(&threads, &steer, &mut steer_events, &mut steer_log, 60).await?;
    println!("[host] the child has finished; a message resumes it as a new run");
    threads.get(&steer)?.send_user("Give them a title.")?;
    pump(&threads, &steer, &mut steer_events, &mut steer_log, 60).await?;

    for (name, log) in [
        ("work", &work_log),
        ("chat", &chat_log),
        ("steer", &steer_log),
    ] {
        println!(
            "\ntranscript of `{name}`:\n{}",
            Transcript::from_events(log).render()
        );
    }
    restart(&mut threads).await
}

fn store(dir: &std::path::Path) -> Result<Arc<EnvelopeStore>, Box<dyn std::error::Error>> {
    Ok(Arc::new(EnvelopeStore::open(dir, Arc::new(SystemClock))?.0))
}

/// The process `restart` kills: a thread on the store whose child takes a
/// step, then works for an hour. Says `ready` once that is on disk.
async fn crashing_process(dir: &str) -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run("Indexer", "index the wiki", &["sleep"], false)),
        Reply::answer("The indexer is on it."),
    ])
    .with_script(
        "Indexer",
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":0}"#),
            Reply::new().tool_call("sleep", r#"{"secs":3600}"#),
        ],
    );
    let config = ThreadConfig::new(builder(model)).store(store(dir.as_ref())?);
    let (thread, mut events) = ThreadHandle::spawn(config, None).await?;
    thread.send_user("Index the wiki.")?;
    while let Some(event) = events.recv().await {
        if let AgentEvent::Child(_, inner) = &event
            && let AgentEvent::ToolStarted(call) = &**inner
            && call.arguments.contains("3600")
        {
            break;
        }
    }
    thread.flush_persistence().await?;
    println!("ready");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(())
}

async fn restart(threads: &mut Threads) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("chat_host_restart_{}", std::process::id()));
    println!(
        "\n[host] another process runs an indexer on the store {} ...",
        dir.display()
    );
    let mut crashing = std::process::Command::new(std::env::current_exe()?)
        .env(CRASH_DIR, &dir)
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let stdout = crashing.stdout.take().ok_or("no stdout")?;
    let ready = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .any(|line| line == "ready");
    crashing.kill()?; // SIGKILL: the process this example started, by its pid
    crashing.wait()?;
    if !ready {
        return Err("the crashing process never got its child running".into());
    }
    println!(
        "[host] ... and is killed (kill -9) while the indexer works; this process opens the store"
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on where you stopped")),
        Reply::answer("The indexer goes on."),
        Reply::answer("The wiki is indexed."),
    ])
    .with_script(
        "Indexer",
        vec![
            Reply::answer("unused"),
            Reply::answer("indexed 120 pages"),
            Reply::answer("indexed 120 pages"),
        ],
    );
    let id = ThreadId::new("after");
    let config = ThreadConfig::new(builder(model)).store(store(&dir)?);
    let mut events = threads.open(id.clone(), config).await?;
    let mut log = Vec::new();
    pump(threads, &id, &mut events, &mut log, 60).await?;
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "\ntranscript of `after`:\n{}",
        Transcript::from_events(&log).render()
    );
    Ok(())
}
