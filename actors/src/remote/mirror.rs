//! What the parent's node knows of a child's turn on another node, from
//! its reports alone: the reports put back in order (each applied once),
//! the tool calls and the approval left open, and — when the node is lost
//! — the events that close the turn as a local stop would: every
//! `ToolStarted` its `ToolResult`, the approval its `ApprovalResolved`,
//! then one failed `Result`. A plain struct: the proxy actor only moves
//! messages through it.

use std::collections::BTreeMap;

use subagents_messages::remote::{ReportBody, RunReport};
use subagents_messages::{
    AgentEvent, AgentResult, ApprovalId, ApprovalOutcome, Outcome, ToolResult, ToolUseId, Usage,
};

/// The first words of a lost child's error: the node went away.
pub(crate) const NODE_LOST: &str = "node lost";

/// A remote turn, as its reports tell it.
#[derive(Debug, Default)]
pub(crate) struct Mirror {
    /// The seq of the next report to apply.
    next: u64,
    /// Reports that arrived ahead of a gap, by seq.
    early: BTreeMap<u64, ReportBody>,
    /// Calls started and not answered, in order (id, tool name).
    open: Vec<(ToolUseId, String)>,
    /// Approvals asked and not answered (id, the call).
    approvals: Vec<(ApprovalId, ToolUseId)>,
    /// Every approval asked in the turn, answered or not.
    asked: Vec<ApprovalId>,
    /// Its `Result` went by (nothing of the turn follows).
    ended: bool,
    /// That `Result`: what the turn ended with, if its node is lost
    /// before the `Ended` report that follows it.
    result: Option<AgentResult>,
    /// Calls answered so far.
    pub(crate) tool_calls: u32,
    /// Usage so far (from its result).
    pub(crate) usage: Usage,
}

impl Mirror {
    /// Takes a report: returns the bodies now in order — this one and
    /// those it unblocks — or none while a gap is open. A repeated report,
    /// or one for before `next`, is dropped.
    pub(crate) fn accept(&mut self, report: RunReport) -> Vec<ReportBody> {
        if report.seq < self.next {
            return Vec::new();
        }
        self.early.entry(report.seq).or_insert(report.body);
        let mut ready = Vec::new();
        while let Some(body) = self.early.remove(&self.next) {
            self.next += 1;
            ready.push(body);
        }
        ready
    }

    /// Notes an event on its way to the parent's stream; `false` for one
    /// after the turn's `Result` (dropped: nothing of a turn follows it).
    pub(crate) fn note(&mut self, event: &AgentEvent) -> bool {
        if self.ended {
            return false;
        }
        match event {
            AgentEvent::ToolStarted(started) => self
                .open
                .push((started.tool_use_id.clone(), started.name.clone())),
            AgentEvent::ToolResult(result) => {
                self.open.retain(|(id, _)| *id != result.tool_use_id);
                self.tool_calls += 1;
            }
            AgentEvent::ApprovalRequested(request) => {
                self.asked.push(request.id.clone());
                self.approvals
                    .push((request.id.clone(), request.tool_use_id.clone()));
            }
            AgentEvent::ApprovalResolved { id: resolved, .. } => {
                self.approvals.retain(|(id, _)| id != resolved);
            }
            AgentEvent::Result(result) => {
                self.ended = true;
                self.usage = result.usage;
                self.result = Some((**result).clone());
            }
            _ => {}
        }
        true
    }

