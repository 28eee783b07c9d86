//! The three front-ends over one engine (use_agent, delegate_task, agent),
//! named profiles, the model registry with fallback, the max_iterations
//! clamp, inherited instructions, and the profile enum in schemas.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "front_ends/empty_task.rs"]
mod empty_task;
#[path = "front_ends/inherit.rs"]
mod inherit;
#[path = "front_ends/no_profiles.rs"]
mod no_profiles;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::json;
use subagents::actors::profile::{Profile, ProfileSet};
use subagents::actors::registry::ModelRegistry;
use subagents::actors::{DelegatingAgent, DelegationBuilder, Model};
use subagents::messages::ModelRequest;
use subagents::prelude::*;
use subagents_demo::{Calculator, PageTitle};

fn profile(name: &str, prompt: &str) -> Profile {
    Profile {
        name: name.into(),
        description: format!("{name} does things."),
        system_prompt: prompt.into(),
        model: None,
        provider: None,
        tools: None,
        max_iterations: None,
        source: PathBuf::from(format!("{name}.md")),
        ..Default::default()
    }
}

fn profiles() -> ProfileSet {
    let mut reviewer = profile("reviewer", "You review code.");
    reviewer.model = Some("haiku".into());
    reviewer.provider = Some("anthropic".into());
    reviewer.tools = Some(vec!["calculator".into()]);
    reviewer.max_iterations = Some(10);
    let checker = profile("fact-checker", "You check facts.");
    ProfileSet::from_profiles([reviewer, checker])
}

async fn parent(
    model: Arc<dyn Model>,
    registry: ModelRegistry,
    limits: Limits,
) -> (DelegatingAgent, EventStream) {
    DelegationBuilder::new(model)
        .system_prompt("You are the parent.")
        .tools(
            ToolRegistry::new()
                .with(Calculator)
                .with(PageTitle::default()),
        )
        .profiles(profiles())
        .models(registry)
        .delegate_task_tool(true)
        .agent_tool(true)
        .limits(limits)
        .instructions("Global rule: cite sources.")
        .instructions("Project rule: British spelling.")
        .spawn()
        .await
        .unwrap()
}

/// A registry with `anthropic/haiku` (the `reviewer` profile's model),
/// answering "LGTM from haiku", and what it was asked.
async fn haiku_registry() -> (ModelRegistry, Arc<Mutex<Vec<ModelRequest>>>) {
    let (haiku, haiku_seen) = spy(
        "haiku",
        ScriptedModel::new(vec![Reply::answer("LGTM from haiku")]),
    );
    let mut registry = ModelRegistry::new();
    registry
        .register("anthropic", "haiku", haiku, 1)
        .await
        .unwrap();
    (registry, haiku_seen)
}

#[tokio::test(start_paused = true)]
async fn a_named_profile_runs_on_its_registered_model_with_its_tools() {
    let (registry, haiku_seen) = haiku_registry().await;
    let (main, main_seen) = spy(
        "main",
        ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run_named("reviewer", "review this diff")),
            Reply::answer("Reviewed."),
        ]),
    );
    let (parent, mut events) = parent(main, registry, Limits::default()).await;
    parent.agent.send_user("review").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error, "{output}");
    assert!(output.contains("LGTM from haiku"), "{output}");
    let child = haiku_seen.lock().unwrap()[0].clone();
    assert!(
        child
            .system_prompt()
            .unwrap()
            .starts_with("You review code.")
    );
    assert!(
        child
            .system_prompt()
            .unwrap()
            .ends_with("Global rule: cite sources.\n\nProject rule: British spelling.")
    );
    assert_eq!(
        child
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["calculator"]
    );
    assert_eq!(
        main_seen.lock().unwrap().len(),
        2,
        "the child never used the parent's model"
    );
    let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.name, "reviewer");
    // Each distinct model has its own gate: the parent's saw 2 grants.
    assert_eq!(parent.gate.snapshot().await.unwrap().granted_total, 2);
}

#[tokio::test(start_paused = true)]
async fn a_profile_without_a_model_falls_back_to_the_parents() {
    let (main, main_seen) = spy(
        "main",
        ScriptedModel::new(vec![
            Reply::new().tool_call(
                "delegate_task",
                json!({"agent": "fact-checker", "task": "Is water wet?"}).to_string(),
            ),
            Reply::answer("Done."),
        ])
        .with_script("You check facts.", vec![Reply::answer("Accurate.")]),
    );
    let (parent, mut events) = parent(main, ModelRegistry::new(), Limits::default()).await;
    parent.agent.send_user("check").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    assert_eq!(
        results_of(&log, "delegate_task"),
        [("Accurate.".to_owned(), false)],
        "only the final answer"
    );
    assert_eq!(
        main_seen.lock().unwrap().len(),
        3,
        "parent twice, child once, same model"
    );
    check_log(&log, true);
    check_inline_order(&log);
}

