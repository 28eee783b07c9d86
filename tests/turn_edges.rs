//! The agent's turn at its edges: what a failed model call counts, a tool
//! that panics deciding on approval, a stop in the tick a turn ends with
//! turns queued behind it, a message typed while the reply streams.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "turn_edges/queued.rs"]
mod queued;
#[path = "turn_edges/quick_calls.rs"]
mod quick_calls;
#[path = "turn_edges/streamed_quote.rs"]
mod streamed_quote;

use std::time::Duration;

use common::{check_log, spy, thread_with, until, until_result};
use serde_json::json;
use subagents::actors::DelegationBuilder;
use subagents::messages::{AgentEvent, Role, ToolResult, Transcript, TranscriptItem};
use subagents::prelude::*;
use subagents_demo::Calculator;

/// A model call that failed counted its tokens but not itself: the result
/// said 0 model calls beside 15 tokens (a call cut by the token budget
/// counted). A failed call counts once.
#[tokio::test(start_paused = true)]
async fn a_failed_model_call_counts_as_one() {
    let model = ScriptedModel::new(vec![Reply::new().text("a").usage(10, 5).error("boom")]);
    let (agent, _events, gate) =
        common::spawn_agent(model.shared(), ToolRegistry::new(), Limits::default()).await;
    let result = agent.run("go").await.unwrap();
    assert!(matches!(result.outcome, Outcome::Failed(_)), "{result:?}");
    assert_eq!(result.usage.total(), 15);
    assert_eq!(result.model_calls, 1, "{result:?}");
    common::assert_gate_free(&gate).await;
}

/// A tool that panics deciding whether it needs approval.
struct PanicsDeciding;

impl Tool for PanicsDeciding {
    fn name(&self) -> &str {
        "fragile"
    }
    fn description(&self) -> String {
        "panics in requires_approval".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn requires_approval(&self, _arguments: &str) -> bool {
        panic!("cannot decide")
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async { Ok("ran".into()) })
    }
}

/// A panic in a tool's `requires_approval` crashed the whole turn: the
/// turn failed, and the other call of the same answer never ran. The call
/// fails with a sentence; the turn goes on.
#[tokio::test(start_paused = true)]
async fn a_tool_that_panics_deciding_on_approval_fails_its_call_only() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("fragile", "{}")
            .tool_call("calculator", r#"{"expression":"6*7"}"#),
        Reply::answer("Done."),
    ]);
    let tools = ToolRegistry::new().with(PanicsDeciding).with(Calculator);
    let (agent, mut events, gate) =
        common::spawn_agent(model.shared(), tools, Limits::default()).await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::Completed, "{result:?}");
    let mut log = Vec::new();
    while let Some(event) = events.try_recv() {
        log.push(event);
    }
    let results: Vec<&ToolResult> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{log:#?}");
    assert!(
        results[0].is_error && results[0].output.contains("cannot decide"),
        "{:?}",
        results[0]
    );
    assert_eq!(results[1].output, "42");
    common::assert_gate_free(&gate).await;
}

/// Stops the agent `turns` scheduler turns after turn "a"'s `Result` is
/// read, with turn "b" queued behind it; then runs "c" and returns the
/// conversation the model was sent for "c".
async fn stop_as_a_turn_ends(turns: usize) -> Vec<String> {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .delay(std::time::Duration::from_secs(10))
            .text("A"),
        Reply::answer("C"),
    ]);
    let (model, seen) = common::spy("spy", model);
    let (agent, mut events, _gate) =
        common::spawn_agent(model, ToolRegistry::new(), Limits::default()).await;
    let a = agent.queue_turn("a").unwrap();
    let b = agent.queue_turn("b").unwrap();
    let mut log = Vec::new();
    common::until_result(&mut events, &mut log).await;
    for _ in 0..turns {
        tokio::task::yield_now().await;
    }
    agent.stop_turn().unwrap();
    let _ = (a.await, b.await);
    agent.run("c").await.unwrap();
    let last = seen.lock().unwrap().last().cloned().unwrap();
    last.messages.iter().map(|m| m.content.clone()).collect()
}

