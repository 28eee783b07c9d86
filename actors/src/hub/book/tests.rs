//! The book's rules, tested on the plain struct: statuses move forward,
//! one finish, one claim, queue order.

use super::*;
use subagents_messages::{ChildRequest, ToolUseId};

fn book_with(ids: &[&str], background: bool) -> Book {
    let book = Book::default();
    for id in ids {
        let mut request = ChildRequest::new(
            AgentId::new("parent"),
            0,
            ToolUseId::new("c"),
            "Child",
            "task",
        );
        request.background = background;
        book.insert(
            requested(AgentId::new(*id), "Child".into(), &request, vec![], 0),
            None,
            None,
        );
    }
    book
}

fn id(s: &str) -> AgentId {
    AgentId::new(s)
}

#[test]
fn statuses_only_move_forward() {
    let book = book_with(&["agent_1"], false);
    assert!(book.advance(&id("agent_1"), SubAgentStatus::Running));
    assert!(!book.advance(&id("agent_1"), SubAgentStatus::Running));
    assert!(!book.advance(&id("agent_1"), SubAgentStatus::Queued));
    assert!(book.advance(&id("agent_1"), SubAgentStatus::Background));
    assert!(book.is_background(&id("agent_1")));
    assert!(book.finish(&id("agent_1"), SubAgentStatus::Done, None, None, 5));
    assert!(!book.finish(&id("agent_1"), SubAgentStatus::Stopped, None, None, 6));
    assert_eq!(
        book.envelope(&id("agent_1")).map(|e| e.finished_at_ms),
        Some(Some(5)),
        "the first finish stands"
    );
    assert!(!book.advance(&id("agent_1"), SubAgentStatus::Background));
    assert_eq!(
        book.get(&id("agent_1")).unwrap().status,
        SubAgentStatus::Done
    );
}

#[test]
fn queue_positions_follow_queue_order() {
    let book = book_with(&["agent_1", "agent_2", "agent_3"], true);
    for n in ["agent_2", "agent_3", "agent_1"] {
        book.mark_queued(&id(n));
    }
    assert_eq!(book.queue_position(&id("agent_2")), Some(1));
    assert_eq!(book.queue_position(&id("agent_1")), Some(3));
    let started = book.start(&id("agent_2"), 1);
    assert!(started.was_queued && started.now_running, "{started:?}");
    let again = book.start(&id("agent_2"), 1);
    assert!(
        !again.was_queued && !again.now_running,
        "started once: {again:?}"
    );
    assert_eq!(book.queue_position(&id("agent_2")), None);
    assert_eq!(book.queue_position(&id("agent_3")), Some(1));
    book.finish(&id("agent_3"), SubAgentStatus::Stopped, None, None, 2);
    assert_eq!(book.queue_position(&id("agent_1")), Some(1));
}

#[test]
fn a_result_is_claimed_or_released_once_and_only_when_finished() {
    let book = book_with(&["agent_1", "agent_2"], false);
    assert_eq!(book.claim(&id("agent_1")), None, "not finished yet");
    assert_eq!(book.release_finished(&id("agent_1")), None);
    book.finish(
        &id("agent_1"),
        SubAgentStatus::Done,
        Some("r".into()),
        None,
        1,
    );
    assert!(book.claim(&id("agent_1")).unwrap().0.claimed);
    assert_eq!(book.claim(&id("agent_1")), None, "claimed once");
    assert_eq!(
        book.release_finished(&id("agent_1")),
        None,
        "claimed: no wake"
    );
    book.finish(
        &id("agent_2"),
        SubAgentStatus::Done,
        Some("r".into()),
        None,
        1,
    );
    assert!(book.release_finished(&id("agent_2")).unwrap().background);
    assert_eq!(book.release_finished(&id("agent_2")), None, "released once");
}

