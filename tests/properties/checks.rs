//! The checks run over a thread's whole log: every guarantee of
//! docs/event-ordering.md, every wake rule, and the delivery rule (a
//! child's result reaches the parent once).

use std::collections::{BTreeSet, HashMap, HashSet};

use subagents::messages::{AgentEvent, AgentId, ChatMessage, SubAgentStatus};
use subagents::simulation::{HostAction, LogEntry};

use crate::common;

/// The events of a log, in order.
pub(crate) fn events(log: &[LogEntry]) -> Vec<AgentEvent> {
    log.iter().filter_map(|l| l.event().cloned()).collect()
}

/// The child whose finished result a top-level `use_agent` output carries
/// (a `run` that waited, or a `result`), if any.
pub(crate) fn delivered(event: &AgentEvent) -> Option<AgentId> {
    common::finished_result(event)
        .filter(|(_, status)| status == "done" || status == "failed")
        .map(|(id, _)| id)
}

/// What a thread's earlier sessions (before a restart: `Step::Restart`)
/// left it, as the store the restart reopened says.
#[derive(Debug, Clone, Default)]
pub(crate) struct Earlier {
    /// Every child started in an earlier session, on any thread: no id
    /// comes back.
    pub(crate) ids: BTreeSet<AgentId>,
    /// This thread's children whose wake the killed process owed: each is
    /// woken once (unless resumed, or given back to the store by a switch).
    pub(crate) owed: BTreeSet<AgentId>,
    /// This thread's children the reopen found unfinished, in its order:
    /// one restart wake lists them.
    pub(crate) interrupted: Vec<AgentId>,
}

/// What a session's log says at its end, for the next session's checks.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    /// Children whose result must reach the parent and has not (a wake
    /// owed): the store the restart reopens must still owe each.
    pub(crate) owed: BTreeSet<AgentId>,
    /// Children whose result reached the parent for good (by a call, or by
    /// a wake whose turn ended): the store must owe none of them.
    pub(crate) delivered: BTreeSet<AgentId>,
}

/// The text of a restart's wake line.
const RESTART: &str = "interrupted when the process stopped";

