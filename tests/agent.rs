//! The agent turn loop: events in order, limits with partial results,
//! errors and panics as sentences, stop, approvals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "agent/choice.rs"]
mod choice;
mod common;

use std::time::Duration;

use common::assert_gate_free;
use serde_json::json;
use subagents::messages::{ApprovalRefusal, ToolResult, ToolStarted, Usage};
use subagents::prelude::*;
use subagents_demo::{Calculator, PageTitle, Post};

async fn until_result(events: &mut EventStream) -> (Vec<AgentEvent>, AgentResult) {
    let mut seen = Vec::new();
    let day = Duration::from_secs(24 * 3600);
    while let Some(event) = tokio::time::timeout(day, events.recv())
        .await
        .unwrap_or_else(|_| panic!("no event for a day of virtual time: {seen:?}"))
    {
        if let AgentEvent::Result(result) = &event {
            let result = (**result).clone();
            seen.push(event);
            return (seen, result);
        }
        seen.push(event);
    }
    panic!("the stream ended without a result: {seen:?}");
}

async fn spawn(
    model: ScriptedModel,
    tools: ToolRegistry,
    limits: Limits,
) -> (AgentHandle, EventStream, GateHandle) {
    common::spawn_agent(model.shared(), tools, limits).await
}

fn started(id: &str, name: &str, arguments: &str) -> AgentEvent {
    AgentEvent::ToolStarted(ToolStarted {
        tool_use_id: ToolUseId::new(id),
        name: name.into(),
        arguments: arguments.into(),
    })
}

fn finished(id: &str, name: &str, output: &str, is_error: bool) -> AgentEvent {
    AgentEvent::ToolResult(ToolResult {
        tool_use_id: ToolUseId::new(id),
        name: name.into(),
        output: output.into(),
        is_error,
    })
}

#[tokio::test(start_paused = true)]
async fn a_multi_turn_run_with_tool_calls_yields_events_in_order() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .text("Let me check. ")
            .tool_call("calculator", r#"{"expression":"6*7"}"#)
            .tool_call("fetch_title", r#"{"url":"https://example.com"}"#)
            .usage(100, 20),
        Reply::new()
            .text("6×7 is 42 and the page is ")
            .text("Example Domain.")
            .usage(150, 10),
    ]);
    let tools = ToolRegistry::new()
        .with(Calculator)
        .with(PageTitle::default());
    let (agent, mut events, gate) = spawn(model, tools, Limits::default()).await;
    agent.send_user("Two questions").unwrap();
    let (seen, result) = until_result(&mut events).await;
    assert_eq!(
        seen[..7],
        [
            AgentEvent::Text("Let me check. ".into()),
            started("call_1_1", "calculator", r#"{"expression":"6*7"}"#),
            finished("call_1_1", "calculator", "42", false),
            started(
                "call_1_2",
                "fetch_title",
                r#"{"url":"https://example.com"}"#
            ),
            finished("call_1_2", "fetch_title", "Example Domain", false),
            AgentEvent::Text("6×7 is 42 and the page is ".into()),
            AgentEvent::Text("Example Domain.".into()),
        ]
    );
    assert_eq!(seen.len(), 8);
    assert_eq!(result.text, "6×7 is 42 and the page is Example Domain.");
    assert_eq!(result.outcome, Outcome::Completed);
    assert_eq!((result.model_calls, result.tool_calls), (2, 2));
    assert_eq!(result.usage.total(), 280);
    assert_gate_free(&gate).await;
}

#[tokio::test(start_paused = true)]
async fn the_turn_limit_yields_a_partial_result_naming_it() {
    let looping = Reply::new()
        .text("still working")
        .tool_call("calculator", r#"{"expression":"1+1"}"#);
    let model = ScriptedModel::new(vec![looping; 5]);
    let limits = Limits {
        max_model_calls: 3,
        ..Limits::default()
    };
    let (agent, mut events, gate) =
        spawn(model, ToolRegistry::new().with(Calculator), limits).await;
    let result = agent.run("loop").await.unwrap();
    let _ = until_result(&mut events).await;
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::ModelCalls));
    assert_eq!(result.model_calls, 3);
    assert!(
        result
            .text
            .starts_with("Partial result: stopped by the model-call limit (3 model calls)"),
        "{}",
        result.text
    );
    assert!(result.text.contains("still working"), "{}", result.text);
    assert_gate_free(&gate).await;
}

