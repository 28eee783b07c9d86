//! The `use_agent` tool (Loopl's front-end):
//! `{action: run | status | result | send | interrupt | stop | agents,
//! agent? | system_prompt?, input?, tools?, model?, provider?,
//! max_iterations?, wait?, id?, offset?, limit?}`.
//!
//! Every refusal — a missing argument, an unknown action or id, a tool the
//! caller does not have, a recursion attempt — is a sentence the model
//! reads; no child is spawned for it.

use std::sync::Arc;

use crate::hub::DetachOutcome;
use serde::Deserialize;

use crate::delegation::args::{self, CHILD_SPEC, Kind};
use crate::delegation::call::UseAgentAction;
use serde_json::{Value, json};
use subagents_messages::{AgentId, Envelope, SubAgentStatus};

use crate::agent::{ChildNote, TakenNote};
use crate::delegation::answers::{
    finished_json, pending_json, pending_json_at, range_json, resumed_json, status_json, taken_json,
};
use crate::delegation::engine::{ChildSpec, Delegator, USE_AGENT, Waited, refuse};
use crate::delegation::shown;
use crate::hub::{HubHandle, Refused, Steered, WaitOutcome};
use crate::tool::{Tool, ToolCallContext, ToolError, ToolFuture};

/// The `use_agent` tool, bound to a hub.
#[derive(Debug, Clone)]
pub(crate) struct UseAgent {
    delegator: Delegator,
}

impl UseAgent {
    /// A `use_agent` over a configured engine (profiles, depth, policy).
    pub(crate) fn with_delegator(delegator: Delegator) -> Self {
        Self { delegator }
    }

    fn hub(&self) -> &HubHandle {
        self.delegator.hub()
    }
}

/// `use_agent`'s own fields (who the child is: [`CHILD_SPEC`]).
const FIELDS: &[(&str, Kind)] = &[
    ("action", Kind::Text),
    ("input", Kind::Text),
    ("wait", Kind::Flag),
    ("id", Kind::Text),
    ("offset", Kind::Offset),
    ("limit", Kind::Count),
];

#[derive(Debug, Deserialize)]
struct Arguments {
    action: Option<String>,
    #[serde(flatten)]
    spec: ChildSpec,
    input: Option<String>,
    wait: Option<bool>,
    id: Option<String>,
    offset: Option<u64>,
    limit: Option<u64>,
}

impl Arguments {
    /// Refuses a field `action` does not read (`wait` on `result` would
    /// otherwise be taken and ignored: the call still waits).
    fn only_for(&self, action: &str) -> Result<(), ToolError> {
        let spec = &self.spec;
        // An empty string or list says nothing (a model that fills every
        // field of the schema sends them); a flag or a number does.
        let text = |t: &Option<String>| t.as_deref().is_some_and(|t| !t.is_empty());
        let given = [
            ("agent", text(&spec.agent)),
            ("system_prompt", text(&spec.system_prompt)),
            ("tools", spec.tools.as_ref().is_some_and(|t| !t.is_empty())),
            ("model", text(&spec.model)),
            ("provider", text(&spec.provider)),
            ("max_iterations", spec.max_iterations.is_some()),
            ("input", text(&self.input)),
            ("wait", self.wait.is_some()),
            ("id", text(&self.id)),
            ("offset", self.offset.is_some()),
            ("limit", self.limit.is_some()),
        ];
        // An unknown action is refused by name.
        let Some(reads) = UseAgentAction::from_name(action).map(UseAgentAction::fields) else {
            return Ok(());
        };
        args::only_fields(action, &given, reads)
    }
}

impl UseAgent {
    async fn run(&self, call: &ToolCallContext, args: Arguments) -> Result<String, ToolError> {
        let input = args
            .input
            .filter(|i| !i.trim().is_empty())
            .ok_or_else(|| refuse("`input` is required for action run: the complete task for the sub-agent, which cannot see this conversation"))?;
        // No `wait`: the profile's `background` decides (inline by default).
        let request =
            self.delegator
                .request(call, args.spec, input, args.wait.map(|wait| !wait))?;
        let background = request.background;
        let id = self
            .delegator
            .start(request, Some(call.slot.clone()))
            .await?;
        // Cut before it returns, the call still says which child runs.
        call.on_cut(pending_json(&id, call.depth, self.delegator.woken));
        if background {
            return Ok(pending_json(&id, call.depth, self.delegator.woken));
        }
        match self
            .delegator
            .wait_inline(call, &id, Some(self.hub().inline_wait()), |e| {
                Ok(self.finished(call, e))
            })
            .await
        {
            Waited::Delivered(output) => output,
            Waited::Unknown => Err(refuse(format!("the sub-agent `{id}` was lost"))),
            Waited::Pending => {
                // From here the child goes on in the background, whatever
                // the parent-stop policy: a turn cut while the detach is
                // in flight (its wall clock running out in the same tick
                // as the wait) says so, not "stopped with it".
                call.on_cut(pending_json(&id, call.depth, self.delegator.woken));
                match self.hub().detach(&id, false).await {
                    DetachOutcome::AlreadyFinished(envelope) => {
                        let output = Ok(self.finished(call, &envelope));
                        // Not taken (the turn was cut): the detach already
                        // made it a background result.
                        self.delegator.deliver(call, &envelope, &output);
                        output
                    }
                    _ => Ok(pending_json(&id, call.depth, self.delegator.woken)),
                }
            }
        }
    }

