//! `ScriptedModel`: a deterministic model, scripted per model call: one
//! [`Reply`] for each time the model is called. The embedded
//! default for examples and the engine of every simulation test.
//!
//! A script is chosen by the request's system prompt (the first script
//! whose pattern it contains, else the default script), and the reply by how
//! many assistant messages that conversation holds — one per answer, and
//! one for each turn that ended without completing (its result stands in
//! the conversation as an assistant message). The
//! choice depends only on the request, never on call order, so parents and
//! children sharing one model replay identically however their calls
//! interleave.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::stream;
use subagents_messages::{ModelChunk, ModelRequest, ToolCall, ToolUseId, Usage};

use crate::delegation::{USE_AGENT, UseAgentCall};
use crate::model::{Model, ModelError, ModelStream};

/// One step of a scripted reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ScriptStep {
    /// Yield a text delta.
    Text(String),
    /// Yield a tool call (its id is made up: `call_<turn>_<n>`).
    ToolCall {
        /// The tool's name.
        name: String,
        /// Its arguments, a JSON string.
        arguments: String,
    },
    /// Yield usage.
    Usage(Usage),
    /// Wait this long (tokio time) before the next step.
    Delay(Duration),
    /// Fail the call with this message.
    Error(String),
    /// Yield `Truncated` with this reason (the output limit cut it).
    Truncated(String),
    /// Never yield again (a hung model; the wall clock cuts it).
    Hang,
    /// Panic (a broken adapter; the runtime must survive it).
    Panic(String),
}

/// One scripted model answer: steps run in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    steps: Vec<ScriptStep>,
}

impl Reply {
    /// An empty reply (answers with no text and no tool calls).
    pub fn new() -> Self {
        Self::default()
    }

    /// A reply that answers `text` and nothing else.
    pub fn answer(text: impl Into<String>) -> Self {
        Self::new().text(text)
    }

    /// Adds a text delta.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.steps.push(ScriptStep::Text(text.into()));
        self
    }

    /// Adds a tool call; `arguments` is a JSON string.
    pub fn tool_call(mut self, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        self.steps.push(ScriptStep::ToolCall {
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    /// Adds a `use_agent` call, typed (see [`UseAgentCall`]).
    pub fn use_agent(self, call: &UseAgentCall) -> Self {
        self.tool_call(USE_AGENT, call.to_json())
    }

    /// Adds usage.
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.steps.push(ScriptStep::Usage(Usage {
            prompt_tokens,
            completion_tokens,
        }));
        self
    }

    /// Waits before the next step (latency in tokio time).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.steps.push(ScriptStep::Delay(delay));
        self
    }

    /// Fails the call.
    pub fn error(mut self, message: impl Into<String>) -> Self {
        self.steps.push(ScriptStep::Error(message.into()));
        self
    }

    /// Says the output was cut here (as a server's `finish_reason:
    /// length` does): the reply is incomplete.
    pub fn truncated(mut self, reason: impl Into<String>) -> Self {
        self.steps.push(ScriptStep::Truncated(reason.into()));
        self
    }

    /// Hangs forever.
    pub fn hang(mut self) -> Self {
        self.steps.push(ScriptStep::Hang);
        self
    }

    /// Panics inside the model stream.
    pub fn panic(mut self, message: impl Into<String>) -> Self {
        self.steps.push(ScriptStep::Panic(message.into()));
        self
    }

    /// The steps, in order.
    pub(crate) fn steps(&self) -> &[ScriptStep] {
        &self.steps
    }
}

#[derive(Clone, Debug)]
enum Pattern {
    Any,
    SystemPrompt(String),
    Input(String),
}

#[derive(Clone, Debug)]
struct Script {
    pattern: Pattern,
    replies: Vec<Reply>,
}

/// A deterministic [`Model`]. See the module docs for how a reply is chosen.
///
/// ```
/// use subagents_actors::scripted::{ScriptedModel, Reply};
/// let model = ScriptedModel::new(vec![
///     Reply::new().tool_call("calculator", r#"{"expression":"2+2"}"#),
///     Reply::answer("It is 4."),
/// ])
/// .with_script("You fetch pages", vec![Reply::answer("Example Domain")]);
/// # let _ = model;
/// ```
#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    scripts: Vec<Script>,
    calls: AtomicU64,
}

impl Clone for ScriptedModel {
    /// The same scripts, with the call count at zero.
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            scripts: self.scripts.clone(),
            calls: AtomicU64::new(0),
        }
    }
}

impl ScriptedModel {
    /// A model whose default script is `replies`.
    pub fn new(replies: Vec<Reply>) -> Self {
        Self {
            name: "scripted".to_owned(),
            scripts: vec![Script {
                pattern: Pattern::Any,
                replies,
            }],
            calls: AtomicU64::new(0),
        }
    }

    /// Adds a script for conversations whose system prompt contains
    /// `pattern`. Scripts are tried in the order added.
    pub fn with_script(self, pattern: impl Into<String>, replies: Vec<Reply>) -> Self {
        self.insert(Pattern::SystemPrompt(pattern.into()), replies)
    }

    /// Adds a script for conversations whose first user message (the
    /// task) contains `pattern` — for children that share a system prompt.
    pub fn with_input_script(self, pattern: impl Into<String>, replies: Vec<Reply>) -> Self {
        self.insert(Pattern::Input(pattern.into()), replies)
    }

