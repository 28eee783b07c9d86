//! Reading back what was written elsewhere: files of an earlier version
//! (fields added since left out), and many nested events on one thread.

use super::*;

/// `value`'s JSON with `field` left out, read back, and the same JSON
/// with `field` set to `documented` read back; `field` must be written,
/// and `documented` must differ from what it holds (else leaving it out
/// proves nothing).
fn without_and_with_default<T: Serialize + DeserializeOwned>(
    value: &T,
    field: &str,
    documented: &serde_json::Value,
) -> (Result<T, serde_json::Error>, T) {
    let mut json = serde_json::to_value(value).unwrap();
    let fields = json.as_object_mut().unwrap();
    let written = fields
        .insert(field.to_owned(), documented.clone())
        .unwrap_or_else(|| panic!("`{field}` is written"));
    assert_ne!(&written, documented, "`{field}` holds a value of its own");
    let defaulted: T = serde_json::from_value(json.clone()).unwrap();
    json.as_object_mut().unwrap().remove(field);
    (serde_json::from_value(json), defaulted)
}

/// Reads `value`'s JSON once per `(field, documented value)` with that
/// field left out, as a file an earlier version wrote (before the field
/// was kept): it must read, and as the documented value. Collects the
/// fields that did not.
fn read_without<T: Serialize + DeserializeOwned + PartialEq + Debug>(
    what: &str,
    value: &T,
    fields: &[(&str, serde_json::Value)],
    wrong: &mut Vec<String>,
) {
    for (field, documented) in fields {
        match without_and_with_default(value, field, documented) {
            (Ok(read), defaulted) if read == defaulted => {}
            (Ok(read), _) => wrong.push(format!("{what}.{field}: read as {read:?}")),
            (Err(e), _) => wrong.push(format!("{what}.{field}: {e}")),
        }
    }
}

/// Files from an earlier version (a store's envelopes and runs, a saved
/// transcript, a conversation) lack the fields added since. Each such
/// field is `#[serde(default)]` and documented as reading as its default
/// (`false` "when read from a file written before it was kept", `None`,
/// 0, empty); only `Envelope::depth` was tested, so deleting any other
/// attribute — `Envelope::cancelled`, `ChildRequest::no_delegation`,
/// `Transcript::open_turns` — made every store from an earlier release
/// unreadable ("missing field") and no test failed. Every such field of
/// `Envelope`, `ChildRequest`, `ToolCall`, `ModelRequest`,
/// `AgentResult`, `SubAgentInfo` and `Transcript`, left out, reads as
/// documented.
#[test]
fn fields_added_since_an_earlier_version_read_as_documented_when_absent() {
    use serde_json::{Value, json};
    let zero_usage = json!({ "prompt_tokens": 0, "completion_tokens": 0 });
    let mut wrong = Vec::new();

    let mut env = envelope();
    env.model_calls = 2;
    env.children_usage = usage();
    env.wake_owed = true;
    env.depth = 3;
    env.resumed_from = Some(AgentId::new("agent_0"));
    env.continued_as = Some(AgentId::new("agent_2"));
    env.thread = Some(ThreadId::new("t1"));
    env.cancelled = true;
    read_without(
        "Envelope",
        &env,
        &[
            ("model_calls", json!(0)),
            ("children_usage", zero_usage.clone()),
            ("wake_owed", json!(false)),
            ("depth", json!(1)),
            ("resumed_from", Value::Null),
            ("continued_as", Value::Null),
            ("thread", Value::Null),
            ("cancelled", json!(false)),
        ],
        &mut wrong,
    );

    let mut request = ChildRequest::new(
        AgentId::new("agent_0"),
        1,
        ToolUseId::new("call_1"),
        "You fetch.",
        "fetch it",
    );
    request.no_delegation = true;
    request.wall_clock_cap = Some(Duration::from_secs(30));
    request.token_cap = Some(1_000);
    request.options = Some(RequestOptions {
        seed: Some(7),
        ..Default::default()
    });
    request.resumed_from = Some(AgentId::new("agent_1"));
    request.conversation = vec![ChatMessage::user("earlier")];
    read_without(
        "ChildRequest",
        &request,
        &[
            ("no_delegation", json!(false)),
            ("wall_clock_cap", Value::Null),
            ("token_cap", Value::Null),
            ("options", Value::Null),
            ("resumed_from", Value::Null),
            ("conversation", json!([])),
        ],
        &mut wrong,
    );

    read_without(
        "ToolCall",
        &call(),
        &[("extra_content", Value::Null)],
        &mut wrong,
    );

    let model_request = ModelRequest {
        messages: vec![ChatMessage::user("hi")],
        tools: vec![],
        options: RequestOptions {
            max_tokens: Some(64),
            ..Default::default()
        },
    };
    let no_options = serde_json::to_value(RequestOptions::default()).unwrap();
    read_without(
        "ModelRequest",
        &model_request,
        &[("options", no_options)],
        &mut wrong,
    );

    let mut agent_result = result();
    agent_result.children_usage = usage();
    read_without(
        "AgentResult",
        &agent_result,
        &[("children_usage", zero_usage)],
        &mut wrong,
    );

    let info = SubAgentInfo {
        id: AgentId::new("agent_2"),
        parent_tool_use_id: ToolUseId::new("call_1"),
        name: "Fetcher".into(),
        tools: vec![],
        background: false,
        resumed_from: Some(AgentId::new("agent_1")),
    };
    read_without(
        "SubAgentInfo",
        &info,
        &[("resumed_from", Value::Null)],
        &mut wrong,
    );

    // Two turns open, the second message queued behind the first.
    let transcript = Transcript::from_events(&[
        AgentEvent::UserMessage("one".into()),
        AgentEvent::UserMessage("two".into()),
    ]);
    read_without(
        "Transcript",
        &transcript,
        &[("queued_user", json!([])), ("open_turns", json!(0))],
        &mut wrong,
    );

    assert!(
        wrong.is_empty(),
        "a file written before these fields were kept did not read as documented:\n{}",
        wrong.join("\n")
    );
}