#[tokio::test(start_paused = true)]
async fn the_token_budget_yields_a_partial_result_naming_it() {
    let expensive = Reply::new()
        .tool_call("calculator", r#"{"expression":"1+1"}"#)
        .usage(20_000, 10_000);
    let model = ScriptedModel::new(vec![expensive; 5]);
    let (agent, _events, gate) = spawn(
        model,
        ToolRegistry::new().with(Calculator),
        Limits::default(),
    )
    .await;
    let result = agent.run("spend").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::Tokens));
    assert_eq!(result.model_calls, 2);
    assert!(
        result
            .text
            .contains("token budget (50000 tokens; 60000 used)"),
        "{}",
        result.text
    );
    assert_gate_free(&gate).await;
}

#[tokio::test(start_paused = true)]
async fn a_hanging_model_is_cut_by_the_wall_clock() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("calculator", r#"{"expression":"2+2"}"#),
        Reply::new().text("thinking…").hang(),
    ]);
    let (agent, mut events, gate) = spawn(
        model,
        ToolRegistry::new().with(Calculator),
        Limits::default(),
    )
    .await;
    let start = tokio::time::Instant::now();
    let result = agent.run("hang").await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(300));
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::WallClock));
    assert!(
        result.text.contains("wall-clock limit (300 s)"),
        "{}",
        result.text
    );
    assert!(
        result.text.contains("1 tool call(s) (calculator)"),
        "{}",
        result.text
    );
    let (seen, _) = until_result(&mut events).await;
    assert!(seen.contains(&AgentEvent::Text("thinking…".into())));
    assert_gate_free(&gate).await;
    // Nothing of the cut turn after its one `Result`, an hour on.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(events.try_recv(), None);
}

#[tokio::test(start_paused = true)]
async fn a_model_error_yields_an_error_result_and_returns_the_permit() {
    let model = ScriptedModel::new(vec![Reply::new().text("par").error("connection reset")]);
    let (agent, _events, gate) = spawn(model, ToolRegistry::new(), Limits::default()).await;
    let result = agent.run("x").await.unwrap();
    assert_eq!(
        result.outcome,
        Outcome::Failed("the model `scripted` failed: connection reset".into())
    );
    assert_eq!(result.text, "the model `scripted` failed: connection reset");
    assert_gate_free(&gate).await;
}

#[tokio::test(start_paused = true)]
async fn a_panicking_model_fails_the_turn_but_not_the_agent() {
    let model = ScriptedModel::new(vec![Reply::new().panic("adapter bug")]);
    let (agent, _events, gate) = spawn(model, ToolRegistry::new(), Limits::default()).await;
    let result = agent.run("x").await.unwrap();
    assert!(
        matches!(&result.outcome, Outcome::Failed(e) if e.contains("the model's stream panicked: adapter bug")),
        "{result:?}"
    );
    assert_gate_free(&gate).await;
    // The agent still answers.
    assert!(!agent.snapshot().await.unwrap().busy);
}

struct Panicky;

impl Tool for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn description(&self) -> String {
        "always panics".into()
    }
    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async { panic!("index out of bounds") })
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_tool_becomes_a_readable_error_and_the_loop_continues() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .tool_call("panicky", "{}")
            .tool_call("nope", "{}"),
        Reply::answer("Recovered."),
    ]);
    let (agent, mut events, _gate) =
        spawn(model, ToolRegistry::new().with(Panicky), Limits::default()).await;
    agent.send_user("go").unwrap();
    let (seen, result) = until_result(&mut events).await;
    assert_eq!(result.text, "Recovered.");
    assert!(seen.contains(&finished(
        "call_1_1",
        "panicky",
        "the tool `panicky` crashed (index out of bounds); try another approach",
        true
    )));
    assert!(seen.contains(&finished(
        "call_1_2",
        "nope",
        "there is no tool named `nope`; the tools available are: panicky",
        true
    )));
}

