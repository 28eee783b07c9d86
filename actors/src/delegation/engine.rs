//! The delegation engine shared by the three front-ends: the hub, the
//! profiles, the depth and parent-stop policies, and the rules for
//! turning a call into a request and a finished child into a result.

use std::sync::Arc;

use serde::Deserialize;
use subagents_messages::text::within_budget;
use subagents_messages::{AgentId, ChildRequest, Envelope, SubAgentStatus};

use super::answers::{cut_note, final_answer, lost};
use crate::agent::{CallSlot, ChildNote};
use crate::delegation::parent_stop::OnParentStop;
use crate::delegation::shown;
use crate::hub::{Claimed, HubHandle, Refused, WaitOutcome};
use crate::profile::ProfileSet;
use crate::tool::{ToolCallContext, ToolError};

/// The `use_agent` tool's name.
pub(crate) const USE_AGENT: &str = "use_agent";
/// The `delegate_task` tool's name.
pub(crate) const DELEGATE_TASK: &str = "delegate_task";
/// The `agent` tool's name.
pub(crate) const AGENT: &str = "agent";

/// Names of every delegation tool: never given to a child.
pub(crate) const DELEGATION_TOOLS: [&str; 3] = [USE_AGENT, DELEGATE_TASK, AGENT];

/// One of the delegation tools' names.
pub(crate) fn is_delegation_tool(name: &str) -> bool {
    DELEGATION_TOOLS.contains(&name)
}

/// True when a deny list's entry `name` takes delegation away: a delegation
/// tool, offered here or not, in any case, or Claude Code's own spawn tool
/// (`Agent`, formerly `Task`) — or, `starts` (a rule ending in `*`), the
/// start of one's name (`use_*`, `*`).
pub(crate) fn denying_takes_delegation(name: &str, starts: bool) -> bool {
    DELEGATION_TOOLS
        .iter()
        .chain(&["task"])
        .any(|tool| match starts {
            false => tool.eq_ignore_ascii_case(name),
            true => tool
                .get(..name.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(name)),
        })
}

pub(crate) fn refuse(sentence: impl Into<String>) -> ToolError {
    ToolError::Failed(sentence.into())
}

/// The shared engine: the hub, the profiles, the depth and parent-stop
/// policies.
#[derive(Debug, Clone)]
pub(crate) struct Delegator {
    pub(crate) hub: HubHandle,
    pub(crate) profiles: Arc<ProfileSet>,
    pub(crate) max_depth: u32,
    pub(crate) parent_stop: ParentStopPolicy,
    /// Which of [`DELEGATION_TOOLS`] this parent offers: a host tool with
    /// the name of one it does not offer (`agent`, say) is an ordinary tool.
    pub(crate) offered: [bool; 3],
    /// A thread's supervisor delivers the parent's wakes: its background
    /// children's results "arrive as a message". A parent built alone is
    /// told to ask.
    pub(crate) woken: bool,
}

/// Who the child is: a profile, or an inline definition with overrides.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ChildSpec {
    /// A profile name.
    pub(crate) agent: Option<String>,
    /// An inline system prompt.
    pub(crate) system_prompt: Option<String>,
    /// Tools (names of the caller's own).
    pub(crate) tools: Option<Vec<String>>,
    /// A model override.
    pub(crate) model: Option<String>,
    /// The override's provider.
    pub(crate) provider: Option<String>,
    /// A cap on the child's model calls (clamped to the parent's).
    pub(crate) max_iterations: Option<u32>,
}

impl Delegator {
    /// An engine over `hub` with these profiles.
    pub(crate) fn new(hub: HubHandle, profiles: Arc<ProfileSet>) -> Self {
        Self {
            hub,
            profiles,
            max_depth: crate::defaults::MAX_DEPTH,
            parent_stop: ParentStopPolicy::default(),
            offered: [true; 3],
            woken: false,
        }
    }

    /// Its parent's wakes are delivered (by a thread's supervisor).
    pub(crate) fn woken(mut self, woken: bool) -> Self {
        self.woken = woken;
        self
    }

    /// Offers only these of [`DELEGATION_TOOLS`].
    pub(crate) fn offered(mut self, offered: [bool; 3]) -> Self {
        self.offered = offered;
        self
    }

    /// `name` is a delegation tool this parent offers.
    pub(crate) fn is_delegation(&self, name: &str) -> bool {
        DELEGATION_TOOLS
            .iter()
            .zip(self.offered)
            .any(|(tool, on)| on && *tool == name)
    }