/// A host that read a dead hub's failures first (`HubHandle` is public)
/// took them from the thread: the thread's own call got nothing, so
/// nothing was persisted until close.
#[test]
fn every_caller_after_a_hub_death_gets_every_child_it_failed() {
    let book = book_with(&["agent_1", "agent_2"], false);
    let host: Vec<String> = book
        .fail_unfinished("gone", 9)
        .iter()
        .map(|e| e.id.to_string())
        .collect();
    let thread: Vec<(String, Option<String>)> = book
        .fail_unfinished("gone", 10)
        .iter()
        .map(|e| (e.id.to_string(), e.error.clone()))
        .collect();
    assert_eq!(host, ["agent_1", "agent_2"]);
    assert_eq!(
        thread,
        [
            ("agent_1".to_owned(), Some("gone".to_owned())),
            ("agent_2".to_owned(), Some("gone".to_owned()))
        ]
    );
}

#[test]
fn unfinished_children_fail_in_number_order() {
    let book = book_with(&["agent_10", "agent_2", "agent_3"], false);
    book.finish(&id("agent_3"), SubAgentStatus::Done, None, None, 1);
    let failed: Vec<String> = book
        .fail_unfinished("gone", 9)
        .iter()
        .map(|e| e.id.to_string())
        .collect();
    assert_eq!(failed, ["agent_2", "agent_10"]);
    let again = book.fail_unfinished("gone", 9);
    assert_eq!(
        again.len(),
        2,
        "each caller gets every child the death failed"
    );
    assert!(again.iter().all(|e| e.status == SubAgentStatus::Failed));
    let all: Vec<String> = book.all().iter().map(|e| e.id.to_string()).collect();
    assert_eq!(all, ["agent_2", "agent_3", "agent_10"]);
}

/// Held at rest: a finished child's book entry kept its turn's whole
/// state through its probe for the hub's life — the last answer's copy,
/// the streaming buffer, a remote child's conversation (the hub took a
/// copy of it). Once the book took what it keeps, the turn is let go.
#[test]
fn a_finished_childs_turn_is_let_go() {
    let book = book_with(&["agent_1"], false);
    let probe = crate::agent::Probe::default();
    let mut state = crate::agent::TurnState::new(Vec::new());
    state.streaming = "x".repeat(1 << 16);
    let turn: crate::agent::Shared = Arc::new(std::sync::Mutex::new(state));
    probe.publish(&turn);
    book.set_probe(&id("agent_1"), probe);
    let held = Arc::downgrade(&turn);
    drop(turn);
    assert!(held.upgrade().is_some(), "held while it runs");
    assert!(book.finish(
        &id("agent_1"),
        SubAgentStatus::Done,
        Some("ok".into()),
        None,
        5
    ));
    assert!(
        held.upgrade().is_none(),
        "the finished child's turn is still held"
    );
    // It still counts as a child that ran here.
    assert_eq!(book.totals().1, 0);
    assert_eq!(book.entries.iter().filter(|e| e.probe.is_some()).count(), 1);
}

/// Held at rest: a resumed run's seed kept the whole conversation it went
/// on from, which its own conversation holds again at its end — a child
/// resumed k times held k² messages. Once it ended with a conversation of
/// its own, the seed keeps the rest of what it was asked.
#[test]
fn a_finished_runs_seed_lets_go_of_the_conversation_it_went_on_from() {
    let book = book_with(&["agent_2"], false);
    let mut seed = ChildRequest::new(
        AgentId::new("parent"),
        0,
        ToolUseId::new("c"),
        "Child",
        "go on",
    );
    seed.conversation = vec![subagents_messages::ChatMessage::user("x".repeat(1 << 12)); 8];
    book.set_seed(&id("agent_2"), Arc::new(seed));
    let probe = crate::agent::Probe::default();
    let mut state = crate::agent::TurnState::new(Vec::new());
    state.ended = Some(Arc::new(vec![
        subagents_messages::ChatMessage::user(
            "all of it"
        );
        9
    ]));
    probe.publish(&Arc::new(std::sync::Mutex::new(state)));
    book.set_probe(&id("agent_2"), probe);
    assert!(book.finish(
        &id("agent_2"),
        SubAgentStatus::Done,
        Some("ok".into()),
        None,
        5
    ));
    let entry = book.entries.get(&id("agent_2")).unwrap();
    let seed = entry.seed.as_ref().unwrap();
    assert!(
        seed.conversation.is_empty(),
        "{} messages kept twice",
        seed.conversation.len()
    );
    assert_eq!(seed.input, "go on");
    assert_eq!(entry.conversation.as_ref().map(|c| c.len()), Some(9));
}

