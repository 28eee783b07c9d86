//! The book's runs: what a finished child goes on from, and its
//! conversation.

use super::*;

/// A run that wrote nothing (queued, or in its first model call, when
/// it ended or its process died) goes on from what its start would
/// have read: a new run from its task, a resumed run from the
/// conversation it went on from, then its message as one from its
/// requester.
#[test]
fn a_run_that_wrote_nothing_goes_on_from_its_start() {
    let seed = |resumed_from: Option<&str>| {
        let mut seed = ChildRequest::new(
            AgentId::new("parent"),
            0,
            subagents_messages::ToolUseId::new("call_1"),
            "Worker",
            "the task",
        );
        seed.resumed_from = resumed_from.map(AgentId::new);
        if resumed_from.is_some() {
            seed.conversation = vec![ChatMessage::user("earlier")];
        }
        seed
    };
    let contents =
        |messages: Vec<ChatMessage>| messages.into_iter().map(|m| m.content).collect::<Vec<_>>();
    assert_eq!(contents(first_messages(&seed(None))), ["the task"]);
    assert_eq!(
        contents(first_messages(&seed(Some("agent_1")))),
        ["earlier", &crate::agent::steering_text("the task")]
    );
    // Saved empty (before a restart): the same, not an empty start.
    let book = Book::default();
    let mut envelope = crate::hub::book::requested(
        AgentId::new("agent_2"),
        "Worker".into(),
        &seed(None),
        Vec::new(),
        0,
    );
    envelope.status = SubAgentStatus::Interrupted;
    book.import(envelope, seed(None), Vec::new());
    let from = book.resume_from(&AgentId::new("agent_2")).unwrap();
    assert_eq!(contents(from.conversation), ["the task"]);
}

/// Stopped midway (a kill in a child's first model call): the
/// messages kept while it queued were dropped as it started, before
/// its turn published a conversation of its own — a run written in
/// between was written empty, over the one that held them. Kept until
/// the turn publishes.
#[test]
fn messages_kept_while_queued_stay_until_its_turn_publishes() {
    let id = AgentId::new("agent_3");
    let seed = ChildRequest::new(
        AgentId::new("parent"),
        0,
        subagents_messages::ToolUseId::new("call_1"),
        "Worker",
        "the task",
    );
    let envelope = crate::hub::book::requested(id.clone(), "Worker".into(), &seed, Vec::new(), 0);
    let book = Book::default();
    book.import(envelope, seed, Vec::new());
    book.keep_unread(&id, &["also this".to_owned()]);
    book.set_probe(&id, crate::agent::Probe::default());
    let said = book.conversation(&id).unwrap_or_default();
    assert!(
        said.iter().any(|m| m.content.contains("also this")),
        "{said:?}"
    );
}
/// Foreign input: a run whose files name it as its own next run
/// (`continued_as` and `resumed_from` both its own id, written by hand
/// or by a host's `save`) was folded into itself — its conversation
/// "the start of" itself — and the first read of it recursed until
/// the stack overflowed (the process aborted, no guard catches it).
/// A run is never folded into itself, and a chain of starts that does
/// not end reads nothing.
#[test]
fn a_run_named_as_its_own_next_run_is_read_not_recursed() {
    let id = AgentId::new("agent_1");
    let mut seed = ChildRequest::new(
        AgentId::new("parent"),
        0,
        subagents_messages::ToolUseId::new("call_1"),
        "Worker",
        "the task",
    );
    seed.resumed_from = Some(id.clone());
    let mut envelope =
        crate::hub::book::requested(id.clone(), "Worker".into(), &seed, Vec::new(), 0);
    envelope.status = SubAgentStatus::Done;
    envelope.continued_as = Some(id.clone());
    let book = Book::default();
    let said = vec![
        ChatMessage::user("the task"),
        ChatMessage::assistant("done", Vec::new()),
    ];
    book.import(envelope, seed, said.clone());
    assert_eq!(book.conversation(&id), Some(said.clone()));
    assert_eq!(book.resume_from(&id).unwrap().conversation, said);

    // A cycle of starts (two runs each the start of the other) reads
    // nothing rather than recursing.
    let other = AgentId::new("agent_2");
    let seed = ChildRequest::new(
        AgentId::new("parent"),
        0,
        subagents_messages::ToolUseId::new("call_2"),
        "Worker",
        "the task",
    );
    let envelope =
        crate::hub::book::requested(other.clone(), "Worker".into(), &seed, Vec::new(), 0);
    book.import(envelope, seed, Vec::new());
    for (run, next) in [(&id, &other), (&other, &id)] {
        if let Some(mut entry) = book.entries.get_mut(run) {
            entry.prefix_of = Some(Box::new((next.clone(), 1)));
        }
    }
    assert_eq!(book.conversation(&id), None);
}
