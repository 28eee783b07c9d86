//! A profile's tool list read against the host it is offered on: a
//! profile built in code as a file is loaded, and a delegation tool of
//! another front-end decided by depth.

use super::*;

/// A profile built in code (or parsed alone) listing a tool the host
/// lacks — Claude Code's `Read` — was never narrowed as a file's is when
/// loaded: every delegation to it was refused, "the tool `Read` is not
/// one of your tools", a list the model never wrote. Narrowed when the
/// parent it is offered to spawns, it runs with the tools the host has.
#[tokio::test(start_paused = true)]
async fn a_profile_built_in_code_runs_with_the_listed_tools_the_host_has() {
    let text = "---\nname: reader\ntools: Read, sleep\n---\nYou read.";
    assert_eq!(tools_run_with("reader", text, "You read.").await, ["sleep"]);
}

/// A coordinator whose list names a front-end this parent does not offer
/// (`delegate_task` where only `use_agent` is): "not one of your tools",
/// and a call narrowing it with `tools` was refused too — no call could
/// run it. A delegation tool in a profile's list is decided by the depth,
/// whichever front-end it names: tool-less at the depth limit.
#[tokio::test(start_paused = true)]
async fn a_front_end_the_parent_does_not_offer_in_a_profiles_list_is_decided_by_depth() {
    let text = "---\nname: coordinator\ntools: delegate_task\n---\nYou coordinate.";
    assert!(
        tools_run_with("coordinator", text, "You coordinate.")
            .await
            .is_empty()
    );
}

/// Review of this session's change: a host tool named like a front-end
/// this parent does not offer (`agent`, with only `use_agent` on) is an
/// ordinary tool (docs/front-ends.md) — in a profile's list too: the
/// change above dropped it as a delegation name, and a call passing it
/// back was refused.
#[tokio::test(start_paused = true)]
async fn a_host_tool_named_like_a_front_end_not_offered_stays_in_a_profiles_list() {
    let host = ToolRegistry::new().with(HostTool("agent")).with(Sleep);
    let (tools, _parent) = tools_the_worker_gets_from("tools: agent, sleep", host, 1).await;
    assert_eq!(tools, ["agent", "sleep"]);
}

/// Widened (foreign, a tool registered after the load): a file's rule
/// for a whole MCP server (`disallowedTools: mcp__srv__*`) was turned at
/// the load into the server's tools the host had then, and the rule
/// dropped: a tool of that server the host registered later
/// (`mcp__srv__b`, a server that finished listing) went to the child.
#[tokio::test(start_paused = true)]
async fn a_server_wide_deny_covers_a_tool_registered_after_the_load() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("worker.md"),
        "---\nname: worker\ndisallowedTools: mcp__srv__*\n---\nYou work alone.",
    )
    .unwrap();
    let (profiles, warnings) = ProfileSet::load(
        &[tmp.path().to_path_buf()],
        &["calculator".to_owned(), "mcp__srv__a".to_owned()],
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let host = ToolRegistry::new()
        .with(Calculator)
        .with(common::HostTool("mcp__srv__a"))
        .with(common::HostTool("mcp__srv__b"));
    let (tools, _) = tools_a_worker_gets(profiles, host, 1).await;
    assert_eq!(tools, ["calculator"]);
}