    /// `send`: a message to a child's latest run — read by its running
    /// turn, kept for its start, or read by a new run of a finished child.
    /// A child ending at that instant takes it once it has ended.
    async fn send(&self, call: &ToolCallContext, args: &Arguments) -> Result<String, ToolError> {
        let id = self.id_of(call, args, "send")?;
        let text = args
            .input
            .clone()
            .filter(|i| !i.trim().is_empty())
            .ok_or_else(|| {
                refuse("`input` is required for action send: the message for the sub-agent")
            })?;
        // Cut once the hub announced the run a resume makes, before its id
        // is read here, the call still names it (see `Delegator::start`;
        // announced under this call's lock, at the run's own depth: the
        // parent's grandchild goes on under its requester).
        let (from, depth, woken) = (id.clone(), call.depth, self.delegator.woken);
        call.slot
            .on_child_announced(ChildNote(Box::new(move |next, target| {
                resumed_json(&from, next, (depth, target), woken).to_string()
            })));
        // Cut once a child took the message, before the answer is read
        // here, the call says it was taken (written as it is taken).
        let to = id.clone();
        call.slot.on_message_taken(TakenNote(Box::new(move |how| {
            taken_json(&to, how).to_string()
        })));
        let mut went = self.hub().send(&id, text.clone(), call).await;
        if let Err(Refused::Finished { id: ending }) = &went {
            // Its turn gave its final answer at this instant, is in its
            // last allowed model call, or is being stopped: once it has
            // ended, however long that call takes, the message resumes
            // it. Waited for only up to the inline wait, a last call
            // longer than that (a slow local model, `max_iterations: 1`)
            // handed the model "send it again" — the message not read.
            // The parent's own wall clock and a stop bound the wait.
            let _ = self.hub().wait(ending, None).await;
            went = self.hub().send(&id, text, call).await;
        }
        let out = match went.map_err(|e| refuse(e.to_string()))? {
            how @ (Steered::Running | Steered::Queued) => taken_json(&id, &how),
            Steered::Resumed(next) => {
                // The new run sits where the old one did: a child's child
                // resumed by the parent never wakes it.
                let target = self.hub().status(&next).map_or(call.depth + 1, |e| e.depth);
                resumed_json(&id, &next, (call.depth, target), self.delegator.woken)
            }
        };
        Ok(out.to_string())
    }

    /// `envelope` naming, as the run it went on as, the newest of its
    /// chain — the run a `send` to it reaches (its next one answered the
    /// first message only) — if this hub holds it.
    fn name_newest(&self, envelope: &mut Envelope) {
        if envelope.continued_as.is_some() {
            let newest = self.hub().newest_run(&envelope.id);
            // Another thread's run (it resumed an earlier session's child):
            // not one this caller can read or reach — not named.
            let here = self.hub().status(&newest).is_some();
            envelope.continued_as = here.then_some(newest);
        }
    }

    /// A finished child as the model reads it, its answer within budget.
    fn finished(&self, call: &ToolCallContext, envelope: &Envelope) -> String {
        let answer = envelope
            .result
            .as_deref()
            .map(|r| self.delegator.budgeted(call, &envelope.id, r));
        finished_json(
            envelope,
            answer,
            self.delegator.budgeted_error(envelope, true),
        )
    }

