//! A request amended as its server's refusal asks: a field renamed or left
//! out, a field added to each assistant message, a message added between
//! two roles the server will not take in a row. Learnt from a 400 (or
//! Mistral's 422) that names the refusal, once per adapter (`call.rs`).

use serde_json::Value;

/// The field of `body` a 400 refusal names, if it has a known answer not
/// tried yet ([`amend`]):
///
/// - OpenAI's o-series and gpt-5 refuse `max_tokens` and name its
///   successor (vLLM and llama.cpp do not all take the new name);
/// - older Azure API versions and some gateways refuse `stream_options`
///   ("Unknown parameter"), Mistral's API too (422);
/// - Mistral's API refuses `seed` as a field it does not take (422,
///   "Extra inputs are not permitted"): its name for it is `random_seed`.
///   Only a refusal of the field itself: an error about the seed's value
///   ("seed must be …") is answered as it is;
/// - a thinking model's API (DeepSeek's thinking mode, Kimi) refuses an
///   assistant message without its `reasoning_content` ("Missing
///   `reasoning_content` field in the assistant message at message index
///   2"; DeepSeek V4: "The `reasoning_content` in the thinking mode must be
///   passed back to the API"): every request after a tool call failed, and
///   the conversation with it. Not a refusal of the field itself (one a
///   server does not take is answered as it is). Its reasoning is not kept (it is never shown): an empty one
///   is sent, which these servers take;
/// - Mistral (its API, and vLLM serving its models with their tokenizer)
///   refuses a user message right after a tool result ("Unexpected role
///   'user' after role 'tool'"), which a message read mid-turn (a steered
///   child, a message waiting) and a resumed child's first message
///   make: every later call of that conversation failed. A short
///   assistant message is put between the two ([`BRIDGE`]).
pub(super) fn refused_field(body: &Value, message: &str) -> Option<&'static str> {
    let fields = body.as_object()?;
    if message.contains("reasoning_content")
        && !NOT_TAKEN.iter().any(|words| message.contains(words))
        && assistants_without_reasoning(body).next().is_some()
    {
        Some("reasoning_content")
    } else if message.contains("after role 'tool'") && tool_then_user(body).is_some() {
        Some(ASSISTANT_AFTER_TOOL)
    } else if message.contains("max_tokens")
        && message.contains("max_completion_tokens")
        // vLLM's context overflow names both ("… is too large"): not a
        // refusal of the field, the same request would fail again.
        && !message.contains("too large")
        && !message.contains("context length")
        && fields.contains_key("max_tokens")
    {
        Some("max_tokens")
    } else if message.contains("stream_options") && fields.contains_key("stream_options") {
        Some("stream_options")
    } else if message.contains("top_p")
        && message.contains("< 1.0")
        && fields.get("top_p").and_then(Value::as_f64) == Some(1.0)
    {
        // TGI: "`top_p` must be > 0.0 and < 1.0" (422) — and 1 is no cut
        // at all there, which leaving it out gives.
        Some("top_p")
    } else if message.contains("seed")
        && !message.contains("random_seed")
        && fields.contains_key("seed")
        && NOT_TAKEN.iter().any(|words| message.contains(words))
    {
        Some("seed")
    } else {
        None
    }
}

/// How servers say a field is not one they take (Mistral's and FastAPI's
/// `extra_forbidden`, OpenAI's and Azure's "Unknown parameter", others'
/// "unrecognized"/"unknown field").
const NOT_TAKEN: [&str; 6] = [
    "Extra inputs are not permitted",
    "extra_forbidden",
    "Unknown parameter",
    "nrecognized",
    "unknown field",
    "not permitted",
];

/// `body` with `field` amended as its refusal asks: `max_tokens` renamed
/// `max_completion_tokens`, `seed` renamed `random_seed`,
/// `stream_options` left out (the usage is then estimated), a `top_p` of
/// 1 left out (any other kept). A body without that field is left as it
/// is.
pub(super) fn amend(body: &mut Value, field: &str) {
    if field == ASSISTANT_AFTER_TOOL {
        if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
            while let Some(at) = tool_then_user_in(messages) {
                let bridge = serde_json::json!({"role": "assistant", "content": BRIDGE});
                messages.insert(at, bridge);
            }
        }
        return;
    }
    if field == "reasoning_content" {
        for message in assistants_without_reasoning_mut(body) {
            message.insert(field.to_owned(), Value::String(String::new()));
        }
        return;
    }
    let Some(fields) = body.as_object_mut() else {
        return;
    };
    // Learnt from a refused 1, applied to every later body: a `top_p` TGI
    // takes (0.9, a child's profile) goes as set.
    if field == "top_p" && fields.get(field).and_then(Value::as_f64) != Some(1.0) {
        return;
    }
    let Some(value) = fields.remove(field) else {
        return;
    };
    match field {
        "max_tokens" => {
            fields.insert("max_completion_tokens".to_owned(), value);
        }
        "seed" => {
            fields.insert("random_seed".to_owned(), value);
        }
        _ => {}
    }
}

/// The request's assistant messages that carry no `reasoning_content`.
fn assistants_without_reasoning(
    body: &Value,
) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter(|m| !m.contains_key("reasoning_content"))
}

/// [`assistants_without_reasoning`], to amend.
fn assistants_without_reasoning_mut(
    body: &mut Value,
) -> impl Iterator<Item = &mut serde_json::Map<String, Value>> {
    body.get_mut("messages")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter(|m| !m.contains_key("reasoning_content"))
}

/// What the assistant message put between a tool result and a user
/// message says: not empty — Mistral's validator refuses an assistant
/// message with neither text nor calls (before its V5 tokenizers, and its
/// API), as OpenCode's and pydantic-ai's bridges know.
const BRIDGE: &str = "Done.";

/// The amendment that puts an assistant message between a tool result
/// and the user message after it (not a field: a name for the list of
/// amendments learnt).
const ASSISTANT_AFTER_TOOL: &str = "assistant after tool";

/// Where the request's first user message right after a tool result is.
fn tool_then_user(body: &Value) -> Option<usize> {
    tool_then_user_in(body.get("messages")?.as_array()?)
}

fn tool_then_user_in(messages: &[Value]) -> Option<usize> {
    let role = |m: &Value| m.get("role").and_then(Value::as_str).map(str::to_owned);
    (1..messages.len()).find(|&i| {
        role(&messages[i - 1]).as_deref() == Some("tool")
            && role(&messages[i]).as_deref() == Some("user")
    })
}
