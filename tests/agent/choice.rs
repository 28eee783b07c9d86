//! A forced `tool_choice` as a server that checks it reads it.

use super::*;
use subagents::actors::{Model, ModelStream};
use subagents::messages::{ModelRequest, RequestOptions, ToolChoice};

/// A server that refuses a forced function its request does not offer
/// (vLLM: "the tool specified in `tool_choice` does not match any of the
/// specified `tools`"; OpenAI: a 400), and answers otherwise.
struct Checks;

impl Model for Checks {
    fn name(&self) -> &str {
        "checks"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let reply = match &request.options.tool_choice {
            Some(ToolChoice::Function(name)) if !request.tools.iter().any(|t| &t.name == name) => {
                Reply::new().error(format!("400: `{name}` is not one of the tools"))
            }
            _ => Reply::answer("done"),
        };
        ScriptedModel::new(vec![reply]).stream(ModelRequest::default())
    }
}

/// Configuration at odds with itself: a host forcing a function (as
/// `child_request_options` does for every child) on an agent without it
/// — a child narrowed to other tools — sent the pair, and every model
/// call of every turn failed. The choice is not sent to a call that does
/// not offer the tool.
#[tokio::test(start_paused = true)]
async fn a_forced_function_the_agent_does_not_have_is_not_sent() {
    let (agent, events) = AgentBuilder::new(std::sync::Arc::new(Checks))
        .tools(ToolRegistry::new().with(Calculator))
        .request_options(RequestOptions {
            tool_choice: Some(ToolChoice::Function("sleep".into())),
            ..RequestOptions::default()
        })
        .spawn()
        .await
        .unwrap();
    drop(events);
    let result = agent.run("go").await.unwrap();
    assert_eq!(
        (&result.outcome, result.text.as_str()),
        (&Outcome::Completed, "done"),
        "{result:?}"
    );
}
