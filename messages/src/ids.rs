//! Identifiers. Each is a cheap-to-clone shared string (`Arc<str>`), so
//! wrapping an event for a nesting level never copies an id.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps a string as this kind of id.
            pub fn new(id: impl Into<Arc<str>>) -> Self {
                Self(id.into())
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), &*self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::new(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::new(s)
            }
        }
    };
}

string_id!(
    /// A conversation thread, as the host names it.
    ThreadId
);
string_id!(
    /// An agent: a parent or a child. Child ids look like `agent_3`.
    AgentId
);
string_id!(
    /// One tool call the model asked for (the OpenAI `tool_call.id`).
    ToolUseId
);
string_id!(
    /// One approval request; the host resolves it by this id.
    ApprovalId
);

/// What separates an approval id's agent from its number.
const APPROVAL_SEPARATOR: &str = "-approval-";

impl ApprovalId {
    /// The `n`-th approval `agent` asked for: `agent_3-approval-2`.
    pub fn for_agent(agent: &AgentId, n: u64) -> Self {
        Self::new(format!("{agent}{APPROVAL_SEPARATOR}{n}"))
    }

    /// The agent that asked and its number, read back from the id; `None`
    /// for an id no agent made (`"other"`, `"x-approval-y"`, and a number
    /// written as no agent writes it: `01`, `+1`, `0`). The last separator
    /// counts, so an agent id that itself contains `-approval-` still
    /// reads back whole.
    pub fn parts(&self) -> Option<(AgentId, u64)> {
        let (agent, digits) = self.as_str().rsplit_once(APPROVAL_SEPARATOR)?;
        // As `for_agent` writes it: digits only, from 1, no leading zero.
        if !digits.bytes().all(|b| b.is_ascii_digit()) || digits.starts_with('0') {
            return None;
        }
        let n = digits.parse::<u64>().ok()?;
        (!agent.is_empty()).then(|| (AgentId::new(agent), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_ids_read_back_their_agent_and_number() {
        let id = ApprovalId::for_agent(&AgentId::new("agent_3"), 2);
        assert_eq!(id.as_str(), "agent_3-approval-2");
        assert_eq!(id.parts(), Some((AgentId::new("agent_3"), 2)));
        let odd = ApprovalId::for_agent(&AgentId::new("a-approval-b"), 7);
        assert_eq!(odd.parts(), Some((AgentId::new("a-approval-b"), 7)));
        // Forged (a number no agent writes): the agent read it as its own
        // id's number while it lived, and answered `Unknown` by its exact
        // id — the hub, once it ended, `Ended`. One answer for one id.
        for foreign in [
            "other",
            "x-approval-y",
            "-approval-1",
            "",
            "agent_1-approval-01",
            "agent_1-approval-+1",
            "agent_1-approval-0",
            "agent_1-approval-",
        ] {
            assert_eq!(ApprovalId::new(foreign).parts(), None, "{foreign}");
        }
    }
}
