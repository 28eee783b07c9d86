//! Claude Code profile keys keep their meaning at delegation time: a deny
//! list (`disallowedTools`) only narrows, `background: true` runs a
//! profile in the background when the call does not say `wait`, and the
//! frontmatter `name` is the name to delegate by.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "profile_semantics/host_tools.rs"]
mod host_tools;
#[path = "profile_semantics/options.rs"]
mod options;

use std::path::Path;
use std::sync::{Arc, Mutex};

use common::*;
use subagents::actors::profile::{Profile, ProfileSet};
use subagents::actors::{DelegatingAgent, DelegationBuilder};
use subagents::messages::{ModelRequest, RequestOptions};
use subagents::prelude::*;
use subagents_demo::{Calculator, PageTitle, Sleep};

/// A profile parsed from a Claude Code style file named `file`.
fn claude_profile(file: &str, text: &str) -> Profile {
    Profile::parse(Path::new(file), text).unwrap().0
}

async fn parent(
    model: ScriptedModel,
    profiles: ProfileSet,
) -> (DelegatingAgent, EventStream, Arc<Mutex<Vec<ModelRequest>>>) {
    let (spy, seen) = spy("spy", model);
    let (parent, events) = DelegationBuilder::new(spy)
        .tools(
            ToolRegistry::new()
                .with(Calculator)
                .with(PageTitle::default())
                .with(Sleep),
        )
        .profiles(profiles)
        .spawn()
        .await
        .unwrap();
    (parent, events, seen)
}

/// The tool names of the first request whose system prompt starts with
/// `prompt`.
fn tools_seen(seen: &Mutex<Vec<ModelRequest>>, prompt: &str) -> Vec<String> {
    let seen = seen.lock().unwrap();
    let request = seen
        .iter()
        .find(|r| r.system_prompt().is_some_and(|p| p.starts_with(prompt)))
        .expect("the child made a model call");
    request.tools.iter().map(|t| t.name.clone()).collect()
}

/// The tools a profile built in code from the Claude Code file `text`
/// (named `name`, its prompt starting `prompt`) runs with when a parent
/// with calculator, page_title and sleep delegates to it by name — the
/// delegation not refused.
async fn tools_run_with(name: &str, text: &str, prompt: &str) -> Vec<String> {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named(name, "work")),
        Reply::answer("Done."),
    ])
    .with_script(prompt, vec![Reply::answer("worked")]);
    let profiles = ProfileSet::from_profiles([claude_profile(&format!("/agents/{name}.md"), text)]);
    let (parent, mut events, seen) = parent(model, profiles).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let results = results_of(&log, "use_agent");
    assert!(!results[0].1, "refused: {}", results[0].0);
    tools_seen(&seen, prompt)
}

/// The tools the sub-agent `worker` (a Claude Code file's `frontmatter`,
/// prompt "You work alone.") is given by a parent with `calculator` and
/// `sleep` that may delegate two levels down, and the delegating parent.
async fn tools_the_worker_gets(frontmatter: &str) -> (Vec<String>, DelegatingAgent) {
    let host = ToolRegistry::new().with(Calculator).with(Sleep);
    tools_the_worker_gets_from(frontmatter, host, 2).await
}

/// The same, from a parent with `host`'s tools that may delegate
/// `max_depth` levels down.
async fn tools_the_worker_gets_from(
    frontmatter: &str,
    host: ToolRegistry,
    max_depth: u32,
) -> (Vec<String>, DelegatingAgent) {
    let worker = claude_profile(
        "/agents/worker.md",
        &format!("---\nname: worker\n{frontmatter}\n---\nYou work alone."),
    );
    tools_a_worker_gets(ProfileSet::from_profiles([worker]), host, max_depth).await
}

/// The tools the `worker` of `profiles` (its prompt "You work alone.")
/// runs with under a parent holding `host`.
async fn tools_a_worker_gets(
    profiles: ProfileSet,
    host: ToolRegistry,
    max_depth: u32,
) -> (Vec<String>, DelegatingAgent) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named("worker", "work")),
        Reply::answer("Done."),
    ])
    .with_script("You work alone.", vec![Reply::answer("worked")]);
    let (spy, seen) = spy("spy", model);
    let (parent, mut events) = DelegationBuilder::new(spy)
        .tools(host)
        .profiles(profiles)
        .max_depth(max_depth)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    (tools_seen(&seen, "You work alone."), parent)
}

