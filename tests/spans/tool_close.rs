//! A tool call's `execute_tool` span closes outside its turn's lock:
//! closing a span runs every tracing layer (a synchronous exporter's
//! network send), and every read of the turn (`status`, a stop, a
//! message, the thread's writer) waited behind it.

use super::closing::ReadsAtClose;
use super::*;

/// A thread under a layer reading `agent_1`'s envelope as each
/// `execute_tool` span closes, its user's first turn sent and answered.
async fn thread_reading_at_tool_close(
    builder: DelegationBuilder,
) -> (
    ReadsAtClose,
    tracing::subscriber::DefaultGuard,
    ThreadHandle,
    EventStream,
) {
    let layer = ReadsAtClose {
        span: Some("execute_tool"),
        ..ReadsAtClose::default()
    };
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(layer.clone()));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    layer.hub.set(thread.hub().clone()).unwrap();
    thread.send_user("go").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    (layer, guard, thread, events)
}

/// Until `agent_1` ends, then: every tool span's close found the turn free.
async fn assert_free_once_ended(layer: &ReadsAtClose, events: &mut EventStream) {
    let agent_1 = AgentId::new("agent_1");
    until(
        events,
        &mut Vec::new(),
        |e| matches!(e, AgentEvent::ChildStatus(id, s) if *id == agent_1 && s.is_terminal()),
    )
    .await;
    let answered = layer.answered.lock().unwrap().clone();
    assert!(!answered.is_empty(), "no tool span closed");
    assert!(answered.iter().all(|(_, free)| *free), "{answered:?}");
}

/// Held under a lock (review: tools and streams): a call refused because
/// the model's output was cut (`finish_reason: length`) closed its span
/// inside the turn's lock — the span was made and dropped there.
#[tokio::test(start_paused = true)]
async fn a_refused_calls_span_closes_outside_the_turns_lock() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Worker",
        vec![
            Reply::new()
                .tool_call("sleep", r#"{"secs":1}"#)
                .truncated("length"),
            Reply::answer("done"),
        ],
    );
    let builder = DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(Sleep));
    let (layer, _guard, thread, mut events) = thread_reading_at_tool_close(builder).await;
    assert_free_once_ended(&layer, &mut events).await;
    thread.close_and_wait().await;
}

/// The same for a call its turn's wall clock cut while it ran: the turn's
/// close answered it and dropped its span's last handle under the turn's
/// lock (and its sink's).
#[tokio::test(start_paused = true)]
async fn a_cut_calls_span_closes_outside_the_turns_lock() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 100, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(100));
    let builder = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Sleep))
        .child_limits(subagents::messages::Limits {
            wall_clock: std::time::Duration::from_secs(10),
            ..Default::default()
        });
    let (layer, _guard, thread, mut events) = thread_reading_at_tool_close(builder).await;
    assert_free_once_ended(&layer, &mut events).await;
    thread.close_and_wait().await;
}
