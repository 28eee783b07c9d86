//! The chat-completions wire format: the request body sent and the stream
//! chunks received. Only the fields this adapter reads or writes are
//! modelled; unknown fields in responses are ignored.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use subagents_messages::{ChatMessage, ModelRequest, Role, ToolCall, ToolChoice, ToolSpec, Usage};

/// The body of `POST {base_url}/chat/completions`.
#[derive(Debug, Serialize)]
pub(crate) struct ChatRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tools: Vec<WireTool<'a>>,
    pub(crate) stream: bool,
    pub(crate) stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(crate) stop: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seed: Option<u64>,
}

/// `stream_options`: ask for a final usage chunk.
#[derive(Debug, Serialize)]
pub(crate) struct StreamOptions {
    pub(crate) include_usage: bool,
}

/// One message of the conversation, as the service expects it.
#[derive(Debug, Serialize)]
pub(crate) struct WireMessage<'a> {
    pub(crate) role: &'static str,
    /// Always a string: an assistant message that only calls tools sends
    /// `""`, never `null` (llama-cpp-python answers `null` with HTTP 500,
    /// and an omitted field with an empty stream; `""` works everywhere).
    /// Owned only where user messages in a row were joined.
    pub(crate) content: Cow<'a, str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_call_id: Option<&'a str>,
}

/// An assistant's tool call, sent back in the history.
#[derive(Debug, Serialize)]
pub(crate) struct WireToolCall<'a> {
    pub(crate) id: &'a str,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) function: WireFunctionCall<'a>,
    /// The provider's own data on the call, sent back as it came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) extra_content: Option<Value>,
}

/// The function part of a tool call; `arguments` stays a JSON string.
#[derive(Debug, Serialize)]
pub(crate) struct WireFunctionCall<'a> {
    /// Owned only where a made-up name was made one a server takes.
    pub(crate) name: Cow<'a, str>,
    pub(crate) arguments: &'a str,
}

/// A tool on offer: `{type: "function", function: {...}}`.
#[derive(Debug, Serialize)]
pub(crate) struct WireTool<'a> {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) function: WireFunction<'a>,
}

/// The function part of a tool; `parameters` is a JSON object.
#[derive(Debug, Serialize)]
pub(crate) struct WireFunction<'a> {
    pub(crate) name: &'a str,
    pub(crate) description: &'a str,
    pub(crate) parameters: Value,
}

impl<'a> ChatRequest<'a> {
    /// The streaming request for `request` on `model`.
    pub(crate) fn new(model: &'a str, request: &'a ModelRequest) -> Self {
        // An empty system prompt (a builder's default, a profile's empty
        // body) is left out: LM Studio, Mistral, Anthropic's and Gemini's
        // compatible endpoints answer 400 to an empty message.
        let mut messages = alternating(
            request
                .messages
                .iter()
                .filter(|m| !(m.role == Role::System && m.content.trim().is_empty()))
                .map(WireMessage::from),
        );
        // A past call to a tool not on offer whose name a server refuses
        // (see `sendable_name`): sent under one it takes.
        for call in messages.iter_mut().flat_map(|m| m.tool_calls.iter_mut()) {
            let name = &call.function.name;
            if !request.tools.iter().any(|t| t.name == *name)
                && let Some(sendable) = sendable_name(name)
            {
                call.function.name = Cow::Owned(sendable);
            }
        }
        Self {
            model,
            messages,
            tools: request.tools.iter().map(WireTool::from).collect(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            // Only beside tools: vLLM and OpenAI refuse a `tool_choice`
            // without `tools` (400), and with none there is no choice.
            tool_choice: request
                .options
                .tool_choice
                .as_ref()
                .filter(|_| !request.tools.is_empty())
                .map(tool_choice),
            max_tokens: request.options.max_tokens,
            temperature: request.options.temperature,
            top_p: request.options.top_p,
            stop: &request.options.stop,
            seed: request.options.seed,
        }
    }
}

/// `messages` with each run of user messages joined into one (blank
/// lines between): the messages a running child reads (several at one
/// call, one after its task while it was queued, one after a turn that
/// ended before it read it) follow each other, and the chat templates
/// that want roles to alternate (Gemma, Mistral, Llama 2: llama.cpp's
/// `--jinja`, LM Studio, vLLM with the model's template) refuse the
/// request — the child's next call failed. The conversation itself keeps
/// them apart.
fn alternating<'a>(messages: impl Iterator<Item = WireMessage<'a>>) -> Vec<WireMessage<'a>> {
    let mut out: Vec<WireMessage<'a>> = Vec::new();
    for message in messages {
        match out.last_mut() {
            Some(last) if last.role == "user" && message.role == "user" => {
                let joined = last.content.to_mut();
                joined.push_str("\n\n");
                joined.push_str(&message.content);
            }
            _ => out.push(message),
        }
    }
    out
}

