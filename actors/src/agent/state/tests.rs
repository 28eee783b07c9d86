use super::*;
use crate::footprint::handler_future_size as future_size;

/// A new agent's empty conversation is one shared allocation; an agent
/// that writes to its own (a stop with turns queued) copies it first,
/// so no other agent sees the write.
#[test]
fn the_shared_empty_conversation_is_never_written() {
    let (mut one, two) = (shared_history(Vec::new()), shared_history(Vec::new()));
    assert!(
        Arc::ptr_eq(&one, &two),
        "one allocation for every new agent"
    );
    Arc::make_mut(&mut one).push(ChatMessage::user("mine"));
    assert_eq!(one.len(), 1);
    assert!(two.is_empty() && shared_history(Vec::new()).is_empty());
    let own = shared_history(vec![ChatMessage::user("so far")]);
    assert!(!Arc::ptr_eq(&own, &two));
}

/// The handler's future sizes the loop ractor keeps boxed for the
/// agent's whole life (see the hub's test of the same).
#[test]
fn the_agents_handler_future_stays_small() {
    let handle = future_size(|myself: ActorRef<AgentMsg>, message: AgentMsg, state| {
        AgentActor.handle(myself, message, state)
    });
    assert!(
        handle <= 512,
        "AgentActor::handle's future is {handle} bytes"
    );
}