#[tokio::test(start_paused = true)]
async fn a_deny_list_narrows_what_the_child_would_inherit() {
    // No `tools`: the child would inherit every tool of the parent's; the
    // deny list takes `sleep` out (on the old code it was an unknown key
    // and the child got all three).
    let reviewer = claude_profile(
        "/agents/file-name.md",
        "---\nname: reviewer\ndescription: Reviews.\ndisallowedTools: sleep\n---\nYou review.",
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named("reviewer", "review it")),
        Reply::answer("Done."),
    ])
    .with_script("You review.", vec![Reply::answer("LGTM")]);
    let (parent, mut events, seen) = parent(model, ProfileSet::from_profiles([reviewer])).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (output, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error, "{output}");
    assert_eq!(
        tools_seen(&seen, "You review."),
        ["calculator", "fetch_title"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_deny_list_wins_over_the_allow_list_and_refuses_a_call_that_asks() {
    let reviewer = claude_profile(
        "/agents/reviewer.md",
        "---\ntools: [calculator, sleep]\ndisallowedTools: [sleep, Bash]\n---\nYou review.",
    );
    let model = ScriptedModel::new(vec![
        // The call asks for the denied tool: refused, with the reason.
        Reply::new().use_agent(&UseAgentCall::run_named("reviewer", "a").tools(["sleep"])),
        Reply::new().use_agent(&UseAgentCall::run_named("reviewer", "b")),
        Reply::answer("Done."),
    ])
    .with_script("You review.", vec![Reply::answer("LGTM")]);
    let (parent, mut events, seen) = parent(model, ProfileSet::from_profiles([reviewer])).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    assert!(outputs[0].1, "{:?}", outputs[0]);
    assert!(
        outputs[0].0.contains("may not have the tool `sleep`"),
        "{}",
        outputs[0].0
    );
    assert!(!outputs[1].1, "{:?}", outputs[1]);
    assert_eq!(tools_seen(&seen, "You review."), ["calculator"]);
}

#[tokio::test(start_paused = true)]
async fn a_background_profile_runs_in_the_background_unless_the_call_waits() {
    let watcher = claude_profile(
        "/agents/watcher.md",
        "---\nbackground: true\n---\nYou watch.",
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named("watcher", "watch a")),
        Reply::new().use_agent(&UseAgentCall::run_named("watcher", "watch b").wait(true)),
        Reply::answer("Done."),
    ])
    .with_script("You watch.", vec![Reply::answer("all quiet")]);
    let (parent, mut events, _seen) = parent(model, ProfileSet::from_profiles([watcher])).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    assert!(
        outputs[0].0.contains("\"pending\":true"),
        "{}",
        outputs[0].0
    );
    assert!(outputs[1].0.contains("all quiet"), "{}", outputs[1].0);
    assert!(
        log.iter().any(|e| matches!(
            e,
            AgentEvent::ChildStatus(id, SubAgentStatus::Background) if id.as_str() == "agent_1"
        )),
        "the first child went to the background"
    );
}

/// Widened (foreign-files review, thirty-fourth session): a call giving
/// `tools` ran the profile with them — Factory's `tools: read-only` (a
/// category no tool is named) ran with the shell when the model, told to
/// "give it `tools` from yours", did. The profile allows only what it
/// lists: refused whatever the call gives.
#[tokio::test(start_paused = true)]
async fn a_profile_whose_tools_all_failed_to_map_is_refused_not_run_tool_less() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("reader.md"),
        "---\ntools: Read, Grep\n---\nYou read.",
    )
    .unwrap();
    let (set, _warnings) = ProfileSet::load(&[dir.path().to_path_buf()], &["calculator".into()]);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named("reader", "read it")),
        // With tools of the caller's own, it is refused too.
        Reply::new().use_agent(&UseAgentCall::run_named("reader", "read it").tools(["calculator"])),
        Reply::answer("Done."),
    ])
    .with_script("You read.", vec![Reply::answer("read")]);
    let (parent, mut events, seen) = parent(model, set).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let outputs = results_of(&log, "use_agent");
    assert!(outputs[0].1, "{:?}", outputs[0]);
    assert!(
        outputs[0]
            .0
            .contains("cannot run: none of the tools it lists exists here (Read, Grep)"),
        "{}",
        outputs[0].0
    );
    assert!(outputs[1].1, "{:?}", outputs[1]);
    assert!(
        outputs[1].0.contains("may have no other"),
        "{}",
        outputs[1].0
    );
    let children = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| {
            r.system_prompt()
                .is_some_and(|p| p.starts_with("You read."))
        })
        .count();
    assert_eq!(children, 0, "no child started");
}