    fn insert(mut self, pattern: Pattern, replies: Vec<Reply>) -> Self {
        let at = self.scripts.len().saturating_sub(1);
        self.scripts.insert(at, Script { pattern, replies });
        self
    }

    /// Renames the model (for logs and the model registry).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How many calls were started so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Wraps the model for sharing.
    pub fn shared(self) -> Arc<dyn Model> {
        Arc::new(self)
    }

    fn reply_for(&self, request: &ModelRequest) -> Result<(usize, &Reply), String> {
        let prompt = request.system_prompt().unwrap_or("");
        let input = request
            .messages
            .iter()
            .find(|m| m.role == subagents_messages::Role::User)
            .map_or("", |m| m.content.as_str());
        let script = self.scripts.iter().find(|s| match &s.pattern {
            Pattern::Any => true,
            Pattern::SystemPrompt(p) => prompt.contains(p.as_str()),
            Pattern::Input(p) => input.contains(p.as_str()),
        });
        let index = request.assistant_messages();
        match script.and_then(|s| s.replies.get(index)) {
            Some(reply) => Ok((index, reply)),
            None => Err(format!(
                "the scripted model has no reply {} for the conversation whose system prompt begins {}",
                index + 1,
                crate::delegation::quoted(prompt.lines().next().unwrap_or(""))
            )),
        }
    }
}

enum Pending {
    Chunk(ModelChunk),
    Error(String),
    Delay(Duration),
    Hang,
    Panic(String),
}

impl Model for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let steps: Vec<Pending> = match self.reply_for(&request) {
            Err(message) => vec![Pending::Error(message)],
            Ok((index, reply)) => {
                let mut calls = 0;
                reply
                    .steps()
                    .iter()
                    .map(|step| match step {
                        ScriptStep::Text(t) => Pending::Chunk(ModelChunk::Text(t.clone())),
                        ScriptStep::ToolCall { name, arguments } => {
                            calls += 1;
                            Pending::Chunk(ModelChunk::ToolCall(Box::new(ToolCall {
                                id: ToolUseId::new(format!("call_{}_{}", index + 1, calls)),
                                name: name.clone(),
                                arguments: arguments.clone(),
                                extra_content: None,
                            })))
                        }
                        ScriptStep::Usage(u) => Pending::Chunk(ModelChunk::Usage(*u)),
                        ScriptStep::Delay(d) => Pending::Delay(*d),
                        ScriptStep::Error(e) => Pending::Error(e.clone()),
                        ScriptStep::Truncated(r) => {
                            Pending::Chunk(ModelChunk::Truncated(r.clone()))
                        }
                        ScriptStep::Hang => Pending::Hang,
                        ScriptStep::Panic(p) => Pending::Panic(p.clone()),
                    })
                    .collect()
            }
        };
        let steps = steps.into_iter();
        Box::pin(stream::unfold(Some(steps), |state| async move {
            let mut steps = state?;
            loop {
                match steps.next()? {
                    Pending::Chunk(chunk) => return Some((Ok(chunk), Some(steps))),
                    Pending::Error(e) => return Some((Err(ModelError::Other(e)), None)),
                    Pending::Delay(d) => tokio::time::sleep(d).await,
                    Pending::Hang => std::future::pending::<()>().await,
                    Pending::Panic(p) => panic!("{p}"),
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use subagents_messages::ChatMessage;

    fn request(system: &str, assistant_messages: usize) -> ModelRequest {
        let mut messages = vec![ChatMessage::system(system), ChatMessage::user("hi")];
        for _ in 0..assistant_messages {
            messages.push(ChatMessage::assistant("x", vec![]));
        }
        ModelRequest {
            messages,
            tools: vec![],
            ..Default::default()
        }
    }

    async fn collect(
        model: &ScriptedModel,
        req: ModelRequest,
    ) -> Vec<Result<ModelChunk, ModelError>> {
        model.stream(req).collect().await
    }

    #[tokio::test(start_paused = true)]
    async fn reply_is_chosen_by_prompt_and_answer_count() {
        let model = ScriptedModel::new(vec![Reply::answer("d1"), Reply::answer("d2")])
            .with_script("child", vec![Reply::answer("c1")]);
        assert_eq!(
            collect(&model, request("parent", 1)).await,
            vec![Ok(ModelChunk::Text("d2".into()))]
        );
        assert_eq!(
            collect(&model, request("I am a child", 0)).await,
            vec![Ok(ModelChunk::Text("c1".into()))]
        );
        assert_eq!(model.calls(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn running_out_of_script_is_a_readable_error() {
        let model = ScriptedModel::new(vec![]);
        let out = collect(&model, request("Parent prompt", 0)).await;
        let [Err(ModelError::Other(message))] = out.as_slice() else {
            panic!("expected one error, got {out:?}");
        };
        assert!(message.contains("no reply 1"), "{message}");
        assert!(message.contains("Parent prompt"), "{message}");
    }

    #[tokio::test(start_paused = true)]
    async fn delays_run_in_tokio_time_and_errors_end_the_stream() {
        let model = ScriptedModel::new(vec![
            Reply::new()
                .delay(Duration::from_secs(10))
                .text("a")
                .tool_call("t", "{}")
                .error("boom")
                .text("never"),
        ]);
        let start = tokio::time::Instant::now();
        let out = collect(&model, request("p", 0)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(out.len(), 3);
        assert!(matches!(&out[1], Ok(ModelChunk::ToolCall(c)) if c.id.as_str() == "call_1_1"));
        assert_eq!(out[2], Err(ModelError::Other("boom".into())));
    }
}