#[tokio::test(start_paused = true)]
async fn stopping_a_turn_ends_it_once_as_stopped_and_frees_the_gate() {
    let model = ScriptedModel::new(vec![Reply::new().text("…").hang(), Reply::answer("next")]);
    let (agent, mut events, gate) = spawn(model, ToolRegistry::new(), Limits::default()).await;
    let runner = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run("first").await })
    };
    assert_eq!(events.recv().await, Some(AgentEvent::Text("…".into())));
    agent.stop_turn().unwrap();
    let result = runner.await.unwrap().unwrap();
    assert_eq!(result.outcome, Outcome::Stopped);
    let (_, emitted) = until_result(&mut events).await;
    assert_eq!(emitted, result);
    assert_gate_free(&gate).await;
    // The next turn runs normally, after the stopped one in the history.
    let next = agent.run("second").await.unwrap();
    assert_eq!(next.text, "next");
    // Exactly one `Result` for the stopped turn, and nothing of it after:
    // what follows is the second turn's text and `Result` only.
    let mut after = Vec::new();
    while let Some(event) = events.try_recv() {
        after.push(event);
    }
    assert_eq!(
        after,
        [
            AgentEvent::Text("next".into()),
            AgentEvent::Result(Box::new(next))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn turns_run_one_at_a_time_in_order() {
    let model = ScriptedModel::new(vec![
        Reply::new().delay(Duration::from_secs(1)).text("one"),
        Reply::answer("two"),
    ]);
    let (agent, mut events, _gate) = spawn(model, ToolRegistry::new(), Limits::default()).await;
    agent.send_user("a").unwrap();
    agent.send_user("b").unwrap();
    let (_, first) = until_result(&mut events).await;
    let (_, second) = until_result(&mut events).await;
    assert_eq!((first.text.as_str(), second.text.as_str()), ("one", "two"));
}

async fn approval_run(decision: ApprovalDecision) -> (Vec<AgentEvent>, AgentHandle) {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("http_post", "{}"),
        Reply::answer("done"),
    ]);
    let (agent, mut events, _gate) =
        spawn(model, ToolRegistry::new().with(Post), Limits::default()).await;
    agent.send_user("post it").unwrap();
    let mut seen = Vec::new();
    loop {
        let event = events.recv().await.unwrap();
        seen.push(event.clone());
        if let AgentEvent::ApprovalRequested(request) = event {
            assert_eq!(
                agent
                    .resolve_approval(ApprovalId::new("other"), decision)
                    .await,
                Err(AgentError::Approval(ApprovalRefusal::Unknown(
                    ApprovalId::new("other")
                )))
            );
            agent
                .resolve_approval(request.id.clone(), decision)
                .await
                .unwrap();
            assert_eq!(
                agent.resolve_approval(request.id.clone(), decision).await,
                Err(AgentError::Approval(ApprovalRefusal::AlreadyAnswered {
                    id: request.id,
                    decision
                })),
                "a second answer is refused with the first one"
            );
            break;
        }
    }
    let (rest, _) = until_result(&mut events).await;
    seen.extend(rest);
    (seen, agent)
}

#[tokio::test(start_paused = true)]
async fn an_approved_call_runs() {
    let (seen, _) = approval_run(ApprovalDecision::Approve).await;
    assert!(seen.contains(&finished("call_1_1", "http_post", "posted", false)));
}

#[tokio::test(start_paused = true)]
async fn a_denied_call_is_a_sentence_for_the_model() {
    let (seen, _) = approval_run(ApprovalDecision::Deny).await;
    assert!(seen.iter().any(|e| matches!(e,
        AgentEvent::ToolResult(r) if r.is_error && r.output.starts_with("the user denied this call to `http_post`"))));
}

#[tokio::test(start_paused = true)]
async fn a_call_on_a_stopped_agent_is_a_clear_error() {
    let model = ScriptedModel::new(vec![]);
    let (agent, _events, _gate) = spawn(model, ToolRegistry::new(), Limits::default()).await;
    agent.shutdown();
    tokio::time::sleep(Duration::from_millis(1)).await;
    let err = agent.send_user("hello").unwrap_err();
    assert_eq!(
        err.to_string(),
        "the agent `parent` is stopped; the turn was not delivered"
    );
    assert!(matches!(agent.stop_turn(), Err(AgentError::Closed(_))));
}

#[tokio::test(start_paused = true)]
async fn usage_adds_up() {
    let mut usage = Usage::default();
    usage.add(Usage {
        prompt_tokens: u64::MAX,
        completion_tokens: 1,
    });
    assert_eq!(usage.total(), u64::MAX);
}

