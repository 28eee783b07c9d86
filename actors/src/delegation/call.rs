//! A typed `use_agent` call: what a model writes, built in code — for
//! hosts replaying a call, tests, examples and scripted models.
//!
//! ```
//! use subagents_actors::delegation::UseAgentCall;
//!
//! let call = UseAgentCall::run("Researcher\nYou find sources.", "three sources on X")
//!     .tools(["fetch_title"])
//!     .background();
//! assert_eq!(
//!     call.to_json(),
//!     r#"{"action":"run","input":"three sources on X","system_prompt":"Researcher\nYou find sources.","tools":["fetch_title"],"wait":false}"#
//! );
//! assert_eq!(UseAgentCall::result("agent_1").to_json(), r#"{"action":"result","id":"agent_1"}"#);
//! ```

use serde_json::{Map, Value, json};

/// What a `use_agent` call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UseAgentAction {
    /// Start a child.
    Run,
    /// Its progress, without waiting.
    Status,
    /// Its answer, waiting a while.
    Result,
    /// Send it a message (read at its next model call; a finished child
    /// goes on as a new run).
    Send,
    /// Interrupt it: it ends `interrupted`, and a message resumes it.
    Interrupt,
    /// Stop it.
    Stop,
    /// List every named sub-agent with its description.
    Agents,
}

impl UseAgentAction {
    /// The name the tool reads (`"run"`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            UseAgentAction::Run => "run",
            UseAgentAction::Status => "status",
            UseAgentAction::Result => "result",
            UseAgentAction::Send => "send",
            UseAgentAction::Interrupt => "interrupt",
            UseAgentAction::Stop => "stop",
            UseAgentAction::Agents => "agents",
        }
    }

    /// The action named `name`, if it is one.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        [
            UseAgentAction::Run,
            UseAgentAction::Status,
            UseAgentAction::Result,
            UseAgentAction::Send,
            UseAgentAction::Interrupt,
            UseAgentAction::Stop,
            UseAgentAction::Agents,
        ]
        .into_iter()
        .find(|a| a.as_str() == name)
    }

    /// The fields this action reads besides `action` — one table for the
    /// tool (which refuses any other) and for [`UseAgentCall::to_json`]
    /// (which writes no other).
    pub(crate) fn fields(self) -> &'static [&'static str] {
        match self {
            UseAgentAction::Run => &[
                "agent",
                "system_prompt",
                "tools",
                "model",
                "provider",
                "max_iterations",
                "input",
                "wait",
            ],
            UseAgentAction::Status | UseAgentAction::Interrupt | UseAgentAction::Stop => &["id"],
            UseAgentAction::Result => &["id", "offset", "limit"],
            UseAgentAction::Send => &["id", "input"],
            UseAgentAction::Agents => &[],
        }
    }
}

/// One `use_agent` call's arguments. Build it with [`UseAgentCall::run`],
/// [`UseAgentCall::run_named`], [`UseAgentCall::status`],
/// [`UseAgentCall::result`] or [`UseAgentCall::stop`], then write it with
/// [`UseAgentCall::to_json`]. A setter that does not apply to the call's
/// action (`wait` on `result`, `offset` on `run`) is not written: the
/// tool refuses a field its action does not read, and what this writes
/// it always takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseAgentCall {
    action: UseAgentAction,
    fields: Vec<(&'static str, Value)>,
}

impl UseAgentCall {
    fn new(action: UseAgentAction) -> Self {
        Self {
            action,
            fields: Vec::new(),
        }
    }

    fn with(mut self, key: &'static str, value: Value) -> Self {
        self.fields.retain(|(k, _)| *k != key);
        self.fields.push((key, value));
        self
    }

    /// Starts an inline child: its system prompt (first line: its name)
    /// and its one input. Waits for it (`wait: true`) unless
    /// [`UseAgentCall::background`].
    pub fn run(system_prompt: impl Into<String>, input: impl Into<String>) -> Self {
        Self::new(UseAgentAction::Run)
            .with("system_prompt", Value::String(system_prompt.into()))
            .with("input", Value::String(input.into()))
    }

