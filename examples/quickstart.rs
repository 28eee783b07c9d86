//! Run with: cargo run --example quickstart
//!
//! One agent on the embedded scripted model (offline, deterministic) with
//! two demo tools; prints its event stream as it arrives.

use subagents::prelude::*;

fn script() -> ScriptedModel {
    ScriptedModel::new(vec![
        Turn::new()
            .text("I'll look up the page and do the sum. ")
            .tool_call("fetch_title", r#"{"url":"https://example.com"}"#)
            .tool_call("calculator", r#"{"expression":"(2 + 3) * 4"}"#)
            .usage(180, 40),
        Turn::new()
            .text("The page is titled \"Example Domain\", ")
            .text("and (2 + 3) × 4 = 20.")
            .usage(260, 20),
    ])
}

fn print(event: &AgentEvent) {
    match event {
        AgentEvent::Text(text) => println!("  text      {text:?}"),
        AgentEvent::ToolStarted(call) => println!("  tool   ▶  {}({})", call.name, call.arguments),
        AgentEvent::ToolResult(result) => {
            let mark = if result.is_error { "✗" } else { "✓" };
            println!("  tool   {mark}  {} → {}", result.name, result.output)
        }
        AgentEvent::Result(result) => println!(
            "  result    {} [{:?}; {} model calls, {} tool calls, {} tokens]",
            result.text,
            result.outcome,
            result.turns,
            result.tool_calls,
            result.usage.total()
        ),
        other => println!("  event     {other:?}"),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tools = ToolRegistry::new()
        .with(PageTitle::default())
        .with(Calculator);
    let (agent, mut events) = Agent::builder(script().shared())
        .system_prompt("You are a helpful assistant.")
        .tools(tools)
        .spawn()
        .await?;

    println!("user: What is the title of https://example.com, and (2 + 3) * 4?");
    agent.send_user("What is the title of https://example.com, and (2 + 3) * 4?")?;
    while let Some(event) = events.recv().await {
        print(&event);
        if matches!(event, AgentEvent::Result(_)) {
            break;
        }
    }
    agent.shutdown();
    Ok(())
}
