//! Empty messages where servers want words.

use super::*;
use subagents_messages::ToolUseId;

fn sent(messages: Vec<ChatMessage>) -> Vec<Value> {
    let request = ModelRequest {
        messages,
        ..Default::default()
    };
    let body = serde_json::to_value(ChatRequest::new("m", &request)).unwrap();
    body["messages"].as_array().unwrap().clone()
}

/// Foreign (LM Studio, Mistral's API, vLLM with a Mistral tokenizer,
/// Anthropic's and Gemini's compatible endpoints): an empty message is a
/// 400. A builder's default system prompt is empty, so every call to
/// those servers failed; an empty answer or a tool that returned nothing
/// went into the history and failed every later call. The empty system
/// prompt is left out; an empty tool output and an empty answer say so
/// (left out, two user messages would follow each other); an assistant
/// message that calls tools still sends `""`.
#[test]
fn no_message_goes_out_empty_but_one_that_calls_tools() {
    let call = ToolCall {
        id: ToolUseId::new("c1"),
        name: "f".into(),
        arguments: "{}".into(),
        extra_content: None,
    };
    let messages = sent(vec![
        ChatMessage::system(""),
        ChatMessage::user("a"),
        ChatMessage::assistant(" ", Vec::new()),
        ChatMessage::user("b"),
        ChatMessage::assistant("", vec![call]),
        ChatMessage::tool(ToolUseId::new("c1"), ""),
    ]);
    let shown: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("user", "a"),
        ("assistant", NO_ANSWER),
        ("user", "b"),
        ("assistant", ""),
        ("tool", NO_OUTPUT),
    ]
    .iter()
    .map(|(r, c)| ((*r).to_owned(), (*c).to_owned()))
    .collect();
    assert_eq!(shown, expected);
    assert!(messages[3].get("tool_calls").is_some());
    // A system prompt with words goes out as it is.
    let with_prompt = sent(vec![ChatMessage::system("sys"), ChatMessage::user("a")]);
    assert_eq!(with_prompt[0]["content"], "sys");
}
