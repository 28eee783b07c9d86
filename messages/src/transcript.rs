//! The transcript: a pure fold of events into a tree. A child's rows nest
//! under the parent's `use_agent` row, so a UI renders children with the
//! same views it uses for the parent.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::event::{
    AgentEvent, ApprovalOutcome, ApprovalRequest, Outcome, SubAgentInfo, SubAgentStatus,
};
use crate::ids::{AgentId, ToolUseId};

/// What a row the killed process left open reads once
/// [`Transcript::end_open_turns`] closed it.
const INTERRUPTED: &str = "interrupted: the process stopped before this ended";

/// One row of a transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TranscriptItem {
    /// A user turn the host recorded; in a child's rows, a message the
    /// agent that started it sent ([`AgentEvent::Steered`]).
    User(String),
    /// A wake: one system-styled line, not a user bubble.
    Wake(String),
    /// Text from the model (consecutive deltas merged).
    Assistant(String),
    /// A tool call, with its output once it finished.
    Tool {
        /// The call's id.
        id: ToolUseId,
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: String,
        /// Its output, once finished.
        output: Option<String>,
        /// The output is an error sentence.
        is_error: bool,
    },
    /// A tool call's approval: live until `resolved` is set.
    Approval {
        /// The request.
        request: ApprovalRequest,
        /// How it was closed, once it was.
        resolved: Option<ApprovalOutcome>,
    },
    /// A child agent: its info, status and its own nested transcript.
    Agent(SubAgentRun),
    /// The end of a turn.
    Result {
        /// The final or partial answer.
        text: String,
        /// How the turn ended.
        outcome: Outcome,
    },
}

/// A child's run inside a transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubAgentRun {
    /// What `ChildStarted` said.
    pub info: SubAgentInfo,
    /// The last status seen.
    pub status: Option<SubAgentStatus>,
    /// It waits in the queue (a `queued` status, and no `ChildRunning` or
    /// terminal status yet).
    pub queued: bool,
    /// The child's own rows (read back at most 128 levels deep: a stored
    /// transcript nested deeper — damaged bytes — is an error, not a
    /// stack overflow).
    #[serde(deserialize_with = "crate::event::one_level_deeper")]
    pub transcript: Transcript,
}

/// Rows read one by one, without first reserving room for as many as the
/// input claims: each child's row holds its own transcript, and each level
/// reserved what serde allows a claimed length (1 MiB) before its first
/// row was read — 128 levels of a few bytes each, 128 MiB at once,
/// against the codec's "a few MiB for a moment".
fn unreserved<'de, D, T>(reader: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Rows<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Rows<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence of rows")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut rows = Vec::new();
            while let Some(row) = seq.next_element()? {
                rows.push(row);
            }
            Ok(rows)
        }
    }
    reader.deserialize_seq(Rows(std::marker::PhantomData))
}

/// A fold of events into rows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// The rows, in order.
    #[serde(deserialize_with = "unreserved")]
    pub items: Vec<TranscriptItem>,
    /// User messages sent while a turn ran, not yet rows: the parent reads
    /// each as the turn after the running one, so each becomes a row after
    /// that turn's `Result`, as in the model's conversation (the stream has
    /// the message where it was typed, between the running turn's
    /// deltas). [`render`](Self::render) lists them last, as queued.
    #[serde(default)]
    pub queued_user: VecDeque<String>,
    /// Top-level turns (a `UserMessage` or a `Wake`) whose `Result` has
    /// not come yet.
    #[serde(default)]
    open_turns: usize,
}