    /// `result`: the answer (within budget), or the range asked for
    /// (`offset`, `limit` at most the budget).
    async fn result(&self, call: &ToolCallContext, args: &Arguments) -> Result<String, ToolError> {
        let id = self.id_of(call, args, "result")?;
        let ranged = args.offset.is_some() || args.limit.is_some();
        match self.hub().wait(&id, Some(self.hub().inline_wait())).await {
            WaitOutcome::Finished(mut envelope) => {
                self.name_newest(&mut envelope);
                let output = Ok(if ranged {
                    let budget = self.hub().result_budget();
                    let limit = args.limit.map_or(budget, |l| (l as usize).min(budget));
                    let error = self.delegator.budgeted_error(&envelope, false);
                    range_json(&envelope, args.offset.unwrap_or(0) as usize, limit, error)
                } else {
                    self.finished(call, &envelope)
                });
                // Not taken (the turn was cut): it stays unclaimed and
                // wakes the parent.
                self.delegator.deliver(call, &envelope, &output);
                output
            }
            WaitOutcome::Pending => {
                let target = self.hub().status(&id).map_or(call.depth + 1, |e| e.depth);
                Ok(pending_json_at(
                    &id,
                    call.depth,
                    target,
                    self.delegator.woken,
                ))
            }
            WaitOutcome::Unknown => Err(refuse(format!("the sub-agent `{id}` was lost"))),
        }
    }

    /// The child `args` names, if the calling agent may act on it: the
    /// parent (depth 0) any child of its thread, as the host may; a child
    /// only one it asked for. Any other id reads as unknown: a child
    /// reading, claiming, stopping or messaging its sibling took the
    /// sibling's result from the parent, whose wake then never came
    /// (docs/front-ends.md, "Isolation").
    fn id_of(
        &self,
        call: &ToolCallContext,
        args: &Arguments,
        action: &str,
    ) -> Result<AgentId, ToolError> {
        let id = args
            .id
            .as_deref()
            .filter(|i| !i.trim().is_empty())
            .ok_or_else(|| {
                refuse(format!(
                    "`id` is required for action {action}: the id that run returned, like `agent_1`"
                ))
            })?;
        let id = AgentId::new(id);
        let mine = call.depth == 0 || self.hub().asked_by(&id, &call.agent_id);
        if !mine || self.hub().status(&id).is_none() {
            return Err(refuse(format!(
                "there is no sub-agent with id `{}`; ids look like `agent_1`",
                shown(id.as_str())
            )));
        }
        Ok(id)
    }
}

impl UseAgent {
    /// Every named sub-agent with its whole description (the tool's own
    /// description carries only a bounded listing).
    fn agents_json(&self) -> String {
        let agents: Vec<Value> = self
            .delegator
            .profiles
            .iter()
            .map(|p| {
                json!({
                    "name": p.name,
                    "description": p.description,
                    "background": p.background,
                })
            })
            .collect();
        json!({ "agents": agents }).to_string()
    }
}

impl Tool for UseAgent {
    fn name(&self) -> &str {
        USE_AGENT
    }

    fn description(&self) -> String {
        // The actions are told in `action`'s own description: a tool's
        // description has 1,024 characters at most (OpenAI refuses more),
        // the named sub-agents' listing included.
        let before = "Delegate a self-contained task to a sub-agent that runs on your model (a named one on \
         its own, unless you give `model`) with its own system prompt, one input and only the tools \
         you list. It cannot see this conversation: write the input as a complete brief. `action` \
         says what each action does. "
            .to_owned()
            + if self.delegator.profiles.is_empty() {
                "Give `system_prompt` (its instructions; there are no named sub-agents)."
            } else {
                "Give either `agent` (a named sub-agent) or `system_prompt` (an inline one)."
            };
        self.delegator.with_profile_listing(
            before,
            "call use_agent with action `agents` to list every named sub-agent with its description",
        )
    }