/// `n` messages of a conversation.
fn talk(n: usize) -> Vec<ChatMessage> {
    (0..n).map(|i| ChatMessage::user(format!("m{i}"))).collect()
}

/// A child's request, going on from `resumed_from` (its `conversation`).
fn ask(resumed_from: Option<&str>, conversation: Vec<ChatMessage>) -> ChildRequest {
    let parent = AgentId::new("parent");
    let mut request = ChildRequest::new(parent, 0, ToolUseId::new("c"), "Child", "more");
    request.resumed_from = resumed_from.map(AgentId::new);
    request.conversation = conversation;
    request
}

/// A child resumed k times: each run's conversation begins with the whole
/// of the run it went on from, and each kept its own copy — k²/2
/// conversations' worth of messages for the thread's life. A run resumed
/// as another that ended keeps only where its own ends, and reads (and
/// resumes from) the start of the later run's.
#[test]
fn a_chain_of_resumed_runs_holds_each_message_once() {
    let book = Book::default();
    let mut first = requested(id("agent_1"), "Child".into(), &ask(None, vec![]), vec![], 0);
    first.status = SubAgentStatus::Done;
    book.import(first, ask(None, vec![]), talk(4));
    let mut runs = vec![id("agent_1")];
    for n in 2..=4 {
        let from = runs.last().unwrap().clone();
        let next = id(&format!("agent_{n}"));
        let said = book.conversation(&from).unwrap();
        let request = ask(Some(from.as_str()), said);
        book.insert(
            requested(next.clone(), "Child".into(), &request, vec![], 0),
            None,
            None,
        );
        book.set_seed(&next, Arc::new(request));
        book.set_continued(&from, next.clone());
        book.keep_unread(&next, &["and more".to_owned()]);
        assert!(book.finish(&next, SubAgentStatus::Done, None, None, 1));
        runs.push(next);
    }
    // Held: only the last run's conversation, whole (4 + 2 a run).
    let held: Vec<usize> = runs
        .iter()
        .map(|r| {
            book.entries
                .get(r)
                .unwrap()
                .conversation
                .as_ref()
                .map_or(0, |c| c.len())
        })
        .collect();
    assert_eq!(held, [0, 0, 0, 10]);
    // Read: each run's own, as it ended.
    for (run, len) in runs.iter().zip([4, 6, 8, 10]) {
        let said = book.conversation(run).unwrap();
        assert_eq!(said.len(), len, "{run}");
        assert_eq!(said[..4], talk(4)[..], "{run}");
    }
    let from = book.resume_from(&id("agent_2")).unwrap();
    assert_eq!(from.conversation.len(), 6);
}