    /// Why `event` cannot be what the node's agent `agent` emitted at this
    /// point of its turn (`None`: it can) — a node that lies, or has a bug.
    /// Checked before the event is noted or passed on: what the parent's
    /// stream shows of a remote child holds what a local child's holds
    /// (an approval in the child's name only, every `ToolResult` after its
    /// `ToolStarted`, no sub-agent's or thread's events: a child on a node
    /// starts none). Nothing is checked once the turn ended.
    pub(crate) fn incoherent(
        &self,
        event: &AgentEvent,
        agent: &subagents_messages::AgentId,
    ) -> Option<String> {
        if self.ended {
            return None;
        }
        let open = |id: &ToolUseId| self.open.iter().any(|(o, _)| o == id);
        match event {
            AgentEvent::ApprovalRequested(request) if !matches!(request.id.parts(), Some((owner, _)) if owner == *agent) => {
                Some(format!(
                    "asked an approval in another agent's name (`{}`)",
                    request.id
                ))
            }
            // A local turn asks each approval once, for a call it
            // started and not yet answered, one at a time: asked again,
            // the stream showed two requests and one answer, and the
            // host's answer to the second was refused as given.
            AgentEvent::ApprovalRequested(request) if self.asked.contains(&request.id) => {
                Some(format!("asked the approval `{}` twice", request.id))
            }
            AgentEvent::ApprovalRequested(request) if !open(&request.tool_use_id) => Some(format!(
                "asked an approval for a tool call not open (`{}`)",
                request.tool_use_id
            )),
            AgentEvent::ApprovalRequested(request)
                if self
                    .approvals
                    .iter()
                    .any(|(_, c)| *c == request.tool_use_id) =>
            {
                Some(format!(
                    "asked a second approval for the tool call `{}`",
                    request.tool_use_id
                ))
            }
            AgentEvent::ApprovalResolved { id, .. } if !self.awaits(id) => {
                Some(format!("answered an approval it never asked (`{id}`)"))
            }
            AgentEvent::ToolStarted(started) if open(&started.tool_use_id) => Some(format!(
                "started the tool call `{}` while it was open",
                started.tool_use_id
            )),
            AgentEvent::ToolResult(result) if !open(&result.tool_use_id) => Some(format!(
                "answered a tool call it never started (`{}`)",
                result.tool_use_id
            )),
            // A local turn cancels a call's approval before it answers the
            // call, and answers every call and approval before its
            // `Result`: after such a `Result` nothing would answer them.
            AgentEvent::ToolResult(result)
                if self.approvals.iter().any(|(_, c)| *c == result.tool_use_id) =>
            {
                Some(format!(
                    "answered the tool call `{}` while its approval was open",
                    result.tool_use_id
                ))
            }
            AgentEvent::Result(_) if !self.open.is_empty() || !self.approvals.is_empty() => {
                Some("ended its turn with a tool call or an approval unanswered".to_owned())
            }
            AgentEvent::Child(..)
            | AgentEvent::ChildStarted(_)
            | AgentEvent::ChildStatus(..)
            | AgentEvent::ChildRunning(_) => {
                Some("sent a sub-agent's event (a child on a node starts none)".to_owned())
            }
            AgentEvent::Wake { .. } | AgentEvent::UserMessage(_) | AgentEvent::SwitchedAway => {
                Some("sent an event only a thread emits".to_owned())
            }
            _ => None,
        }
    }

    /// The report missing ahead of those held (`None`: no gap).
    pub(crate) fn gap(&self) -> Option<u64> {
        (!self.early.is_empty()).then_some(self.next)
    }

    /// True when it waits on approval `id`.
    pub(crate) fn awaits(&self, id: &ApprovalId) -> bool {
        self.approvals.iter().any(|(waiting, _)| waiting == id)
    }

    /// Its `Result` went by.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// The `Result` it ended with, once it went by.
    pub(crate) fn result(&self) -> Option<&AgentResult> {
        self.result.as_ref()
    }

    /// The turn ends here, not on its node (the node was lost, refused
    /// the run, or the proxy stops): the events that close it, in the
    /// order a local stop emits them — each approval cancelled, each open
    /// call answered, then its `Result` saying `text` — and that result.
    /// Nothing once the turn had ended.
    pub(crate) fn close(
        &mut self,
        text: &str,
        outcome: Outcome,
        elapsed: std::time::Duration,
    ) -> Option<(Vec<AgentEvent>, AgentResult)> {
        if self.ended {
            return None;
        }
        let mut events = self.answer_open(text);
        let result = AgentResult {
            text: text.to_owned(),
            outcome,
            model_calls: 0,
            tool_calls: self.tool_calls,
            usage: self.usage,
            children_usage: Usage::default(),
            elapsed,
        };
        events.push(AgentEvent::Result(Box::new(result.clone())));
        self.ended = true;
        Some((events, result))
    }

    /// The node ended the turn (`Ended`) without its `Result` event: the
    /// events that close it with `result` — what it left open answered
    /// first, as a local close answers it (a node that sends `Ended`
    /// straight after a `ToolStarted` left that call without its
    /// `ToolResult`, and an approval pending for ever). Nothing once the
    /// turn had ended.
    pub(crate) fn end_with(&mut self, result: &AgentResult) -> Vec<AgentEvent> {
        if self.ended {
            return Vec::new();
        }
        let mut events = self.answer_open("its node ended the turn without answering it");
        let event = AgentEvent::Result(Box::new(result.clone()));
        self.note(&event);
        events.push(event);
        events
    }