/// A host that stops reading drops the stream; emits become no-ops — and
/// the turn goes on as before. A dropped stream read as a cut turn: each
/// tool result was left out of the conversation (the next model call saw
/// a call without its answer, which a real server refuses with a 400),
/// the result counted no tool calls and the call was answered again as
/// "the turn ended before this call finished" after the final answer.
#[tokio::test(start_paused = true)]
async fn a_dropped_stream_changes_nothing_but_what_the_host_sees() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("calculator", r#"{"expression":"6*7"}"#),
        Reply::answer("42"),
        Reply::answer("still here"),
    ]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    use subagents::actors::Model;
    use subagents::messages::ModelRequest;
    struct Spy(
        ScriptedModel,
        std::sync::Arc<std::sync::Mutex<Vec<ModelRequest>>>,
    );
    impl Model for Spy {
        fn name(&self) -> &str {
            "spy"
        }
        fn stream(&self, request: ModelRequest) -> subagents::actors::ModelStream {
            self.1.lock().unwrap().push(request.clone());
            self.0.stream(request)
        }
    }
    let (agent, events) = AgentBuilder::new(std::sync::Arc::new(Spy(model, seen.clone())))
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    drop(events);
    let result = agent.run("what is 6*7?").await.unwrap();
    assert_eq!(result.outcome, Outcome::Completed);
    assert_eq!((result.text.as_str(), result.tool_calls), ("42", 1));
    let second = seen.lock().unwrap()[1].clone();
    assert!(
        second
            .messages
            .iter()
            .any(|m| m.role == subagents::messages::Role::Tool && m.content == "42"),
        "the tool's answer is missing: {:?}",
        second.messages
    );
    // The next turn reads a conversation with nothing after the answer.
    agent.run("again").await.unwrap();
    let third = seen.lock().unwrap()[2].clone();
    let roles: Vec<_> = third.messages.iter().map(|m| m.role).collect();
    use subagents::messages::Role::{Assistant, System, Tool, User};
    assert_eq!(roles, [System, User, Assistant, Tool, Assistant, User]);
}

/// A wall clock of `Duration::MAX` ("no limit") is a limit like any
/// other: computing the deadline a tool call reads panicked ("overflow
/// when adding duration to instant") and failed every turn that called a
/// tool.
#[tokio::test(start_paused = true)]
async fn a_wall_clock_of_duration_max_is_no_limit() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("calculator", r#"{"expression":"1+1"}"#),
        Reply::answer("2"),
    ]);
    let limits = Limits {
        wall_clock: Duration::MAX,
        ..Limits::default()
    };
    let (agent, mut events, gate) =
        spawn(model, ToolRegistry::new().with(Calculator), limits).await;
    agent.send_user("1+1?").unwrap();
    let (_, result) = until_result(&mut events).await;
    assert_eq!(
        (result.outcome, result.text.as_str()),
        (Outcome::Completed, "2")
    );
    assert_gate_free(&gate).await;
}

/// Stopped midway: a turn sent, then the agent shut down in the same tick
/// (a UI's "send" and "close"): ractor's stop is read before the mailbox,
/// so the turn — `send_user` had returned `Ok` — was dropped with no
/// `Result`. The agent is drained: the turn ends as stopped, and one sent
/// after the shutdown comes back.
#[tokio::test(start_paused = true)]
async fn a_turn_sent_just_before_a_shutdown_is_answered() {
    let model = ScriptedModel::new(vec![Reply::answer("hi")]);
    let (agent, mut events, _gate) = spawn(model, ToolRegistry::new(), Limits::default()).await;
    agent.send_user("a").unwrap();
    agent.shutdown();
    let late = agent.send_user("b");
    let mut results = 0;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(60), events.recv()).await {
        if matches!(event, AgentEvent::Result(_)) {
            results += 1;
        }
    }
    assert_eq!(results, 1 + usize::from(late.is_ok()), "late: {late:?}");
    assert!(late.is_err(), "a turn sent after the shutdown comes back");
}

/// Arguments a skim of the JSON passes but a parse refuses (a number out
/// of range, a lone surrogate) are refused before any approval is asked:
/// the host never approves a call that then does not run.
#[tokio::test(start_paused = true)]
async fn arguments_no_parse_reads_are_refused_before_an_approval_is_asked() {
    for arguments in [r#"{"a":1e400}"#, r#"{"a":"\ud800"}"#] {
        refused_before_an_approval(arguments, "not valid JSON").await;
    }
}

