//! The checks run over a thread's whole log: every guarantee of
//! docs/event-ordering.md, every wake rule, and the delivery rule (a
//! child's result reaches the parent once).

use std::collections::{HashMap, HashSet};

use subagents::messages::{AgentEvent, AgentId, SubAgentStatus};
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

/// Every guarantee of docs/event-ordering.md and every wake rule, over the
/// whole log; the delivery rule too. `exactly_once`: whether every result
/// that could reach the parent must have (at rest, with the Detach
/// policy).
pub(crate) fn check_everything(log: &[LogEntry], at_rest: bool, exactly_once: bool) {
    let events = events(log);
    common::check_log(&events, at_rest);
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
                    }
                    AgentEvent::Result(_) => {
                        assert!(generating > 0, "a Result with no turn in flight");
                        generating -= 1;
                        wake_in_flight = false;
                    }
                    AgentEvent::ChildStarted(info) => {
                        started.push(info.id.clone());
                        // Resumed as this run: its successor's result is
                        // the one that wakes the parent.
                        if let Some(from) = &info.resumed_from {
                            wake_dropped.insert(from.clone());
                        }
                    }
                    AgentEvent::ChildStatus(id, status) if status.is_terminal() => {
                        terminal.insert(id.clone(), (i, *status));
                        if !on_screen {
                            finished_off_screen.insert(id.clone());
                        }
                    }
                    AgentEvent::Wake { child, .. } => {
                        assert!(!wake_in_flight, "two wakes in flight ({child})");
                        assert_eq!(generating, 0, "a wake ({child}) while the parent generates");
                        assert!(!typing, "a wake ({child}) while the user types");
                        assert!(on_screen, "a wake ({child}) while off screen");
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
                        wake_in_flight = true;
                        generating += 1;
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
    if at_rest && exactly_once {
        for (child, (_, status)) in &terminal {
            let finished = matches!(status, SubAgentStatus::Done | SubAgentStatus::Failed);
            if finished && !wake_dropped.contains(child) && !finished_off_screen.contains(child) {
                assert!(
                    delivered_to.contains(child),
                    "the result of {child} ({status}) never reached the parent"
                );
            }
        }
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
