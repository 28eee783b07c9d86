//! A call turned into a child's request: who the child is (a profile or
//! an inline prompt), the tools it gets (never more than its requester
//! has, never a tool its profile does not list or denies), its model and
//! its model-call cap (a call may lower a profile's, not raise it).

use subagents_messages::{ChildRequest, RequestOptions};

use crate::delegation::engine::{ChildSpec, Delegator, ParentStopPolicy, refuse};
use crate::delegation::shown;
use crate::profile::{denies, denies_delegation, expand_servers};
use crate::tool::{ToolCallContext, ToolError};

impl Delegator {
    /// Builds the request: exactly one of `agent` or `system_prompt`; a
    /// profile's fields, then the call's overrides; tools checked against
    /// the caller's own, less the profile's deny list. `background`:
    /// `None` takes the profile's (inline for an inline definition).
    /// Every refusal is a sentence.
    pub(crate) fn request(
        &self,
        call: &ToolCallContext,
        spec: ChildSpec,
        input: String,
        background: Option<bool>,
    ) -> Result<ChildRequest, ToolError> {
        let agent = spec.agent.filter(|a| !a.trim().is_empty());
        let inline = spec.system_prompt.filter(|p| !p.trim().is_empty());
        let (profile, system_prompt) = match (agent, inline) {
            // No named sub-agents here: `agent` is no way forward (told
            // "give `agent`", a model trained on Claude Code tried names
            // one after another).
            (Some(_), _) | (None, None) if self.profiles.is_empty() => {
                return Err(refuse(NO_NAMED));
            }
            (Some(_), Some(_)) => {
                return Err(refuse(
                    "give either `agent` (a named sub-agent) or `system_prompt` (an inline one), not both",
                ));
            }
            (None, None) => {
                return Err(refuse(format!(
                    "give `agent` (a named sub-agent) or `system_prompt` (an inline one's instructions; its first line is its name){}",
                    self.names_hint()
                )));
            }
            (Some(name), None) => {
                let profile = self.profiles.get(&name).ok_or_else(|| {
                    refuse(format!(
                        "there is no sub-agent named `{}`{}",
                        shown(&name),
                        self.names_hint()
                    ))
                })?;
                (Some(profile), profile.system_prompt.clone())
            }
            (None, Some(prompt)) => (None, prompt),
        };
        // Whatever the call gives: the profile allows only what it lists
        // (Factory's `tools: read-only`, an unmapped `Read, Grep`), so any
        // tool the call named would widen it.
        if let Some(p) = profile
            && p.tools.as_ref().is_some_and(Vec::is_empty)
            && !p.unavailable_tools.is_empty()
        {
            return Err(refuse(format!(
                "the sub-agent `{}` cannot run: none of the tools it lists exists here ({}), and it may have no other; do the work yourself",
                p.name,
                p.unavailable_tools.join(", ")
            )));
        }
        let name = profile.map(|p| p.name.clone());
        let mut tools = profile.and_then(|p| p.tools.clone());
        // A delegation tool in the profile's own list: the depth decides,
        // as its deny list is read — left out here, given by depth below
        // the limit (at it, the model was told to "leave it out of
        // `tools`", a list it never wrote).
        if let Some(listed) = tools.as_mut() {
            // Any front-end's name, offered here or not (`tools:
            // delegate_task` on a parent offering `use_agent` was "not
            // one of your tools", and no call could run the profile) —
            // but a host tool of that name, not offered as delegation, is
            // an ordinary tool, kept (docs/front-ends.md).
            listed.retain(|t| {
                !(self.is_delegation(t)
                    || crate::delegation::is_delegation_tool(t)
                        && !call.available_tools.iter().any(|a| a == t))
            });
            // A rule for a whole MCP server, as the caller's tools of that
            // server (a profile built in code or parsed alone is mapped
            // nowhere else).
            *listed = expand_servers(std::mem::take(listed), &call.available_tools);
        }
        let mut model = profile.and_then(|p| p.model.clone());
        let mut provider = profile.and_then(|p| p.provider.clone());
        let mut max_iterations = profile.and_then(|p| p.max_iterations);
        let denied: &[String] = profile.map_or(&[], |p| &p.disallowed_tools);
        // A tool the profile lists, does not deny, and the caller lacks (a
        // sub-agent's own sub-agent): said of the profile — "not one of your tools" told
        // the model to leave out a tool it never wrote, and a call that
        // did was refused for narrowing nothing the profile allows.
        if spec.tools.is_none()
            && let (Some(name), Some(listed)) = (name.as_deref(), tools.as_ref())
            && let Some(missing) = listed
                .iter()
                .find(|t| !denies(denied, t) && !call.available_tools.contains(t))
        {
            return Err(refuse(format!(
                "the sub-agent `{name}` needs the tool `{}` (its profile lists it), which is not one of your tools: it cannot run under you",
                shown(missing)
            )));
        }
        if let Some(asked) = spec.tools {
            if let Some(tool) = asked.iter().find(|t| denies(denied, t)) {
                return Err(refuse(format!(
                    "the sub-agent `{}` may not have the tool `{}` (its profile denies it); leave it out",
                    name.as_deref().unwrap_or_default(),
                    shown(tool)
                )));
            }
            // A delegation tool the profile itself lists is no widening:
            // left out of `listed` above, the depth decides it below (the
            // call echoing the profile's own list was refused as "not one
            // of them").
            let its_own = |t: &String| {
                crate::delegation::is_delegation_tool(t)
                    && profile.is_some_and(|p| p.tools.as_ref().is_some_and(|all| all.contains(t)))
            };
            // A call narrows a profile's list, never widens it: `tools: []`
            // is a deliberate tool-less profile.
            if profile.is_some()
                && let Some(listed) = tools.as_ref()
                && let Some(tool) = asked.iter().find(|t| !listed.contains(t) && !its_own(t))
            {
                return Err(refuse(format!(
                    "the sub-agent `{}` may only have the tools its profile lists ({}), and `{}` is not one of them; leave it out",
                    name.as_deref().unwrap_or_default(),
                    if listed.is_empty() {
                        "none".to_owned()
                    } else {
                        listed.join(", ")
                    },
                    shown(tool)
                )));
            }
            // One the profile lists that this parent does not offer (nor
            // has as a host tool): left out, as from the profile's list
            // above — kept, it was "not one of your tools".
            let mut asked = asked;
            asked.retain(|t| {
                !(its_own(t)
                    && !self.is_delegation(t)
                    && !call.available_tools.iter().any(|a| a == t))
            });
            tools = Some(asked);
        }
        // An empty string says nothing (a model that fills every field
        // sends `""`): it does not replace the profile's model.
        if let Some(asked) = spec.model.filter(|m| !m.trim().is_empty()) {
            model = Some(asked);
            provider = spec.provider.filter(|p| !p.trim().is_empty());
        }
        // A call may lower a profile's cap, not raise it.
        max_iterations = match (max_iterations, spec.max_iterations) {
            (Some(profile), Some(call)) => Some(profile.min(call)),
            (profile, call) => call.or(profile),
        };
        if !denied.is_empty() {
            // A deny list only narrows: whatever the child would get (its
            // list, or every tool of the caller's), less the denied ones.
            let base = tools.unwrap_or_else(|| {
                call.available_tools
                    .iter()
                    .filter(|t| !self.is_delegation(t))
                    .cloned()
                    .collect()
            });
            tools = Some(base.into_iter().filter(|t| !denies(denied, t)).collect());
        }
        let tools = self.check_tools(call, tools)?;
        let background = background.unwrap_or_else(|| profile.is_some_and(|p| p.background));
        if input.trim().is_empty() {
            return Err(refuse(
                "the task is empty: write the complete task for the sub-agent, which cannot see this conversation",
            ));
        }
        Ok(ChildRequest {
            requester: call.agent_id.clone(),
            requester_depth: call.depth,
            parent_tool_use_id: call.tool_use_id.clone(),
            system_prompt,
            input,
            tools,
            background,
            name,
            model,
            provider,
            max_iterations,
            // `Detach` is for the user's parent: a child's call cut before
            // it read the id ends its grandchild, as its cut inline wait
            // does (its note says "stops when you end").
            stop_if_abandoned: self.parent_stop == ParentStopPolicy::Cascade || call.depth > 0,
            // A profile that denies any delegation tool gets none: the hub
            // adds them to a child below the depth limit otherwise.
            no_delegation: denies_delegation(denied),
            wall_clock_cap: None,
            token_cap: None,
            options: profile
                .map(|p| p.options.clone())
                .filter(|o| *o != RequestOptions::default()),
            resumed_from: None,
            conversation: Vec::new(),
        })
    }