    /// Allows children down to `max_depth`.
    pub(crate) fn max_depth(mut self, max_depth: u32) -> Self {
        self.max_depth = max_depth;
        self
    }

    /// What a parent stopped mid-wait does to its child.
    pub(crate) fn parent_stop(mut self, policy: ParentStopPolicy) -> Self {
        self.parent_stop = policy;
        self
    }

    /// The hub.
    pub(crate) fn hub(&self) -> &HubHandle {
        &self.hub
    }

    /// The refusal for a delegation tool used (or handed on) too deep.
    pub(crate) fn depth_refusal(&self) -> String {
        format!(
            "a sub-agent cannot start sub-agents or be given a delegation tool (the maximum depth is {}); do the work yourself",
            self.max_depth
        )
    }

    /// Refuses a call made too deep.
    pub(crate) fn check_depth(&self, call: &ToolCallContext) -> Result<(), ToolError> {
        if call.depth >= self.max_depth {
            return Err(refuse(self.depth_refusal()));
        }
        Ok(())
    }

    /// A tool description, `before` then the profile listing (none
    /// without profiles), within [`TOOL_DESCRIPTION_CHARS`](crate::defaults::TOOL_DESCRIPTION_CHARS)
    /// characters in all: whole lines in name order, then how many were
    /// left out and where the model finds them (`more`).
    pub(crate) fn with_profile_listing(&self, before: String, more: &str) -> String {
        if self.profiles.is_empty() {
            return before;
        }
        const HEADER: &str = "\n\nNamed sub-agents (pass the name as `agent`):\n";
        let left_out = |n: usize| format!("\n… and {n} more: {more}");
        // Room kept for the last line, whatever the count it says.
        let tail = left_out(self.profiles.len()).chars().count();
        let used = before.chars().count() + HEADER.chars().count() + tail;
        let budget = crate::defaults::TOOL_DESCRIPTION_CHARS.saturating_sub(used);
        let (listing, omitted) = self.profiles.describe_within(budget);
        let mut out = before;
        if listing.is_empty() {
            out.push_str(&format!(
                "\n\nThere are {omitted} named sub-agents (pass a name as `agent`): {more}."
            ));
            return out;
        }
        out.push_str(HEADER);
        out.push_str(&listing);
        if omitted > 0 {
            out.push_str(&left_out(omitted));
        }
        out
    }

    /// Starts a child; its id or why not. A named sub-agent whose own
    /// model is not registered is refused as such: the hub's sentence
    /// ("or omit `model`") told the model to leave out what it had not
    /// given. `call`: the call that asks — no child is made once it was
    /// cut, and a queued child keeps its caps only while it waits.
    pub(crate) async fn start(
        &self,
        request: ChildRequest,
        call: Option<CallSlot>,
    ) -> Result<AgentId, ToolError> {
        let profile = request.name.as_deref().and_then(|n| self.profiles.get(n));
        let own_model = profile.and_then(|p| p.model.clone());
        // Cut once the hub announced the child, before its id is read
        // here, the call still names it (written under the announcement's
        // lock); the dropped reply abandons the child as the note says.
        if let Some(call) = &call {
            let (policy, depth, woken) = (self.parent_stop, request.requester_depth, self.woken);
            call.on_child_announced(ChildNote(Box::new(move |id, _| {
                cut_note(policy, id, depth, woken)
            })));
        }
        let name = profile.map(|p| p.name.clone());
        self.hub.request_child(request, tracing::Span::current(), call).await.map_err(|e| match (e, name) {
            (Refused::UnknownModel { model, provider, available }, Some(name))
                if own_model.as_deref().map(shown).as_deref() == Some(model.as_str()) =>
            {
                refuse(format!(
                    "the sub-agent `{name}` runs on the model `{model}`{}, which is not registered here; pass `model` to run it on another (the models you may pass are: {available}), or use another sub-agent",
                    provider.map(|p| format!(" from provider `{p}`")).unwrap_or_default()
                ))
            }
            (e, _) => refuse(e.to_string()),
        })
    }