#[tokio::test(start_paused = true)]
async fn a_large_profile_set_is_listed_within_a_budget_and_listed_whole_on_request() {
    // 137 profiles with real-length descriptions: uncapped, the listing
    // alone was over 22 KB in every model call.
    let profiles = ProfileSet::from_profiles((0..137).map(|i| Profile {
        name: format!("agent-{i:03}"),
        description: format!(
            "Agent number {i}. Use it proactively for reviews of every kind of change, with care, \
             citing file and line, and never guessing; it answers in short paragraphs."
        ),
        system_prompt: format!("You are agent {i}."),
        ..Default::default()
    }));
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::agents()),
        Reply::answer("Done."),
    ]);
    let (parent, mut events, seen) = parent(model, profiles).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let description = {
        let seen = seen.lock().unwrap();
        seen[0]
            .tools
            .iter()
            .find(|t| t.name == "use_agent")
            .unwrap()
            .description
            .clone()
    };
    assert!(
        description.chars().count() <= 1024,
        "{} characters",
        description.chars().count()
    );
    let listed = description
        .lines()
        .filter(|l| l.starts_with("- agent-"))
        .count();
    assert!((2..137).contains(&listed), "{listed} listed");
    assert!(
        description.contains(&format!(
            "… and {} more: call use_agent with action `agents`",
            137 - listed
        )),
        "{description}"
    );
    let (output, is_error) = &results_of(&log, "use_agent")[0];
    assert!(!is_error, "{output}");
    let all: serde_json::Value = serde_json::from_str(output).unwrap();
    assert_eq!(all["agents"].as_array().unwrap().len(), 137);
    assert_eq!(all["agents"][136]["name"], "agent-136");
}

