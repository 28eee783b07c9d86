//! A stored conversation made fit to resume: every call an answer asked
//! for is answered right after that answer, as a model server requires.
//! The library's own runs are cut at most in their last answer's calls;
//! a run file edited by hand or written by another tool can be broken
//! anywhere, and a server refused every later resume of its chain.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use subagents_messages::{ChatMessage, Role, ToolUseId};

/// What a call that never got its answer reads. An answer's step is
/// written as it is given, before its calls run: a kill then left a call
/// that may have run (a POST made, a grandchild started) as one that
/// reads no answer — told "not run", a resumed run did it again.
const INTERRUPTED_CALL: &str = "interrupted: the sub-agent's process stopped while this call ran or before it started, so it may have taken effect (a sub-agent it started goes on as an interrupted one); check before you repeat it";

/// A finished run's answer (`answer`: its envelope's `result`) where its
/// turn keeps it: last, but for the messages after it (read before its
/// last call, or taken and never read). Its end writes the envelope,
/// then the run; a kill between the two left a run that stopped at its
/// last step — a final answer with no calls writes none of its own — and
/// a message resumed it without its own answer (it did its task again).
/// A conversation that ends in it already is left as it is.
pub(crate) fn keep_final_answer(conversation: &mut Vec<ChatMessage>, answer: &str) {
    let last = conversation.iter().rev().find(|m| m.role != Role::User);
    let kept = last.is_some_and(|m| {
        m.role == Role::Assistant && m.tool_calls.is_empty() && m.content == answer
    });
    if !kept && !conversation.is_empty() {
        conversation.push(ChatMessage::assistant(answer, Vec::new()));
    }
}