    fn names_hint(&self) -> String {
        if self.profiles.is_empty() {
            String::new()
        } else {
            format!(
                "; the named sub-agents are: {}",
                self.profiles.names().collect::<Vec<_>>().join(", ")
            )
        }
    }

    /// Checks listed tools against the caller's; `None` inherits all of
    /// them but the delegation tools (for a parent, `None`: the hub's).
    fn check_tools(
        &self,
        call: &ToolCallContext,
        tools: Option<Vec<String>>,
    ) -> Result<Option<Vec<String>>, ToolError> {
        let Some(mut tools) = tools else {
            // A child's child gets at most its requester's tools (the hub
            // would give it every host tool); a parent's are the host's.
            if call.depth == 0 {
                return Ok(None);
            }
            return Ok(Some(
                call.available_tools
                    .iter()
                    .filter(|t| !self.is_delegation(t))
                    .cloned()
                    .collect(),
            ));
        };
        // A delegation tool listed: the depth decides, not the list — a
        // child that may delegate gets it anyway (refused, the call read
        // "a sub-agent cannot start sub-agents", false below the limit).
        if call.depth + 1 < self.max_depth {
            tools.retain(|name| !self.is_delegation(name));
        }
        for name in &tools {
            // The parent may delegate; only this name may not go (told
            // "do the work yourself", it gave up delegating).
            if self.is_delegation(name) {
                return Err(refuse(format!(
                    "`{}` cannot be given to a sub-agent here (the maximum depth is {}): leave it out of `tools`",
                    shown(name),
                    self.max_depth
                )));
            }
            if !call.available_tools.iter().any(|t| t == name) {
                return Err(refuse(format!(
                    "the tool `{}` is not one of your tools, so a sub-agent cannot get it; your tools are: {}",
                    shown(name),
                    call.available_tools
                        .iter()
                        .filter(|t| !self.is_delegation(t))
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        Ok(Some(tools))
    }
}

/// The refusal of a call naming no sub-agent, or a named one, where there
/// are no named sub-agents (no profiles).
const NO_NAMED: &str = "there are no named sub-agents here: give `system_prompt` (the sub-agent's \
     instructions; its first line is its name), and leave `agent` out";
