//! The wire format's tests: what goes out, what is read back.

use super::*;
use subagents_messages::ToolUseId;

#[test]
fn a_request_has_the_chat_completions_shape() {
    let request = ModelRequest {
        messages: vec![
            ChatMessage::system("sys"),
            ChatMessage::user("hi"),
            ChatMessage::assistant(
                "",
                vec![ToolCall {
                    id: ToolUseId::new("call_1"),
                    name: "calc".into(),
                    arguments: r#"{"x":1}"#.into(),
                    extra_content: None,
                }],
            ),
            ChatMessage::tool(ToolUseId::new("call_1"), "2"),
        ],
        tools: vec![
            ToolSpec {
                name: "calc".into(),
                description: "adds".into(),
                parameters: r#"{"type":"object","properties":{"x":{"type":"number"}}}"#.into(),
            },
            ToolSpec {
                name: "broken".into(),
                description: "bad schema".into(),
                parameters: "not json".into(),
            },
        ],
        ..Default::default()
    };
    let body = serde_json::to_value(ChatRequest::new("m", &request)).ok();
    let expected = serde_json::json!({
        "model": "m",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "calc", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "content": "2", "tool_call_id": "call_1"}
        ],
        "tools": [
            {"type": "function", "function": {"name": "calc", "description": "adds",
              "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}},
            {"type": "function", "function": {"name": "broken", "description": "bad schema",
              "parameters": {"type": "object"}}}
        ]
    });
    assert_eq!(body, Some(expected));
}

/// Foreign (a real server): a `tool_choice` set for every call (a
/// host's `child_request_options`) went out on a request with no tools
/// — a child at the depth limit given none, a profile denying all —
/// and vLLM and OpenAI answer 400 to that ("When using `tool_choice`,
/// `tools` must be set"): every such call failed. With no tools there
/// is no choice to make; it is left out.
#[test]
fn a_tool_choice_is_not_sent_without_tools() {
    let mut request = ModelRequest {
        messages: vec![ChatMessage::user("hi")],
        ..Default::default()
    };
    for choice in [ToolChoice::Auto, ToolChoice::Required, ToolChoice::None] {
        request.options.tool_choice = Some(choice);
        let body = serde_json::to_value(ChatRequest::new("m", &request)).unwrap();
        assert!(body.get("tools").is_none());
        assert!(body.get("tool_choice").is_none(), "{body}");
    }
}

#[test]
fn request_options_are_sent_and_unset_ones_are_not() {
    let mut request = ModelRequest {
        messages: vec![ChatMessage::user("hi")],
        ..Default::default()
    };
    let body = serde_json::to_value(ChatRequest::new("m", &request)).unwrap();
    for absent in [
        "tool_choice",
        "max_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
    ] {
        assert!(body.get(absent).is_none(), "{absent} sent unset");
    }
    request.tools = vec![ToolSpec {
        name: "get_weather".into(),
        description: "The weather.".into(),
        parameters: r#"{"type":"object"}"#.into(),
    }];
    request.options = subagents_messages::RequestOptions {
        tool_choice: Some(ToolChoice::Function("get_weather".into())),
        max_tokens: Some(64),
        temperature: Some(0.2),
        top_p: Some(0.9),
        stop: vec!["\n\n".into()],
        seed: Some(7),
    };
    let body = serde_json::to_value(ChatRequest::new("m", &request)).unwrap();
    assert_eq!(
        body["tool_choice"],
        serde_json::json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["top_p"], 0.9);
    assert_eq!(body["stop"], serde_json::json!(["\n\n"]));
    assert_eq!(body["seed"], 7);
    for (choice, wire) in [
        (ToolChoice::Auto, "auto"),
        (ToolChoice::None, "none"),
        (ToolChoice::Required, "required"),
    ] {
        request.options.tool_choice = Some(choice);
        let body = serde_json::to_value(ChatRequest::new("m", &request)).unwrap();
        assert_eq!(body["tool_choice"], wire);
    }
}

#[test]
fn no_tools_means_no_tools_field() {
    let request = ModelRequest {
        messages: vec![ChatMessage::user("hi")],
        tools: vec![],
        ..Default::default()
    };
    let body = serde_json::to_value(ChatRequest::new("m", &request)).ok();
    assert!(body.is_some_and(|b| b.get("tools").is_none()));
}

#[test]
fn a_schema_that_is_not_an_object_is_replaced() {
    assert_eq!(
        parameters_schema("[1]"),
        serde_json::json!({"type": "object"})
    );
    assert_eq!(parameters_schema(""), serde_json::json!({"type": "object"}));
}