/// `tool_choice` as the chat-completions API spells it.
fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => Value::from("auto"),
        ToolChoice::None => Value::from("none"),
        ToolChoice::Required => Value::from("required"),
        ToolChoice::Function(name) => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
    }
}

/// What a tool message that returned nothing says to the server.
pub(crate) const NO_OUTPUT: &str = "(no output)";

/// What an empty answer (no text, no tool call) says to the server.
pub(crate) const NO_ANSWER: &str = "(no answer)";

impl<'a> From<&'a ChatMessage> for WireMessage<'a> {
    fn from(message: &'a ChatMessage) -> Self {
        let role = match message.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        let tool_calls: Vec<WireToolCall<'a>> = match message.role {
            Role::Assistant => message.tool_calls.iter().map(WireToolCall::from).collect(),
            _ => Vec::new(),
        };
        // Empty where a server wants words (the servers that refuse an
        // empty system message refuse these too): a tool that returned
        // nothing, an answer of nothing (a thinking model that spent its
        // whole answer thinking). Said, not left out — two user messages
        // in a row are refused by templates that want roles to alternate.
        // An assistant message that calls tools sends `""` (see above).
        let content = match message.role {
            Role::Tool if message.content.trim().is_empty() => NO_OUTPUT,
            Role::Assistant if message.content.trim().is_empty() && tool_calls.is_empty() => {
                NO_ANSWER
            }
            _ => message.content.as_str(),
        };
        let tool_call_id = match message.role {
            Role::Tool => message.tool_call_id.as_ref().map(|id| id.as_str()),
            _ => None,
        };
        Self {
            role,
            content: Cow::Borrowed(content),
            tool_calls,
            tool_call_id,
        }
    }
}

impl<'a> From<&'a ToolCall> for WireToolCall<'a> {
    fn from(call: &'a ToolCall) -> Self {
        Self {
            id: call.id.as_str(),
            kind: "function",
            function: WireFunctionCall {
                name: Cow::Borrowed(&call.name),
                arguments: sendable(&call.arguments),
            },
            // The JSON value it came as (text that is no JSON, set by a
            // host: left out, said in a warning).
            extra_content: call.extra_content.as_deref().and_then(|text| {
                let value = serde_json::from_str(text);
                if value.is_err() {
                    tracing::warn!(call = %call.id, "a tool call's extra_content is not JSON; not sent");
                }
                value.ok()
            }),
        }
    }
}

impl<'a> From<&'a ToolSpec> for WireTool<'a> {
    fn from(spec: &'a ToolSpec) -> Self {
        Self {
            kind: "function",
            function: WireFunction {
                name: &spec.name,
                description: &spec.description,
                parameters: parameters_schema(&spec.parameters),
            },
        }
    }
}

/// A tool's JSON-schema string as a JSON object; a schema that does not
/// parse to an object becomes `{"type":"object"}` (any arguments).
pub(crate) fn parameters_schema(parameters: &str) -> Value {
    match serde_json::from_str::<Value>(parameters) {
        Ok(value @ Value::Object(_)) => value,
        _ => serde_json::json!({ "type": "object" }),
    }
}