/// Every guarantee of docs/event-ordering.md and every wake rule, over the
/// whole log; the delivery rule too. `exactly_once`: whether every result
/// that could reach the parent must have (at rest, on an open thread).
/// `earlier`: what a restart left the thread (its restart wake, its owed
/// wakes).
pub(crate) fn check_everything(
    log: &[LogEntry],
    at_rest: bool,
    exactly_once: bool,
    earlier: &Earlier,
    failed_elsewhere: &dyn Fn(&AgentId) -> bool,
) -> Summary {
    let events = events(log);
    common::check_log_failing(&events, at_rest, failed_elsewhere);
    common::check_inline_order_settled(&events);

    let mut typing = false;
    let mut on_screen = true;
    let mut generating = 0usize;
    let mut wake_in_flight = false;
    let mut started: Vec<AgentId> = Vec::new();
    let mut before_switch: HashSet<AgentId> = HashSet::new();
    let mut terminal: HashMap<AgentId, (usize, SubAgentStatus)> = HashMap::new();
    let mut finished_off_screen: HashSet<AgentId> = HashSet::new();
    let mut last_woken: Option<usize> = None;
    let mut woken: HashSet<AgentId> = HashSet::new();
    let mut delivered_to: HashSet<AgentId> = HashSet::new();
    // Children whose wake may legitimately never come: started before an
    // off-screen or a switch.
    let mut wake_dropped: HashSet<AgentId> = HashSet::new();
    // The earlier sessions' wakes: the restart's, the owed ones woken, the
    // children resumed (their successor wakes), whether a switch or an
    // off-screen spell may have given them back to the store.
    let mut restart_woken = false;
    let mut earlier_woken: BTreeSet<AgentId> = BTreeSet::new();
    let mut resumed: BTreeSet<AgentId> = BTreeSet::new();
    let mut given_back = false;
    // The wake whose turn is in flight, and the children whose wake turn
    // ended (delivered for good).
    let mut reading: Option<AgentId> = None;
    let mut read: BTreeSet<AgentId> = BTreeSet::new();
    for (i, logged) in log.iter().enumerate() {
        match logged {
            LogEntry::Host {
                action: HostAction::Typing(on),
                ..
            } => typing = *on,
            LogEntry::Host {
                action: HostAction::OnScreen(on),
                ..
            } => {
                on_screen = *on;
                if !on {
                    wake_dropped.extend(started.iter().cloned());
                    given_back = true;
                }
            }
            LogEntry::Host { .. } | LogEntry::Fired { .. } | LogEntry::Refused { .. } => {}
            LogEntry::Event { event, .. } => {
                if let Some(child) = delivered(event) {
                    delivered_to.insert(child);
                }
                match event {
                    AgentEvent::UserMessage(_) => generating += 1,
                    AgentEvent::SwitchedAway => {
                        before_switch.extend(started.iter().cloned());
                        wake_dropped.extend(started.iter().cloned());
                        given_back = true;
                    }
                    AgentEvent::Result(_) => {
                        assert!(generating > 0, "a Result with no turn in flight");
                        generating -= 1;
                        wake_in_flight = false;
                        read.extend(reading.take());
                    }
                    AgentEvent::ChildStarted(info) => {
                        assert!(
                            !earlier.ids.contains(&info.id),
                            "{} started again after a restart (ids reused)",
                            info.id
                        );
                        started.push(info.id.clone());
                        // Resumed as this run: its successor's result is
                        // the one that wakes the parent.
                        if let Some(from) = &info.resumed_from {
                            wake_dropped.insert(from.clone());
                            resumed.insert(from.clone());
                        }
                    }
                    AgentEvent::ChildStatus(id, status) if status.is_terminal() => {
                        terminal.insert(id.clone(), (i, *status));
                        if !on_screen {
                            finished_off_screen.insert(id.clone());
                        }
                    }
                    AgentEvent::Wake { child, line } => {
                        assert!(!wake_in_flight, "two wakes in flight ({child})");
                        assert_eq!(generating, 0, "a wake ({child}) while the parent generates");
                        assert!(!typing, "a wake ({child}) while the user types");
                        assert!(on_screen, "a wake ({child}) while off screen");
                        wake_in_flight = true;
                        generating += 1;
                        reading = Some(child.clone());
                        if line.contains(RESTART) {
                            check_restart_wake(child, line, earlier);
                            assert!(!restart_woken, "two restart wakes ({line})");
                            assert!(
                                (woken.is_empty() && earlier_woken.is_empty()) || given_back,
                                "the restart's wake after another ({line})"
                            );
                            restart_woken = true;
                            continue;
                        }
                        // Resumed by a message (this session's child, or
                        // one an earlier session owed): its old run's wake
                        // is dropped, the run it goes on as wakes instead.
                        assert!(
                            !resumed.contains(child),
                            "a wake ({child}) for a run a message resumed"
                        );
                        if !terminal.contains_key(child) {
                            assert!(
                                earlier.owed.contains(child),
                                "a wake ({child}) for no child of this session and none owed by the last"
                            );
                            assert!(earlier_woken.insert(child.clone()), "two wakes for {child}");
                            continue;
                        }
                        assert!(
                            !before_switch.contains(child),
                            "a wake ({child}) after a thread switch"
                        );
                        assert!(
                            !finished_off_screen.contains(child),
                            "a wake ({child}) that finished off screen"
                        );
                        assert!(woken.insert(child.clone()), "two wakes for {child}");
                        assert!(
                            delivered_to.insert(child.clone()),
                            "a wake ({child}) for a result already delivered"
                        );
                        let (at, status) = terminal
                            .get(child)
                            .copied()
                            .unwrap_or_else(|| panic!("a wake ({child}) before the child ended"));
                        assert!(
                            matches!(status, SubAgentStatus::Done | SubAgentStatus::Failed),
                            "a wake ({child}) for a {status} child"
                        );
                        assert!(
                            last_woken.is_none_or(|last| at > last),
                            "wakes out of FIFO order ({child})"
                        );
                        last_woken = Some(at);
                    }
                    _ => {}
                }
            }
        }
    }
    // Every turn sent (a user message, a wake) is answered once: at rest,
    // none is left without its `Result` (a lost one was seen only if a
    // later wake happened to trip "a wake while the parent generates").
    if at_rest {
        assert_eq!(generating, 0, "at rest, a turn sent was never answered");
    }
    // What must still reach the parent: a result never delivered, a wake
    // whose turn never ended; and an earlier session's, not yet woken.
    let mut summary = Summary::default();
    for (child, (_, status)) in &terminal {
        let finished = matches!(status, SubAgentStatus::Done | SubAgentStatus::Failed);
        if finished && !wake_dropped.contains(child) && !finished_off_screen.contains(child) {
            if at_rest && exactly_once {
                assert!(
                    delivered_to.contains(child),
                    "the result of {child} ({status}) never reached the parent"
                );
            }
            if !delivered_to.contains(child) {
                summary.owed.insert(child.clone());
            }
        }
    }
    for child in &earlier.owed {
        if resumed.contains(child) || read.contains(child) {
            continue;
        }
        if at_rest && exactly_once && !given_back {
            assert!(
                earlier_woken.contains(child),
                "{child}'s wake, owed by the process a restart killed, never came"
            );
        }
        if !earlier_woken.contains(child) {
            summary.owed.insert(child.clone());
        }
    }
    if at_rest && exactly_once && !given_back && !earlier.interrupted.is_empty() {
        assert!(
            restart_woken,
            "the children a restart interrupted ({:?}) woke nobody",
            earlier.interrupted
        );
    }
    // A wake read by a turn that never ended is owed still.
    summary.owed.extend(
        reading
            .iter()
            .filter(|c| earlier.owed.contains(*c) || terminal.contains_key(*c))
            .cloned(),
    );
    summary.delivered = delivered_to
        .into_iter()
        .filter(|c| !woken.contains(c) || read.contains(c))
        .chain(read.iter().filter(|c| earlier_woken.contains(*c)).cloned())
        .collect();
    summary
}

