//! Which model a sub-agent's own sub-agent runs on.

use super::*;
use std::sync::Arc;
use subagents::actors::registry::ModelRegistry;
use subagents::messages::ModelRequest;

/// A model's word, taken (review: the model as an adversary): a child on
/// a model of its own (`cheap`) was told its sub-agents run "on your
/// model" — and its child, naming none, ran on the thread parent's
/// (`main`), through the parent's gate: the tools a grandchild gets are
/// its requester's, its model was not. A child names no model: its
/// requester's (the parent's, for a child of the parent).
#[tokio::test(start_paused = true)]
async fn a_sub_agents_own_sub_agent_runs_on_its_requesters_model() {
    let (main, main_seen) = spy(
        "main",
        ScriptedModel::new(vec![
            Reply::new().use_agent(&run("Child", "ask your own sub-agent", true).model("cheap")),
            Reply::answer("parent: done"),
        ]),
    );
    let (cheap, cheap_seen) = spy(
        "cheap",
        ScriptedModel::new(vec![])
            .with_script("Child", asks_grand(true))
            .with_script("Grand", vec![Reply::answer("42")]),
    );
    let mut models = ModelRegistry::new();
    models.register("local", "cheap", cheap, 1).await.unwrap();
    let (parent, mut events) = DelegationBuilder::new(main)
        .tools(ToolRegistry::new().with(Calculator).with(Sleep))
        .models(models)
        .max_depth(2)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    let result = until_result(&mut events, &mut log).await;
    assert_eq!(result.text, "parent: done");
    let asked_of = |seen: &Arc<std::sync::Mutex<Vec<ModelRequest>>>| -> Vec<String> {
        seen.lock()
            .unwrap()
            .iter()
            .map(|r| {
                r.messages[0]
                    .content
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    };
    let on_main = asked_of(&main_seen);
    assert!(!on_main.iter().any(|first| first == "Grand"), "{on_main:?}");
    assert!(asked_of(&cheap_seen).iter().any(|first| first == "Grand"));
}

/// A child given `tools` (under a parent at depth 2) that calls the
/// profile `reviewer`: the parent's handle and the log.
async fn a_child_calling(
    tools: &[&str],
    reviewer: subagents::actors::profile::Profile,
) -> (subagents::actors::DelegatingAgent, Vec<AgentEvent>) {
    use subagents::actors::profile::ProfileSet;
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&run("Child", "ask the reviewer", true).tools(tools.iter().copied())),
        Reply::answer("parent: done"),
    ])
    .with_script(
        "Child",
        vec![
            Reply::new().use_agent(&UseAgentCall::run_named("reviewer", "review it")),
            Reply::answer("child: done"),
        ],
    )
    .with_script("Reviewer", vec![Reply::answer("ok")]);
    let (parent, mut events) = builder(model, 2)
        .profiles(ProfileSet::from_profiles([reviewer]))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    (parent, log)
}

/// A refusal that named the wrong cause (review: the model as an
/// adversary): a child given `sleep` called a profile listing
/// `calculator` — refused "the tool `calculator` is not one of your
/// tools", a tool the model never wrote; leaving `tools` out (it had)
/// changed nothing, and listing `sleep` was refused for narrowing outside
/// the profile. The refusal names the profile.
#[tokio::test(start_paused = true)]
async fn a_profile_its_caller_cannot_give_the_tools_of_is_refused_by_name() {
    use subagents::actors::profile::Profile;
    let reviewer = Profile {
        name: "reviewer".into(),
        system_prompt: "Reviewer\nYou review.".into(),
        tools: Some(vec!["calculator".into()]),
        ..Profile::default()
    };
    let (_parent, log) = a_child_calling(&["sleep"], reviewer).await;
    // The child's own call's answer, inside its row.
    let (_, children) = children(&log);
    let row: Vec<AgentEvent> = children[&AgentId::new("agent_1")]
        .events
        .iter()
        .map(|(_, e)| e.clone())
        .collect();
    let refused: Vec<String> = results_of(&row, "use_agent")
        .into_iter()
        .filter(|(_, error)| *error)
        .map(|(output, _)| output)
        .collect();
    assert_eq!(refused.len(), 1, "{log:#?}");
    assert!(
        refused[0].contains("`reviewer` needs the tool `calculator`"),
        "{}",
        refused[0]
    );
    assert!(
        !refused[0].contains("is not one of your tools, so"),
        "{}",
        refused[0]
    );
}

/// Review of this session's own change: the check of a profile's tools
/// against its caller's ignored the profile's deny list — a profile
/// listing `calculator` and `sleep` and denying `sleep` (a Claude Code
/// file's `tools` with a scoped `disallowedTools`) was refused under a
/// caller with `calculator` alone, "it cannot run under you", where it
/// had run with what its list less its denials gives.
#[tokio::test(start_paused = true)]
async fn a_profile_denying_what_its_caller_lacks_runs_under_it() {
    use subagents::actors::profile::Profile;
    let reviewer = Profile {
        name: "reviewer".into(),
        system_prompt: "Reviewer\nYou review.".into(),
        tools: Some(vec!["calculator".into(), "sleep".into()]),
        disallowed_tools: vec!["sleep".into()],
        ..Profile::default()
    };
    let (parent, log) = a_child_calling(&["calculator"], reviewer).await;
    let grand = parent.hub.status(&AgentId::new("agent_2"));
    assert_eq!(
        grand.map(|e| (e.status, e.tools)),
        Some((SubAgentStatus::Done, vec!["calculator".to_owned()])),
        "{log:#?}"
    );
}
