//! Run with: cargo run --example quickstart
//!
//! A parent agent on the embedded scripted model (offline, deterministic)
//! delegates a page-title fetch to a child inline, then fans out five
//! background children — three live, two queued behind them — and prints
//! the event stream as it arrives, the transcript tree and the envelopes.
//!
//! With the `openai` feature and `SUBAGENTS_OPENAI_BASE_URL` set, the same
//! host runs on a real model instead (see docs/openai.md):
//! `SUBAGENTS_OPENAI_BASE_URL=http://127.0.0.1:8080/v1 SUBAGENTS_OPENAI_MODEL=qwen2.5 \
//!  cargo run --example quickstart --features openai`

use std::time::Duration;

use subagents::actors::DelegationBuilder;
use subagents::messages::Transcript;
use subagents::prelude::*;
use subagents_demo::{Calculator, PageTitle};

const SITES: [&str; 5] = [
    "https://www.rust-lang.org",
    "https://tokio.rs",
    "https://docs.rs/ractor",
    "https://serde.rs",
    "https://example.com",
];

fn run(name: &str, input: &str, wait: bool) -> UseAgentCall {
    UseAgentCall::run(
        format!("{name}\nYou fetch one page title and answer with it."),
        input,
    )
    .tools(["fetch_title"])
    .wait(wait)
}

fn script() -> ScriptedModel {
    let mut fan_out = Reply::new().text("Now the five sites, in the background. ");
    for (i, site) in SITES.iter().enumerate() {
        fan_out = fan_out.use_agent(&run(&format!("Title worker {}", i + 1), site, false));
    }
    let mut model = ScriptedModel::new(vec![
        Reply::new()
            .text("I'll delegate the fetch. ")
            .use_agent(&run("Title fetcher", "https://example.com", true)),
        fan_out,
        Reply::answer("The first page is \"Example Domain\"; five workers are fetching the rest."),
    ])
    .with_script(
        "Title fetcher",
        vec![
            Reply::new().tool_call("fetch_title", r#"{"url":"https://example.com"}"#),
            Reply::answer("Example Domain"),
        ],
    );
    for (i, site) in SITES.iter().enumerate() {
        model = model.with_script(
            format!("Title worker {}\n", i + 1),
            vec![
                Reply::new()
                    .delay(Duration::from_millis(50))
                    .tool_call("fetch_title", format!(r#"{{"url":"{site}"}}"#)),
                Reply::new()
                    .delay(Duration::from_millis(50))
                    .text(format!("{site}: done")),
            ],
        );
    }
    model
}

fn describe(event: &AgentEvent) -> String {
    match event {
        AgentEvent::Text(text) => format!("text {text:?}"),
        AgentEvent::ToolStarted(call) => format!("▶ {}({})", call.name, call.arguments),
        AgentEvent::ToolResult(result) => format!(
            "{} {} → {}",
            if result.is_error { "✗" } else { "✓" },
            result.name,
            result.output
        ),
        AgentEvent::Result(result) => format!("result {:?} ({:?})", result.text, result.outcome),
        AgentEvent::ChildStarted(info) => format!(
            "child started {} \"{}\" tools={:?}{}",
            info.id,
            info.name,
            info.tools,
            if info.background { " (background)" } else { "" }
        ),
        AgentEvent::ChildStatus(id, status) => format!("[{id}] {status}"),
        AgentEvent::Child(id, inner) => format!("[{id}] {}", describe(inner)),
        other => format!("{other:?}"),
    }
}

/// The scripted model, or a real one when the environment names it.
fn model() -> Result<std::sync::Arc<dyn Model>, Box<dyn std::error::Error>> {
    #[cfg(feature = "openai")]
    if std::env::var_os(subagents::actors::openai::OpenAiCompatible::ENV_BASE_URL).is_some() {
        let model = subagents::actors::openai::OpenAiCompatible::from_env()?;
        println!("(model: {} from the environment)", model.name());
        return Ok(std::sync::Arc::new(model));
    }
    Ok(script().shared())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `RUST_LOG=subagents_actors=debug` shows the gate's grants (queue
    // depth, wait times) as tracing fields.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    run_quickstart().await
}

/// The whole quickstart, under whatever `tracing` subscriber is set (the
/// `otel` example runs it under tracing-opentelemetry).
pub(crate) async fn run_quickstart() -> Result<(), Box<dyn std::error::Error>> {
    let (parent, mut events) = DelegationBuilder::new(model()?)
        .system_prompt("You are a helpful assistant. Delegate fetches to sub-agents.")
        .tools(
            ToolRegistry::new()
                .with(PageTitle::default())
                .with(Calculator),
        )
        .max_live(3)
        .conversation_id("quickstart")
        .spawn()
        .await?;

    let question = "What is the title of https://example.com? Then check five more sites.";
    println!("user: {question}\n");
    parent.agent.send_user(question)?;

    let mut log = Vec::new();
    loop {
        let Some(event) = events.recv().await else {
            break;
        };
        println!("  {}", describe(&event));
        log.push(event);
        let snapshot = parent.hub.snapshot().await?;
        if matches!(log.last(), Some(AgentEvent::Result(_))) {
            println!(
                "  (hub: {} live, {} queued, {} finished)",
                snapshot.live, snapshot.queued, snapshot.finished
            );
        }
        let parent_done = log.iter().any(|e| matches!(e, AgentEvent::Result(_)));
        if parent_done && snapshot.live == 0 && snapshot.queued == 0 {
            break;
        }
    }
    while let Some(event) = events.try_recv() {
        println!("  {}", describe(&event));
        log.push(event);
    }

    let mut transcript = Transcript::new();
    // A bare parent's stream does not say the user's turn (a thread's
    // does): the host applies it, so the reply folds as one row.
    transcript.apply(&AgentEvent::UserMessage(question.to_owned()));
    for event in &log {
        transcript.apply(event);
    }
    println!("\ntranscript:\n{}", transcript.render());

    println!("envelopes:");
    for envelope in parent.hub.envelopes() {
        println!(
            "  {} {:<16} {:<8} {} tool call(s), background={}, result={:?}",
            envelope.id,
            envelope.name,
            envelope.status.as_str(),
            envelope.tool_calls,
            envelope.background,
            envelope.result.unwrap_or_default()
        );
    }
    parent.shutdown_and_wait().await;
    Ok(())
}
