//! A stored conversation made fit to resume: every call an answer asked
//! for is answered right after that answer, as a model server requires.
//! The library's own runs are cut at most in their last answer's calls;
//! a run file edited by hand or written by another tool can be broken
//! anywhere, and a server refused every later resume of its chain.

use subagents_messages::{ChatMessage, Role};

/// What a call that never got its answer reads.
const NOT_RUN: &str = "not run: the sub-agent was interrupted before this call finished";

/// Every assistant message's calls get their answers right after it: the
/// tool messages that follow it answering its calls stay where they are,
/// in their order; an answer further on (before the next assistant
/// message, after a message taken between two calls) moves up to it; a
/// call with none gets one saying it was not run. A tool message that
/// answers no open call — an orphan, or a second answer to one call — is
/// dropped. Every other message keeps its place. A conversation already
/// whole comes out unchanged, and a second repair changes nothing.
pub(crate) fn answer_open_calls(conversation: &mut Vec<ChatMessage>) {
    let mut rest: Vec<Option<ChatMessage>> =
        std::mem::take(conversation).into_iter().map(Some).collect();
    let is_answer = |m: &ChatMessage, id: &str| {
        m.role == Role::Tool && m.tool_call_id.as_ref().map(|i| i.as_str()) == Some(id)
    };
    let mut at = 0;
    while at < rest.len() {
        let Some(message) = rest[at].take() else {
            at += 1;
            continue;
        };
        at += 1;
        match message.role {
            // Every answer to a call was taken up after its call.
            Role::Tool => continue,
            Role::System | Role::User => {
                conversation.push(message);
                continue;
            }
            Role::Assistant => {}
        }
        let mut open: Vec<String> = message
            .tool_calls
            .iter()
            .map(|c| c.id.as_str().to_owned())
            .collect();
        conversation.push(message);
        // The answers right after it, in their order.
        while let Some(slot) = rest.get_mut(at) {
            if slot.as_ref().is_some_and(|m| m.role != Role::Tool) {
                break;
            }
            at += 1;
            let Some(answer) = slot.take() else {
                continue;
            };
            let id = answer.tool_call_id.as_ref().map_or("", |i| i.as_str());
            if let Some(i) = open.iter().position(|c| c == id) {
                open.remove(i);
                conversation.push(answer);
            }
        }
        // Answers further on, up to the next answer of the model's.
        let end = rest[at..]
            .iter()
            .position(|m| m.as_ref().is_some_and(|m| m.role == Role::Assistant))
            .map_or(rest.len(), |p| at + p);
        for id in open {
            let further = (at..end).find_map(|j| rest[j].take_if(|m| is_answer(m, &id)));
            conversation.push(further.unwrap_or_else(|| ChatMessage::tool(id.into(), NOT_RUN)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use subagents_messages::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "sleep".into(),
            arguments: "{}".into(),
            extra_content: None,
        }
    }

    /// Role and the call each tool message answers (or its text).
    fn shape(conversation: &[ChatMessage]) -> Vec<String> {
        conversation
            .iter()
            .map(|m| match m.role {
                Role::Tool => format!(
                    "tool {} {}",
                    m.tool_call_id.as_ref().map_or("-", |i| i.as_str()),
                    m.content
                ),
                Role::Assistant => format!("assistant {}", m.tool_calls.len()),
                Role::User => format!("user {}", m.content),
                Role::System => format!("system {}", m.content),
            })
            .collect()
    }

    #[test]
    fn calls_left_open_are_answered_once() {
        let mut conversation = vec![
            ChatMessage::user("task"),
            ChatMessage::assistant("", vec![call("a"), call("b")]),
            ChatMessage::tool("a".into(), "slept"),
        ];
        answer_open_calls(&mut conversation);
        assert_eq!(conversation.len(), 4);
        assert_eq!(
            conversation[3].tool_call_id.as_ref().map(|i| i.as_str()),
            Some("b")
        );
        answer_open_calls(&mut conversation);
        assert_eq!(conversation.len(), 4, "answered once");
    }

    /// A run file edited by hand or written by another tool: a call left
    /// open in an earlier answer, an answer after a message taken between
    /// two calls, an orphan and a second answer. The server refused each;
    /// only the last answer's calls were answered.
    #[test]
    fn a_conversation_broken_anywhere_is_made_whole() {
        let mut conversation = vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("task"),
            ChatMessage::tool("ghost".into(), "orphan"),
            ChatMessage::assistant("", vec![call("a"), call("b")]),
            ChatMessage::tool("a".into(), "slept a"),
            ChatMessage::user("a message taken between the calls"),
            ChatMessage::tool("b".into(), "slept b"),
            ChatMessage::tool("a".into(), "a second answer"),
            ChatMessage::assistant("", vec![call("c"), call("d")]),
            ChatMessage::tool("d".into(), "slept d"),
            ChatMessage::assistant("done", vec![]),
        ];
        answer_open_calls(&mut conversation);
        let whole = shape(&conversation);
        assert_eq!(
            whole,
            [
                "system be brief",
                "user task",
                "assistant 2",
                "tool a slept a",
                "tool b slept b",
                "user a message taken between the calls",
                "assistant 2",
                "tool d slept d",
                &format!("tool c {NOT_RUN}"),
                "assistant 0",
            ]
        );
        answer_open_calls(&mut conversation);
        assert_eq!(
            shape(&conversation),
            whole,
            "a second repair changes nothing"
        );
    }

    /// The library's own conversations are whole: nothing moves, even
    /// answers in another order than their calls.
    #[test]
    fn a_whole_conversation_comes_out_unchanged() {
        let whole = vec![
            ChatMessage::user("task"),
            ChatMessage::assistant("", vec![call("a"), call("b")]),
            ChatMessage::tool("b".into(), "slept b"),
            ChatMessage::tool("a".into(), "slept a"),
            ChatMessage::user("more"),
            ChatMessage::assistant("ok", vec![]),
        ];
        let mut conversation = whole.clone();
        answer_open_calls(&mut conversation);
        assert_eq!(conversation, whole);
    }
}