    fn parameters(&self) -> Value {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["run", "status", "result", "send", "interrupt", "stop", "agents"], "description": "run starts it (wait true returns its answer when it finishes soon, else {pending, id}); status shows progress by id without waiting; result returns its answer by id (waiting a while); send gives one a message it reads at its next model call (a finished one goes on from its conversation as a new run); interrupt cuts what it is doing and leaves it waiting for a message; stop cancels it for good; agents lists every named sub-agent with its description"},
                "system_prompt": {"type": "string", "description": "run: the sub-agent's instructions; the first line is its name"},
                "input": {"type": "string", "description": "run: the complete task; send: the message"},
                "tools": {"type": "array", "items": {"type": "string"}, "description": "run: names of your tools it may use (left out: all of them, or a named sub-agent's own; [] gives it none)"},
                "wait": {"type": "boolean", "description": "run: wait for the answer (default true; a named sub-agent that runs in the background: false)"},
                "model": {"type": "string", "description": "run: a model to run it on (default: the named sub-agent's, else yours)"},
                "provider": {"type": "string", "description": "run: the provider of `model`"},
                "max_iterations": {"type": "integer", "minimum": 1, "description": "run: at most this many model calls"},
                "id": {"type": "string", "description": "status, result, send, interrupt, stop: the id run returned"},
                "offset": {"type": "integer", "minimum": 0, "description": "result: read the answer from this character on (a long answer is cut; its marker gives the offset)"},
                "limit": {"type": "integer", "minimum": 1, "description": "result: at most this many characters from offset"}
            },
            "required": ["action"]
        });
        if let Some(names) = self.delegator.profiles.name_schema() {
            schema["properties"]["agent"] = names;
        }
        schema
    }

    fn call(&self, call: ToolCallContext) -> ToolFuture {
        let this = Arc::new(self.clone());
        Box::pin(async move {
            this.delegator.check_depth(&call)?;
            let args: Arguments = args::parse(USE_AGENT, &call.arguments, &[FIELDS, CHILD_SPEC])?;
            if let Some(action) = args.action.as_deref() {
                args.only_for(action)?;
            }
            match args.action.as_deref() {
                Some("run") => this.run(&call, args).await,
                Some("status") => {
                    let id = this.id_of(&call, &args, "status")?;
                    let (envelope, live) = this
                        .hub()
                        .status_live(&id)
                        .ok_or_else(|| refuse("the sub-agent was lost"))?;
                    let mut envelope = envelope;
                    this.name_newest(&mut envelope);
                    // Its answer within the result budget, as `result`
                    // gives it (the whole answer stays in the envelope).
                    let answer = envelope
                        .result
                        .as_deref()
                        .map(|r| this.delegator.budgeted(&call, &id, r));
                    let error = this.delegator.budgeted_error(&envelope, true);
                    let output = Ok(status_json(
                        &envelope,
                        live.as_ref(),
                        this.hub().queue_position(&id),
                        (answer, error),
                    ));
                    // Given here, delivered as `result` delivers it: it
                    // came back as a wake, and its usage went uncounted.
                    if envelope.status.is_terminal() {
                        this.delegator.deliver(&call, &envelope, &output);
                    }
                    output
                }
                Some("result") => this.result(&call, &args).await,
                Some("send") => this.send(&call, &args).await,
                Some("interrupt") => {
                    let id = this.id_of(&call, &args, "interrupt")?;
                    let status = this
                        .hub()
                        .interrupt(&id, &call)
                        .await
                        .map_err(|e| refuse(e.to_string()))?;
                    let note = match status {
                        SubAgentStatus::Interrupted => {
                            "interrupted: it waits for a message; action send resumes it from its conversation"
                        }
                        // A stop came first (the user's, a switch, a
                        // close): it ended stopped, with no answer.
                        SubAgentStatus::Stopped => {
                            "it was stopped (a stop came before or with the interrupt): it has no answer and does not resume"
                        }
                        _ => "it had already ended; action result reads its answer",
                    };
                    Ok(
                        json!({"id": id.as_str(), "status": status.as_str(), "note": note})
                            .to_string(),
                    )
                }
                Some("stop") => {
                    let id = this.id_of(&call, &args, "stop")?;
                    let status = this
                        .hub()
                        .stop_asked(&id, &call)
                        .await
                        .map_err(|e| refuse(e.to_string()))?;
                    let mut out = json!({"id": id.as_str(), "status": status.as_str()});
                    // Ended before the stop: cancelled now, which its
                    // status alone (`interrupted`, `done`) does not say.
                    if status.is_terminal() && status != SubAgentStatus::Stopped {
                        out["cancelled"] = json!(true);
                        out["note"] = json!(
                            "it had already ended; the stop cancels it for good: a message no longer resumes it"
                        );
                    }
                    Ok(out.to_string())
                }
                Some("agents") => Ok(this.agents_json()),
                Some(other) => Err(refuse(format!(
                    "unknown action `{}`: use run, status, result, send, interrupt, stop or agents",
                    shown(other)
                ))),
                None => Err(refuse(
                    "`action` is required: run, status, result, send, interrupt, stop or agents",
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::UseAgentCall;

    /// Review (the public API): the typed call wrote what the tool refuses
    /// — `limit(0)`, a limit past `u32::MAX`, `max_iterations(0)` — though
    /// it says what it writes the tool always takes. Every such call now
    /// reads.
    #[test]
    fn the_typed_call_writes_only_what_the_tool_takes() {
        let calls = [
            UseAgentCall::result("agent_1").limit(0),
            UseAgentCall::result("agent_1").limit(5_000_000_000),
            UseAgentCall::run("Worker", "task").max_iterations(0),
        ];
        for call in calls {
            let json = call.to_json();
            let args: Result<Arguments, _> = args::parse(USE_AGENT, &json, &[FIELDS, CHILD_SPEC]);
            let args = args.unwrap_or_else(|e| panic!("{json}: {e}"));
            if let Some(action) = args.action.as_deref() {
                args.only_for(action)
                    .unwrap_or_else(|e| panic!("{json}: {e}"));
            }
        }
    }
}