/// Refused by a real server (review: what the adapter sends): OpenAI and
/// Azure OpenAI refuse a tool description over 1,024 characters (400
/// `string_above_max_length`), on every call. `use_agent`'s own text left
/// 241 characters for the listing, so two profiles with descriptions of
/// Claude Code's length failed every turn of the parent. Every delegation
/// tool's description, listing included, is within 1,024 characters.
#[tokio::test(start_paused = true)]
async fn delegation_tool_descriptions_fit_in_1024_characters() {
    for n in [1, 3, 40] {
        let profiles = ProfileSet::from_profiles((0..n).map(|i| {
            Profile {
                name: format!("reviewer-{i}"),
                description:
                    "Use this agent when the user asks for a review of a change: it reads \
                the diff, checks every file for correctness and style, and answers with findings \
                citing file and line, most severe first."
                        .into(),
                system_prompt: format!("You review {i}."),
                ..Default::default()
            }
        }));
        let (spy, seen) = spy("spy", ScriptedModel::new(vec![Reply::answer("Done.")]));
        let (parent, mut events) = DelegationBuilder::new(spy)
            .profiles(profiles)
            .delegate_task_tool(true)
            .agent_tool(true)
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        until_result(&mut events, &mut Vec::new()).await;
        let tools = seen.lock().unwrap()[0].tools.clone();
        for tool in &tools {
            let chars = tool.description.chars().count();
            assert!(
                chars <= 1024,
                "{n} profiles: {} is {chars} characters",
                tool.name
            );
        }
        let use_agent = tools.iter().find(|t| t.name == "use_agent").unwrap();
        assert!(
            use_agent
                .description
                .contains("- reviewer-0: Use this agent"),
            "{n} profiles: at least one listed: {}",
            use_agent.description
        );
        parent.shutdown_and_wait().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_profiles_request_options_reach_its_model_calls_over_the_builders() {
    let writer = claude_profile(
        "/agents/writer.md",
        "---\nmaxTokens: 64\ntemperature: 0.25\nstop: [\"END\"]\n---\nYou write.",
    );
    assert_eq!(writer.options.max_tokens, Some(64));
    let options = options::writer_call_options(
        writer,
        RequestOptions {
            max_tokens: Some(1000),
            seed: Some(7),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        options,
        RequestOptions {
            max_tokens: Some(64),
            temperature: Some(0.25),
            stop: vec!["END".into()],
            seed: Some(7),
            ..Default::default()
        },
        "the profile's fields over the builder's, the builder's seed kept"
    );
}

/// Widened by a call: a profile that lists its tools (`tools: calculator`)
/// or caps its model calls (`maxTurns: 2`) was given more by the call's
/// own `tools` or `max_iterations`. A call may narrow a profile, never
/// widen it: a tool the profile does not list is refused, naming the
/// profile's; a larger cap is held to the profile's.
#[tokio::test(start_paused = true)]
async fn a_call_narrows_a_profile_and_never_widens_it() {
    let reviewer = || {
        claude_profile(
            "/agents/reviewer.md",
            "---\nname: reviewer\ndescription: Reviews.\ntools: calculator\nmaxTurns: 2\n---\nYou review.",
        )
    };
    let calc = || Reply::new().tool_call("calculator", r#"{"expression":"1+1"}"#);
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named("reviewer", "review it").tools(["sleep"])),
        Reply::new()
            .use_agent(&UseAgentCall::run_named("reviewer", "review it").max_iterations(20)),
        Reply::answer("Done."),
    ])
    .with_script(
        "You review.",
        vec![calc(), calc(), calc(), Reply::answer("LGTM")],
    );
    let (parent, mut events, _) = parent(model, ProfileSet::from_profiles([reviewer()])).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let results = results_of(&log, "use_agent");
    let (refusal, is_error) = &results[0];
    assert!(is_error, "a tool the profile does not list: {refusal}");
    assert!(
        refusal.contains("`sleep`") && refusal.contains("calculator"),
        "{refusal}"
    );
    let only = parent.hub.envelopes();
    assert_eq!(only.len(), 1, "the refused call started nothing: {only:?}");
    assert_eq!(
        only[0].model_calls, 2,
        "held to the profile's maxTurns: {:?}",
        only[0]
    );
    parent.shutdown_and_wait().await;
}

/// The same for a deliberately tool-less profile (`tools: []`): the
/// narrowing check skipped an empty list, so a call's `tools` gave it
/// any tool of the caller's.
#[tokio::test(start_paused = true)]
async fn a_call_gives_no_tool_to_a_tool_less_profile() {
    let thinker = claude_profile(
        "/agents/thinker.md",
        "---\nname: thinker\ndescription: Thinks.\ntools: []\n---\nYou think.",
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named("thinker", "think").tools(["sleep"])),
        Reply::answer("Done."),
    ]);
    let (parent, mut events, _) = parent(model, ProfileSet::from_profiles([thinker])).await;
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (refusal, is_error) = &results_of(&log, "use_agent")[0];
    assert!(*is_error && refusal.contains("lists (none)"), "{refusal}");
    assert!(parent.hub.envelopes().is_empty());
    parent.shutdown_and_wait().await;
}