    /// Each approval cancelled, then each open call answered, saying
    /// `text` (the order a local close emits them in).
    fn answer_open(&mut self, text: &str) -> Vec<AgentEvent> {
        let mut events = Vec::new();
        for (id, tool_use_id) in self.approvals.drain(..) {
            events.push(AgentEvent::ApprovalResolved {
                id,
                tool_use_id,
                outcome: ApprovalOutcome::Cancelled(text.to_owned()),
            });
        }
        for (tool_use_id, name) in self.open.drain(..) {
            events.push(AgentEvent::ToolResult(ToolResult {
                tool_use_id,
                name,
                output: format!("not finished: {text}"),
                is_error: true,
            }));
            self.tool_calls += 1;
        }
        events
    }

    /// The approvals it waits on.
    pub(crate) fn pending_approvals(&self) -> usize {
        self.approvals.len()
    }
}

/// The failed outcome of a run whose node was lost (`why`), and its text.
pub(crate) fn lost_outcome(node: &str, why: &str) -> (String, Outcome) {
    let text = format!("{NODE_LOST}: node `{node}`: {why}");
    (text.clone(), Outcome::Failed(text))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use subagents_messages::{ApprovalRequest, ToolStarted};

    fn report(seq: u64, text: &str) -> RunReport {
        RunReport {
            key: 1,
            seq,
            body: ReportBody::Event(AgentEvent::Text(text.into())),
        }
    }

    fn texts(bodies: Vec<ReportBody>) -> Vec<String> {
        bodies
            .into_iter()
            .map(|b| match b {
                ReportBody::Event(AgentEvent::Text(t)) => t,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn reports_apply_once_and_in_order_whatever_order_they_arrive_in() {
        // Every order of four reports, each sent twice.
        let orders = [
            [0, 1, 2, 3],
            [3, 2, 1, 0],
            [1, 0, 3, 2],
            [2, 0, 3, 1],
            [0, 2, 1, 3],
        ];
        for order in orders {
            let mut mirror = Mirror::default();
            let mut applied = Vec::new();
            for seq in order.iter().chain(order.iter()) {
                applied.extend(texts(mirror.accept(report(*seq, &seq.to_string()))));
            }
            assert_eq!(applied, ["0", "1", "2", "3"], "order {order:?}");
        }
    }

    fn started(id: &str) -> AgentEvent {
        AgentEvent::ToolStarted(ToolStarted {
            tool_use_id: ToolUseId::new(id),
            name: "sleep".into(),
            arguments: "{}".into(),
        })
    }

    #[test]
    fn a_lost_node_closes_what_is_open_then_fails_once() {
        let mut mirror = Mirror::default();
        assert!(mirror.note(&started("call_1")));
        assert!(mirror.note(&AgentEvent::ToolResult(ToolResult {
            tool_use_id: ToolUseId::new("call_1"),
            name: "sleep".into(),
            output: "slept".into(),
            is_error: false,
        })));
        mirror.note(&started("call_2"));
        mirror.note(&AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
            id: ApprovalId::new("agent_1-approval-1"),
            tool_use_id: ToolUseId::new("call_2"),
            tool_name: "sleep".into(),
            arguments: "{}".into(),
        })));
        assert!(mirror.awaits(&ApprovalId::new("agent_1-approval-1")));
        let (text, outcome) = lost_outcome("b", "the link dropped");
        let (events, result) = mirror
            .close(&text, outcome, std::time::Duration::ZERO)
            .unwrap();
        assert!(
            matches!(&events[0], AgentEvent::ApprovalResolved { outcome, .. }
            if matches!(outcome, ApprovalOutcome::Cancelled(why) if why.starts_with(NODE_LOST)))
        );
        assert!(matches!(&events[1], AgentEvent::ToolResult(r)
            if r.tool_use_id.as_str() == "call_2" && r.is_error));
        assert!(matches!(&events[2], AgentEvent::Result(r) if **r == result));
        assert_eq!(events.len(), 3);
        assert_eq!(result.tool_calls, 2);
        assert!(
            matches!(&result.outcome, Outcome::Failed(why) if why.contains("the link dropped"))
        );
        // Once: a second loss, or an event after the end, changes nothing.
        assert!(
            mirror
                .close("again", Outcome::Stopped, std::time::Duration::ZERO)
                .is_none()
        );
        assert!(!mirror.note(&AgentEvent::Text("late".into())));
    }

    /// A node's `Result` (or `ToolResult`) that left a call or its
    /// approval open passed: the `ToolStarted` on the parent's stream was
    /// never answered (its local twin cannot end so).
    #[test]
    fn a_result_or_answer_that_leaves_something_open_is_incoherent() {
        let agent = subagents_messages::AgentId::new("agent_1");
        let result = AgentEvent::Result(Box::new(done()));
        let answer = AgentEvent::ToolResult(ToolResult {
            tool_use_id: ToolUseId::new("call_1"),
            name: "sleep".into(),
            output: "slept".into(),
            is_error: false,
        });
        let mut mirror = Mirror::default();
        assert_eq!(mirror.incoherent(&result, &agent), None);
        mirror.note(&started("call_1"));
        assert!(mirror.incoherent(&result, &agent).is_some());
        mirror.note(&AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
            id: ApprovalId::new("agent_1-approval-1"),
            tool_use_id: ToolUseId::new("call_1"),
            tool_name: "sleep".into(),
            arguments: "{}".into(),
        })));
        assert!(mirror.incoherent(&answer, &agent).is_some());
        mirror.note(&AgentEvent::ApprovalResolved {
            id: ApprovalId::new("agent_1-approval-1"),
            tool_use_id: ToolUseId::new("call_1"),
            outcome: ApprovalOutcome::Approved,
        });
        assert_eq!(mirror.incoherent(&answer, &agent), None);
        mirror.note(&answer);
        assert_eq!(mirror.incoherent(&result, &agent), None);
    }

    /// Every report a node's agent cannot have sent fails its child, each
    /// for its own reason (review: only two of the kinds were reached by a
    /// test; any other arm could go unnoticed).
    #[test]
    fn each_report_an_agent_cannot_have_sent_is_incoherent_for_its_reason() {
        let agent = subagents_messages::AgentId::new("agent_1");
        let ask = |id: &str, call: &str| {
            AgentEvent::ApprovalRequested(Box::new(ApprovalRequest {
                id: ApprovalId::new(id),
                tool_use_id: ToolUseId::new(call),
                tool_name: "sleep".into(),
                arguments: "{}".into(),
            }))
        };
        let resolved = |id: &str| AgentEvent::ApprovalResolved {
            id: ApprovalId::new(id),
            tool_use_id: ToolUseId::new("call_1"),
            outcome: ApprovalOutcome::Approved,
        };
        let answer = AgentEvent::ToolResult(ToolResult {
            tool_use_id: ToolUseId::new("call_9"),
            name: "sleep".into(),
            output: String::new(),
            is_error: false,
        });
        let (a1, open) = ("agent_1-approval-1", started("call_1"));
        let status = AgentEvent::ChildRunning(agent.clone());
        let (other, user) = (
            ask("parent-approval-1", "call_1"),
            AgentEvent::UserMessage("hi".into()),
        );
        let cases: Vec<(Vec<AgentEvent>, AgentEvent, &str)> = vec![
            (vec![], other, "another agent's name"),
            (
                vec![open.clone(), ask(a1, "call_1"), resolved(a1)],
                ask(a1, "call_1"),
                "twice",
            ),
            (vec![], ask(a1, "call_9"), "not open"),
            (
                vec![open.clone(), ask(a1, "call_1")],
                ask("agent_1-approval-2", "call_1"),
                "second approval",
            ),
            (vec![], resolved(a1), "never asked"),
            (vec![open.clone()], open.clone(), "while it was open"),
            (vec![], answer, "never started"),
            (vec![], status, "sub-agent's event"),
            (vec![], user, "only a thread emits"),
            (vec![], AgentEvent::SwitchedAway, "only a thread emits"),
        ];
        for (before, event, reason) in cases {
            let mut mirror = Mirror::default();
            for e in &before {
                assert_eq!(mirror.incoherent(e, &agent), None, "{e:?}");
                mirror.note(e);
            }
            let why = mirror.incoherent(&event, &agent);
            assert!(
                why.as_deref().is_some_and(|w| w.contains(reason)),
                "{event:?}: {why:?}"
            );
        }
    }

    /// A turn's `Result` that says it completed.
    fn done() -> AgentResult {
        AgentResult {
            text: "done".into(),
            outcome: Outcome::Completed,
            model_calls: 1,
            tool_calls: 0,
            usage: Usage::default(),
            children_usage: Usage::default(),
            elapsed: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn a_turn_that_ended_is_not_lost() {
        let mut mirror = Mirror::default();
        mirror.note(&AgentEvent::Result(Box::new(done())));
        assert!(mirror.ended());
        assert!(
            mirror
                .close("late", Outcome::Stopped, std::time::Duration::ZERO)
                .is_none()
        );
        assert_eq!(mirror.result().map(|r| r.text.as_str()), Some("done"));
    }
}