/// A guard around the race below, from the host's side: a stop sent 0–11
/// scheduler turns after turn "a"'s `Result` is read, with turn "b"
/// queued behind it. On one thread the agent has read "a"'s end notice
/// by then (the `Result` is emitted after it is sent), so this never puts
/// the stop before the notice — the next test reaches that order by the
/// clock. Whatever the ordering, "b" is in the conversation.
#[tokio::test(start_paused = true)]
async fn a_stop_after_a_turns_result_keeps_the_queued_turn_in_the_conversation() {
    for turns in 0..12 {
        let said = tokio::spawn(stop_as_a_turn_ends(turns)).await.unwrap();
        assert!(
            said.iter().any(|m| m == "b"),
            "after {turns} turns, \"b\" is missing: {said:?}"
        );
    }
}

/// Same instant, by the clock: a stop in the tick a turn ended, its end
/// notice still in the agent's mailbox, with a turn queued behind it. The
/// stop is sent at the instant the model's answer arrives (both timers at
/// 10 s), so it can be in the mailbox before the turn's end notice, with
/// the turn already closed — the order a host reacting to the `Result`
/// never reaches on one thread. The stop wrote the queued turn (and its
/// "Stopped before it started.") into the conversation, then the end
/// notice replaced the conversation with the finished turn's: the next
/// model call never saw "b", though the stream showed it. Whatever the
/// ordering, "b" is in the conversation; some ordering is that window
/// ("a" completed, "b" stopped before it started). And a turn "c" sent
/// after the stop runs (review: the stopped-midway matrix, thirty-ninth
/// session — in that window the stop, kept for the end notice, ended
/// every turn queued when the notice came, "c" too: "Stopped before it
/// started", though it was sent after the stop).
#[tokio::test(start_paused = true)]
async fn a_stop_sent_as_the_answer_arrives_keeps_the_queued_turn_in_the_conversation() {
    let mut window = 0;
    for turns in 0..12 {
        let (said, a, b, c) = tokio::spawn(async move {
            let model = ScriptedModel::new(vec![
                Reply::new()
                    .delay(std::time::Duration::from_secs(10))
                    .text("A"),
                Reply::answer("C"),
                Reply::answer("C"),
            ]);
            let (model, seen) = common::spy("spy", model);
            let (agent, _events, _gate) =
                common::spawn_agent(model, ToolRegistry::new(), Limits::default()).await;
            let a = agent.queue_turn("a").unwrap();
            let b = agent.queue_turn("b").unwrap();
            tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            for _ in 0..turns {
                tokio::task::yield_now().await;
            }
            agent.stop_turn().unwrap();
            let c = agent.queue_turn("c").unwrap();
            let (a, b, c) = (a.await.unwrap(), b.await.unwrap(), c.await.unwrap());
            let last = seen.lock().unwrap().last().cloned().unwrap();
            let said = last
                .messages
                .iter()
                .map(|m| m.content.clone())
                .collect::<Vec<_>>();
            (said, a, b, c)
        })
        .await
        .unwrap();
        assert_eq!(
            (c.outcome, c.text.as_str()),
            (Outcome::Completed, "C"),
            "after {turns} turns: a turn sent after the stop"
        );
        assert!(
            said.iter().any(|m| m == "b"),
            "after {turns} turns, \"b\" is missing: {said:?}"
        );
        window +=
            usize::from(a.outcome == Outcome::Completed && b.text == "Stopped before it started.");
    }
    assert!(
        window > 0,
        "no ordering put the stop between the close and the end notice"
    );
}