    /// Starts a named child (a profile).
    pub fn run_named(agent: impl Into<String>, input: impl Into<String>) -> Self {
        Self::new(UseAgentAction::Run)
            .with("agent", Value::String(agent.into()))
            .with("input", Value::String(input.into()))
    }

    /// Asks for a child's progress.
    pub fn status(id: impl Into<String>) -> Self {
        Self::new(UseAgentAction::Status).with("id", Value::String(id.into()))
    }

    /// Asks for a child's answer.
    pub fn result(id: impl Into<String>) -> Self {
        Self::new(UseAgentAction::Result).with("id", Value::String(id.into()))
    }

    /// Sends a running (or queued) child a message: it reads it at its
    /// next model call, after what it is doing now.
    pub fn send(id: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(UseAgentAction::Send)
            .with("id", Value::String(id.into()))
            .with("input", Value::String(message.into()))
    }

    /// Interrupts a child: what it does now is cut and it ends
    /// `interrupted`; [`UseAgentCall::send`] resumes it.
    pub fn interrupt(id: impl Into<String>) -> Self {
        Self::new(UseAgentAction::Interrupt).with("id", Value::String(id.into()))
    }

    /// Lists every named sub-agent with its description.
    pub fn agents() -> Self {
        Self::new(UseAgentAction::Agents)
    }

    /// Stops a child.
    pub fn stop(id: impl Into<String>) -> Self {
        Self::new(UseAgentAction::Stop).with("id", Value::String(id.into()))
    }

    /// The tools the child may use (names of the caller's own).
    pub fn tools<S: Into<String>>(self, tools: impl IntoIterator<Item = S>) -> Self {
        let tools: Vec<Value> = tools.into_iter().map(|t| Value::String(t.into())).collect();
        self.with("tools", Value::Array(tools))
    }

    /// Waits for the answer (`true`, the default) or returns at once.
    pub fn wait(self, wait: bool) -> Self {
        self.with("wait", Value::Bool(wait))
    }

    /// Returns at once: the child runs in the background (`wait: false`).
    pub fn background(self) -> Self {
        self.wait(false)
    }

    /// A cap on the child's model calls (at least 1: the tool refuses 0,
    /// and a 0 given here is written as 1).
    pub fn max_iterations(self, cap: u32) -> Self {
        self.with("max_iterations", json!(cap.max(1)))
    }

    /// `result`: read the answer from this character on (a long answer is
    /// cut to the result budget; its marker names the offset of the part
    /// left out).
    pub fn offset(self, offset: u64) -> Self {
        self.with("offset", json!(offset))
    }

    /// `result`: at most this many characters from the offset (at most
    /// the result budget; written from 1 to `u32::MAX`, what the tool
    /// takes — 0 or more was refused).
    pub fn limit(self, limit: u64) -> Self {
        self.with("limit", json!(limit.clamp(1, u64::from(u32::MAX))))
    }

    /// A model override (resolved in the host's registry).
    pub fn model(self, model: impl Into<String>) -> Self {
        self.with("model", Value::String(model.into()))
    }

    /// The provider serving [`UseAgentCall::model`], for a model name
    /// several providers in the host's registry serve (without it, `run`
    /// refuses such a name: "name the provider").
    pub fn provider(self, provider: impl Into<String>) -> Self {
        self.with("provider", Value::String(provider.into()))
    }

    /// What it asks for (the crate's tests': public, it returned a type
    /// no host could name).
    #[cfg(test)]
    pub(crate) fn action(&self) -> UseAgentAction {
        self.action
    }

    /// The arguments as the model would write them: one JSON object, keys
    /// sorted, only the fields its action reads.
    pub fn to_json(&self) -> String {
        let mut map = Map::new();
        for (key, value) in self.pairs() {
            map.insert(key.into(), value);
        }
        Value::Object(map).to_string()
    }

