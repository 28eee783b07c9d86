//! The fixed order of an inline run, and what a child sees.

use super::*;

#[tokio::test(start_paused = true)]
async fn inline_run_follows_the_fixed_order() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call(
            "Fetcher",
            "Title of https://example.com?",
            &["fetch_title"],
            true,
        )),
        Reply::answer("The title is Example Domain."),
    ])
    .with_script(
        "Fetcher",
        vec![
            Reply::new().tool_call("fetch_title", r#"{"url":"https://example.com"}"#),
            Reply::answer("Example Domain"),
        ],
    );
    let (parent, mut events) = delegating(model, 3).await;
    parent.agent.send_user("What is the title?").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "The title is Example Domain.");
    let shape: Vec<String> = log
        .iter()
        .map(|e| match e {
            AgentEvent::ToolStarted(t) => format!("ToolStarted({})", t.name),
            AgentEvent::ToolResult(t) => format!("ToolResult({})", t.name),
            AgentEvent::ChildStarted(i) => format!("ChildStarted({},{})", i.id, i.name),
            AgentEvent::ChildStatus(id, s) => format!("ChildStatus({id},{s})"),
            AgentEvent::Child(id, inner) => match &**inner {
                AgentEvent::ToolStarted(t) => format!("Child({id},ToolStarted({}))", t.name),
                AgentEvent::ToolResult(t) => format!("Child({id},ToolResult({}))", t.name),
                AgentEvent::Text(t) => format!("Child({id},Text({t}))"),
                AgentEvent::Result(r) => format!("Child({id},Result({}))", r.text),
                other => format!("Child({id},{other:?})"),
            },
            AgentEvent::Text(t) => format!("Text({t})"),
            AgentEvent::Result(r) => format!("Result({})", r.text),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "ToolStarted(use_agent)",
            "ChildStarted(agent_1,Fetcher)",
            "ChildStatus(agent_1,running)",
            "Child(agent_1,ToolStarted(fetch_title))",
            "Child(agent_1,ToolResult(fetch_title))",
            "Child(agent_1,Text(Example Domain))",
            "Child(agent_1,Result(Example Domain))",
            "ChildStatus(agent_1,done)",
            "ToolResult(use_agent)",
            "Text(The title is Example Domain.)",
            "Result(The title is Example Domain.)",
        ]
    );
    let (output, is_error) = &tool_result(&log, "use_agent")[0];
    assert!(!is_error);
    let output: serde_json::Value = serde_json::from_str(output).unwrap();
    assert_eq!(output["result"], "Example Domain");
    assert_eq!(output["status"], "done");
    check_log(&log, true);
    check_inline_order(&log);
    let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert!(envelope.claimed, "an inline result claims the wake");
    assert_eq!(envelope.tool_calls, 1);
    assert_eq!(envelope.last_tool.as_deref(), Some("fetch_title"));
    assert_eq!(envelope.tools, ["fetch_title"]);
}

#[tokio::test(start_paused = true)]
async fn a_child_sees_only_its_prompt_and_input() {
    struct Spy(Arc<std::sync::Mutex<Vec<ModelRequest>>>, ScriptedModel);
    impl Model for Spy {
        fn name(&self) -> &str {
            "spy"
        }
        fn stream(&self, request: ModelRequest) -> ModelStream {
            self.0.lock().unwrap().push(request.clone());
            self.1.stream(request)
        }
    }
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let scripted = ScriptedModel::new(vec![
        Reply::new().use_agent(&run_call(
            "Mathematician",
            "What is 2+2?",
            &["calculator"],
            true,
        )),
        Reply::answer("4"),
    ])
    .with_script("Mathematician", vec![Reply::answer("4")]);
    let (parent, mut events) = DelegationBuilder::new(Arc::new(Spy(seen.clone(), scripted)))
        .system_prompt("You are the parent.")
        .tools(
            ToolRegistry::new()
                .with(Calculator)
                .with(PageTitle::default()),
        )
        .instructions("Project rule: be brief.")
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("secret parent history").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let requests = seen.lock().unwrap();
    let child = requests
        .iter()
        .find(|r| r.system_prompt().unwrap().starts_with("Mathematician"))
        .unwrap();
    assert_eq!(child.messages.len(), 2, "system prompt and input only");
    assert_eq!(child.messages[1].content, "What is 2+2?");
    assert!(
        child
            .system_prompt()
            .unwrap()
            .ends_with("Project rule: be brief.")
    );
    let names: Vec<&str> = child.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["calculator"]);
    assert!(!format!("{child:?}").contains("secret parent history"));
}
