//! What a past tool call sends back in the history: its arguments and
//! its name as the servers that check the history take them.

/// A past call's arguments as they can be sent back: as the model wrote
/// them if they are a JSON object, else `{}`. A call whose arguments were
/// not JSON (cut by the output limit, or just wrong) never ran and its
/// result says why; sent back as written, it failed every later request
/// on servers that parse the history (llama-server: 500 "Failed to parse
/// tool call arguments as JSON"; vLLM: 400), so the conversation was stuck
/// for good.
///
/// Parsed as the turn parses them before a run (`agent/call.rs`), not
/// skimmed: a lone surrogate (`"\ud83d"`, an emoji escape left unfinished)
/// or `1e400` passes a skim, was refused as no JSON, and went back as
/// written — to the same 500.
pub(super) fn sendable(arguments: &str) -> &str {
    let object = serde_json::from_str::<serde_json::Value>(arguments).is_ok_and(|v| v.is_object());
    if object { arguments } else { "{}" }
}

/// A past call's name a server refuses, as one it takes (`None`: as it
/// is). OpenAI checks every past call's name against
/// `^[a-zA-Z0-9_-]{1,64}$` (400 "does not match pattern"), and so does
/// Mistral: a name a model made up — gpt-4o's `multi_tool_use.parallel`,
/// one with a space or a dot, one too long — was answered "no tool
/// named …" and kept in the conversation, and every later request of
/// the turn, and of a resumed run, failed. Each other character becomes
/// `_`, the name is cut to 64, an empty one is `unknown_tool` (the
/// request renames only a call to no tool on offer: it never ran).
pub(super) fn sendable_name(name: &str) -> Option<String> {
    let takes = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !name.is_empty() && name.len() <= 64 && name.chars().all(takes) {
        return None;
    }
    let renamed: String = name
        .chars()
        .map(|c| if takes(c) { c } else { '_' })
        .take(64)
        .collect();
    Some(match renamed.is_empty() {
        true => "unknown_tool".to_owned(),
        false => renamed,
    })
}