/// Foreign model output (review: tools that misbehave): arguments that
/// are JSON but no object (`null`, `5`, a string, an array) passed the
/// parse: the host was asked to approve `null`, the tool ran on it — and
/// the model's history showed the call as `http_post({})`, the wire's
/// stand-in, beside a result computed from `5`. Refused before any
/// approval, saying what they must be.
#[tokio::test(start_paused = true)]
async fn arguments_that_are_no_object_are_refused_before_an_approval_is_asked() {
    for arguments in ["null", "5", r#""post it""#, "[1]"] {
        refused_before_an_approval(arguments, "must be a JSON object").await;
    }
}

/// A call of `http_post` (which always asks) with `arguments`: no approval
/// asked, and its result an error saying `why`.
async fn refused_before_an_approval(arguments: &str, why: &str) {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("http_post", arguments),
        Reply::answer("done"),
    ]);
    let (agent, mut events, _gate) =
        spawn(model, ToolRegistry::new().with(Post), Limits::default()).await;
    agent.send_user("post it").unwrap();
    let (seen, _) = until_result(&mut events).await;
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e, AgentEvent::ApprovalRequested(_))),
        "{arguments}: {seen:#?}"
    );
    assert!(
        seen.iter().any(|e| matches!(e,
            AgentEvent::ToolResult(r) if r.is_error && r.output.contains(why))),
        "{arguments}: {seen:#?}"
    );
}

/// A model's call to a tool named with 64 KiB is answered on one short
/// line: the name is not read back whole.
#[tokio::test(start_paused = true)]
async fn an_unknown_tools_huge_name_is_quoted_cut_short() {
    let huge = "x".repeat(1 << 16);
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call(huge.as_str(), "{}"),
        Reply::answer("done"),
    ]);
    let (agent, mut events, _gate) =
        spawn(model, ToolRegistry::new().with(Post), Limits::default()).await;
    agent.send_user("go").unwrap();
    let (seen, _) = until_result(&mut events).await;
    let output = seen
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolResult(r) => Some(r.output.clone()),
            _ => None,
        })
        .expect("the call was answered");
    assert!(output.len() < 2_000, "{} bytes", output.len());
    assert!(
        output.starts_with("there is no tool named `xxx"),
        "{}",
        &output[..100]
    );
}

/// A model whose every call waits, once asked, until the test opens it.
struct Gated {
    inner: ScriptedModel,
    called: std::sync::Arc<tokio::sync::Notify>,
    open: std::sync::Arc<tokio::sync::Notify>,
}

impl Model for Gated {
    fn name(&self) -> &str {
        "gated"
    }
    fn stream(&self, request: subagents::messages::ModelRequest) -> subagents::actors::ModelStream {
        use futures_util::StreamExt;
        self.called.notify_one();
        let open = self.open.clone();
        let inner = self.inner.stream(request);
        Box::pin(
            futures_util::stream::once(async move {
                open.notified().await;
                inner
            })
            .flatten(),
        )
    }
}

/// The gated model, and the two notices: asked, and open it.
fn gated(
    replies: Vec<Reply>,
) -> (
    std::sync::Arc<dyn Model>,
    std::sync::Arc<tokio::sync::Notify>,
    std::sync::Arc<tokio::sync::Notify>,
) {
    let called = std::sync::Arc::new(tokio::sync::Notify::new());
    let open = std::sync::Arc::new(tokio::sync::Notify::new());
    let model = Gated {
        inner: ScriptedModel::new(replies),
        called: called.clone(),
        open: open.clone(),
    };
    (std::sync::Arc::new(model), called, open)
}

/// Same instant: the model answers and the agent is shut down in one
/// tick. The turn completed (its `Result` is on the stream), but the
/// draining agent refused the task's end notice and dropped the reply:
/// the caller read `Dropped` ("went away with the turn unrun").
#[tokio::test(start_paused = true)]
async fn a_turn_ending_as_its_agent_shuts_down_is_answered_with_its_result() {
    let (model, called, open) = gated(vec![Reply::answer("done")]);
    let (agent, mut events, _gate) =
        common::spawn_agent(model, ToolRegistry::new(), Limits::default()).await;
    let answer = agent.queue_turn("go").unwrap();
    called.notified().await;
    open.notify_one();
    agent.shutdown();
    let answered = answer.await;
    let (_, streamed) = until_result(&mut events).await;
    assert_eq!(streamed.outcome, Outcome::Completed);
    assert_eq!(answered.map(|r| r.text), Ok("done".to_owned()));
}