/// Stopped midway, by a kill: an agent's actor killed (no `post_stop`)
/// ended its running turn on the stream, but a turn queued behind it got
/// no `Result` at all, and its future only `Dropped`: a `UserMessage` a
/// thread showed for it stayed unanswered. Each queued turn ends in one
/// failed `Result`, after the running one's.
#[tokio::test(start_paused = true)]
async fn a_killed_agent_ends_its_queued_turns_too() {
    let model = ScriptedModel::new(vec![Reply::new().hang()]);
    let (agent, mut events, _gate) =
        common::spawn_agent(model.shared(), ToolRegistry::new(), Limits::default()).await;
    let a = agent.queue_turn("a").unwrap();
    let b = agent.queue_turn("b").unwrap();
    // The running turn is in its model call.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    agent.actor().kill();
    agent.actor().wait(None).await.ok();
    let (a, b) = (a.await, b.await);
    let mut results = Vec::new();
    while let Some(event) = events.try_recv() {
        if let AgentEvent::Result(r) = event {
            results.push(r.text.clone());
        }
    }
    assert_eq!(results.len(), 2, "one Result each, in order: {results:?}");
    assert!(
        results[0].contains("without ending its turn"),
        "{results:?}"
    );
    // The running turn's future: its failed result, or Dropped with the
    // task that held its reply.
    assert!(
        a.as_ref()
            .map_or(true, |r| matches!(r.outcome, Outcome::Failed(_))),
        "{a:?}"
    );
    let b = b.expect("the queued turn has its result");
    assert!(matches!(b.outcome, Outcome::Failed(_)), "{b:?}");
}