/// One `data:` event of the response stream.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ChunkWire {
    #[serde(default)]
    pub(crate) choices: Option<Vec<ChoiceWire>>,
    #[serde(default)]
    pub(crate) usage: Option<UsageWire>,
    /// Some servers report a failure inside the stream.
    #[serde(default)]
    pub(crate) error: Option<Value>,
    /// `chat.completion.chunk`; vLLM reports a failure inside the stream
    /// as an object `"error"` with its `message` beside it.
    #[serde(default)]
    pub(crate) object: Option<String>,
    /// Anthropic's OpenAI-compatible endpoint sends `{"type": "ping"}`
    /// between chunks, a keep-alive.
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<Value>,
    /// MiniMax's status, in every chunk (`status_code` 0: none).
    #[serde(default)]
    pub(crate) base_resp: Option<Value>,
}

/// One choice of a chunk (this adapter reads choice 0).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ChoiceWire {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default)]
    pub(crate) delta: Option<DeltaWire>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

/// What a chunk adds to the answer.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct DeltaWire {
    #[serde(default)]
    pub(crate) content: Option<ContentWire>,
    #[serde(default)]
    pub(crate) refusal: Option<String>,
    /// A thinking model's reasoning (vLLM, llama.cpp: `reasoning_content`;
    /// others: `reasoning`): not passed on, but it is output — the answer
    /// has begun, and it costs tokens. Two fields, not an alias: a proxy
    /// that sends both keys (one text under each name, or `null`s) sends
    /// a chunk like any other, and an alias made it a duplicate field.
    #[serde(default)]
    pub(crate) reasoning_content: Option<ReasoningWire>,
    /// The same reasoning under the other name; read only when
    /// `reasoning_content` is absent, so text sent under both counts once.
    #[serde(default)]
    pub(crate) reasoning: Option<ReasoningWire>,
    /// A list of call fragments, or one not in a list (TGI before 3.2:
    /// read as a list only, every chunk of a call was `Malformed`).
    #[serde(default, deserialize_with = "one_or_many")]
    pub(crate) tool_calls: Option<Vec<ToolCallDeltaWire>>,
    /// The functions API's one call (before `tools`): read as call 0 when
    /// the delta has no `tool_calls` — llama-cpp-python sends both, the
    /// same call twice. Any JSON: one that is no call (`{}`, `"auto"`)
    /// is no output, not a malformed chunk ([`DeltaWire::function_call`]).
    #[serde(default, rename = "function_call")]
    pub(crate) function_call_wire: Option<Value>,
}

impl DeltaWire {
    /// [`Self::function_call_wire`] when it says something of a call: a
    /// name, or arguments.
    pub(crate) fn function_call(&mut self) -> Option<FunctionDeltaWire> {
        let call: FunctionDeltaWire =
            serde_json::from_value(self.function_call_wire.take()?).ok()?;
        let named = call.name.as_deref().is_some_and(|n| !n.is_empty());
        let argued =
            (call.arguments.as_ref()).is_some_and(|a| !a.is_null() && a.as_str() != Some(""));
        (named || argued).then_some(call)
    }
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<ToolCallDeltaWire>>, D::Error> {
    use serde::de::Error;
    Ok(match Option::<Value>::deserialize(deserializer)? {
        None => None,
        Some(one @ Value::Object(_)) => {
            Some(vec![serde_json::from_value(one).map_err(D::Error::custom)?])
        }
        Some(many) => Some(serde_json::from_value(many).map_err(D::Error::custom)?),
    })
}

/// A delta's reasoning, in characters: a string, or (a gateway that
/// translates Bedrock's blocks) an object with its `text` (or `content`),
/// or a list of them. Read as a string only, every chunk of such an answer
/// was `Malformed`, though reasoning is never passed on.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ReasoningWire(pub(crate) usize);

impl<'de> Deserialize<'de> for ReasoningWire {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        fn chars(value: &Value) -> usize {
            match value {
                Value::String(text) => text.chars().count(),
                Value::Array(parts) => parts.iter().map(chars).sum(),
                Value::Object(part) => ["text", "content", "thinking"]
                    .iter()
                    .find_map(|key| part.get(*key))
                    .map_or(0, chars),
                _ => 0,
            }
        }
        Ok(Self(chars(&Value::deserialize(deserializer)?)))
    }
}