/// Widened: a profile that denies the delegation tool ("do the work
/// yourself") still got it below `max_depth`: the deny list narrowed the
/// request's tool list, and the hub then added every delegation tool to a
/// child that may still delegate. Denied, the child gets none (and the
/// load does not warn that the denial "denies nothing").
#[tokio::test(start_paused = true)]
async fn a_profile_that_denies_delegation_never_gets_the_delegation_tools() {
    let (tools, parent) = tools_the_worker_gets("disallowedTools: use_agent").await;
    assert_eq!(tools, ["calculator", "sleep"]);
    let envelope = parent.hub.status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(envelope.tools, ["calculator", "sleep"]);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("worker.md"),
        "---\nname: worker\ndisallowedTools: use_agent\n---\nYou work alone.",
    )
    .unwrap();
    let (_, warnings) = ProfileSet::load(&[tmp.path().to_path_buf()], &["sleep".to_owned()]);
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// Foreign (a deny list no load put in the host's names): a deny entry
/// was matched by exact string when a child started, its Claude Code form
/// read only by `ProfileSet::load` — so `Sleep`, `sleep(*)` (a profile
/// from `Profile::parse` and `from_profiles`, as here, or a tool the host
/// registered after the load) denied nothing, and the child got `sleep`.
/// Every doubt denies: any case, a scoped entry denies its whole tool.
#[tokio::test(start_paused = true)]
async fn a_deny_entry_in_another_case_or_scoped_still_denies() {
    for entry in ["Sleep", "sleep(*)", "SLEEP(secs:600)"] {
        let reviewer = claude_profile(
            "/agents/reviewer.md",
            &format!("---\nname: reviewer\ndisallowedTools: {entry}\n---\nYou review."),
        );
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(&UseAgentCall::run_named("reviewer", "review it")),
            Reply::answer("Done."),
        ])
        .with_script("You review.", vec![Reply::answer("LGTM")]);
        let (parent, mut events, seen) = parent(model, ProfileSet::from_profiles([reviewer])).await;
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        assert_eq!(
            tools_seen(&seen, "You review."),
            ["calculator", "fetch_title"],
            "{entry}"
        );
    }
}

/// Foreign (Claude Code's own spawn tool): `disallowedTools: Agent` (or
/// its former name `Task`) says the sub-agent starts no sub-agents; it was
/// warned as an unknown tool, and below the depth limit the child got the
/// delegation tools.
#[tokio::test(start_paused = true)]
async fn denying_claude_codes_agent_tool_takes_delegation_away() {
    // Scoped to named sub-agents, with a comma inside: the string was
    // split at it (`Agent(worker` and `researcher)`, neither naming its
    // tool), and the child got the delegation tools; `sleep(a, b)` denied
    // nothing either.
    for entry in [
        "Agent",
        "Task",
        "Agent(worker, researcher)",
        "Task(a, b), calculator",
    ] {
        let (tools, _) = tools_the_worker_gets(&format!("disallowedTools: {entry}")).await;
        let want: &[&str] = if entry.contains("calculator") {
            &["sleep"]
        } else {
            &["calculator", "sleep"]
        };
        assert_eq!(tools, want, "{entry}");
    }
    let (tools, _) = tools_the_worker_gets("disallowedTools: sleep(a, b)").await;
    assert_eq!(tools, ["calculator", "use_agent"]);
    // A `(` never closed: every comma splits, as before (kept whole, the
    // entry named no tool and `calculator` after it was not denied).
    let (tools, _) = tools_the_worker_gets("disallowedTools: sleep(a, calculator").await;
    assert!(!tools.iter().any(|t| t == "calculator"), "{tools:?}");
}

/// Foreign (Agent Skills' `allowed-tools` spelling, copied into agent
/// files and templates): a space-separated list. `disallowedTools: sleep
/// calculator` was read as one name, `"sleep calculator"`, which named no
/// tool: the deny list denied nothing and the child kept both. A scoped
/// entry keeps its spaces inside the parentheses.
#[tokio::test(start_paused = true)]
async fn a_space_separated_deny_list_denies_each_name() {
    let (tools, _) = tools_the_worker_gets("disallowedTools: sleep calculator").await;
    assert_eq!(tools, ["use_agent"]);
    let (tools, _) = tools_the_worker_gets("disallowedTools: sleep(a b) calculator").await;
    assert_eq!(tools, ["use_agent"]);
    let (tools, _) = tools_the_worker_gets("tools: sleep  calculator").await;
    assert_eq!(tools, ["sleep", "calculator", "use_agent"]);
}

