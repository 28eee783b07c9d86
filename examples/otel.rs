//! Run with: cargo run --example otel --features otel
//!
//! The quickstart, its spans exported through `tracing-opentelemetry`: the
//! OpenTelemetry SDK collects them and this prints the trace as a tree —
//! each agent run (`invoke_agent`), model call (`chat`) and tool call
//! (`execute_tool`), a child's run under the `use_agent` call that started
//! it. `--raw` prints every span with `opentelemetry-stdout` instead.
//! docs/observability.md lists the spans and their attributes.

#[allow(dead_code)]
#[path = "quickstart.rs"]
mod quickstart;

use std::collections::HashMap;

use opentelemetry::trace::{SpanId, SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;

/// The attributes shown beside a span's name.
const SHOWN: [&str; 6] = [
    "gen_ai.conversation.id",
    "subagents.mode",
    "subagents.outcome",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "error.type",
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let raw = std::env::args().any(|a| a == "--raw");
    let memory = InMemorySpanExporter::default();
    let provider = if raw {
        SdkTracerProvider::builder()
            .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
            .build()
    } else {
        SdkTracerProvider::builder()
            .with_simple_exporter(memory.clone())
            .build()
    };
    // Our spans only (ractor has spans of its own, one per actor).
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("subagents"))
        .with_filter(filter_fn(|meta| meta.target().starts_with("subagents")));
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(otel))?;

    quickstart::run_quickstart().await?;

    provider.force_flush()?;
    if !raw {
        println!("\ntrace:");
        print_tree(&memory.get_finished_spans()?);
    }
    provider.shutdown()?;
    Ok(())
}

/// Prints the spans as a tree, children in the order they started.
fn print_tree(spans: &[SpanData]) {
    let mut children: HashMap<SpanId, Vec<&SpanData>> = HashMap::new();
    let ids: Vec<SpanId> = spans.iter().map(|s| s.span_context.span_id()).collect();
    let mut roots = Vec::new();
    for span in spans {
        if ids.contains(&span.parent_span_id) {
            children.entry(span.parent_span_id).or_default().push(span);
        } else {
            roots.push(span);
        }
    }
    for list in children.values_mut() {
        list.sort_by_key(|s| s.start_time);
    }
    roots.sort_by_key(|s| s.start_time);
    for root in roots {
        print_span(root, &children, 0);
    }
}

fn print_span(span: &SpanData, children: &HashMap<SpanId, Vec<&SpanData>>, depth: usize) {
    let kind = if span.span_kind == SpanKind::Client {
        " (client)"
    } else {
        ""
    };
    let shown: Vec<String> = span
        .attributes
        .iter()
        .filter(|kv| SHOWN.contains(&kv.key.as_str()))
        .filter(|kv| depth == 0 || kv.key.as_str() != "gen_ai.conversation.id")
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    println!(
        "{:indent$}{}{kind}  {}",
        "",
        span.name,
        shown.join(" "),
        indent = depth * 2
    );
    for child in children
        .get(&span.span_context.span_id())
        .into_iter()
        .flatten()
    {
        print_span(child, children, depth + 1);
    }
}