/// Foreign input: a past call whose arguments were not a JSON object
/// (cut by the output limit, or just wrong; it never ran) was sent
/// back as written, and llama-server (500) and vLLM (400) refuse a
/// history they cannot parse: every later request of the conversation
/// failed. It goes back as `{}`; a JSON object goes back as written.
#[test]
fn past_arguments_that_are_no_json_object_are_sent_back_as_an_empty_one() {
    let call = |id: &str, arguments: &str| ToolCall {
        id: ToolUseId::new(id),
        name: "calc".into(),
        arguments: arguments.into(),
        extra_content: None,
    };
    let request = ModelRequest {
        messages: vec![
            ChatMessage::user("hi"),
            ChatMessage::assistant(
                "",
                vec![
                    call("a", r#"{"expression":"6*"#),
                    call("b", "[1]"),
                    call("c", ""),
                    call("d", r#" {"x": 1} "#),
                    // Skimmed as JSON, no JSON to a parse (review 27).
                    call("e", r#"{"text":"hi \ud83d"}"#),
                    call("f", r#"{"a":1e400}"#),
                ],
            ),
        ],
        ..Default::default()
    };
    let body = serde_json::to_value(ChatRequest::new("m", &request)).unwrap();
    let sent: Vec<&str> = body["messages"][1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(sent, ["{}", "{}", "{}", r#" {"x": 1} "#, "{}", "{}"]);
}

/// Foreign input: a usage count that is no token count (a negative,
/// a fraction, past `u64`) made the whole chunk malformed — and with
/// it an answer that was complete. The usage is unreadable instead.
#[test]
fn a_usage_count_that_is_no_count_is_unreadable_not_malformed() {
    let read = |json: &str| serde_json::from_str::<UsageWire>(json).unwrap().read();
    assert_eq!(
        read(r#"{"prompt_tokens":3,"completion_tokens":null}"#),
        Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 0
        })
    );
    for bad in [
        r#"{"prompt_tokens":-1,"completion_tokens":3}"#,
        r#"{"prompt_tokens":1.5}"#,
        r#"{"completion_tokens":1e20}"#,
        r#"{"prompt_tokens":"7"}"#,
    ] {
        assert_eq!(read(bad), None, "{bad}");
    }
}

mod empty;

/// Foreign server (review: model servers' streams): a gateway translating
/// Gemini reports its thinking in `total_tokens` only (`completion_tokens`
/// 151 of a total 553 over 20 of prompt; `0` of 81): the budget saw a
/// fraction of the output, or none. What the total holds past the prompt
/// counts as output; a total within the two, or unreadable, changes
/// nothing.
#[test]
fn a_total_past_the_two_counts_counts_as_output() {
    let read = |json: &str| serde_json::from_str::<UsageWire>(json).unwrap().read();
    let usage = |prompt_tokens, completion_tokens| {
        Some(Usage {
            prompt_tokens,
            completion_tokens,
        })
    };
    let thinking = r#"{"prompt_tokens":20,"completion_tokens":151,"total_tokens":553}"#;
    assert_eq!(read(thinking), usage(20, 533));
    let none_said = r#"{"prompt_tokens":20,"completion_tokens":0,"total_tokens":81}"#;
    assert_eq!(read(none_said), usage(20, 61));
    let within = r#"{"prompt_tokens":20,"completion_tokens":10,"total_tokens":30}"#;
    assert_eq!(read(within), usage(20, 10));
    let below = r#"{"prompt_tokens":20,"completion_tokens":10,"total_tokens":5}"#;
    assert_eq!(read(below), usage(20, 10));
    let unreadable = r#"{"prompt_tokens":20,"completion_tokens":10,"total_tokens":-1}"#;
    assert_eq!(read(unreadable), usage(20, 10));
}

/// Refused by a real server (review: what the adapter sends): a past
/// call's name a model made up (gpt-4o's `multi_tool_use.parallel`, a
/// space, a name past 64 characters, none) was sent back as written, and
/// OpenAI (and Mistral) refuse every request whose history holds one
/// (400 "does not match pattern"): the turn and every later one failed.
/// A call to no tool on offer goes under a name they take; a tool on
/// offer, and a name they take, go as they are.
#[test]
fn a_made_up_tool_name_is_sent_back_as_one_servers_take() {
    let call = |id: &str, name: &str| ToolCall {
        id: ToolUseId::new(id),
        name: name.into(),
        arguments: "{}".into(),
        extra_content: None,
    };
    let long = "x".repeat(100);
    let request = ModelRequest {
        messages: vec![
            ChatMessage::user("hi"),
            ChatMessage::assistant(
                "",
                vec![
                    call("a", "multi_tool_use.parallel"),
                    call("b", "calc"),
                    call("c", "read file"),
                    call("d", &long),
                    call("e", ""),
                    call("f", "fs.read"),
                    call("g", "lëse"),
                ],
            ),
        ],
        tools: vec![ToolSpec {
            name: "fs.read".into(),
            description: "reads".into(),
            parameters: "{}".into(),
        }],
        ..Default::default()
    };
    let body = serde_json::to_value(ChatRequest::new("m", &request)).unwrap();
    let sent: Vec<&str> = body["messages"][1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        sent,
        [
            "multi_tool_use_parallel",
            "calc",
            "read_file",
            &"x".repeat(64),
            "unknown_tool",
            "fs.read",
            "l_se",
        ]
    );
}