/// Same instant, through the cell: the turn's `Result` on the stream, its
/// end notice in the agent's mailbox, the host stops the agent (ractor
/// reads a stop before messages) or kills it. The notice was dropped with
/// the mailbox and the reply with the turn: the caller of a turn that
/// completed read `Dropped` ("went away with the turn unrun"). The task
/// keeps its result in the turn before it sends the notice, and whoever
/// ends the agent answers with it.
#[tokio::test(start_paused = true)]
async fn a_turn_ended_as_its_agent_is_stopped_through_its_cell_is_answered_with_its_result() {
    for kill in [false, true] {
        let model = ScriptedModel::new(vec![Reply::answer("done")]).shared();
        let (agent, mut events, _gate) =
            common::spawn_agent(model, ToolRegistry::new(), Limits::default()).await;
        let answer = agent.queue_turn("go").unwrap();
        // A task of its own, as a host's is: woken by the `Result` before
        // the agent by its notice (the test's own future is polled apart).
        let host = tokio::spawn(async move {
            let (_, streamed) = until_result(&mut events).await;
            match kill {
                true => agent.actor().kill(),
                false => agent.actor().stop(None),
            }
            streamed
        });
        assert_eq!(host.await.unwrap().outcome, Outcome::Completed);
        let answered = answer.await.map(|r| r.text);
        assert_eq!(answered, Ok("done".to_owned()), "killed: {kill}");
    }
}

/// Same instant: the model asks for a call that needs approval as the
/// agent is shut down. The request could not be put to the host (the
/// agent drains), and the model read "the user denied this call" — a
/// denial nobody gave.
#[tokio::test(start_paused = true)]
async fn an_approval_that_cannot_be_asked_is_not_read_as_denied() {
    let (model, called, open) = gated(vec![
        Reply::new().tool_call("http_post", "{}"),
        Reply::answer("done"),
    ]);
    let (agent, mut events, _gate) =
        common::spawn_agent(model, ToolRegistry::new().with(Post), Limits::default()).await;
    agent.send_user("post it").unwrap();
    called.notified().await;
    open.notify_one();
    agent.shutdown();
    let (seen, _) = until_result(&mut events).await;
    assert!(
        !seen.iter().any(|e| matches!(e,
            AgentEvent::ToolResult(r) if r.output.contains("the user denied"))),
        "{seen:#?}"
    );
}

/// Host boundary values: a request option no server takes (a NaN or
/// out-of-range temperature, `top_p` above 1, `max_tokens` 0), set by the
/// host on an agent or on every child, was sent as `null` (silently
/// nothing) or failed every model call — a profile's were refused. The
/// spawn is refused, naming the option.
#[tokio::test(start_paused = true)]
async fn options_no_server_takes_are_refused_at_the_spawn() {
    use subagents::messages::RequestOptions;
    let model = || ScriptedModel::new(vec![Reply::answer("hi")]).shared();
    let cases = [
        (
            RequestOptions {
                temperature: Some(f64::NAN),
                ..RequestOptions::default()
            },
            "temperature",
        ),
        (
            RequestOptions {
                top_p: Some(1.5),
                ..RequestOptions::default()
            },
            "top_p",
        ),
        (
            RequestOptions {
                max_tokens: Some(0),
                ..RequestOptions::default()
            },
            "max_tokens",
        ),
        // Refused by real servers (review: what the adapter sends): vLLM
        // and Ollama read a seed as a signed 64-bit integer; one past it
        // (half of `rand::random::<u64>()`) failed every call with 400.
        (
            RequestOptions {
                seed: Some(i64::MAX as u64 + 1),
                ..RequestOptions::default()
            },
            "seed",
        ),
    ];
    for (options, named) in cases {
        let agent = AgentBuilder::new(model())
            .request_options(options.clone())
            .spawn()
            .await;
        assert!(
            matches!(&agent, Err(AgentError::Options { field, .. }) if *field == named),
            "{named}: {:?}",
            agent.map(|_| ())
        );
        let delegating = DelegationBuilder::new(model())
            .child_request_options(options.clone())
            .spawn()
            .await;
        assert!(
            matches!(&delegating, Err(e @ AgentError::Options { field, .. })
                if *field == named && e.to_string().contains("(set by child_request_options)")),
            "{named}: {:?}",
            delegating.map(|_| ())
        );
        // Through a thread, the host's usual door, the same typed error
        // (it read "Actor panicked during startup '…'", a string).
        let thread = subagents::supervisor::ThreadHandle::spawn(
            DelegationBuilder::new(model()).child_request_options(options),
            None,
        )
        .await;
        match thread.map(|_| ()) {
            Err(subagents::supervisor::ThreadError::Refused(AgentError::Options {
                field, ..
            })) => assert_eq!(field, named),
            other => panic!("{named}: {other:?}"),
        }
    }
    let fine = RequestOptions {
        temperature: Some(0.0),
        top_p: Some(1.0),
        max_tokens: Some(1),
        ..RequestOptions::default()
    };
    assert!(
        AgentBuilder::new(model())
            .request_options(fine)
            .spawn()
            .await
            .is_ok()
    );
}