/// Widened (foreign, a Codex role): a role's `[mcp_servers.<id>]` that
/// switches the server off (`enabled = false`) or some of its tools
/// (`disabled_tools`) was dropped as "not applied", and the child got
/// every tool of that server the parent had. Denied as a `[tools]`
/// switch turned off is; the server's other tools stay.
#[tokio::test(start_paused = true)]
async fn a_codex_role_never_gets_an_mcp_server_or_tool_it_switches_off() {
    let cases = [
        (
            "[mcp_servers.github]\nenabled = false\n",
            vec!["calculator", "mcp__my__gh__merge", "mcp__my__gh"],
        ),
        // Its id in another case than the host's tools (a one-tool rule
        // matches whatever the case; the server's matched none).
        (
            "[mcp_servers.GitHub]\nenabled = false\n",
            vec!["calculator", "mcp__my__gh__merge", "mcp__my__gh"],
        ),
        (
            "[mcp_servers.github]\ndisabled_tools = [\"merge_pull_request\"]\n",
            vec![
                "calculator",
                "mcp__github__get_pr",
                "mcp__my__gh__merge",
                "mcp__my__gh",
            ],
        ),
        // A server whose id holds `__`: its rule `mcp__my__gh` read as the
        // tool `gh` of a server `my` (the last tool here), and denied that
        // one, not the server's.
        (
            "[mcp_servers.my__gh]\nenabled = false\n",
            vec![
                "calculator",
                "mcp__github__merge_pull_request",
                "mcp__github__get_pr",
                "mcp__my__gh",
            ],
        ),
    ];
    for (table, want) in cases {
        let (worker, _) = Profile::parse_codex_role(
            Path::new("/p/.codex/agents/worker.toml"),
            &format!("name = \"worker\"\ndeveloper_instructions = \"You work alone.\"\n{table}"),
        )
        .unwrap();
        let host = ToolRegistry::new()
            .with(Calculator)
            .with(common::HostTool("mcp__github__merge_pull_request"))
            .with(common::HostTool("mcp__github__get_pr"))
            .with(common::HostTool("mcp__my__gh__merge"))
            .with(common::HostTool("mcp__my__gh"));
        let (tools, _) = tools_a_worker_gets(ProfileSet::from_profiles([worker]), host, 1).await;
        assert_eq!(tools, want, "{table}");
    }
}

/// Widened (foreign, a Codex role): `[agents] max_depth = 1` (Codex's
/// way of saying the role's agent starts no sub-agents of its own) was an
/// unknown key: under a host's `max_depth(2)` the worker was offered
/// `use_agent` and could fan out.
#[tokio::test(start_paused = true)]
async fn a_codex_role_with_max_depth_one_never_delegates() {
    let (worker, _) = Profile::parse_codex_role(
        Path::new("/p/.codex/agents/worker.toml"),
        "name = \"worker\"\ndeveloper_instructions = \"You work alone.\"\n[agents]\nmax_depth = 1\n",
    )
    .unwrap();
    let host = ToolRegistry::new().with(Calculator).with(Sleep);
    let (tools, _) = tools_a_worker_gets(ProfileSet::from_profiles([worker]), host, 2).await;
    assert_eq!(tools, ["calculator", "sleep"]);
}

/// Widened (foreign, a deny list): an entry of a deny list holding
/// several names (`["calculator, sleep"]`, the string form written inside
/// a list) was one name that named no tool: it denied nothing, and the
/// child got both. Each entry is split as a string is.
#[tokio::test(start_paused = true)]
async fn a_deny_list_entry_naming_several_tools_denies_each() {
    let host = ToolRegistry::new()
        .with(Calculator)
        .with(Sleep)
        .with(HostTool("read_file"));
    let (tools, _parent) =
        tools_the_worker_gets_from("disallowedTools: [\"calculator, sleep\"]", host, 1).await;
    assert_eq!(tools, ["read_file"]);
}

/// Widened (foreign, real files: `disallowedTools: [Agent, "mcp__*"]`,
/// a guide's "drop all MCP tools"): a deny rule ending in `*` was read
/// as one tool's name, `mcp__*`, which no tool has — the child kept
/// every MCP tool; `"*"` denied nothing at all. A deny list resolves
/// towards denying: the rule covers every tool that begins as it does.
#[tokio::test(start_paused = true)]
async fn a_wildcard_deny_rule_denies_every_tool_it_covers() {
    let host = || {
        ToolRegistry::new()
            .with(Calculator)
            .with(common::HostTool("mcp__github__merge_pull_request"))
    };
    let (tools, _parent) =
        tools_the_worker_gets_from("disallowedTools: [Agent, \"mcp__*\"]", host(), 1).await;
    assert_eq!(tools, ["calculator"]);
    // Every tool, delegation too (the parent may delegate two levels).
    let (tools, _parent) = tools_the_worker_gets_from("disallowedTools: \"*\"", host(), 2).await;
    assert!(tools.is_empty(), "{tools:?}");
}