    /// Its keys and values, sorted by key, `action` among them: inserted so
    /// into a `serde_json::Map`, the JSON is sorted whatever the map is (a
    /// crate in the host's build turning serde_json's `preserve_order` on
    /// makes it keep the order of insertion, and the setters' order
    /// reached the call's bytes, and a replay's).
    fn pairs(&self) -> Vec<(&'static str, Value)> {
        let reads = self.action.fields();
        let action = Value::String(self.action.as_str().into());
        let mut pairs: Vec<(&'static str, Value)> = std::iter::once(("action", action))
            .chain(
                (self.fields.iter())
                    .filter(|(k, _)| reads.contains(k))
                    .map(|(k, v)| (*k, v.clone())),
            )
            .collect();
        pairs.sort_by_key(|(key, _)| *key);
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_write_what_the_tool_reads() {
        let call = UseAgentCall::run("Worker\nYou work.", "work 5 s")
            .tools(["sleep"])
            .wait(true)
            .max_iterations(3);
        let value: Value = serde_json::from_str(&call.to_json()).unwrap_or_default();
        assert_eq!(value["action"], "run");
        assert_eq!(value["tools"], json!(["sleep"]));
        assert_eq!(value["wait"], true);
        assert_eq!(value["max_iterations"], 3);
        assert_eq!(
            UseAgentCall::run_named("reviewer", "x")
                .background()
                .to_json(),
            r#"{"action":"run","agent":"reviewer","input":"x","wait":false}"#
        );
        assert_eq!(
            UseAgentCall::stop("agent_2").to_json(),
            r#"{"action":"stop","id":"agent_2"}"#
        );
        assert_eq!(
            UseAgentCall::status("agent_2").action(),
            UseAgentAction::Status
        );
        // A repeated setter keeps the last value.
        assert_eq!(
            UseAgentCall::run("W", "x").wait(true).wait(false).to_json(),
            r#"{"action":"run","input":"x","system_prompt":"W","wait":false}"#
        );
    }

    /// Sorted by key whatever the order of the setters (review: a host's
    /// build with serde_json's `preserve_order` wrote them as set).
    #[test]
    fn its_keys_are_sorted_whatever_the_order_they_were_set_in() {
        let call = UseAgentCall::run("W", "x")
            .wait(false)
            .provider("ollama")
            .model("qwen")
            .max_iterations(2)
            .tools(["sleep"]);
        let keys: Vec<&str> = call.pairs().iter().map(|(k, _)| *k).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(keys, sorted);
        assert_eq!(
            call.to_json(),
            r#"{"action":"run","input":"x","max_iterations":2,"model":"qwen","provider":"ollama","system_prompt":"W","tools":["sleep"],"wait":false}"#
        );
    }

    /// The builder wrote any setter for any action, so `result(..)
    /// .wait(false)` — as this file's own test wrote — was a call the tool
    /// refuses ("`wait` does not apply to action `result`"). Every call it
    /// builds, every setter applied, has only fields its action reads.
    #[test]
    fn every_call_it_builds_has_only_fields_its_action_reads() {
        let all = |call: UseAgentCall| {
            call.tools(["sleep"])
                .wait(false)
                .max_iterations(2)
                .offset(10)
                .limit(20)
                .model("m")
                .provider("p")
        };
        let calls = [
            UseAgentCall::run("W", "x"),
            UseAgentCall::run_named("w", "x"),
            UseAgentCall::status("a"),
            UseAgentCall::result("a"),
            UseAgentCall::send("a", "x"),
            UseAgentCall::interrupt("a"),
            UseAgentCall::stop("a"),
            UseAgentCall::agents(),
        ];
        for call in calls {
            let action = call.action();
            let value: Value = serde_json::from_str(&all(call).to_json()).unwrap_or_default();
            let keys: Vec<&str> = value
                .as_object()
                .map(|m| m.keys().map(String::as_str).collect())
                .unwrap_or_default();
            for key in keys.iter().filter(|k| **k != "action") {
                assert!(action.fields().contains(key), "{action:?} wrote `{key}`");
            }
        }
        assert_eq!(
            UseAgentCall::result("a").wait(false).offset(3).to_json(),
            r#"{"action":"result","id":"a","offset":3}"#
        );
    }
}
