//! What a delegation builder refuses before it starts anything.

use super::DelegationBuilder;
use crate::agent::AgentError;
use crate::defaults::DEPTH_CEILING;

impl DelegationBuilder {
    /// What [`DelegationBuilder::spawn`] refuses before it starts anything:
    /// a request option no server takes, a limit of zero, a `max_depth`
    /// past 16, a profile no call could select ([`AgentError::Options`],
    /// [`AgentError::Limits`], [`AgentError::Profile`]). A host building
    /// threads from settings can check them first; `ThreadHandle::spawn`
    /// does.
    ///
    /// A child setting's refusal says which setter held it (`… (set by
    /// child_limits)`): the same field of the parent's and the children's
    /// read alike.
    pub fn check(&self) -> Result<(), AgentError> {
        let (check, limits) = (crate::agent::check_options, crate::agent::check_limits);
        let children = |setter: &'static str| {
            move |e: AgentError| match e {
                AgentError::Options { field, why } => AgentError::Options {
                    field,
                    why: format!("{why} (set by {setter})"),
                },
                AgentError::Limits { field, why } => AgentError::Limits {
                    field,
                    why: format!("{why} (set by {setter})"),
                },
                other => other,
            }
        };
        depth_within_ceiling(self.max_depth)?;
        check(&self.options)?;
        check(&self.child_options).map_err(children("child_request_options"))?;
        self.profiles.check()?;
        limits(&self.limits)?;
        limits(&self.child_limits).map_err(children("child_limits"))
    }
}

/// A `max_depth` a tree may reach: each level is a frame of the stack
/// an event of the deepest child is forwarded on, and of every reader of
/// its nesting (a `Transcript`, a JSON log). With no ceiling, a model
/// that kept delegating under `max_depth(u32::MAX)` made events no reader
/// took back past 128 levels, and a few thousand deep overflowed the
/// worker's stack (the process aborts).
fn depth_within_ceiling(depth: u32) -> Result<(), AgentError> {
    if depth <= DEPTH_CEILING {
        return Ok(());
    }
    Err(AgentError::Limits {
        field: "max_depth",
        why: format!(
            "{depth} is deeper than a delegation tree may go ({DEPTH_CEILING} levels: each is a model that delegates)"
        ),
    })
}

/// Which delegation tools the parent's model sees (one engine); none at `max_depth(0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrontEnds {
    /// Loopl's `use_agent` (its seven actions), inline or background.
    pub(super) use_agent: bool,
    /// openheim's `delegate_task`: named or inline, synchronous, final answer only.
    pub(super) delegate_task: bool,
    /// ghyll's `agent`: a task only, synchronous.
    pub(super) agent: bool,
}

impl Default for FrontEnds {
    fn default() -> Self {
        Self {
            use_agent: true,
            delegate_task: false,
            agent: false,
        }
    }
}