/// A `Child` event nested `levels` deep around a text.
fn nested_child(levels: usize) -> AgentEvent {
    (0..levels).fold(AgentEvent::Text("deep".into()), |event, n| {
        AgentEvent::Child(AgentId::new(format!("agent_{n}")), Box::new(event))
    })
}

/// The nesting limit counts the `Child` levels being read on a thread
/// now, and each level is released however its read ends. Released only
/// on success (or never), the count grew with every decode on the
/// thread: a host re-folding a saved event log had every nested event
/// refused ("nested deeper than 128 levels") after the first 128, or
/// after one too-deep event. The limit's own test decoded each message
/// on a fresh thread, so a leak never showed. Here on one thread: many
/// one-level events, in JSON and on the wire; then, after a decode that
/// failed for its depth, one exactly at the limit still decodes.
#[test]
fn the_nesting_count_is_released_after_every_decode_on_a_thread() {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let one = nested_child(1);
            let json = serde_json::to_string(&one).unwrap();
            let bytes = one.to_wire().unwrap();
            for n in 0..300 {
                let read: Result<AgentEvent, _> = serde_json::from_str(&json);
                assert_eq!(read.as_ref().ok(), Some(&one), "JSON decode {n}: {read:?}");
                let read = AgentEvent::from_wire(&bytes);
                assert_eq!(read.as_ref().ok(), Some(&one), "wire decode {n}: {read:?}");
            }
            let at_limit = nested_child(128).to_wire().unwrap();
            let too_deep = nested_child(129).to_wire().unwrap();
            for n in 0..3 {
                let err = AgentEvent::from_wire(&too_deep).unwrap_err();
                assert!(err.to_string().contains("nested deeper than 128"), "{err}");
                let read = AgentEvent::from_wire(&at_limit);
                assert!(
                    read.is_ok(),
                    "at the limit, after {} too-deep decodes: {read:?}",
                    n + 1
                );
            }
            assert_eq!(AgentEvent::from_wire(&bytes).unwrap(), one);
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A field renamed since an earlier version (`AgentResult::turns`, now
/// `model_calls`): an event log that version wrote failed to read whole
/// ("missing field `model_calls`"). Its old name is read as the new.
#[test]
fn a_result_written_with_the_earlier_name_of_its_model_calls_reads() {
    let result = AgentEvent::Result(Box::new(AgentResult {
        text: "done".into(),
        outcome: Outcome::Completed,
        model_calls: 2,
        tool_calls: 1,
        usage: Usage::default(),
        children_usage: Usage::default(),
        elapsed: std::time::Duration::from_secs(3),
    }));
    let line = serde_json::to_string(&result).unwrap();
    assert!(line.contains(r#""model_calls":2"#), "{line}");
    let earlier = line.replace(r#""model_calls":2"#, r#""turns":2"#);
    let read: AgentEvent = serde_json::from_str(&earlier).unwrap();
    assert_eq!(read, result);
}
