//! Every wire type round-trips through bincode, and what goes to disk
//! through JSON too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use subagents_messages::codec::{CodecError, Wire};
use subagents_messages::*;

#[path = "roundtrip/reading_back.rs"]
mod reading_back;

fn bincode_roundtrip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: T) {
    let bytes = value.to_wire().unwrap();
    let back = T::from_wire(&bytes).unwrap();
    assert_eq!(back, value);
}

fn json_roundtrip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: T) {
    let text = serde_json::to_string(&value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(back, value);
}

fn both<T: Serialize + DeserializeOwned + PartialEq + Debug + Clone>(value: T) {
    bincode_roundtrip(value.clone());
    json_roundtrip(value);
}

fn call() -> ToolCall {
    ToolCall {
        id: ToolUseId::new("call_1"),
        name: "calculator".into(),
        arguments: r#"{"expression":"2+2","nested":{"a":[1,2]}}"#.into(),
        extra_content: Some(r#"{"google":{"thought_signature":"CiQB"}}"#.into()),
    }
}

fn usage() -> Usage {
    Usage {
        prompt_tokens: 12,
        completion_tokens: 34,
    }
}

fn result() -> AgentResult {
    AgentResult {
        text: "It is 4. ✓".into(),
        outcome: Outcome::LimitReached(LimitKind::WallClock),
        model_calls: 3,
        tool_calls: 2,
        usage: usage(),
        children_usage: Default::default(),
        elapsed: Duration::from_millis(1500),
    }
}

fn envelope() -> Envelope {
    Envelope {
        id: AgentId::new("agent_1"),
        name: "Fetcher".into(),
        parent_tool_use_id: ToolUseId::new("call_1_1"),
        task: "fetch https://example.com".into(),
        tools: vec!["fetch_title".into()],
        status: SubAgentStatus::Done,
        background: true,
        requested_at_ms: 1_700_000_000_000,
        started_at_ms: Some(1_700_000_000_500),
        finished_at_ms: None,
        elapsed: Duration::from_secs(12),
        tool_calls: 1,
        last_tool: Some("fetch_title".into()),
        usage: usage(),
        model_calls: 2,
        children_usage: Default::default(),
        result: Some("Example Domain".into()),
        error: None,
        claimed: false,
        wake_owed: false,
        depth: 1,
        resumed_from: None,
        continued_as: None,
        thread: None,
        cancelled: false,
        forgotten: false,
        stopping: false,
    }
}

#[test]
fn ids_roundtrip() {
    both(ThreadId::new("t1"));
    both(AgentId::new("agent_1"));
    both(ToolUseId::new("call_1"));
    both(ApprovalId::new("agent_1-approval-1"));
}

#[test]
fn model_types_roundtrip() {
    both(call());
    both(usage());
    both(ToolSpec {
        name: "calculator".into(),
        description: "math".into(),
        parameters: r#"{"type":"object"}"#.into(),
    });
    for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
        both(role);
    }
    let request = ModelRequest {
        messages: vec![
            ChatMessage::system("sys"),
            ChatMessage::user("hi"),
            ChatMessage::assistant("", vec![call()]),
            ChatMessage::tool(ToolUseId::new("call_1"), "4"),
        ],
        tools: vec![],
        ..Default::default()
    };
    both(request);
    for chunk in [
        ModelChunk::Text("a".into()),
        ModelChunk::ToolCall(Box::new(call())),
        ModelChunk::Usage(usage()),
    ] {
        both(chunk);
    }
}

/// `max_turns` and `turns` were the names of the model-call limit before:
/// JSON written then still reads.
#[test]
fn the_model_call_limit_reads_under_its_old_names() {
    let limits: Limits = serde_json::from_str(
        r#"{"max_turns":7,"token_budget":10,"wall_clock":{"secs":1,"nanos":0}}"#,
    )
    .unwrap();
    assert_eq!(limits.max_model_calls, 7);
    let kind: LimitKind = serde_json::from_str(r#""turns""#).unwrap();
    assert_eq!(kind, LimitKind::ModelCalls);
    assert_eq!(serde_json::to_string(&kind).unwrap(), r#""model_calls""#);
}

#[test]
fn limits_and_outcomes_roundtrip() {
    both(Limits::default());
    for kind in [
        LimitKind::ModelCalls,
        LimitKind::Tokens,
        LimitKind::WallClock,
    ] {
        both(kind);
    }
    for outcome in [
        Outcome::Completed,
        Outcome::LimitReached(LimitKind::Tokens),
        Outcome::Failed("the model failed".into()),
        Outcome::Stopped,
    ] {
        both(outcome);
    }
    both(result());
    both(AgentSnapshot::default());
}

#[test]
fn every_event_variant_roundtrips() {
    let info = SubAgentInfo {
        id: AgentId::new("agent_1"),
        parent_tool_use_id: ToolUseId::new("call_1"),
        name: "Fetcher".into(),
        tools: vec!["fetch_title".into()],
        background: false,
        resumed_from: None,
    };
    let events = vec![
        AgentEvent::Text("hello".into()),
        AgentEvent::ToolStarted(ToolStarted {
            tool_use_id: ToolUseId::new("c"),
            name: "n".into(),
            arguments: "{}".into(),
        }),
        AgentEvent::ToolResult(ToolResult {
            tool_use_id: ToolUseId::new("c"),
            name: "n".into(),
            output: "o".into(),
            is_error: true,
        }),
        AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
            id: ApprovalId::new("a"),
            tool_use_id: ToolUseId::new("c"),
            tool_name: "n".into(),
            arguments: "{}".into(),
        })),
        AgentEvent::Result(Box::new(result())),
        AgentEvent::ChildStarted(Box::new(info)),
        AgentEvent::Child(
            AgentId::new("agent_1"),
            Box::new(AgentEvent::Child(
                AgentId::new("agent_2"),
                Box::new(AgentEvent::Text("deep".into())),
            )),
        ),
    ];
    for event in events {
        both(event);
    }
    for status in [
        SubAgentStatus::Queued,
        SubAgentStatus::Running,
        SubAgentStatus::Background,
        SubAgentStatus::Done,
        SubAgentStatus::Failed,
        SubAgentStatus::Stopped,
    ] {
        both(AgentEvent::ChildStatus(AgentId::new("agent_1"), status));
    }
    for decision in [ApprovalDecision::Approve, ApprovalDecision::Deny] {
        both(decision);
    }
}