/// A restart's wake: about the first child the reopen found unfinished,
/// counting and naming every one (fewer than twenty here).
fn check_restart_wake(child: &AgentId, line: &str, earlier: &Earlier) {
    assert_eq!(
        Some(child),
        earlier.interrupted.first(),
        "a restart's wake for a child the reopen did not interrupt here: {line}"
    );
    assert!(
        line.contains(&format!(
            "{} sub-agent(s) {RESTART}",
            earlier.interrupted.len()
        )),
        "a restart's wake counting other than {:?}: {line}",
        earlier.interrupted
    );
    for id in &earlier.interrupted {
        assert!(
            line.contains(&format!("{id} ")),
            "a restart's wake leaving out {id}: {line}"
        );
    }
}

/// A one-line summary of how a race resolved, for counting the distinct
/// interleavings reached: the trigger, and for the child it fired on, its
/// end, how its result was delivered, and on which side of the host's
/// action its terminal status came.
pub(crate) fn signature(log: &[LogEntry], fired_at: usize, child: &AgentId, what: &str) -> String {
    let events_before: usize = log[..fired_at]
        .iter()
        .filter(|l| matches!(l, LogEntry::Event { .. }))
        .count();
    let events = events(log);
    let terminal = events.iter().position(
        |e| matches!(e, AgentEvent::ChildStatus(id, s) if id == child && s.is_terminal()),
    );
    let status = terminal.and_then(|t| match &events[t] {
        AgentEvent::ChildStatus(_, s) => Some(*s),
        _ => None,
    });
    let side = match terminal {
        Some(t) if t < events_before => "ended-before",
        Some(_) => "ended-after",
        None => "never-ended",
    };
    let inline = events.iter().any(|e| delivered(e).as_ref() == Some(child));
    let woke = events
        .iter()
        .any(|e| matches!(e, AgentEvent::Wake { child: woke, .. } if woke == child));
    let delivery = match (inline, woke) {
        (true, false) => "by-call",
        (false, true) => "by-wake",
        (false, false) => "undelivered",
        (true, true) => "twice",
    };
    format!("{what} {status:?} {side} {delivery}")
}

