//! openheim's `delegate_task`: a named or inline sub-agent, synchronous,
//! only the final answer comes back.

use serde::Deserialize;

use crate::delegation::args::{self, CHILD_SPEC, Kind};
use serde_json::{Value, json};

use crate::delegation::engine::{ChildSpec, DELEGATE_TASK, Delegator, refuse};
use crate::tool::{Tool, ToolCallContext, ToolFuture};

/// openheim's `delegate_task`: a named or inline sub-agent, synchronous,
/// only the final answer comes back.
#[derive(Debug, Clone)]
pub(crate) struct DelegateTask {
    delegator: Delegator,
}

impl DelegateTask {
    /// The tool over this engine.
    pub(crate) fn new(delegator: Delegator) -> Self {
        Self { delegator }
    }
}

#[derive(Debug, Deserialize)]
struct DelegateArgs {
    #[serde(flatten)]
    spec: ChildSpec,
    task: Option<String>,
}

impl Tool for DelegateTask {
    fn name(&self) -> &str {
        DELEGATE_TASK
    }

    fn description(&self) -> String {
        let which = if self.delegator.profiles.is_empty() {
            "one you define"
        } else {
            "a named one (`agent`) or one you define"
        };
        self.delegator.with_profile_listing(
            format!(
                "Delegate a self-contained task to another agent — {which} \
                 inline (`system_prompt`, optionally `tools`, `model`, `provider`, `max_iterations`) — and get \
                 back only its final answer. It cannot see this conversation: write `task` as a complete brief."
            ),
            "every name is in the `agent` parameter's enum",
        )
    }

    fn parameters(&self) -> Value {
        let mut properties = json!({
            "system_prompt": {"type": "string", "description": "an inline sub-agent's instructions; the first line is its name"},
            "task": {"type": "string", "description": "the complete task"},
            "tools": {"type": "array", "items": {"type": "string"}, "description": "names of your tools it may use (left out: all of them, or a named sub-agent's own; [] gives it none)"},
            "model": {"type": "string"},
            "provider": {"type": "string"},
            "max_iterations": {"type": "integer", "minimum": 1}
        });
        if let Some(names) = self.delegator.profiles.name_schema() {
            properties["agent"] = names;
        }
        json!({"type": "object", "properties": properties, "required": ["task"]})
    }

    fn call(&self, call: ToolCallContext) -> ToolFuture {
        let delegator = self.delegator.clone();
        Box::pin(async move {
            delegator.check_depth(&call)?;
            let args: DelegateArgs = args::parse(
                DELEGATE_TASK,
                &call.arguments,
                &[&[("task", Kind::Text)], CHILD_SPEC],
            )?;
            let task = args.task.ok_or_else(|| {
                refuse("`task` is required: the complete brief for the sub-agent")
            })?;
            let request = delegator.request(&call, args.spec, task, Some(false))?;
            delegator.run_to_end(&call, request).await
        })
    }
}