/// A host tool whose `parameters` panics (a bug in its schema): the specs
/// are built for every model call, outside any guard, so every turn of the
/// agent failed "crashed", naming no tool. It is left out of the model's
/// list; the turn goes on.
#[tokio::test(start_paused = true)]
async fn a_tool_whose_schema_panics_is_left_out_not_fatal() {
    struct BadSchema;
    impl Tool for BadSchema {
        fn name(&self) -> &str {
            "bad_schema"
        }
        fn description(&self) -> String {
            "its schema is broken".into()
        }
        fn parameters(&self) -> serde_json::Value {
            panic!("a bug in the schema")
        }
        fn call(&self, _call: ToolCallContext) -> ToolFuture {
            Box::pin(async { Ok("ran".into()) })
        }
    }
    let model = ScriptedModel::new(vec![Reply::answer("fine")]);
    let (agent, _events, _gate) = spawn(
        model,
        ToolRegistry::new().with(BadSchema).with(Calculator),
        Limits::default(),
    )
    .await;
    let result = agent.run("go").await.unwrap();
    assert_eq!(
        (result.outcome, result.text.as_str()),
        (Outcome::Completed, "fine")
    );
}

/// Foreign (a real server honours what the host set): a forced
/// `tool_choice` (`required`, a named tool) was sent again with every
/// model call of the turn, the one after the tool results too — a server
/// that honours it made the model call a tool again each time, so no turn
/// could answer: it ran to its model-call limit (20), the forced tool (a
/// POST, a write) run at every call. Forced until the turn has tool
/// results, then the server's default (`auto`), as other agent loops do.
#[tokio::test(start_paused = true)]
async fn a_forced_tool_choice_is_honoured_once_then_the_turn_answers() {
    use subagents::actors::{Model, ModelStream};
    use subagents::messages::{ModelRequest, RequestOptions, ToolChoice};
    /// A server that honours a forced choice: a tool call while one is
    /// forced, an answer otherwise.
    struct Honours;
    impl Model for Honours {
        fn name(&self) -> &str {
            "honours"
        }
        fn stream(&self, request: ModelRequest) -> ModelStream {
            let forced = matches!(
                request.options.tool_choice,
                Some(ToolChoice::Required | ToolChoice::Function(_))
            );
            let reply = if forced && !request.tools.is_empty() {
                Reply::new().tool_call("calculator", r#"{"expression":"1+1"}"#)
            } else {
                Reply::answer("2")
            };
            ScriptedModel::new(vec![reply]).stream(ModelRequest::default())
        }
    }
    for choice in [
        ToolChoice::Required,
        ToolChoice::Function("calculator".into()),
    ] {
        let (agent, events) = AgentBuilder::new(std::sync::Arc::new(Honours))
            .tools(ToolRegistry::new().with(Calculator))
            .request_options(RequestOptions {
                tool_choice: Some(choice.clone()),
                ..RequestOptions::default()
            })
            .spawn()
            .await
            .unwrap();
        drop(events);
        let result = agent.run("add").await.unwrap();
        assert_eq!(
            (&result.outcome, result.tool_calls, result.text.as_str()),
            (&Outcome::Completed, 1, "2"),
            "{choice:?}"
        );
        // The next turn is forced again: once per turn.
        let again = agent.run("add again").await.unwrap();
        assert_eq!(again.tool_calls, 1, "{choice:?}");
    }
}
