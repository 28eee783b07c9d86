//! Delegation: a parent that starts children through three tool
//! front-ends sharing one engine.
//!
//! | tool | arguments | waits | returns |
//! |---|---|---|---|
//! | `use_agent` | `action` run/status/result/send/interrupt/stop/agents, `agent` or `system_prompt`, `input`, `tools`, `model`, `provider`, `max_iterations`, `wait`, `id`, `offset`, `limit` | up to the inline wait, then background | JSON: id, status, result — or `{pending, id}` |
//! | `delegate_task` | `agent` or `system_prompt`, `task`, `tools`, `model`, `provider`, `max_iterations` | to the end | the final answer only |
//! | `agent` | `task` | to the end | the final (or partial) answer only |
//!
//! All three go through the same hub (slots, queue, envelopes, events) and
//! refuse the same things with the same sentences.

//!
//! | file | holds |
//! |---|---|
//! | `engine.rs` | the engine: waits, delivery; the policies and tool names |
//! | `shown.rs` | a value the model sent, as a refusal quotes it |
//! | `request.rs` | a call turned into a child's request: profile, tools, model, caps |
//! | `use_agent.rs` | Loopl's `use_agent` |
//! | `answers.rs` | what `use_agent` answers a model, as JSON |
//! | `delegate_task.rs` | openheim's `delegate_task` |
//! | `agent_tool.rs` | ghyll's `agent` |
//! | `builder.rs` | [`DelegationBuilder`]: a parent with its hub, gate and tools |
//! | `delegating.rs` | [`DelegatingAgent`]: what it spawned, and its shutdown |
//! | `call.rs` | [`UseAgentCall`]: a `use_agent` call, typed |

mod agent_tool;
mod answers;
mod args;
mod builder;
mod call;
mod delegate_task;
mod delegating;
mod engine;
mod in_time;
mod parent_stop;
mod request;
mod shown;
mod use_agent;

pub use builder::DelegationBuilder;
pub use call::UseAgentCall;
pub use delegating::DelegatingAgent;
pub use engine::ParentStopPolicy;
pub(crate) use engine::{USE_AGENT, denying_takes_delegation, is_delegation_tool};
pub(crate) use shown::{is_invisible, quoted, shown};