/// A second user message while the parent's answer streams is queued as
/// the next turn: the stream has it between two deltas, where it was
/// typed, but the transcript reads as the model's conversation — one
/// reply, its `Result`, then the second message and its answer. The fold
/// split the reply around the user row.
#[tokio::test(start_paused = true)]
async fn a_message_typed_while_the_reply_streams_folds_after_that_reply() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .text("first half, ")
            .delay(Duration::from_secs(10))
            .text("second half."),
        Reply::answer("Answer to the second."),
    ]);
    let (model, seen) = spy("parent", model);
    let (thread, mut events) = thread_with(DelegationBuilder::new(model)).await;
    thread.send_user("one").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| matches!(e, AgentEvent::Text(_))).await;
    thread.send_user("two").unwrap();
    until_result(&mut events, &mut log).await;
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let at = |p: &dyn Fn(&AgentEvent) -> bool| log.iter().position(p).unwrap();
    let two = at(&|e| matches!(e, AgentEvent::UserMessage(t) if t == "two"));
    let tail = at(&|e| matches!(e, AgentEvent::Text(t) if t == "second half."));
    assert!(two < tail, "the stream has it where it was typed: {log:?}");
    let mut said: Vec<(Role, String)> = seen.lock().unwrap()[1].messages[1..]
        .iter()
        .map(|m| (m.role, m.content.clone()))
        .collect();
    said.push((Role::Assistant, "Answer to the second.".into()));
    let transcript = Transcript::from_events(&log);
    let rows: Vec<(Role, String)> = transcript
        .items
        .iter()
        .filter_map(|i| match i {
            TranscriptItem::User(t) => Some((Role::User, t.clone())),
            TranscriptItem::Assistant(t) => Some((Role::Assistant, t.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(rows, said, "{}", transcript.render());
    let pos = |p: &dyn Fn(&TranscriptItem) -> bool| transcript.items.iter().position(p).unwrap();
    let first_result = pos(&|i| matches!(i, TranscriptItem::Result { .. }));
    let user_two = pos(&|i| matches!(i, TranscriptItem::User(t) if t == "two"));
    assert!(first_result < user_two, "{}", transcript.render());
    thread.close_and_wait().await;
}

/// Gives every tool call the id `dup` and keeps each request it is sent.
struct DuplicateIds {
    inner: ScriptedModel,
    seen: std::sync::Arc<std::sync::Mutex<Vec<subagents::messages::ModelRequest>>>,
}

impl Model for DuplicateIds {
    fn name(&self) -> &str {
        "duplicate-ids"
    }
    fn stream(
        &self,
        request: subagents::messages::ModelRequest,
    ) -> subagents::actors::model::ModelStream {
        use futures_util::StreamExt;
        self.seen.lock().unwrap().push(request.clone());
        Box::pin(self.inner.stream(request).map(|chunk| match chunk {
            Ok(subagents::messages::ModelChunk::ToolCall(mut call)) => {
                call.id = subagents::messages::ToolUseId::new("dup");
                Ok(subagents::messages::ModelChunk::ToolCall(call))
            }
            other => other,
        }))
    }
}

/// A misbehaving model: two calls with one id in one answer. Both ran,
/// but the conversation read back held two results under one id, which
/// servers refuse (DeepSeek: 400 "Duplicate value for 'tool_call_id'"):
/// every later request failed. Each call gets an id of its own, the
/// same on the stream and in the conversation.
#[tokio::test(start_paused = true)]
async fn two_calls_with_one_id_in_one_answer_get_an_id_each() {
    let seen = std::sync::Arc::default();
    let model = DuplicateIds {
        inner: ScriptedModel::new(vec![
            Reply::new()
                .tool_call("calculator", r#"{"expression":"1+1"}"#)
                .tool_call("calculator", r#"{"expression":"2+2"}"#),
            Reply::answer("done"),
        ]),
        seen: std::sync::Arc::clone(&seen),
    };
    let (agent, mut events) = AgentBuilder::new(std::sync::Arc::new(model))
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.text, "done");
    let mut started = Vec::new();
    while let Some(event) = events.try_recv() {
        if let AgentEvent::ToolStarted(call) = event {
            started.push(call.tool_use_id.as_str().to_owned());
        }
    }
    assert_eq!(started, ["dup", "dup#2"]);
    let seen = seen.lock().unwrap();
    let messages = &seen[1].messages;
    let asked: Vec<&str> = messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    assert_eq!(asked, ["dup", "dup#2"]);
    let answered: Vec<(&str, &str)> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_call_id.as_ref().unwrap().as_str(),
                m.content.as_str(),
            )
        })
        .collect();
    assert_eq!(answered, [("dup", "2"), ("dup#2", "4")]);
}

/// Stopped midway: a model call cut mid-stream by the wall clock or a
/// stop. The host had seen its text, but the partial result said "no
/// answer was written yet", and the call (made, as a failed one is) was
/// not counted. Now what it streamed is the last thing written, and it
/// counts.
#[tokio::test(start_paused = true)]
async fn a_model_call_cut_mid_stream_keeps_what_it_wrote_and_counts() {
    let model = ScriptedModel::new(vec![Reply::new().text("Half an answer").hang()]);
    let limits = Limits {
        wall_clock: Duration::from_secs(10),
        ..Limits::default()
    };
    let (agent, _events, gate) =
        common::spawn_agent(model.shared(), ToolRegistry::new(), limits).await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert!(
        result.text.ends_with(
            "after 1 model call(s) and 0 tool call(s); the last thing written was: Half an answer"
        ),
        "{}",
        result.text
    );
    assert_eq!(result.model_calls, 1);
    common::assert_gate_free(&gate).await;

    // A stop: the call counts too.
    let model = ScriptedModel::new(vec![Reply::new().text("Half").hang()]);
    let (agent, mut events, gate) =
        common::spawn_agent(model.shared(), ToolRegistry::new(), Limits::default()).await;
    agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, |e| matches!(e, AgentEvent::Text(_))).await;
    agent.stop_turn().unwrap();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.outcome, Outcome::Stopped);
    assert_eq!(result.model_calls, 1, "{result:?}");
    // What it wrote is quoted: the stopped result takes its place in the
    // conversation, and the host saw it.
    assert!(
        result.text.ends_with("The last thing written was: Half"),
        "{}",
        result.text
    );
    common::assert_gate_free(&gate).await;
}

/// Panics when dropped.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("dropped badly");
    }
}

