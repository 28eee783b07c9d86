//! What a turn has done so far: the counts a partial result reads.

use subagents_messages::Usage;

/// What a turn has done so far; read when a limit or a stop cuts it short.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Model calls finished.
    pub(crate) model_calls: u32,
    /// Tool calls finished.
    pub(crate) tool_calls: u32,
    /// Tokens used.
    pub(crate) usage: Usage,
    /// Some of `usage` is an estimate (a call's server reported none).
    pub(crate) usage_estimated: bool,
    /// Some of `usage` a server reported.
    pub(crate) usage_reported: bool,
    /// Why the model's output was cut (its `finish_reason`), if it was.
    pub(crate) cut: Option<String>,
    /// Tool names called, in order.
    pub(crate) tools_used: Vec<String>,
    /// The last non-empty text the model wrote.
    pub(crate) last_text: String,
    /// Tokens the children whose results this turn took used (their own
    /// and, recursively, their children's).
    pub(crate) children_usage: Usage,
}

impl Progress {
    /// Counts `estimate`, saying some of the usage is estimated.
    pub(crate) fn add_estimate(&mut self, estimate: Usage) {
        self.usage.add(estimate);
        self.usage_estimated = true;
    }

    /// Counts `usage`, as a server reported it.
    pub(crate) fn add_reported(&mut self, usage: Usage) {
        self.usage.add(usage);
        self.usage_reported = true;
    }
}
