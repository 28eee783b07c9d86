//! The model the property test runs on: the parent fans out the children a
//! `PLAN` message lists (or asks for one child's result on `RESULT id`),
//! then answers; a child works in a tool, yields a planned number of
//! scheduler turns, then ends as planned.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::json;
use subagents::actors::{Model, ModelStream};
use subagents::messages::{ChatMessage, ModelRequest, Role};
use subagents::prelude::*;

/// What the parent's `use_agent send` says to a child, then a number.
pub(crate) const SENT: &str = "also: be brief";

/// One send's text, its own among the conversation's (the session, and
/// the length of the parent's conversation as it sends: the same on a
/// replay): two sends of one text hid a lost one behind the other — also
/// across a restart, where the parent's conversation starts short again
/// and a resumed run's conversation holds the earlier session's sends.
fn sent_text(request: &ModelRequest, session: usize) -> String {
    format!("{SENT} #{session}.{}", request.messages.len())
}

/// Grandchildren whose answer reached their child (the depth-2 path was
/// taken, not refused).
pub(crate) static GRANDCHILDREN_DELIVERED: AtomicUsize = AtomicUsize::new(0);

/// How a child ends after its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum End {
    /// It answers.
    Answer,
    /// Its model fails.
    ModelError,
    /// Its model panics.
    Panic,
    /// Its model hangs: the wall clock ends it (a partial result).
    Hang,
    /// It calls a tool that needs approval, then answers.
    Approval,
    /// It keeps calling tools: the model-call limit ends it.
    Loop,
}

/// One child a user turn asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ChildPlan {
    pub(crate) work_secs: u64,
    pub(crate) wait: bool,
    pub(crate) end: End,
    /// Scheduler turns it yields before its last answer.
    pub(crate) yields: u8,
    /// It first starts a child of its own (depth 2), waited on inline,
    /// that works for `work_secs / 2` and answers.
    #[serde(default)]
    pub(crate) nested: bool,
}

/// The parent's and the children's model, counting streams alive at once.
pub(crate) struct PlanModel {
    pub(crate) in_flight: Arc<AtomicUsize>,
    pub(crate) peak: Arc<AtomicUsize>,
    /// The process's session (0, then one more at each restart).
    pub(crate) session: usize,
}

fn play(turn: Reply) -> ModelStream {
    ScriptedModel::new(vec![turn]).stream(ModelRequest {
        messages: vec![],
        tools: vec![],
        ..Default::default()
    })
}

/// `stream`, after `yields` scheduler turns.
fn after_yields(yields: u8, stream: ModelStream) -> ModelStream {
    Box::pin(futures_util::stream::unfold(
        (yields, stream),
        |(yields, mut stream)| async move {
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            let next = futures_util::StreamExt::next(&mut stream).await?;
            Some((next, (0, stream)))
        },
    ))
}

impl Model for PlanModel {
    fn name(&self) -> &str {
        "plan"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let guard = Guard(self.in_flight.clone());
        let stream = if request
            .system_prompt()
            .is_some_and(|p| p.starts_with("Child"))
        {
            child_turn(&request)
        } else {
            parent_turn(&request, self.session)
        };
        Box::pin(futures_util::StreamExt::map(stream, move |chunk| {
            let _ = &guard;
            chunk
        }))
    }
}

struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn last(messages: &[ChatMessage]) -> Option<&ChatMessage> {
    messages.last()
}

/// The user message that plans `plans` (turn number `turn_no`).
pub(crate) fn plan_message(turn_no: usize, plans: &[ChildPlan]) -> String {
    format!("PLAN {}", serde_json::to_string(&(turn_no, plans)).unwrap())
}

fn parent_turn(request: &ModelRequest, session: usize) -> ModelStream {
    let Some(message) = last(&request.messages) else {
        return play(Reply::answer("?"));
    };
    if message.role == Role::User {
        if let Some(id) = message.content.strip_prefix("RESULT ") {
            return play(Reply::new().use_agent(&UseAgentCall::result(id)));
        }
        if let Some(id) = message.content.strip_prefix("INTERRUPT ") {
            return play(Reply::new().use_agent(&UseAgentCall::interrupt(id)));
        }
        if let Some(id) = message.content.strip_prefix("SEND ") {
            return play(
                Reply::new().use_agent(&UseAgentCall::send(id, sent_text(request, session))),
            );
        }
        if let Some(plan) = message.content.strip_prefix("PLAN ") {
            let (turn_no, plans): (usize, Vec<ChildPlan>) = serde_json::from_str(plan).unwrap();
            let mut turn = Reply::new();
            for (k, child) in plans.iter().enumerate() {
                let mut call = UseAgentCall::run(
                    format!("Child {turn_no}.{k}\nYou work."),
                    serde_json::to_string(child).unwrap(),
                )
                .tools(["sleep", "http_post"])
                .wait(child.wait);
                if child.end == End::Loop {
                    call = call.max_iterations(3);
                }
                turn = turn.use_agent(&call);
            }
            if plans.is_empty() {
                turn = turn.text("Nothing to delegate.");
            }
            return play(turn);
        }
        return play(Reply::answer("Noted."));
    }
    play(Reply::answer("Delegated."))
}

fn child_turn(request: &ModelRequest) -> ModelStream {
    let input = request
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .unwrap_or_default();
    let plan: ChildPlan = serde_json::from_str(&input).unwrap();
    let mut done = request.assistant_messages();
    if plan.nested {
        if done == 0 {
            let grand = ChildPlan {
                work_secs: plan.work_secs / 2,
                wait: true,
                end: End::Answer,
                yields: plan.yields,
                nested: false,
            };
            let call = |wait: bool| {
                UseAgentCall::run(
                    "Child of a child\nYou work.",
                    serde_json::to_string(&grand).unwrap(),
                )
                .tools(["sleep"])
                .wait(wait)
            };
            // Two in the background, then one waited on: past the cap
            // (`MAX_LIVE` live per requester), the last waits in its
            // requester's queue — the cap checked level by level is
            // reached (one grandchild never was).
            return play(
                Reply::new()
                    .use_agent(&call(false))
                    .use_agent(&call(false))
                    .use_agent(&call(true)),
            );
        }
        if done == 1
            && request
                .messages
                .last()
                .is_some_and(|m| m.role == Role::Tool && m.content.contains(r#""status":"done""#))
        {
            GRANDCHILDREN_DELIVERED.fetch_add(1, Ordering::SeqCst);
        }
        done -= 1;
    }
    if done == 0 {
        return play(
            Reply::new()
                .text("Working. ")
                .tool_call("sleep", json!({"secs": plan.work_secs}).to_string()),
        );
    }
    let last = match plan.end {
        End::Answer => Reply::answer("Finished."),
        End::ModelError => Reply::new().error("the model went away"),
        End::Panic => Reply::new().panic("adapter bug"),
        End::Hang => Reply::new().text("Thinking…").hang(),
        End::Approval if done == 1 => Reply::new().tool_call("http_post", "{}"),
        End::Approval => Reply::answer("Posted."),
        End::Loop => Reply::new().tool_call("sleep", r#"{"secs": 1}"#),
    };
    after_yields(plan.yields, play(last))
}
