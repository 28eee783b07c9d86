//! What goes to a model and what comes back. The shapes follow the OpenAI
//! chat-completions wire format: tool arguments travel as JSON *strings*
//! end to end, so every type here round-trips through bincode.

use serde::{Deserialize, Serialize};

use crate::ids::ToolUseId;

/// Who wrote a [`ChatMessage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user (or a synthetic turn standing in for one, such as a wake).
    User,
    /// The model.
    Assistant,
    /// The output of a tool call, answering an assistant's tool call by id.
    Tool,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text (may be empty for an assistant message that only calls tools).
    pub content: String,
    /// Tool calls the assistant made in this message.
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message: the call it answers.
    pub tool_call_id: Option<ToolUseId>,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }

    /// An assistant message, with the tool calls it made.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
        }
    }

    /// A tool result answering `call`.
    pub fn tool(call: ToolUseId, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call),
        }
    }

    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id; the tool result answers it.
    pub id: ToolUseId,
    /// The tool's name.
    pub name: String,
    /// The arguments, as a JSON string (as the model wrote them).
    pub arguments: String,
    /// What the provider attached to the call for itself, opaque: an
    /// OpenAI-compatible `extra_content`, as JSON text (Gemini's
    /// `thought_signature`, which its next request must send back — a
    /// call sent without it is refused). Sent back with the call as the
    /// JSON value it came as (text that is not JSON is left out, with a
    /// warning); `None` for most providers.
    #[serde(default)]
    pub extra_content: Option<Box<str>>,
}

/// A tool as the model sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON schema of its arguments, as a JSON string.
    pub parameters: String,
}

/// Tokens a model call used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read.
    pub prompt_tokens: u64,
    /// Tokens written.
    pub completion_tokens: u64,
}

impl Usage {
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
    }
}

/// One model call: the conversation so far, the tools on offer and the
/// request options.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The messages, system prompt first.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Sampling and tool-choice options (none set: the server's defaults).
    #[serde(default)]
    pub options: RequestOptions,
}

/// Options sent with each model call of an agent. A field left `None`
/// (or `stop` empty) is not sent, so the server's default applies. Which
/// servers honour which is in docs/openai.md.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// Whether and which tool the model must call.
    pub tool_choice: Option<ToolChoice>,
    /// The most tokens the answer may have (a longer one is cut, and read
    /// as a partial result).
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Sequences that end the answer.
    pub stop: Vec<String>,
    /// A sampling seed, for servers that take one.
    pub seed: Option<u64>,
}

impl RequestOptions {
    /// `self`, with every field `other` sets taken from `other`.
    pub fn overridden_by(&self, other: &RequestOptions) -> RequestOptions {
        RequestOptions {
            tool_choice: other
                .tool_choice
                .clone()
                .or_else(|| self.tool_choice.clone()),
            max_tokens: other.max_tokens.or(self.max_tokens),
            temperature: other.temperature.or(self.temperature),
            top_p: other.top_p.or(self.top_p),
            stop: if other.stop.is_empty() {
                self.stop.clone()
            } else {
                other.stop.clone()
            },
            seed: other.seed.or(self.seed),
        }
    }
}

/// Whether and which tool the model must call (`tool_choice`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    Auto,
    /// No tool (`"none"`).
    None,
    /// Some tool (`"required"`).
    Required,
    /// This tool (`{"type":"function","function":{"name":…}}`).
    Function(String),
}

impl ModelRequest {
    /// The system prompt, if the conversation starts with one.
    pub fn system_prompt(&self) -> Option<&str> {
        self.messages
            .first()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
    }

    /// How many assistant messages the conversation holds: how many times
    /// the model has already answered in it.
    pub fn assistant_messages(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count()
    }
}

/// One piece of a streamed model response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelChunk {
    /// A text delta, shown to the host as it arrives.
    Text(String),
    /// A whole tool call (adapters assemble fragments before yielding it).
    /// Its name and arguments are output: held against the token budget
    /// as text is, beyond what the call said as [`ModelChunk::Hidden`]
    /// (not counted twice).
    /// Boxed: the largest variant sets the size of every chunk, and of
    /// every future that holds one.
    ToolCall(Box<ToolCall>),
    /// Token usage for the call (may come once, at the end, early — the
    /// prompt's — or never). Each chunk is an increment, added to the
    /// call's count: send a count once, never a running total. Output
    /// after the last one (or all of it, with none) is counted by the
    /// estimate: held against the budget as it streams, and added at the
    /// call's end or cut.
    Usage(Usage),
    /// An estimate of the call's usage, for a server that reports none
    /// (the OpenAI adapter counts about 4 characters a token): counted
    /// against the token budget like [`ModelChunk::Usage`], and said to be
    /// an estimate wherever the budget is named. An increment too, and
    /// never sent beside a [`ModelChunk::Usage`] for the same call.
    UsageEstimate(Usage),
    /// Output the model wrote that is not shown as it streams — its
    /// reasoning, a tool call's arguments still being written — in
    /// characters, said as it grows (each chunk the characters added since
    /// the last, not the size so far): counted against the token budget as
    /// text is (about four characters a token), so a model looping where
    /// nothing is shown ends at the budget, not at the wall clock, and a
    /// call cut there counts its tokens.
    Hidden(u64),
    /// The output was cut before the model finished (the server's
    /// `finish_reason`: `length` for its output-token limit,
    /// `content_filter` for its content filter). The
    /// text so far is incomplete, and so may be any tool call in it: such
    /// a call is never run.
    Truncated(String),
}
