//! The envelope: one record per child for the life of a session.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::event::SubAgentStatus;
use crate::ids::{AgentId, ThreadId, ToolUseId};
use crate::model::Usage;

/// Everything known about one child. Persisted (as JSON) when it is
/// requested and again when it ends (with its run, by a thread's store).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The child's id.
    pub id: AgentId,
    /// Its name: its profile's name, else the first line of its system
    /// prompt.
    pub name: String,
    /// The parent's call that requested it.
    pub parent_tool_use_id: ToolUseId,
    /// The input it was given.
    pub task: String,
    /// The tools it may call.
    pub tools: Vec<String>,
    /// Where it is now.
    pub status: SubAgentStatus,
    /// The parent no longer waits on it.
    pub background: bool,
    /// Wall-clock stamp (ms since the Unix epoch) when it was requested.
    pub requested_at_ms: u64,
    /// Wall-clock stamp when it started running.
    pub started_at_ms: Option<u64>,
    /// Wall-clock stamp when it reached a terminal status.
    pub finished_at_ms: Option<u64>,
    /// Running time so far (tokio time), excluding time queued.
    pub elapsed: Duration,
    /// Tool calls it made.
    pub tool_calls: u32,
    /// The last tool it called.
    pub last_tool: Option<String>,
    /// Tokens it used (so far, while it runs).
    pub usage: Usage,
    /// Model calls it made (so far, while it runs; 0 when read from a
    /// file written before they were counted).
    #[serde(default)]
    pub model_calls: u32,
    /// Tokens its own children used (theirs and their children's), as its
    /// last result counted them.
    #[serde(default)]
    pub children_usage: Usage,
    /// Its final (or partial) answer.
    pub result: Option<String>,
    /// What went wrong, when it failed or was stopped.
    pub error: Option<String>,
    /// The result was delivered through `use_agent result` (no wake).
    pub claimed: bool,
    /// Its result is owed to the parent as a wake not yet delivered (a
    /// finished background child whose wake waits in the thread's queue):
    /// a restart delivers it. Cleared once the wake is delivered, dropped
    /// (a switch, off screen, the thread closed) or the result claimed;
    /// false when read from a file written before it was kept.
    #[serde(default)]
    pub wake_owed: bool,
    /// 1 for a child of the thread's parent, 2 for a child of a child…
    /// (1 when read from a file written before depth was kept).
    #[serde(default = "first_level")]
    pub depth: u32,
    /// The run before this one: this child goes on from that one's
    /// conversation (a `use_agent send` to it after it finished).
    #[serde(default)]
    pub resumed_from: Option<AgentId>,
    /// The run after this one, once a message resumed it.
    #[serde(default)]
    pub continued_as: Option<AgentId>,
    /// The thread it belongs to, as its store recorded it: a restart
    /// wakes only a thread of that id for it (its owed and interrupted
    /// wakes). `None` in a hub's own copy (the thread writes it with the
    /// envelope), for a thread opened without an id, and when read from a
    /// file written before threads were kept — such a child's wakes go to
    /// the first thread shown on the store.
    #[serde(default)]
    pub thread: Option<ThreadId>,
    /// A stop reached this run after it had ended — `interrupted` (left
    /// waiting for a message), `done` or `failed`, each of which a message
    /// would resume: it is cancelled for good, and a message to it is
    /// refused as a stopped child's. Its status stays the one it ended
    /// with (the stream's last word on it). False when read from a file
    /// written before it was kept.
    #[serde(default)]
    pub cancelled: bool,
    /// The host deleted the thread that wrote it (`Threads::delete`): no
    /// thread reaches it (reads, claims or resumes it) or is woken for it,
    /// whatever thread is opened under that id later. Its file stays until
    /// the retention prunes it. False when read from a file written before
    /// it was kept.
    #[serde(default)]
    pub forgotten: bool,
    /// A stop (not an interrupt) was accepted while it ran: it ends
    /// `stopped` — or, finished in that instant, as it finished. Written as
    /// the stop is accepted, so a process that dies before the end is
    /// written (a node's child answers a stop in up to 30 s) leaves it
    /// `stopped` at the next open, not `interrupted`: no restart wake
    /// offers, and no message resumes, a run the host stopped. False when
    /// read from a file written before it was kept.
    #[serde(default)]
    pub stopping: bool,
}

impl Envelope {
    /// A stop now would cancel it ([`Envelope::cancelled`]): it has ended
    /// in a way a message would resume (`done`, `failed`, `interrupted`),
    /// and is not cancelled yet.
    pub fn cancellable(&self) -> bool {
        self.status.is_terminal() && self.status != SubAgentStatus::Stopped && !self.cancelled
    }
}

fn first_level() -> u32 {
    1
}
