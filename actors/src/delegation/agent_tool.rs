//! ghyll's `agent`: a task only; a fresh context with the workflow
//! instructions; synchronous; limits end it with a partial result.

use serde::Deserialize;

use crate::delegation::args::{self, Kind};
use serde_json::{Value, json};

use crate::delegation::engine::{AGENT, ChildSpec, Delegator, refuse};
use crate::tool::{Tool, ToolCallContext, ToolFuture};

/// The system prompt of a child started by the `agent` tool (the host's
/// workflow instructions are appended to it, as to every child's).
pub(crate) const AGENT_PROMPT: &str = "Sub-agent\nYou are a focused sub-agent. You cannot see the conversation that \
     asked for you: the task below is all you know. Use your tools to complete it, then answer with \
     what you found in a few sentences.";

/// ghyll's `agent`: a task only; a fresh context with the workflow
/// instructions; synchronous; limits end it with a partial result.
#[derive(Debug, Clone)]
pub(crate) struct AgentTool {
    delegator: Delegator,
}

impl AgentTool {
    /// The tool over this engine.
    pub(crate) fn new(delegator: Delegator) -> Self {
        Self { delegator }
    }
}

#[derive(Debug, Deserialize)]
struct AgentArgs {
    task: Option<String>,
}

impl Tool for AgentTool {
    fn name(&self) -> &str {
        AGENT
    }

    fn description(&self) -> String {
        // Below a depth limit past 1, the sub-agent gets this tool too.
        let this_one = if self.delegator.max_depth > 1 {
            "this one too, while delegation goes deeper"
        } else {
            "none of the delegation tools: not this one"
        };
        format!(
            "Run a focused sub-agent on a self-contained task (\"read these three files and summarize\") \
             without filling your context. It has your tools ({this_one}), sees only the task, and \
             returns its findings; if it hits its turn, token or time limit it returns a partial result."
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"task": {"type": "string", "description": "the complete task"}},
            "required": ["task"]
        })
    }

    fn call(&self, call: ToolCallContext) -> ToolFuture {
        let delegator = self.delegator.clone();
        Box::pin(async move {
            delegator.check_depth(&call)?;
            let args: AgentArgs = args::parse(AGENT, &call.arguments, &[&[("task", Kind::Text)]])?;
            let task = args.task.ok_or_else(|| {
                refuse("`task` is required: the complete brief for the sub-agent")
            })?;
            let spec = ChildSpec {
                system_prompt: Some(AGENT_PROMPT.to_owned()),
                ..ChildSpec::default()
            };
            let request = delegator.request(&call, spec, task, Some(false))?;
            delegator.run_to_end(&call, request).await
        })
    }
}