#[tokio::test(start_paused = true)]
async fn unknown_models_and_the_exactly_one_rule_are_sentences_and_spawn_nothing() {
    let calls = [
        json!({"agent": "reviewer", "task": "x"}).to_string(), // its model is not registered here
        json!({"system_prompt": "Inline", "task": "x", "model": "gpt-9"}).to_string(),
        json!({"agent": "reviewer", "system_prompt": "Inline", "task": "x"}).to_string(),
        json!({"task": "x"}).to_string(),
        json!({"agent": "nobody", "task": "x"}).to_string(),
        json!({"system_prompt": "Inline"}).to_string(),
        // Another model than its own, with a space: not its own, quoted as sent.
        json!({"agent": "reviewer", "task": "x", "model": "haiku "}).to_string(),
    ];
    let mut turn = Reply::new();
    for call in &calls {
        turn = turn.tool_call("delegate_task", call.clone());
    }
    let model = ScriptedModel::new(vec![turn, Reply::answer("No.")]);
    let (parent, mut events) =
        parent(model.shared(), ModelRegistry::new(), Limits::default()).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let expected = [
        "the sub-agent `reviewer` runs on the model `haiku` from provider `anthropic`, which is not registered here; pass `model` to run it on another (the models you may pass are: none (only your own model is available)), or use another sub-agent",
        "no model `gpt-9` is registered",
        "give either `agent` (a named sub-agent) or `system_prompt` (an inline one), not both",
        "give `agent` (a named sub-agent) or `system_prompt`",
        "there is no sub-agent named `nobody`; the named sub-agents are: fact-checker, reviewer",
        "`task` is required",
        r#"no model `"haiku "` is registered"#,
    ];
    let got = results_of(&log, "delegate_task");
    for ((output, is_error), want) in got.iter().zip(expected) {
        assert!(is_error);
        assert!(output.contains(want), "{output:?} should contain {want:?}");
    }
    assert_eq!(got.len(), 7);
    assert_eq!(parent.hub.snapshot().await.unwrap().requested, 0);
}