/// Widened (foreign, a real `flow.md`): `tools: Agent(flow, player), *`
/// is every tool with `Agent` scoped to two types, in Claude Code; the
/// `*` dropped the whole list, the scope with it — and below the depth
/// limit the sub-agent could start any profile. It starts none, as the
/// scope without the `*` does.
#[tokio::test(start_paused = true)]
async fn a_scoped_agent_tool_beside_a_star_still_starts_no_sub_agent() {
    let (tools, _parent) = tools_the_worker_gets("tools: Agent(flow, player), *").await;
    assert_eq!(tools, ["calculator", "sleep"]);
}

/// This session's own review of the rule above: a rule ending in `*`
/// that covers a delegation tool (`use_*`) denied the tool's name but
/// not delegation — below the depth limit the hub gave the child
/// `use_agent` again; `**` denied nothing.
#[tokio::test(start_paused = true)]
async fn a_wildcard_deny_rule_covering_delegation_takes_it_away() {
    let (tools, _parent) = tools_the_worker_gets("disallowedTools: [\"use_*\"]").await;
    assert_eq!(tools, ["calculator", "sleep"]);
    let (tools, _parent) = tools_the_worker_gets("disallowedTools: \"**\"").await;
    assert!(tools.is_empty(), "{tools:?}");
}

/// Widened (foreign, the scope written another way): `agent(worker)` in
/// another case, and `Agent (worker)` with a space (split at it into a
/// bare `Agent` and `(worker)`), were read as bare: below the depth
/// limit the sub-agent got delegation where its file scoped it.
#[tokio::test(start_paused = true)]
async fn a_scoped_agent_tool_in_another_spelling_starts_no_sub_agent() {
    for tools in [
        "tools: [calculator, \"agent(flow)\"]",
        "tools: calculator, TASK(flow)",
        "tools: calculator, Agent (flow)",
    ] {
        let (got, _parent) = tools_the_worker_gets(tools).await;
        assert_eq!(got, ["calculator"], "{tools}");
    }
}

/// Widened (a profile built in code): `Agent(worker)` in its `tools` was
/// dropped as a tool the host lacks, and no scope kept — below the depth
/// limit the sub-agent got delegation. It starts none, as a file's does.
#[tokio::test(start_paused = true)]
async fn a_scoped_agent_tool_in_a_profile_built_in_code_starts_no_sub_agent() {
    let worker = Profile {
        name: "worker".into(),
        system_prompt: "You work alone.".into(),
        tools: Some(vec!["calculator".into(), "Agent(flow)".into()]),
        ..Profile::default()
    };
    let host = ToolRegistry::new().with(Calculator).with(Sleep);
    let (got, _parent) = tools_a_worker_gets(ProfileSet::from_profiles([worker]), host, 2).await;
    assert_eq!(got, ["calculator"]);
}

/// This session's own review: the reading above, run on a profile built
/// in code, dropped a bare `Task` the host has as a tool of its own —
/// silently (a list of it alone gave the child no tools). A bare name
/// the host has is its tool.
#[tokio::test(start_paused = true)]
async fn a_host_tool_named_task_stays_in_a_profile_built_in_code() {
    for listed in [vec!["Task", "calculator"], vec!["Task"]] {
        let worker = Profile {
            name: "worker".into(),
            system_prompt: "You work alone.".into(),
            tools: Some(listed.iter().map(|t| t.to_string()).collect()),
            ..Profile::default()
        };
        let host = ToolRegistry::new().with(Calculator).with(HostTool("Task"));
        let (got, _parent) =
            tools_a_worker_gets(ProfileSet::from_profiles([worker]), host, 2).await;
        assert!(got.iter().any(|t| t == "Task"), "{listed:?}: {got:?}");
    }
}