/// Growth (review: long-lived growth, thirty-fourth session): after a
/// restart one message to a child resumed k times brings its whole chain
/// in from the archive, and each run's file repeats the run before in its
/// request — imported as they came, the book held each run's conversation
/// whole and twice, k² messages for the thread's life. Imported as
/// finished runs are kept: once.
#[test]
fn a_chain_imported_from_the_archive_holds_each_message_once() {
    let book = Book::default();
    let runs: Vec<AgentId> = (1..=4).map(|n| id(&format!("agent_{n}"))).collect();
    for (n, run) in runs.iter().enumerate() {
        let from = n.checked_sub(1).map(|p| runs[p].as_str());
        let seed = ask(from, if n == 0 { vec![] } else { talk(2 + 2 * n) });
        let mut envelope = requested(run.clone(), "Child".into(), &seed, vec![], 0);
        envelope.status = SubAgentStatus::Done;
        envelope.continued_as = runs.get(n + 1).cloned();
        book.import(envelope, seed, talk(4 + 2 * n));
    }
    let held: Vec<(usize, usize)> = runs
        .iter()
        .map(|r| {
            let entry = book.entries.get(r).unwrap();
            (
                entry.conversation.as_ref().map_or(0, |c| c.len()),
                entry.seed.as_ref().map_or(0, |s| s.conversation.len()),
            )
        })
        .collect();
    assert_eq!(held, [(0, 0), (0, 0), (0, 0), (10, 0)]);
    for (run, len) in runs.iter().zip([4, 6, 8, 10]) {
        assert_eq!(book.conversation(run).unwrap().len(), len, "{run}");
    }
    assert_eq!(book.resume_from(&runs[3]).unwrap().conversation.len(), 10);
}

/// Two workers (a review of shared state): two callers failed a dead
/// hub's children at once (the thread's supervision handler, a host's
/// request in flight); the one that lost the finish had already taken the
/// turn's conversation, and the winner found `[]` — the book kept it, the
/// thread's close wrote it over the child's run file, and a message
/// resumed the child from its task alone, every tool call again. What the
/// loser read first is here what it did first.
#[test]
fn a_finish_that_loses_leaves_the_conversation_to_the_one_that_wins() {
    let book = book_with(&["agent_1"], false);
    let probe = crate::agent::Probe::default();
    let mut state = crate::agent::TurnState::new(Vec::new());
    state.ended = Some(Arc::new(vec![ChatMessage::user("all of it"); 9]));
    probe.publish(&Arc::new(std::sync::Mutex::new(state)));
    book.set_probe(&id("agent_1"), probe.clone());
    // The losing caller's first step, before it found the finish taken.
    drop(probe.conversation_at_end());
    assert!(book.finish(
        &id("agent_1"),
        SubAgentStatus::Failed,
        None,
        Some("gone".into()),
        9
    ));
    assert_eq!(
        book.conversation(&id("agent_1")).map(|c| c.len()),
        Some(9),
        "the winner kept what the loser had taken"
    );
}

/// Two workers (review: shared state): a child's conversation read as it
/// finishes (the thread writing its run on its last step, a host showing
/// it) read the entry running, then found the probe let go by the finish
/// in between: `None` — and the thread wrote `[]` over the child's run
/// file until its final write. Read again, it is what the finish kept.
/// The two reads are split here, the finish between them: the instant
/// another worker makes.
#[test]
fn a_conversation_read_as_the_child_finishes_is_never_lost() {
    let book = book_with(&["agent_1"], false);
    let probe = crate::agent::Probe::default();
    let mut state = crate::agent::TurnState::new(Vec::new());
    state.ended = Some(Arc::new(vec![ChatMessage::user("all of it"); 3]));
    probe.publish(&Arc::new(std::sync::Mutex::new(state)));
    book.set_probe(&id("agent_1"), probe);
    let read = book.entry_read(&id("agent_1")).unwrap();
    assert!(book.finish(&id("agent_1"), SubAgentStatus::Stopped, None, None, 9));
    assert_eq!(
        book.conversation_after(&id("agent_1"), read)
            .map(|c| c.len()),
        Some(3)
    );
}