    /// Delivers a finished child's result through `call`: settles the
    /// call's output on its turn, then claims the result (no wake). `false`
    /// when the turn was already cut: the result was not delivered, so it
    /// stays unclaimed (and, once nobody waits inline, wakes the parent).
    pub(crate) fn deliver(
        &self,
        call: &ToolCallContext,
        envelope: &Envelope,
        output: &Result<String, ToolError>,
    ) -> bool {
        // Counted once: the claim is the one delivery. Settled, claimed
        // and counted in one step, so no stop closes the turn between them.
        let mut archived = false;
        let mut run_span = None;
        let delivered = call.deliver(output, || {
            let (claimed, span) = self.hub.claim(&envelope.id);
            run_span = span;
            match claimed {
                Claimed::Here => {
                    let mut usage = envelope.usage;
                    usage.add(envelope.children_usage);
                    Some(usage)
                }
                Claimed::Imported | Claimed::No => None,
                Claimed::Archived => {
                    archived = true;
                    None
                }
            }
        });
        // Closed (and exported) after the turn's lock is let go.
        drop(run_span);
        // An earlier session's child: recorded in its archive (a disk
        // write) after the turn's lock is let go.
        if archived {
            self.hub.claim_archived(&envelope.id);
        }
        delivered
    }

    /// A child's answer within the result budget, the marker naming how
    /// the caller reads the rest.
    pub(crate) fn budgeted(&self, call: &ToolCallContext, id: &AgentId, text: &str) -> String {
        // The delegation tool, not a host tool of that name.
        let has_use_agent =
            self.is_delegation(USE_AGENT) && call.available_tools.iter().any(|t| t == USE_AGENT);
        within_budget(text, self.hub.result_budget(), |offset| {
            if has_use_agent {
                format!("read them with use_agent action result, id `{id}`, offset {offset}")
            } else {
                format!("the whole answer is kept in the sub-agent's envelope `{id}`")
            }
        })
    }

    /// A finished child's `error` within the result budget, as its answer
    /// is: a host model's 20,000-character failure came back whole, and
    /// again with every ranged `result`. With the whole `result` beside it
    /// (`beside_result`), none when it is the result's own text (a failed
    /// child's answer is its reason): given once. The whole reason stays
    /// in the envelope.
    pub(crate) fn budgeted_error(
        &self,
        envelope: &Envelope,
        beside_result: bool,
    ) -> Option<String> {
        let error = envelope.error.as_deref()?;
        if beside_result && envelope.result.as_deref() == Some(error) {
            return None;
        }
        Some(self.within_error_budget(&envelope.id, error))
    }

    /// `text` (a reason, a refusal) within the result budget.
    fn within_error_budget(&self, id: &AgentId, text: &str) -> String {
        within_budget(text, self.hub.result_budget(), |_| {
            format!("the whole reason is kept in the sub-agent's envelope `{id}`")
        })
    }

    /// Waits inline for a child, up to `within` (or to its end), and
    /// delivers its result through `call` as `render` writes it. If the
    /// turn is cut while it waits, the call reads `answers::cut_note`
    /// and the child is detached or stopped by the parent-stop policy —
    /// also when it finished at that same instant and the result was not
    /// taken yet: then it becomes a background result.
    pub(crate) async fn wait_inline(
        &self,
        call: &ToolCallContext,
        id: &AgentId,
        within: Option<std::time::Duration>,
        render: impl Fn(&Envelope) -> Result<String, ToolError>,
    ) -> Waited {
        call.on_cut(cut_note(self.parent_stop, id, call.depth, self.woken));
        // A child's cut turn ends the child, and its children with it (its
        // note says "stopped"): stopped now. Handed to the background
        // first, its pending request was answered by the background policy
        // (`Approve` ran the call) just before the requester's end stopped
        // it.
        let policy = match call.depth {
            0 => self.parent_stop,
            _ => ParentStopPolicy::Cascade,
        };
        let guard = OnParentStop::armed(self.hub.clone(), id.clone(), policy);
        // Handed on by the close that answers the cut call, before the
        // turn's end goes out (or, failing that, as the wait is dropped).
        call.slot.on_cut_hand_on(guard.hand_on());
        match self.hub.wait(id, within).await {
            WaitOutcome::Finished(envelope) => {
                let output = render(&envelope);
                // Not taken (the turn was cut): handed on.
                if self.deliver(call, &envelope, &output) {
                    guard.disarm();
                }
                Waited::Delivered(output)
            }
            WaitOutcome::Pending => {
                guard.disarm();
                Waited::Pending
            }
            WaitOutcome::Unknown => {
                guard.disarm();
                Waited::Unknown
            }
        }
    }