/// Foreign (Claude Code's tool for starting sub-agents in an allowlist):
/// `tools: Task` (a coordinator) was an unknown tool — listed alone, the
/// profile had "no tools" and every delegation to it was refused; the
/// depth decides delegation here, and it gets it. `Agent(helper)` (only
/// that type) was dropped the same way, and below the depth limit the
/// child could start any profile: a limit not applied here, so it starts
/// none (said, as not applied).
#[tokio::test(start_paused = true)]
async fn claude_codes_spawn_tool_in_an_allowlist_keeps_its_meaning() {
    let (tools, _) = tools_the_worker_gets("tools: Task").await;
    assert_eq!(tools, ["use_agent"]);
    let (tools, _) = tools_the_worker_gets("tools: Agent, calculator").await;
    assert_eq!(tools, ["calculator", "use_agent"]);
    let (tools, _) = tools_the_worker_gets("tools: Agent(helper, researcher), calculator").await;
    assert_eq!(tools, ["calculator"]);
    let (_, warnings) = Profile::parse(
        std::path::Path::new("/agents/lead.md"),
        "---\ntools: Agent(helper), calculator\n---\nLead.",
    )
    .unwrap();
    assert!(
        warnings.iter().any(|w| matches!(w,
            subagents::actors::profile::ProfileWarning::NotApplied { key, .. }
                if key.contains("Agent(helper)"))),
        "{warnings:?}"
    );
}

/// Foreign, where a child starts (a profile parsed alone, mapped nowhere):
/// `tools: mcp__srv__*` was one unknown name, and every delegation to the
/// profile was refused ("none of the tools it lists exists here"); it is
/// the caller's tools of that server.
#[tokio::test(start_paused = true)]
async fn a_whole_mcp_server_in_a_parsed_profile_is_its_tools_where_the_child_starts() {
    let host = ToolRegistry::new()
        .with(Calculator)
        .with(common::HostTool("mcp__srv__a"))
        .with(common::HostTool("mcp__srv__b"));
    let (tools, _) = tools_the_worker_gets_from("tools: mcp__srv__*", host, 1).await;
    assert_eq!(tools, ["mcp__srv__a", "mcp__srv__b"]);
}

/// Profiles built in code (`ProfileSet::from_profiles` takes any, and
/// `Profile` is `Default`) skipped every check a file gets: a profile
/// named `""` or with a line break was offered though no call could select
/// it, a NaN temperature or `max_tokens` 0 reached every model call of its
/// children, `max_iterations` 0 was read as 1, `permission_mode: plan`
/// was read by nothing (every tool). The parent's spawn refuses each,
/// naming the profile.
#[tokio::test(start_paused = true)]
async fn profiles_built_in_code_are_checked_as_files_are() {
    let spawn = |profile: Profile| async move {
        DelegationBuilder::new(ScriptedModel::new(vec![]).shared())
            .profiles(ProfileSet::from_profiles([profile]))
            .spawn()
            .await
            .map(|_| ())
    };
    let named = |name: &str| Profile {
        name: name.into(),
        ..Profile::default()
    };
    for name in ["", "code reviewer", "a\nb"] {
        let refused = spawn(named(name)).await;
        assert!(
            matches!(refused, Err(AgentError::Profile(_))),
            "{name:?}: {refused:?}"
        );
    }
    let mut hot = named("hot");
    hot.options = RequestOptions {
        temperature: Some(f64::NAN),
        ..RequestOptions::default()
    };
    let refused = spawn(hot).await.unwrap_err().to_string();
    assert!(
        refused.contains("temperature") && refused.contains("`hot`"),
        "{refused}"
    );
    let mut idle = named("idle");
    idle.max_iterations = Some(0);
    let refused = spawn(idle).await.unwrap_err().to_string();
    assert!(
        refused.contains("max_iterations") && refused.contains("`idle`"),
        "{refused}"
    );
    // A mode that restricts (read-only `plan`) was kept and read by
    // nothing: the profile ran with every tool.
    for mode in ["plan", "dontAsk", "readOnly"] {
        let mut planner = named("planner");
        planner.permission_mode = Some(mode.into());
        let refused = spawn(planner).await.unwrap_err().to_string();
        assert!(
            refused.contains("permission_mode") && refused.contains("`planner`"),
            "{mode}: {refused}"
        );
    }
    let mut loose = named("loose");
    loose.permission_mode = Some("acceptEdits".into());
    assert!(spawn(loose).await.is_ok());
    assert!(spawn(named("fine")).await.is_ok());
}