impl Transcript {
    /// An empty transcript.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds a whole event log.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a AgentEvent>) -> Self {
        let mut t = Self::new();
        for event in events {
            t.apply(event);
        }
        t
    }

    /// Records a user row, as it is: no turn is opened. A thread's stream
    /// says each user turn itself ([`AgentEvent::UserMessage`], folded by
    /// [`Transcript::apply`]): pushed as well, the row came twice. A host
    /// of a bare parent (no thread, so no `UserMessage`) applies one with
    /// the text it sent — pushed instead, the turn was never counted open,
    /// and a reply streaming around a child's start, or a message typed
    /// while it streamed, split the reply into two rows.
    pub fn push_user(&mut self, text: impl Into<String>) {
        self.items.push(TranscriptItem::User(text.into()));
    }

    /// Records a wake line.
    pub fn push_wake(&mut self, line: impl Into<String>) {
        self.items.push(TranscriptItem::Wake(line.into()));
    }

    /// Applies one event.
    pub fn apply(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::Text(delta) => match self.items.last_mut() {
                Some(TranscriptItem::Assistant(text)) => text.push_str(delta),
                _ => self.items.push(TranscriptItem::Assistant(delta.clone())),
            },
            AgentEvent::ToolStarted(call) => self.items.push(TranscriptItem::Tool {
                id: call.tool_use_id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                output: None,
                is_error: false,
            }),
            AgentEvent::ToolResult(result) => {
                let row = self.items.iter_mut().rev().find(
                    |item| matches!(item, TranscriptItem::Tool { id, .. } if *id == result.tool_use_id),
                );
                if let Some(TranscriptItem::Tool {
                    output, is_error, ..
                }) = row
                {
                    *output = Some(result.output.clone());
                    *is_error = result.is_error;
                }
            }
            AgentEvent::ApprovalRequested(request) => self.items.push(TranscriptItem::Approval {
                request: (**request).clone(),
                resolved: None,
            }),
            AgentEvent::ApprovalResolved { id, outcome, .. } => {
                let row = self.items.iter_mut().rev().find(|item| {
                    matches!(item, TranscriptItem::Approval { request, .. } if request.id == *id)
                });
                if let Some(TranscriptItem::Approval { resolved, .. }) = row {
                    *resolved = Some(outcome.clone());
                }
            }
            AgentEvent::Result(result) => {
                self.items.push(TranscriptItem::Result {
                    text: result.text.clone(),
                    outcome: result.outcome.clone(),
                });
                self.open_turns = self.open_turns.saturating_sub(1);
                // The next turn starts: the message it reads is its row.
                if let Some(next) = self.queued_user.pop_front() {
                    self.push_user(next);
                }
            }
            AgentEvent::ChildStarted(info) => self.insert_child(info),
            // A message read before the child's next answer: a row of its
            // own (the answers either side of it stay apart).
            AgentEvent::Steered(text) => self.push_user(text.clone()),
            AgentEvent::Child(id, inner) => {
                if let Some(run) = self.child_mut(id) {
                    run.transcript.apply(inner);
                }
            }
            AgentEvent::ChildStatus(id, status) => {
                if let Some(run) = self.child_mut(id) {
                    run.status = Some(*status);
                    // A queued child handed to the background still waits:
                    // only its start or its end ends the wait.
                    match status {
                        SubAgentStatus::Queued => run.queued = true,
                        SubAgentStatus::Running => run.queued = false,
                        other if other.is_terminal() => run.queued = false,
                        _ => {}
                    }
                }
            }
            AgentEvent::ChildRunning(id) => {
                if let Some(run) = self.child_mut(id) {
                    run.queued = false;
                }
            }
            AgentEvent::Wake { line, .. } => {
                // Saturating: the count may be restored from a file.
                self.open_turns = self.open_turns.saturating_add(1);
                self.push_wake(line.clone());
            }
            AgentEvent::UserMessage(text) => {
                if self.open_turns > 0 {
                    self.queued_user.push_back(text.clone());
                } else {
                    self.push_user(text.clone());
                }
                self.open_turns = self.open_turns.saturating_add(1);
            }
            AgentEvent::SwitchedAway => {
                let line = "switched away: sub-agents stopped, pending wakes dropped";
                // A switch stops the children, not the parent's turn: a
                // reply still streaming stays one row, the notice before
                // it (pushed after it, the rest of the reply began a row
                // of its own).
                match self.items.last() {
                    Some(TranscriptItem::Assistant(_)) if self.open_turns > 0 => {
                        let at = self.items.len() - 1;
                        self.items.insert(at, TranscriptItem::Wake(line.into()));
                    }
                    _ => self.push_wake(line),
                }
            }
        }
    }

    /// Ends what the stream that fed it left open: a transcript restored
    /// from what a host saved (serialized, or its event log folded again)
    /// after its process was killed mid-turn. The killed process's turns
    /// never get their `Result`, so the fold stayed a turn out of step for
    /// good: the next user message was queued behind the dead turn, its
    /// reply glued onto that turn's text, and every later message drawn
    /// after its own answer. Each open turn ends here with a stopped
    /// `Result` row (each message queued behind it then its row, as a
    /// `Result` does), a call with no output reads as cut, an approval
    /// still open as cancelled, a child that had not ended as
    /// `interrupted` — what the store says of it after the restart. Call
    /// it once, before folding the new process's events.
    pub fn end_open_turns(&mut self) {
        self.close_open_rows();
        // At most the running turn and those queued behind it: a count a
        // hand-edited or foreign file gave (it is read, not checked) set
        // how many rows this pushed — `u64::MAX` of them.
        self.open_turns = self.open_turns.min(self.queued_user.len() + 1);
        while self.open_turns > 0 {
            self.items.push(TranscriptItem::Result {
                text: INTERRUPTED.to_owned(),
                outcome: Outcome::Stopped,
            });
            self.open_turns -= 1;
            if let Some(next) = self.queued_user.pop_front() {
                self.push_user(next);
            }
        }
        // Queued behind no open turn (a hand-edited transcript): rows now.
        while let Some(next) = self.queued_user.pop_front() {
            self.push_user(next);
        }
    }

    /// Closes the rows left open, here and in every child's rows.
    fn close_open_rows(&mut self) {
        for item in &mut self.items {
            match item {
                TranscriptItem::Tool {
                    output: output @ None,
                    is_error,
                    ..
                } => {
                    *output = Some(INTERRUPTED.to_owned());
                    *is_error = true;
                }
                TranscriptItem::Approval {
                    resolved: resolved @ None,
                    ..
                } => *resolved = Some(ApprovalOutcome::Cancelled(INTERRUPTED.to_owned())),
                TranscriptItem::Agent(run) => {
                    if !run.status.is_some_and(SubAgentStatus::is_terminal) {
                        run.status = Some(SubAgentStatus::Interrupted);
                        run.queued = false;
                    }
                    run.transcript.close_open_rows();
                }
                _ => {}
            }
        }
    }

    /// The child run with this id, at this level: the newest row of it (a
    /// transcript restored from before a restart may hold an earlier run
    /// of the id, where ids began again).
    pub fn child(&self, id: &AgentId) -> Option<&SubAgentRun> {
        self.items.iter().rev().find_map(|item| match item {
            TranscriptItem::Agent(run) if run.info.id == *id => Some(run),
            _ => None,
        })
    }

    fn child_mut(&mut self, id: &AgentId) -> Option<&mut SubAgentRun> {
        self.items.iter_mut().rev().find_map(|item| match item {
            TranscriptItem::Agent(run) if run.info.id == *id => Some(run),
            _ => None,
        })
    }

    /// Inserts right after the requesting `use_agent` row and the siblings
    /// already stacked under it; at the end when that row is not here (a
    /// host's own request, a run resumed from another level) — before a
    /// reply still streaming, which stays one row (pushed after it, the
    /// rest of the reply began a row of its own).
    fn insert_child(&mut self, info: &SubAgentInfo) {
        let run = TranscriptItem::Agent(SubAgentRun {
            info: info.clone(),
            status: None,
            queued: false,
            // A child's rows are one run, its turn open until its
            // `Result` (none of its events follows that): counted open, a
            // child of its own from elsewhere (a host's request in its
            // name) goes before its reply still streaming, as at the top
            // (counted 0, it split the reply in two).
            transcript: Transcript {
                open_turns: 1,
                ..Transcript::new()
            },
        });
        let row = self.items.iter().rposition(
            |item| matches!(item, TranscriptItem::Tool { id, .. } if *id == info.parent_tool_use_id),
        );
        let Some(mut at) = row.map(|r| r + 1) else {
            match self.items.last() {
                Some(TranscriptItem::Assistant(_)) if self.open_turns > 0 => {
                    self.items.insert(self.items.len() - 1, run);
                }
                _ => self.items.push(run),
            }
            return;
        };
        while matches!(self.items.get(at), Some(TranscriptItem::Agent(r)) if r.info.parent_tool_use_id == info.parent_tool_use_id)
        {
            at += 1;
        }
        self.items.insert(at, run);
    }

    /// Draws the tree as indented text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out, 0);
        // As every row: a queued message's later lines hang under its
        // first, escapes and controls removed (printed raw, a typed
        // "\nassistant: …" read as a row of the thread's own).
        for text in &self.queued_user {
            push_row(&mut out, "", &format!("user (queued): {text}"));
        }
        out
    }

    fn render_into(&self, out: &mut String, depth: usize) {
        let pad = "    ".repeat(depth);
        for item in &self.items {
            let line = match item {
                TranscriptItem::User(text) => format!("user: {text}"),
                TranscriptItem::Wake(line) => format!("· {line}"),
                TranscriptItem::Assistant(text) => format!("assistant: {}", text.trim()),
                TranscriptItem::Tool {
                    name,
                    arguments,
                    output,
                    is_error,
                    ..
                } => {
                    let shown = match output {
                        None => "…".to_owned(),
                        Some(o) if *is_error => format!("✗ {}", first_line(o)),
                        Some(o) => format!("→ {}", first_line(o)),
                    };
                    // Cut as the output is: a model's made-up 64 KiB name,
                    // or a file's content in the arguments, was one row.
                    format!("[{}] {} {shown}", first_line(name), first_line(arguments))
                }
                TranscriptItem::Approval { request, resolved } => match resolved {
                    None => format!("approval? {} ({})", request.tool_name, request.id),
                    Some(ApprovalOutcome::Approved) => {
                        format!("approved: {} ({})", request.tool_name, request.id)
                    }
                    Some(ApprovalOutcome::Denied) => {
                        format!("denied: {} ({})", request.tool_name, request.id)
                    }
                    Some(ApprovalOutcome::Cancelled(why)) => {
                        format!(
                            "approval cancelled: {} ({}): {why}",
                            request.tool_name, request.id
                        )
                    }
                },
                // The outcome by its kind: a failure's text is the
                // result's own (its first line is shown), never repeated
                // whole on the row.
                TranscriptItem::Result { text, outcome } => match outcome {
                    Outcome::Completed => format!("result: {}", first_line(text)),
                    Outcome::LimitReached(limit) => {
                        format!("result ({limit}): {}", first_line(text))
                    }
                    Outcome::Failed(_) => format!("result (failed): {}", first_line(text)),
                    Outcome::Stopped => format!("result (stopped): {}", first_line(text)),
                },
                TranscriptItem::Agent(run) => {
                    let status = run.status.map_or("requested", |s| s.as_str());
                    let mode = match (run.info.background, run.queued && status != "queued") {
                        (_, true) => ", queued",
                        (true, false) => ", background",
                        (false, false) => "",
                    };
                    format!(
                        "┗ agent {} \"{}\" [{status}{mode}]",
                        run.info.id, run.info.name
                    )
                }
            };
            push_row(out, &pad, &line);
            if let TranscriptItem::Agent(run) = item {
                run.transcript.render_into(out, depth + 1);
            }
        }
    }
}

/// One row: every line of it stays inside it (a child's second paragraph
/// at the margin read as a row of the thread's own, and a model could
/// write one: "user: …"), hanging under its first; escapes and controls
/// are removed.
fn push_row(out: &mut String, pad: &str, line: &str) {
    for (n, text) in crate::text::clean_lines(line).split('\n').enumerate() {
        out.push_str(pad);
        if n > 0 {
            out.push_str("  ");
        }
        out.push_str(text);
        out.push('\n');
    }
}

fn first_line(text: &str) -> String {
    let line = text
        .split(['\n', '\r', '\u{2028}', '\u{2029}'])
        .next()
        .unwrap_or("");
    if line.chars().count() > 100 {
        format!("{}…", line.chars().take(100).collect::<String>())
    } else {
        line.to_owned()
    }
}

#[cfg(test)]
mod restored;
#[cfg(test)]
mod tests;