#[test]
fn envelope_roundtrips_and_its_json_is_stable() {
    both(envelope());
    let json = serde_json::to_value(envelope()).unwrap();
    assert_eq!(json["status"], "done");
    assert_eq!(json["id"], "agent_1");
    assert_eq!(json["finished_at_ms"], serde_json::Value::Null);
}

#[test]
fn truncated_and_trailing_bytes_are_decode_errors() {
    let bytes = envelope().to_wire().unwrap();
    let err = Envelope::from_wire(&bytes[..bytes.len() / 2]).unwrap_err();
    assert!(matches!(err, CodecError::Decode(_)));
    let mut longer = bytes.clone();
    longer.push(0);
    let err = Envelope::from_wire(&longer).unwrap_err();
    assert!(err.to_string().contains("1 trailing bytes"), "{err}");
}

/// An envelope written before depth was kept reads as depth 1.
#[test]
fn an_envelope_without_depth_is_a_first_level_child() {
    let mut value = serde_json::to_value(envelope()).unwrap();
    value.as_object_mut().unwrap().remove("depth");
    let read: Envelope = serde_json::from_value(value).unwrap();
    assert_eq!(read.depth, 1);
}

/// Boxing an event's payload and writing a payload struct as a struct
/// variant changed the Rust type, not the shape on the wire or on disk:
/// the JSON is the variant's name over the payload's fields, and the
/// bincode bytes are those of the payload after the variant's index.
#[test]
fn boxed_and_struct_variants_keep_their_shape() {
    let r = result();
    let json = serde_json::to_value(AgentEvent::Result(Box::new(r.clone()))).unwrap();
    assert_eq!(
        json,
        serde_json::json!({ "Result": serde_json::to_value(&r).unwrap() })
    );
    let wake = AgentEvent::Wake {
        child: AgentId::new("agent_3"),
        line: "[use_agent agent_3 finished] ok".into(),
    };
    assert_eq!(
        serde_json::to_value(&wake).unwrap(),
        serde_json::json!({ "Wake": { "child": "agent_3", "line": "[use_agent agent_3 finished] ok" } })
    );
    let resolved = AgentEvent::ApprovalResolved {
        id: ApprovalId::new("agent_1-approval-1"),
        tool_use_id: ToolUseId::new("call_1"),
        outcome: ApprovalOutcome::Denied,
    };
    assert_eq!(
        serde_json::to_value(&resolved).unwrap(),
        serde_json::json!({ "ApprovalResolved": {
            "id": "agent_1-approval-1", "tool_use_id": "call_1", "outcome": "denied"
        } })
    );
    // bincode: the boxed payload's bytes follow the variant index as the
    // payload's own bytes would.
    let boxed = AgentEvent::Result(Box::new(r.clone())).to_wire().unwrap();
    let payload = r.to_wire().unwrap();
    assert!(boxed.ends_with(&payload) && boxed.len() > payload.len());
}