/// Review of this session's own fix to the background policy: it kept the
/// policy from a request already pending at the detach, but the book
/// still read the going child's inline grandchild as background work — a
/// request it made between the detach and its own stop was approved by
/// the policy at once, with no approval row, and the call ran. Under a
/// requester being stopped the policy answers nothing: the host is asked,
/// and the stop cancels the request. (A rule of the book's; the instant it
/// matters in is between two actors' messages.)
#[test]
fn a_child_under_a_requester_being_stopped_is_not_background_work() {
    let book = book_with(&["agent_1"], false);
    let mut asked = ChildRequest::new(
        AgentId::new("agent_1"),
        1,
        ToolUseId::new("c"),
        "Grand",
        "task",
    );
    asked.background = false;
    book.insert(
        requested(AgentId::new("agent_2"), "Grand".into(), &asked, vec![], 0),
        None,
        None,
    );
    book.set_seed(&id("agent_2"), Arc::new(asked));
    assert!(!book.in_background(&id("agent_2")), "waited on inline");
    assert!(book.advance(&id("agent_1"), SubAgentStatus::Running));
    assert!(book.advance(&id("agent_1"), SubAgentStatus::Background));
    assert!(book.in_background(&id("agent_2")), "under background work");
    book.mark_going(&id("agent_1"));
    assert!(
        !book.in_background(&id("agent_2")),
        "its requester is being stopped: not the policy's"
    );
}

/// The same for a child that itself runs in the background: under a
/// requester being stopped (or whose turn is over, which casts its stop)
/// it goes too, and the policy answered for a child already condemned —
/// the walk stopped at the child's own background level and never saw
/// its requester going.
#[test]
fn a_background_child_under_a_requester_being_stopped_is_not_the_policys() {
    let book = book_with(&["agent_1"], false);
    let mut asked = ChildRequest::new(
        AgentId::new("agent_1"),
        1,
        ToolUseId::new("c"),
        "Poster",
        "task",
    );
    asked.background = true;
    book.insert(
        requested(AgentId::new("agent_2"), "Poster".into(), &asked, vec![], 0),
        None,
        None,
    );
    book.set_seed(&id("agent_2"), Arc::new(asked));
    assert!(book.in_background(&id("agent_2")), "background work");
    book.mark_going(&id("agent_1"));
    assert!(
        !book.in_background(&id("agent_2")),
        "its requester is being stopped: not the policy's"
    );
}

/// A hub is dead (its children failed by whoever asks) once ractor says
/// `Stopped`, or `Stopping` to a caller that read its termination event —
/// never while it says `Stopping` alone: that is also the instant before
/// its own stop's `post_stop` begins, when a thread on another worker
/// failed its children as killed and the stop then waited for ever.
#[test]
fn a_hub_is_dead_only_once_stopped_or_exited() {
    use ractor::ActorStatus::*;
    let book = Book::default();
    for status in [Unstarted, Starting, Running, Upgrading, Draining] {
        assert!(!book.is_dead(status, false), "{status:?}");
        assert!(!book.is_dead(status, true), "{status:?}");
    }
    assert!(!book.is_dead(Stopping, false), "stopping, not yet dead");
    assert!(book.is_dead(Stopping, true), "its termination event came");
    assert!(book.is_dead(Stopped, false));
    let stopping = book.stopping_itself();
    assert!(!book.is_dead(Stopped, true), "it ends its children itself");
    drop(stopping);
    assert!(book.is_dead(Stopped, false), "a stop that unwound");
}

/// The queue is per requester (the cap is): a grandchild next in its
/// requester's queue is at 1, whoever waits in the parent's.
#[test]
fn queue_positions_count_the_same_requesters_children_only() {
    let book = book_with(&["agent_1", "agent_2", "agent_3", "agent_4"], true);
    for (child, requester) in [
        ("agent_1", "parent"),
        ("agent_2", "agent_9"),
        ("agent_3", "parent"),
        ("agent_4", "agent_9"),
    ] {
        let request = ChildRequest::new(id(requester), 0, ToolUseId::new("c"), "Child", "task");
        book.set_seed(&id(child), std::sync::Arc::new(request));
        book.mark_queued(&id(child));
    }
    assert_eq!(book.queue_position(&id("agent_1")), Some(1));
    assert_eq!(book.queue_position(&id("agent_2")), Some(1));
    assert_eq!(book.queue_position(&id("agent_3")), Some(2));
    assert_eq!(book.queue_position(&id("agent_4")), Some(2));
}

mod stamps;