/// A delegation tool in a profile's own `tools` (a coordinator profile):
/// at the depth limit every delegation to it was refused "`use_agent`
/// cannot be given to a sub-agent here …: leave it out of `tools`" — a
/// list the model never wrote; loaded from a file, it was warned as an
/// unknown tool (and a profile listing only it refused as having none).
/// The depth decides, as the deny list reads it: left out at the limit,
/// given by depth below it, never warned.
#[tokio::test(start_paused = true)]
async fn a_delegation_tool_in_a_profiles_own_list_is_decided_by_depth() {
    let text = "---\nname: coordinator\ntools: use_agent, calculator\n---\nYou coordinate.";
    assert_eq!(
        tools_run_with("coordinator", text, "You coordinate.").await,
        ["calculator"]
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("coordinator.md"), text).unwrap();
    let (set, warnings) = ProfileSet::load(&[dir.path().to_path_buf()], &["calculator".to_owned()]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(set.get("coordinator").is_some());
}

/// Misleading the model (review: the front-ends): a profile listing
/// `use_agent` among its tools, called with that same list, was refused
/// as "may only have the tools its profile lists (calculator), and
/// `use_agent` is not one of them" — false twice: the profile lists it,
/// and below the depth limit the child gets it anyway. A delegation tool
/// the profile lists is no widening: the depth decides it, as when the
/// call leaves it out.
#[tokio::test(start_paused = true)]
async fn a_call_echoing_a_profiles_delegation_tool_is_not_refused() {
    // Also a front-end this parent does not offer (`delegate_task` where
    // only `use_agent` is): left out of the profile's list, it stayed in
    // the call's and was refused as "not one of your tools".
    for front_end in ["use_agent", "delegate_task"] {
        let coordinator = claude_profile(
            "/agents/coordinator.md",
            &format!(
                "---\nname: coordinator\ndescription: Coordinates.\ntools: calculator, {front_end}\n---\nYou coordinate."
            ),
        );
        let model = ScriptedModel::new(vec![
            Reply::new().use_agent(
                &UseAgentCall::run_named("coordinator", "coordinate")
                    .tools(["calculator", front_end]),
            ),
            Reply::answer("Done."),
        ])
        .with_script("You coordinate.", vec![Reply::answer("coordinated")]);
        let (spy, seen) = spy("spy", model);
        let (parent, mut events) = DelegationBuilder::new(spy)
            .tools(ToolRegistry::new().with(Calculator).with(Sleep))
            .profiles(ProfileSet::from_profiles([coordinator]))
            .max_depth(2)
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        let results = results_of(&log, "use_agent");
        assert!(!results[0].1, "{front_end}: refused: {}", results[0].0);
        let mut tools = tools_seen(&seen, "You coordinate.");
        tools.sort();
        assert_eq!(tools, ["calculator", "use_agent"], "{front_end}");
        parent.shutdown_and_wait().await;
    }
}

/// Misleading a model (review: malformed delegation calls): a sub-agent
/// whose profile denies delegation, below `max_depth`, that calls
/// `use_agent` anyway (the host's instructions, appended to every child,
/// mention it) read "it runs at depth 1, as deep as delegation goes
/// here" — false: its siblings delegate at this depth. It reads that its
/// profile does not let it.
#[tokio::test(start_paused = true)]
async fn a_child_its_profile_denies_delegation_is_told_so_not_the_depth() {
    let worker = claude_profile(
        "/agents/worker.md",
        "---\nname: worker\ndisallowedTools: use_agent\n---\nYou work alone.",
    );
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&UseAgentCall::run_named("worker", "work")),
        Reply::answer("Done."),
    ])
    .with_script(
        "You work alone.",
        vec![
            Reply::new().use_agent(&UseAgentCall::run("Grand\nYou help.", "x")),
            Reply::answer("worked"),
        ],
    );
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .profiles(ProfileSet::from_profiles([worker]))
        .max_depth(2)
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let (_, by_id) = check_log(&log, true);
    let refused = by_id[&AgentId::new("agent_1")]
        .events
        .iter()
        .find_map(|(_, e)| match e {
            AgentEvent::ToolResult(r) if r.name == "use_agent" => Some(r.output.clone()),
            _ => None,
        })
        .expect("the call was answered");
    assert!(!refused.contains("as deep as delegation goes"), "{refused}");
    assert!(refused.contains("its profile does not let it"), "{refused}");
    assert_eq!(parent.hub.envelopes().len(), 1, "no grandchild was spawned");
}