    /// Runs a child to its end and returns only its final answer; a failed
    /// or stopped child is an error sentence.
    ///
    /// The requester waits to the end, so the child's limits fit inside
    /// what the requester's turn has left: nine tenths of its remaining
    /// wall clock (the last tenth is the requester's, to read the answer)
    /// and its remaining tokens. A child cut by them returns its partial
    /// result before the requester's own limit ends the wait.
    pub(crate) async fn run_to_end(
        &self,
        call: &ToolCallContext,
        mut request: ChildRequest,
    ) -> Result<String, ToolError> {
        if let Some(left) = call.left {
            let remaining = left
                .deadline
                .saturating_duration_since(tokio::time::Instant::now());
            request.wall_clock_cap = Some(remaining.mul_f64(0.9));
            request.token_cap = Some(left.tokens);
        }
        let cap = request.wall_clock_cap;
        // The call goes with the request: a queued child starts on the
        // caps only while the call still waits (cut, its detach goes when
        // the cut turn's task is dropped — the hub may admit the child
        // first, or the call may be cut before it read the child's id).
        let id = self.start(request, Some(call.slot.clone())).await?;
        let answer = |e: &Envelope| {
            final_answer(e)
                .map(|answer| self.budgeted(call, &e.id, &answer))
                .map_err(|why| refuse(self.within_error_budget(&e.id, &why.to_string())))
        };
        if let Some(cap) = cap {
            // Started, its own wall clock (the cap less its wait) ends it
            // by then; still queued, nothing would, and the requester's
            // own limit cut its turn: at the cap the requester stops
            // waiting and keeps its last tenth to answer.
            match self.wait_inline(call, &id, Some(cap), answer).await {
                Waited::Delivered(output) => return output,
                Waited::Unknown => return lost(&id),
                Waited::Pending => {}
            }
            let queued = self.hub().status(&id).map(|e| e.status) == Some(SubAgentStatus::Queued);
            if queued {
                return self.not_started_in_time(call, &id, cap, answer).await;
            }
        }
        match self.wait_inline(call, &id, None, answer).await {
            Waited::Delivered(output) => output,
            _ => lost(&id),
        }
    }
}

/// How an inline wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The child finished; what the call returns (already settled and
    /// claimed, unless the turn was cut).
    Delivered(Result<String, ToolError>),
    /// Still running after the wait.
    Pending,
    /// No child has that id.
    Unknown,
}

/// What stopping the parent while it waits inline does to the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParentStopPolicy {
    /// The child goes on in the background (Loopl); its result comes back
    /// later as a wake.
    #[default]
    Detach,
    /// The child is stopped with the parent (openheim).
    Cascade,
}

#[cfg(test)]
mod tests {
    use super::*;
    use subagents_messages::{SubAgentStatus, ToolUseId};

    /// Misleading a model: a value it sent was quoted cleaned — `agent_1 `
    /// (a trailing space) read "there is no sub-agent with id `agent_1`"
    /// while `agent_1` ran. A value that is not a clean line is quoted
    /// with its escapes; a clean one as it is, cut to 80 characters.
    /// Misleading a model: a child interrupted (by the parent, which may
    /// reach any child of the thread) while its requester waited on it
    /// through `delegate_task` or `agent`: the requester read "the
    /// sub-agent failed: interrupted by the agent that started it; a
    /// message (use_agent send) resumes it" — it did not interrupt it, the
    /// child did not fail, and the requester may have no `use_agent`.
    #[test]
    fn an_interrupted_childs_answer_blames_nobody_and_names_no_tool() {
        let request = subagents_messages::ChildRequest::new(
            AgentId::new("agent_1"),
            1,
            ToolUseId::new("call_1"),
            "Worker",
            "work",
        );
        let mut envelope = crate::hub::requested(
            AgentId::new("agent_2"),
            "Worker".into(),
            &request,
            Vec::new(),
            0,
        );
        envelope.status = SubAgentStatus::Interrupted;
        envelope.error = Some(crate::hub::INTERRUPTED.to_owned());
        let said = final_answer(&envelope).unwrap_err().to_string();
        assert!(said.contains("interrupted"), "{said}");
        for wrong in ["failed", "use_agent", "the agent that started it"] {
            assert!(!said.contains(wrong), "{wrong}: {said}");
        }
        for wrong in ["use_agent", "the agent that started it"] {
            assert!(!crate::hub::INTERRUPTED.contains(wrong), "{wrong}");
        }
    }
}
