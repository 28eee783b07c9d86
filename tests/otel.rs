//! The spans through the OpenTelemetry pipeline a host would use
//! (`tracing-opentelemetry` into the SDK, with its in-memory exporter):
//! `otel.name` becomes the span's name, `otel.kind` its kind, and the tree
//! and one trace id hold across the actors. Built with `--features otel`
//! (the `.ci/run` test command has `--all-features`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use subagents::actors::DelegationBuilder;
use subagents::prelude::*;
use subagents::supervisor::ThreadHandle;
use subagents_demo::Sleep;
use tracing_subscriber::layer::SubscriberExt;

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test(start_paused = true)]
async fn the_exported_trace_is_the_delegation_tree() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));

    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, true)),
        Reply::answer("Done."),
    ])
    .with_script("Worker", worker(1));
    let (thread, mut events) = ThreadHandle::spawn(
        DelegationBuilder::new(model.shared())
            .system_prompt("Planner\nYou plan.")
            .tools(ToolRegistry::new().with(Sleep))
            .conversation_id("conv-1"),
        None,
    )
    .await
    .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    // Exported while the thread goes on: nothing of a finished turn is
    // held open (a span held open is never exported).
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();

    let parent = named(&spans, "invoke_agent Planner");
    assert_eq!(parent.len(), 1, "{spans:#?}");
    let parent = parent[0];
    let tool = named(&spans, "execute_tool use_agent");
    assert_eq!(tool.len(), 1);
    let tool = tool[0];
    assert_eq!(tool.parent_span_id, parent.span_context.span_id());
    let child = named(&spans, "invoke_agent Worker");
    assert_eq!(child.len(), 1);
    let child = child[0];
    assert_eq!(child.parent_span_id, tool.span_context.span_id());
    assert_eq!(
        attribute(child, "subagents.outcome"),
        Some(&Value::from("completed"))
    );
    let sleep = named(&spans, "execute_tool sleep");
    assert_eq!(sleep.len(), 1);
    assert_eq!(sleep[0].parent_span_id, child.span_context.span_id());

    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 4, "two model calls each");
    for chat in &chats {
        assert_eq!(chat.span_kind, SpanKind::Client);
    }
    let trace = parent.span_context.trace_id();
    // ractor's own `Actor` spans aside.
    let ours = spans.iter().filter(|s| {
        ["invoke_agent ", "chat ", "execute_tool "]
            .iter()
            .any(|p| s.name.starts_with(p))
    });
    for span in ours {
        assert_eq!(span.span_context.trace_id(), trace, "one trace: {span:#?}");
        assert_eq!(
            attribute(span, "gen_ai.conversation.id"),
            Some(&Value::from("conv-1")),
            "{span:#?}"
        );
        assert!(
            attribute(span, "otel.name").is_none(),
            "otel.name is the span's name, not an attribute"
        );
    }
    thread.close_and_wait().await;
}
