//! Conformance against a REAL OpenAI-compatible server (opt-in: ignored
//! by default, it needs a server). Run it with
//!
//! ```text
//! scripts/real-server/llama-cpp-python.sh \
//!     cargo test --all-features --test real_server -- --ignored
//! ```
//!
//! which builds llama-cpp-python's server, serves a tiny random-weight
//! model on 127.0.0.1 and sets `SUBAGENTS_OPENAI_BASE_URL` and
//! `SUBAGENTS_OPENAI_MODEL`. Random weights write gibberish, so these tests
//! check the protocol, not the words: streams end, tool calls are forced
//! with `tool_choice` and come back whole, a history with tool calls is
//! accepted, and a delegating turn closes everything it opens.
//!
//! The tests take turns on the server (`SERVER`): llama-cpp-python
//! interrupts a running completion when a new request arrives (its
//! `interrupt_requests` setting, on by default), which ends the earlier
//! stream with a finish and no output.

#![cfg(feature = "openai")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use subagents::actors::openai::OpenAiCompatible;
use subagents::actors::registry::ModelRegistry;
use subagents::messages::{
    ChatMessage, Limits, ModelChunk, ModelRequest, RequestOptions, ToolCall, ToolChoice, ToolSpec,
    ToolUseId,
};
use subagents::prelude::*;
use subagents_demo::Calculator;

/// Held for the whole of each test: one request on the server at a time
/// (a tokio lock: each test has a runtime of its own, and a failed test
/// does not poison it).
static SERVER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn server() -> Arc<dyn Model> {
    OpenAiCompatible::builder(
        std::env::var("SUBAGENTS_OPENAI_BASE_URL").expect(
            "SUBAGENTS_OPENAI_BASE_URL: run through scripts/real-server/llama-cpp-python.sh",
        ),
        std::env::var("SUBAGENTS_OPENAI_MODEL").unwrap_or_else(|_| "tiny".into()),
    )
    .timeout(Duration::from_secs(120))
    .build()
    .unwrap()
    .shared()
}

fn weather() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}).to_string(),
    }
}

async fn chunks(request: ModelRequest) -> Vec<ModelChunk> {
    let out: Vec<_> = server().stream(request).collect().await;
    out.into_iter()
        .map(|c| c.unwrap_or_else(|e| panic!("the real server failed: {e}")))
        .collect()
}

#[tokio::test]
#[ignore = "needs a real server: scripts/real-server/llama-cpp-python.sh"]
async fn text_streams_and_ends_with_usage_or_an_estimate() {
    let _turn = SERVER.lock().await;
    let out = chunks(ModelRequest {
        messages: vec![ChatMessage::user("Say hello.")],
        options: RequestOptions {
            max_tokens: Some(8),
            temperature: Some(0.0),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    assert!(
        out.iter()
            .any(|c| matches!(c, ModelChunk::Usage(_) | ModelChunk::UsageEstimate(_))),
        "{out:?}"
    );
}

#[tokio::test]
#[ignore = "needs a real server: scripts/real-server/llama-cpp-python.sh"]
async fn a_named_tool_choice_yields_one_whole_call() {
    let _turn = SERVER.lock().await;
    let out = chunks(ModelRequest {
        messages: vec![ChatMessage::user("Weather in Paris?")],
        tools: vec![weather()],
        options: RequestOptions {
            tool_choice: Some(ToolChoice::Function("get_weather".into())),
            max_tokens: Some(256),
            temperature: Some(0.0),
            ..Default::default()
        },
    })
    .await;
    let calls: Vec<&ToolCall> = out
        .iter()
        .filter_map(|c| match c {
            ModelChunk::ToolCall(call) => Some(&**call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1, "{out:?}");
    assert_eq!(calls[0].name, "get_weather", "the name is not repeated");
}

/// The history of a tool-calling turn goes back as the adapter writes it
/// (`content: ""`, never `null`): accepted.
#[tokio::test]
#[ignore = "needs a real server: scripts/real-server/llama-cpp-python.sh"]
async fn a_history_with_tool_calls_is_accepted() {
    let _turn = SERVER.lock().await;
    let call = ToolCall {
        id: ToolUseId::new("call_1"),
        name: "get_weather".into(),
        arguments: r#"{"city":"Paris"}"#.into(),
        extra_content: None,
    };
    let out = chunks(ModelRequest {
        messages: vec![
            ChatMessage::user("Weather in Paris?"),
            ChatMessage::assistant("", vec![call]),
            ChatMessage::tool(ToolUseId::new("call_1"), "sunny"),
        ],
        tools: vec![weather()],
        options: RequestOptions {
            max_tokens: Some(8),
            temperature: Some(0.0),
            ..Default::default()
        },
    })
    .await;
    assert!(!out.is_empty());
}

/// A scripted parent delegates with `use_agent` to a child on the real
/// server, which is made to call the calculator (`tool_choice`, forced on
/// its first call) and then answers or is cut by its model-call limit: the
/// child's tool call, its result and its answer come back to the parent,
/// and everything opened closes.
#[tokio::test]
#[ignore = "needs a real server: scripts/real-server/llama-cpp-python.sh"]
async fn a_delegating_turn_runs_a_child_on_the_real_server() {
    let _turn = SERVER.lock().await;
    let mut models = ModelRegistry::new();
    models.register("local", "tiny", server(), 1).await.unwrap();
    let parent = ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Calculator\nCompute what you are asked.", "What is 6*7?")
                .tools(["calculator"])
                .model("tiny"),
        ),
        Reply::answer("The child answered."),
    ]);
    let (parent, mut events) = DelegationBuilder::new(parent.shared())
        .tools(ToolRegistry::new().with(Calculator))
        .models(models)
        .child_limits(Limits {
            max_model_calls: 2,
            ..Limits::default()
        })
        .child_request_options(RequestOptions {
            tool_choice: Some(ToolChoice::Function("calculator".into())),
            max_tokens: Some(128),
            temperature: Some(0.0),
            ..Default::default()
        })
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("Delegate it.").unwrap();
    let mut log = Vec::new();
    let result = loop {
        let event = tokio::time::timeout(Duration::from_secs(600), events.recv())
            .await
            .expect("the turn ends")
            .expect("the stream is open");
        log.push(event.clone());
        if let AgentEvent::Result(result) = event {
            break *result;
        }
    };
    assert_eq!(result.text, "The child answered.", "{log:#?}");
    let child: Vec<&AgentEvent> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(_, inner) => Some(&**inner),
            _ => None,
        })
        .collect();
    let started = child
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolStarted(s) if s.name == "calculator"))
        .count();
    let answered = child
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolResult(r) if r.name == "calculator"))
        .count();
    assert!(started >= 1, "the child called its tool: {log:#?}");
    assert_eq!(started, answered, "every call answered");
    assert!(
        child.iter().any(|e| matches!(e, AgentEvent::Result(_))),
        "the child's own result"
    );
    let envelope = &parent.hub.envelopes()[0];
    assert!(envelope.status.is_terminal(), "{envelope:?}");
    parent.shutdown_and_wait().await;
}