#[tokio::test(start_paused = true)]
async fn max_iterations_is_clamped_to_the_parents_own() {
    let looping = Reply::new().tool_call("calculator", r#"{"expression":"1+1"}"#);
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call(
            "delegate_task",
            json!({"system_prompt": "Looper", "task": "loop", "max_iterations": 10}).to_string(),
        ),
        Reply::answer("ok"),
    ])
    .with_script("Looper", vec![looping; 12]);
    let limits = Limits {
        max_model_calls: 3,
        ..Limits::default()
    };
    let (parent, mut events) = parent(model.shared(), ModelRegistry::new(), limits).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, _) = &results_of(&log, "delegate_task")[0];
    assert!(
        output.starts_with("Partial result: stopped by the model-call limit (3 model calls)"),
        "the child's 10 was clamped to the parent's 3: {output}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_agent_tool_takes_a_task_and_returns_the_answer_or_a_partial_result() {
    let (main, seen) = spy(
        "main",
        ScriptedModel::new(vec![
            Reply::new().tool_call("agent", json!({"task": "Sum 2 and 3."}).to_string()),
            Reply::new().tool_call("agent", json!({"task": "Loop forever."}).to_string()),
            Reply::answer("Both done."),
        ])
        .with_input_script(
            "Sum 2 and 3",
            vec![
                Reply::new().tool_call("calculator", r#"{"expression":"2+3"}"#),
                Reply::answer("It is 5."),
            ],
        )
        .with_input_script(
            "Loop forever",
            vec![
                Reply::new()
                    .text("Looping… ")
                    .tool_call("calculator", r#"{"expression":"1"}"#);
                30
            ],
        ),
    );
    let (parent, mut events) = parent(main, ModelRegistry::new(), Limits::default()).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let got = results_of(&log, "agent");
    assert_eq!(got[0], ("It is 5.".to_owned(), false));
    // The second child hits its model-call limit (20): a partial result, not an error.
    assert!(!got[1].1, "{:?}", got[1]);
    assert!(
        got[1]
            .0
            .starts_with("Partial result: stopped by the model-call limit (20 model calls)"),
        "{}",
        got[1].0
    );
    assert!(got[1].0.contains("Looping…"), "{}", got[1].0);
    let requests = seen.lock().unwrap();
    let child = requests
        .iter()
        .find(|r| r.system_prompt().unwrap().starts_with("Sub-agent"))
        .unwrap();
    assert!(
        child
            .system_prompt()
            .unwrap()
            .contains("Project rule: British spelling.")
    );
    let tools: Vec<&str> = child.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        tools,
        ["calculator", "fetch_title"],
        "no delegation tool reaches a child"
    );
}

/// The tools the parent's model is offered, by name, as its first request
/// carried them.
async fn offered_tools(
    with_profiles: bool,
) -> std::collections::HashMap<String, subagents::messages::ToolSpec> {
    offered_tools_at(with_profiles, 1).await
}

async fn offered_tools_at(
    with_profiles: bool,
    max_depth: u32,
) -> std::collections::HashMap<String, subagents::messages::ToolSpec> {
    let (model, seen) = spy("main", ScriptedModel::new(vec![Reply::answer("ok")]));
    let mut builder = DelegationBuilder::new(model)
        .delegate_task_tool(true)
        .agent_tool(true)
        .max_depth(max_depth);
    if with_profiles {
        builder = builder.profiles(profiles());
    }
    let (parent, mut events) = builder.spawn().await.unwrap();
    parent.agent.send_user("hi").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    let request = seen.lock().unwrap()[0].clone();
    request
        .tools
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn profile_names_are_an_enum_when_profiles_exist_and_absent_otherwise() {
    let specs = offered_tools(true).await;
    assert!(specs.contains_key("agent"));
    for name in ["use_agent", "delegate_task"] {
        let spec = &specs[name];
        let schema: serde_json::Value = serde_json::from_str(&spec.parameters).unwrap();
        assert_eq!(
            schema["properties"]["agent"]["enum"],
            json!(["fact-checker", "reviewer"]),
            "{name}"
        );
        assert!(
            spec.description
                .contains("- reviewer: reviewer does things."),
            "{name}"
        );
    }
    let specs = offered_tools(false).await;
    for name in ["use_agent", "delegate_task"] {
        let schema: serde_json::Value = serde_json::from_str(&specs[name].parameters).unwrap();
        assert!(
            schema["properties"].get("agent").is_none(),
            "{name}: {schema}"
        );
        assert!(!specs[name].description.contains("Named sub-agents"));
    }
}

/// Forged or repeated: a field the action does not read was taken and
/// ignored — `result` with `wait: false` still waited (up to the 45 s
/// inline wait), `stop` with `tools` did nothing with them. It is refused,
/// naming the fields the action reads, and nothing is done.
#[tokio::test(start_paused = true)]
async fn a_field_the_action_does_not_read_is_refused() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 100, false)),
        // Written by hand: `UseAgentCall` writes only what an action reads.
        Reply::new().tool_call(
            "use_agent",
            r#"{"action":"result","id":"agent_1","wait":false}"#,
        ),
        Reply::new().tool_call(
            "use_agent",
            r#"{"action":"stop","id":"agent_1","tools":["sleep"]}"#,
        ),
        Reply::answer("Done."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker\n", worker(100));
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(subagents_demo::Sleep))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    let started = tokio::time::Instant::now();
    until_result(&mut events, &mut log).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "the result call waited"
    );
    let results = results_of(&log, "use_agent");
    let (result, refused) = &results[1];
    assert!(*refused, "{result}");
    assert!(
        result.contains(
            "`wait` does not apply to action `result` (its fields are `id`, `offset`, `limit`)"
        ),
        "{result}"
    );
    let (stop, refused) = &results[2];
    assert!(
        *refused && stop.contains("`tools` does not apply to action `stop`"),
        "{stop}"
    );
    let worker = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert!(
        !worker.status.is_terminal(),
        "the refused stop stopped nothing: {worker:?}"
    );
    parent.shutdown_and_wait().await;
}

/// A model that fills every field of the schema sends `"model": ""`: an
/// empty string says nothing (the front-ends' rule), but it replaced the
/// profile's model — "" resolves to none, so the cheap `reviewer` ran on
/// the parent's model and took the parent's gate.
#[tokio::test(start_paused = true)]
async fn an_empty_model_leaves_a_named_profiles_model() {
    let (registry, haiku_seen) = haiku_registry().await;
    let (main, _) = spy(
        "main",
        ScriptedModel::new(vec![
            Reply::new()
                .use_agent(&UseAgentCall::run_named("reviewer", "review this diff").model("")),
            Reply::answer("Reviewed."),
        ]),
    );
    let (parent, mut events) = parent(main, registry, Limits::default()).await;
    parent.agent.send_user("review").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error, "{output}");
    assert!(output.contains("LGTM from haiku"), "{output}");
    assert_eq!(haiku_seen.lock().unwrap().len(), 1);
}