/// Every assistant message's calls get their answers right after it: the
/// tool messages that follow it answering its calls stay where they are,
/// in their order; an answer further on (before the next assistant
/// message, after a message taken between two calls) moves up to it; a
/// call with none gets one saying it was interrupted, perhaps after it
/// took effect. A tool message that
/// answers no open call — an orphan, or one answer too many — is dropped.
/// Every other message keeps its place. A conversation already whole
/// comes out unchanged, and a second repair changes nothing.
///
/// An answer naming one call id twice (another tool's file) has its
/// calls' ids made unique as a fresh answer's are (`<id>#2`), its answers
/// given to them in order: both answered under one id, servers refused
/// every later request. Linear in the messages: run in the hub's handler
/// at each resume, a lookup per answer made an answer of 50,000 calls
/// take a billion steps.
pub(crate) fn answer_open_calls(conversation: &mut Vec<ChatMessage>) {
    let mut rest: Vec<Option<ChatMessage>> =
        std::mem::take(conversation).into_iter().map(Some).collect();
    let mut at = 0;
    while at < rest.len() {
        let Some(mut message) = rest[at].take() else {
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
        // Each stored id's calls, in their order (their ids made unique).
        let mut open: FxHashMap<String, VecDeque<usize>> = FxHashMap::default();
        for (i, call) in message.tool_calls.iter().enumerate() {
            open.entry(call.id.as_str().to_owned())
                .or_default()
                .push_back(i);
        }
        crate::agent::unique_ids(&mut message.tool_calls);
        let ids: Vec<ToolUseId> = message.tool_calls.iter().map(|c| c.id.clone()).collect();
        let mut answered = vec![false; ids.len()];
        // The answer `answer` gives its next open call, renamed to it.
        let mut take = |answer: &ChatMessage| {
            let id = answer.tool_call_id.as_ref().map_or("", |i| i.as_str());
            let i = open.get_mut(id).and_then(VecDeque::pop_front)?;
            answered[i] = true;
            Some(i)
        };
        conversation.push(message);
        // The answers right after it, in their order.
        while let Some(slot) = rest.get_mut(at) {
            if slot.as_ref().is_some_and(|m| m.role != Role::Tool) {
                break;
            }
            at += 1;
            let Some(mut answer) = slot.take() else {
                continue;
            };
            if let Some(i) = take(&answer) {
                answer.tool_call_id = Some(ids[i].clone());
                conversation.push(answer);
            }
        }
        // Answers further on, up to the next answer of the model's, each
        // to its call; then every call still open, in the answer's order.
        let mut further: FxHashMap<usize, ChatMessage> = FxHashMap::default();
        for slot in rest[at..].iter_mut() {
            let taken = match slot.as_ref() {
                Some(m) if m.role == Role::Assistant => break,
                Some(m) if m.role == Role::Tool => take(m),
                _ => None,
            };
            if let Some(i) = taken {
                further.extend(slot.take().map(|answer| (i, answer)));
            }
        }
        for (i, id) in ids.iter().enumerate() {
            if !answered[i] {
                conversation.push(ChatMessage::tool(id.clone(), INTERRUPTED_CALL));
            } else if let Some(mut answer) = further.remove(&i) {
                answer.tool_call_id = Some(id.clone());
                conversation.push(answer);
            }
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
                &format!("tool c {INTERRUPTED_CALL}"),
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

    /// A stored answer naming one call id twice (another tool's file, or
    /// a run saved before ids were made unique): both calls' answers went
    /// back under the one id, or the second read "not run" beside the
    /// first's answer — two answers to one id, which servers refuse
    /// (DeepSeek: 400), on every later request of the resumed run. The
    /// ids are made unique as a fresh answer's are, the answers given to
    /// them in order.
    #[test]
    fn an_answer_naming_one_call_id_twice_answers_each_call_once() {
        let mut conversation = vec![
            ChatMessage::user("task"),
            ChatMessage::assistant("", vec![call("x"), call("x"), call("x")]),
            ChatMessage::tool("x".into(), "first"),
            ChatMessage::user("a message between"),
            ChatMessage::tool("x".into(), "second"),
        ];
        answer_open_calls(&mut conversation);
        let ids: Vec<&str> = conversation[1]
            .tool_calls
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(ids, ["x", "x#2", "x#3"]);
        assert_eq!(
            shape(&conversation),
            [
                "user task",
                "assistant 3",
                "tool x first",
                "tool x#2 second",
                &format!("tool x#3 {INTERRUPTED_CALL}"),
                "user a message between",
            ]
        );
        let once = conversation.clone();
        answer_open_calls(&mut conversation);
        assert_eq!(conversation, once, "a second repair changes nothing");
    }

    /// 20,000 calls in one answer, answered in the reverse order, some
    /// further on: each keeps its own answer. (A lookup per answer in a
    /// list of the open calls made this a billion steps in the hub's
    /// handler at a resume: 3.3 s in a debug build before, 0.15 s now.)
    #[test]
    fn many_calls_answered_out_of_order_each_keep_their_answer() {
        const N: usize = 20_000;
        let calls: Vec<ToolCall> = (0..N).map(|i| call(&format!("c{i}"))).collect();
        let mut conversation = vec![ChatMessage::assistant("", calls)];
        for i in (N / 2..N).rev() {
            conversation.push(ChatMessage::tool(format!("c{i}").into(), format!("r{i}")));
        }
        conversation.push(ChatMessage::user("between"));
        for i in (0..N / 2).rev() {
            conversation.push(ChatMessage::tool(format!("c{i}").into(), format!("r{i}")));
        }
        answer_open_calls(&mut conversation);
        assert_eq!(conversation.len(), N + 2);
        for m in &conversation[1..=N] {
            let id = m.tool_call_id.as_ref().unwrap().as_str();
            assert_eq!(m.content, format!("r{}", &id[1..]));
        }
        assert_eq!(conversation[N + 1].content, "between");
    }

    /// A finished run's answer is put back once, where its turn keeps it
    /// (after what it did and the messages it read; before one kept
    /// unread, where it is already), and never into an empty run.
    #[test]
    fn a_final_answer_lost_with_its_run_write_is_put_back_once() {
        let mut cut = vec![
            ChatMessage::user("task"),
            ChatMessage::assistant("", vec![call("a")]),
            ChatMessage::tool(ToolUseId::new("a"), "slept"),
            ChatMessage::user("also this"),
        ];
        keep_final_answer(&mut cut, "done");
        assert_eq!(cut.len(), 5);
        assert_eq!(
            (cut[4].role, cut[4].content.as_str()),
            (Role::Assistant, "done")
        );
        let again = cut.clone();
        keep_final_answer(&mut cut, "done");
        assert_eq!(cut, again, "a second repair changes nothing");
        let mut whole = vec![
            ChatMessage::user("task"),
            ChatMessage::assistant("done", Vec::new()),
            ChatMessage::user("kept unread"),
        ];
        let before = whole.clone();
        keep_final_answer(&mut whole, "done");
        assert_eq!(whole, before);
        let mut empty = Vec::new();
        keep_final_answer(&mut empty, "done");
        assert!(empty.is_empty());
    }
}