/// A delta's `content`: a string, or (Mistral's Magistral models) a list
/// of parts — `{"type": "text", "text": …}` and `{"type": "thinking",
/// "thinking": [parts]}`. Read as a string only, every chunk of such an
/// answer was `Malformed` and no answer got through.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ContentWire {
    /// The answer's text.
    pub(crate) text: String,
    /// Characters of reasoning (thinking parts): output, not passed on.
    pub(crate) thought_chars: usize,
}

impl<'de> Deserialize<'de> for ContentWire {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut content = ContentWire::default();
        content.read(&Value::deserialize(deserializer)?, false);
        Ok(content)
    }
}

impl ContentWire {
    /// Adds `value` (a string, a part or a list of them); `thought`:
    /// inside a thinking part.
    fn read(&mut self, value: &Value, thought: bool) {
        match value {
            Value::String(text) if thought => self.thought_chars += text.chars().count(),
            Value::String(text) => self.text.push_str(text),
            Value::Array(parts) => {
                for part in parts {
                    self.read(part, thought);
                }
            }
            Value::Object(part) => {
                let thinking = part.get("type").and_then(Value::as_str) == Some("thinking");
                if let Some(inner) = part.get("thinking").filter(|_| thinking) {
                    self.read(inner, true);
                } else if let Some(text) = part.get("text") {
                    self.read(text, thought || thinking);
                }
            }
            _ => {}
        }
    }
}

/// A fragment of a tool call: id and name come first, arguments in pieces.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolCallDeltaWire {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<FunctionDeltaWire>,
    /// The provider's own data on the call (Gemini's `thought_signature`).
    #[serde(default)]
    pub(crate) extra_content: Option<Value>,
}

/// The function part of a tool-call fragment.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FunctionDeltaWire {
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// Normally a string piece; a server that sends a whole JSON object
    /// instead is tolerated (it is written back out as a string).
    #[serde(default)]
    pub(crate) arguments: Option<Value>,
}

/// Token usage, sent in the last chunk when `include_usage` is set. The
/// counts are read as any JSON, so a count that is no token count (a
/// negative, a fraction, `1e20`) makes the usage unreadable
/// ([`UsageWire::read`]) rather than the whole chunk, with the answer in
/// it, malformed.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct UsageWire {
    #[serde(default)]
    prompt_tokens: Option<Value>,
    #[serde(default)]
    completion_tokens: Option<Value>,
    #[serde(default)]
    total_tokens: Option<Value>,
}

impl UsageWire {
    /// The usage, if both counts are token counts (a missing or `null`
    /// one counts 0); `None` if either is not. A total past the two (a
    /// gateway translating Gemini reports its thinking in the total only:
    /// `completion_tokens` 151 of a total 553 over 20 of prompt — the
    /// budget saw a quarter of the output) counts as output.
    pub(crate) fn read(&self) -> Option<Usage> {
        fn count(value: &Option<Value>) -> Option<u64> {
            match value {
                None | Some(Value::Null) => Some(0),
                Some(value) => value.as_u64(),
            }
        }
        let prompt_tokens = count(&self.prompt_tokens)?;
        let completion_tokens = count(&self.completion_tokens)?;
        // An unreadable total is no total (the two counts stand).
        let beyond = self
            .total_tokens
            .as_ref()
            .and_then(Value::as_u64)
            .map_or(0, |total| total.saturating_sub(prompt_tokens));
        Some(Usage {
            prompt_tokens,
            completion_tokens: completion_tokens.max(beyond),
        })
    }
}

mod history;
use history::{sendable, sendable_name};

#[cfg(test)]
mod tests;
