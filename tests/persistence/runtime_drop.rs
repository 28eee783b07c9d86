//! A runtime dropped (a host's `main` returning, `#[tokio::main]` ending)
//! between two writes of one event.

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::common::held::{Held, HoldFinish, until_held};

/// Runs `worker`'s child in the background on a store in `dir`, on a
/// runtime whose one blocking thread is held by two plugs around the
/// envelope write that follows the event `at` (after its first tool
/// step is written, if `after_a_step`):
/// a run write sent after that envelope's can only come after the drop.
/// Returns once the envelope is on disk saying `written`, and drops the
/// runtime.
fn drop_between_an_envelope_and_its_run(
    dir: &std::path::Path,
    worker: Vec<Reply>,
    after_a_step: bool,
    at: fn(&AgentEvent) -> bool,
    written: &str,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let (release_first, first) = mpsc::channel::<()>();
    let (release_second, second) = mpsc::channel::<()>();
    runtime.block_on(async {
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&work_call("Worker", 1, false)),
            Reply::answer("Started."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker", worker);
        let (thread, mut events) = thread_on(model.shared(), open(dir), 3).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        if after_a_step {
            // The step's run written first: what the end writes is all
            // that is left.
            until(&mut events, &mut log, |e| {
                matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolResult(_)))
            })
            .await;
            thread.flush_persistence().await.unwrap();
        }
        // The one blocking thread held: the event's envelope write queues.
        tokio::task::spawn_blocking(move || first.recv());
        until(&mut events, &mut log, at).await;
        thread.sync().await.unwrap();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        // Queued behind the envelope's write: a run write submitted after
        // it can only run after this one.
        tokio::task::spawn_blocking(move || second.recv());
        release_first.send(()).unwrap();
        let envelope = dir.join("agent_1.json");
        while !std::fs::read_to_string(&envelope).is_ok_and(|text| text.contains(written)) {
            tokio::task::yield_now().await;
        }
    });
    let letting_go = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let _ = release_second.send(());
    });
    drop(runtime);
    letting_go.join().unwrap();
}

/// A child's start is its envelope and its run file, and the thread wrote
/// each in a blocking task of its own: a runtime dropped once the first
/// was done (tokio lets a running blocking task finish, and drops the
/// writer task that would have sent the second) left the child listed
/// `interrupted` — its restart wake telling the model it can go on — with
/// no run, so every message to it was refused "cannot resume". Both files
/// of one event are written in one blocking task.
#[test]
fn a_childs_start_is_resumable_after_a_runtime_dropped_between_its_two_files() {
    let dir = tempfile::tempdir().unwrap();
    drop_between_an_envelope_and_its_run(
        dir.path(),
        worker(3600),
        false,
        |e| matches!(e, AgentEvent::ChildStarted(_)),
        "\"agent_1\"",
    );
    let (store, report) = EnvelopeStore::open(dir.path(), Arc::new(SystemClock)).unwrap();
    assert!(
        report.interrupted.iter().any(|id| id.as_str() == "agent_1"),
        "{report:?}"
    );
    assert!(
        store.run(&AgentId::new("agent_1")).is_some(),
        "agent_1 is listed, and cannot be resumed: no run saved"
    );
}

/// The same at a child's end: its envelope said `done` with its answer,
/// and its run — the final conversation written after it — ended on the
/// tool result before the answer: a message resumed it without its own
/// answer (it answered the task again).
#[test]
fn a_finished_childs_run_holds_its_answer_after_a_runtime_dropped_between_its_two_files() {
    let dir = tempfile::tempdir().unwrap();
    drop_between_an_envelope_and_its_run(
        dir.path(),
        vec![
            Reply::new().tool_call("sleep", r#"{"secs":1}"#),
            Reply::answer("the answer").delay(Duration::from_secs(5)),
        ],
        true,
        |e| matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Done) if id.as_str() == "agent_1"),
        "\"done\"",
    );
    let (store, _) = EnvelopeStore::open(dir.path(), Arc::new(SystemClock)).unwrap();
    let (_, conversation) = store.run(&AgentId::new("agent_1")).expect("its run");
    let last = conversation.last().expect("a conversation");
    assert_eq!(last.content, "the answer", "{conversation:#?}");
}

/// Same instant, two workers: a host that reacted to a child's `done` on
/// the stream with `flush_persistence` got its answer before that child's
/// final envelope was even queued (the hub tells the thread after the
/// event, and a host's observers before it): the flush promised "every
/// write started so far", the disk said `background`, and a host that
/// then exited lost the end. A flush goes through the hub first.
#[test]
fn a_flush_after_a_childs_end_on_the_stream_has_its_envelope_written() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let (held, inside, go) = Held::new();
        held.arm();
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run("Worker\nYou work.", "w").background()),
            Reply::answer("Started."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker", vec![Reply::answer("worked")]);
        let config = ThreadConfig::new(
            DelegationBuilder::new(model.shared()).observer(Arc::new(HoldFinish(held))),
        )
        .store(open(dir.path()));
        let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::ChildStatus(id, SubAgentStatus::Done) if id.as_str() == "agent_1")
        })
        .await;
        until_held(inside, "the hub tells the observer").await;
        let flush = tokio::spawn({
            let thread = thread.clone();
            async move { thread.flush_persistence().await }
        });
        let envelope = dir.path().join("agent_1.json");
        let read = || {
            let text = std::fs::read_to_string(&envelope).unwrap();
            serde_json::from_str::<subagents::messages::Envelope>(&text)
                .unwrap()
                .status
        };
        match tokio::time::timeout(Duration::from_millis(500), flush).await {
            // Answered while the hub still held the notice: the end must
            // be on disk already.
            Ok(flushed) => {
                flushed.unwrap().unwrap();
                assert_eq!(read(), SubAgentStatus::Done, "the flush answered first");
                go.send(()).unwrap();
            }
            Err(_) => go.send(()).unwrap(),
        }
        thread.flush_persistence().await.unwrap();
        assert_eq!(read(), SubAgentStatus::Done);
        thread.close_and_wait().await;
    });
}