/// A stopped child never goes on (docs/lifecycle.md: a stop ends a child
/// — or cancels one that had ended — for good, across restarts): once a
/// host's `StopChild` of an id has taken effect, no later run, in that
/// session or a later one of the thread, is resumed from any run of its
/// chain as it stood then — the runs it went on from and the runs it went
/// on as, backward and forward (a stop of the newest run bars a resume
/// from the first). And a chain never forks: no run is resumed twice (a
/// later message to an old id reaches the newest run). `sessions`: the
/// thread's logs, one per session, in order. Returns how many messages
/// the user sent to a stopped chain (what it had to hold).
pub(crate) fn check_stopped_chains_stay_stopped(sessions: &[&[LogEntry]]) -> usize {
    let mut sent_to_stopped = 0;
    // Each run's successor and predecessor: a chain read both ways.
    let mut next: HashMap<AgentId, AgentId> = HashMap::new();
    let mut prev: HashMap<AgentId, AgentId> = HashMap::new();
    // The stopped runs, each with the run the host stopped.
    let mut stopped: HashMap<AgentId, AgentId> = HashMap::new();
    for log in sessions {
        for (i, entry) in log.iter().enumerate() {
            match entry {
                LogEntry::Event { event, .. } => {
                    for_each_started(event, &mut |id, from| {
                        let Some(from) = from else {
                            return;
                        };
                        if let Some(at) = stopped.get(from) {
                            panic!("{from}'s chain was stopped (at {at}), and goes on as {id}");
                        }
                        if let Some(first) = next.insert(from.clone(), id.clone()) {
                            panic!("{from} was resumed twice, as {first} and as {id}: a fork");
                        }
                        prev.insert(id.clone(), from.clone());
                    });
                }
                LogEntry::Host {
                    action: HostAction::StopChild(id),
                    ..
                } if !matches!(log.get(i + 1), Some(LogEntry::Refused { .. })) => {
                    // Back to the chain's first run, then forward to its
                    // newest, marking each (a log that loops stops there).
                    let mut first = id.clone();
                    let mut seen = HashSet::from([id.clone()]);
                    while let Some(before) = prev.get(&first)
                        && seen.insert(before.clone())
                    {
                        first = before.clone();
                    }
                    let mut seen = HashSet::new();
                    let mut at = Some(first);
                    while let Some(run) = at.filter(|run| seen.insert(run.clone())) {
                        at = next.get(&run).cloned();
                        stopped.entry(run).or_insert_with(|| id.clone());
                    }
                }
                LogEntry::Host {
                    action: HostAction::User(text),
                    ..
                } => {
                    if let Some(id) = text.strip_prefix("SEND ")
                        && stopped.contains_key(&AgentId::new(id))
                    {
                        sent_to_stopped += 1;
                    }
                }
                _ => {}
            }
        }
    }
    sent_to_stopped
}

/// Calls `f` with the id and `resumed_from` of every `ChildStarted` in
/// `event`, at any depth.
fn for_each_started(event: &AgentEvent, f: &mut impl FnMut(&AgentId, Option<&AgentId>)) {
    match event {
        AgentEvent::ChildStarted(info) => f(&info.id, info.resumed_from.as_ref()),
        AgentEvent::Child(_, inner) => for_each_started(inner, f),
        _ => {}
    }
}