/// The schema is what the parser takes: `use_agent run` reads `model`,
/// `provider` and `max_iterations` (its `UseAgentCall` writes them), but
/// its schema listed none of them — a model found them only by
/// misspelling one — and its description said the sub-agent "runs on the
/// same model", false for a named one on its own model.
#[tokio::test(start_paused = true)]
async fn use_agents_schema_lists_every_field_run_reads() {
    let specs = offered_tools(true).await;
    let spec = &specs["use_agent"];
    let schema: serde_json::Value = serde_json::from_str(&spec.parameters).unwrap();
    for field in ["model", "provider", "max_iterations"] {
        assert!(
            schema["properties"].get(field).is_some(),
            "{field}: {schema}"
        );
    }
    assert!(
        !spec.description.contains("same model"),
        "{}",
        spec.description
    );
}

/// A model that fills every field sends `"id": ""` with `run`: an empty
/// string says nothing (the rule every other field follows), but `id` was
/// taken as given, and the run refused ("`id` does not apply to action
/// `run`").
#[tokio::test(start_paused = true)]
async fn an_empty_id_on_run_says_nothing() {
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call(
            "use_agent",
            r#"{"action":"run","system_prompt":"Worker\nYou work.","input":"go","id":"","wait":true}"#,
        ),
        Reply::answer("Done."),
    ])
    .with_script("Worker", vec![Reply::answer("worked")]);
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error, "{output}");
    assert!(output.contains("worked"), "{output}");
}

/// Misleading a model: `agent`'s description said the sub-agent has "your
/// tools (not this one)", but below a depth limit past 1 it is given this
/// one too.
#[tokio::test(start_paused = true)]
async fn the_agent_tools_description_says_whether_a_sub_agent_gets_it() {
    // At depth 1 a sub-agent gets no delegation tool at all (review: the
    // front-ends): "your tools (not this one)" told a parent offering
    // `use_agent` too that its sub-agent could fan out with it.
    let shallow = offered_tools_at(false, 1).await;
    let said = &shallow["agent"].description;
    assert!(said.contains("none of the delegation tools"), "{said}");
    let deep = offered_tools_at(false, 2).await;
    let said = &deep["agent"].description;
    assert!(!said.contains("not this one"), "{said}");
    assert!(said.contains("this one too"), "{said}");
}

/// Misleading a model (review: the front-ends): `tools: []` on `run`
/// gives a tool-less child — the narrower reading — while the schema said
/// only "default: all of them" and the docs that every empty field says
/// nothing: a model filling every field with an empty value got a child
/// with no tools, untold. The schemas of `use_agent` and `delegate_task`
/// say what an empty list gives, and it gives that.
#[tokio::test(start_paused = true)]
async fn an_empty_tools_list_gives_no_tools_and_the_schema_says_so() {
    let specs = offered_tools(false).await;
    for tool in ["use_agent", "delegate_task"] {
        let schema: serde_json::Value = serde_json::from_str(&specs[tool].parameters).unwrap();
        let said = schema["properties"]["tools"]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(said.contains("[] gives it none"), "{tool}: {schema}");
    }
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call(
            "use_agent",
            r#"{"action":"run","system_prompt":"Worker\nYou work.","input":"go","tools":[],"wait":true}"#,
        ),
        Reply::answer("Done."),
    ])
    .with_script("Worker", vec![Reply::answer("worked")]);
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Calculator))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let started = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::ChildStarted(info) => Some(info.tools.clone()),
            _ => None,
        })
        .expect("the child started");
    assert!(started.is_empty(), "{started:?}");
}

/// A typed call for a model name two providers serve (review: malformed
/// delegation calls): `run` reads `provider` and refuses such a name
/// without it ("name the provider"), but `UseAgentCall` could not write
/// one — no typed call could start that child. It can.
#[tokio::test(start_paused = true)]
async fn a_typed_call_names_the_provider_of_a_model_two_serve() {
    let mut registry = ModelRegistry::new();
    for (provider, answer) in [("local", "from local"), ("ollama", "from ollama")] {
        let model = ScriptedModel::new(vec![Reply::answer(answer)]).shared();
        registry.register(provider, "qwen", model, 1).await.unwrap();
    }
    let main = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run("Worker\nYou work.", "go").model("qwen")),
        Reply::new().use_agent(
            &UseAgentCall::run("Worker\nYou work.", "go")
                .model("qwen")
                .provider("ollama"),
        ),
        Reply::answer("Done."),
    ])
    .shared();
    let (parent, mut events) = parent(main, registry, Limits::default()).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let results = results_of(&log, "use_agent");
    let (refused, is_error) = &results[0];
    assert!(
        *is_error && refused.contains("name the provider"),
        "{refused}"
    );
    let (ran, is_error) = &results[1];
    assert!(!is_error && ran.contains("from ollama"), "{ran}");
}