/// A tool whose future panics when it is dropped: done at once, or
/// waiting for ever (`"wait"`).
struct DropsBadly;

impl Tool for DropsBadly {
    fn name(&self) -> &str {
        "drops_badly"
    }
    fn description(&self) -> String {
        "its future panics when dropped".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, call: ToolCallContext) -> ToolFuture {
        Box::pin(DoneThenDropsBadly {
            wait: call.arguments.contains("wait"),
            _guard: PanicsOnDrop,
        })
    }
}

/// Ready with `done` (or never, if `wait`), and panics when dropped — after
/// it was ready, not inside its poll.
struct DoneThenDropsBadly {
    wait: bool,
    _guard: PanicsOnDrop,
}

impl std::future::Future for DoneThenDropsBadly {
    type Output = Result<String, subagents::actors::tool::ToolError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        if self.wait {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(Ok("done".into()))
        }
    }
}

/// A host's approval policy that panics deciding.
struct PanicsApproving;

impl subagents::actors::agent::ApprovalPolicy for PanicsApproving {
    fn decide(
        &self,
        _agent: &AgentId,
        _tool: &str,
        _arguments: &str,
    ) -> Option<subagents::messages::ApprovalDecision> {
        panic!("policy bug")
    }
}

fn results_in(events: &mut EventStream) -> Vec<ToolResult> {
    let mut results = Vec::new();
    while let Some(event) = events.try_recv() {
        if let AgentEvent::ToolResult(r) = event {
            results.push(r);
        }
    }
    results
}

/// A panic where the host's code runs, outside a tool's `call`: a tool
/// future's `Drop` (as it completes, or as the wall clock drops it) and a
/// host's approval policy. Each crashed the whole turn — the answer's
/// other call never ran, a wall-clock cut read as a crash. The call it
/// touches fails (or stands) with a sentence; the turn goes on.
#[tokio::test(start_paused = true)]
async fn a_panic_in_a_tools_drop_or_an_approval_policy_fails_its_call_only() {
    let tools = || ToolRegistry::new().with(DropsBadly).with(Calculator);
    let six_times_seven = r#"{"expression":"6*7"}"#;
    // Dropped as it completes: its output stands.
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("drops_badly", "{}")
            .tool_call("calculator", six_times_seven),
        Reply::answer("Done."),
    ]);
    let (agent, mut events, gate) =
        common::spawn_agent(model.shared(), tools(), Limits::default()).await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::Completed, "{result:?}");
    let outputs: Vec<String> = results_in(&mut events)
        .into_iter()
        .map(|r| r.output)
        .collect();
    assert_eq!(outputs, ["done", "42"]);
    common::assert_gate_free(&gate).await;

    // Dropped by the wall clock: the limit, not a crash.
    let model = ScriptedModel::new(vec![Reply::new().tool_call("drops_badly", r#"{"wait":1}"#)]);
    let limits = Limits {
        wall_clock: Duration::from_secs(5),
        ..Limits::default()
    };
    let (agent, _events, _gate) = common::spawn_agent(model.shared(), tools(), limits).await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(
        result.outcome,
        Outcome::LimitReached(LimitKind::WallClock),
        "{result:?}"
    );

    // The host's approval policy panics: that call fails with a sentence.
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("http_post", r#"{"message":"hi"}"#)
            .tool_call("calculator", six_times_seven),
        Reply::answer("Done."),
    ]);
    let (agent, mut events) = AgentBuilder::new(model.shared())
        .tools(
            ToolRegistry::new()
                .with(subagents_demo::Post)
                .with(Calculator),
        )
        .approvals(std::sync::Arc::new(PanicsApproving))
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::Completed, "{result:?}");
    let results = results_in(&mut events);
    assert!(
        results[0].is_error
            && results[0]
                .output
                .contains("approval policy failed deciding on it (it panicked: policy bug)"),
        "{results:?}"
    );
    assert_eq!(results[1].output, "42");
}