/// A message the parent's `use_agent send` said its child "reads" was
/// read: at rest it is in the conversation of that child, or of the run a
/// later message resumed it as. The property test sends at every moment
/// of a child's life; without this check a message taken and dropped
/// there left every event and envelope as it was.
pub(crate) fn check_sent_messages_read(
    log: &[LogEntry],
    child: impl Fn(&AgentId) -> (Option<Vec<ChatMessage>>, Option<AgentId>, bool),
) -> usize {
    let mut read = 0;
    // Each send's own text (each is unique: `model::sent_text`), by call.
    let mut texts = HashMap::new();
    for event in events(log) {
        if let AgentEvent::ToolStarted(s) = &event
            && s.name == "use_agent"
            && let Ok(args) = serde_json::from_str::<serde_json::Value>(&s.arguments)
            && let Some(text) = args["input"].as_str()
        {
            texts.insert(s.tool_use_id.clone(), text.to_owned());
        }
        let AgentEvent::ToolResult(r) = &event else {
            continue;
        };
        if r.name != "use_agent" || r.is_error {
            continue;
        }
        let Some(text) = texts
            .get(&r.tool_use_id)
            .filter(|t| t.starts_with(crate::model::SENT))
        else {
            continue;
        };
        let Ok(said) = serde_json::from_str::<serde_json::Value>(&r.output) else {
            continue;
        };
        // Taken by the running turn, or the input of the run it resumed
        // (skipped, a message resuming a finished child went unchecked) —
        // one that started: stopped while it waited for a slot (a switch,
        // a stop), it read nothing, as a queued child reads nothing.
        let taken = said["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("it reads your message"));
        let resumed = said.get("resumed_from").is_some();
        let Some(id) = said["id"].as_str().filter(|_| taken || resumed) else {
            continue;
        };
        if resumed && !child(&AgentId::new(id)).2 {
            continue;
        }
        let mut at = Some(AgentId::new(id));
        let mut found = false;
        let mut chain = Vec::new();
        while let Some(run) = at.take() {
            let (conversation, next, _) = child(&run);
            found |= conversation
                .iter()
                .flatten()
                .any(|m| m.content.ends_with(text.as_str()));
            chain.push(run);
            at = next.filter(|n| !chain.contains(n));
        }
        assert!(
            found,
            "the message {text:?} {id} took was never read: {chain:?}"
        );
        read += 1;
    }
    SENT_READ.fetch_add(read, std::sync::atomic::Ordering::SeqCst);
    read
}

/// Messages [`check_sent_messages_read`] found read, over the whole run.
pub(crate) static SENT_READ: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Host stops and switches that landed while a child's `Result` was out
/// and its terminal status was not yet (a remote run's `Ended` held a
/// second: `Setup::slow_ended`) — the window that setting is for; counted,
/// so a run that stopped reaching it fails its coverage. A trigger fired
/// at a child's `Result` counts by its `Fired` entry: an action logged
/// once it took effect (a switch, a stop) comes after the ends it caused.
pub(super) fn actions_between_result_and_end(log: &[LogEntry]) -> usize {
    let is_stop = |action: &HostAction| {
        matches!(
            action,
            HostAction::StopChild(_) | HostAction::SwitchAway | HostAction::StopParent
        )
    };
    let mut open: BTreeSet<AgentId> = BTreeSet::new();
    let (mut hits, mut fired_open) = (0, false);
    for entry in log {
        match entry {
            LogEntry::Event { event, .. } => match event {
                AgentEvent::Child(id, inner) if matches!(**inner, AgentEvent::Result(_)) => {
                    open.insert(id.clone());
                }
                AgentEvent::ChildStatus(id, status) if status.is_terminal() => {
                    open.remove(id);
                }
                _ => {}
            },
            LogEntry::Fired {
                child,
                moment: subagents::simulation::Moment::Result,
                ..
            } => fired_open = open.contains(child),
            LogEntry::Host { action, .. } => {
                if is_stop(action) && (fired_open || !open.is_empty()) {
                    hits += 1;
                }
                fired_open = false;
            }
            _ => {}
        }
    }
    hits
}

/// The children of `live` whose `failed` end was decided from outside
/// their turn, by their envelope's error: a hub that died before it read
/// the finish, a node that stopped, lost or refused the run — the only
/// `failed` a `Result` of another outcome may be followed by.
pub(super) fn failed_elsewhere(
    live: &subagents::simulation::LiveSimulation,
) -> impl Fn(&AgentId) -> bool + '_ {
    move |id: &AgentId| {
        live.thread().hub().status(id).is_some_and(|e| {
            e.status == SubAgentStatus::Failed
                && e.error.as_deref().is_some_and(|why| {
                    why.contains("hub stopped before the sub-agent ended") || why.contains("node")
                })
        })
    }
}
