//! Host code that panics with a value whose own `Drop` panics
//! (`std::panic::panic_any` takes any value): read where it was caught.
//! Every guard read the payload's message and dropped the payload where
//! it returned — outside itself: the second panic unwound on, and a tool's
//! crash was the whole turn's, an observer's or a clock's the hub's.

use std::sync::atomic::{AtomicBool, Ordering};

use subagents::actors::agent::ApprovalPolicy;
use subagents::actors::clock::Clock;
use subagents::actors::model::{Model, ModelError, ModelStream};
use subagents::actors::tool::{ToolCallContext, ToolError, ToolFuture};
use subagents::messages::{ApprovalDecision, ModelChunk, ModelRequest};

use super::*;

/// Panics with a [`Bomb`] as it is dropped (not while unwinding: that
/// aborts in any code).
struct Fuse;

impl Drop for Fuse {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            explode();
        }
    }
}

/// Where the host's code panics with a [`Bomb`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Site {
    ToolCall,
    ToolFuture,
    ToolFutureDrop,
    ToolDeciding,
    ToolSchema,
    Policy,
    ModelStart,
    ModelPoll,
    ModelStreamDrop,
}

/// Every site, in the order the test runs them.
const SITES: [Site; 9] = [
    Site::ToolCall,
    Site::ToolFuture,
    Site::ToolFutureDrop,
    Site::ToolDeciding,
    Site::ToolSchema,
    Site::Policy,
    Site::ModelStart,
    Site::ModelPoll,
    Site::ModelStreamDrop,
];

/// A tool `faulty` panicking at its site.
struct Faulty(Site);

impl Tool for Faulty {
    fn name(&self) -> &str {
        "faulty"
    }
    fn description(&self) -> String {
        "panics where told".into()
    }
    fn parameters(&self) -> serde_json::Value {
        if self.0 == Site::ToolSchema {
            explode();
        }
        serde_json::json!({"type": "object"})
    }
    fn requires_approval(&self, _arguments: &str) -> bool {
        match self.0 {
            Site::ToolDeciding => explode(),
            site => site == Site::Policy,
        }
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        match self.0 {
            Site::ToolCall => explode(),
            Site::ToolFuture => Box::pin(async { explode() }),
            _ => Box::pin(Ready(Fuse)),
        }
    }
}

/// Ready with `done`, holding a fuse only a `Drop` lights.
struct Ready(Fuse);

impl std::future::Future for Ready {
    type Output = Result<String, ToolError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::task::Poll::Ready(Ok("done".into()))
    }
}

/// A host's approval policy that panics deciding.
struct Deciding;

impl ApprovalPolicy for Deciding {
    fn decide(&self, _: &AgentId, _: &str, _: &str) -> Option<ApprovalDecision> {
        explode()
    }
}

/// A model calling `faulty`, then answering `Done.` — its stream
/// panicking at its site.
struct Faultier(Site, ScriptedModel);

/// A stream answering `done`, with a fuse.
struct Lit(bool, Fuse);

impl futures_util::Stream for Lit {
    type Item = Result<ModelChunk, ModelError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let answered = std::mem::replace(&mut self.0, true);
        std::task::Poll::Ready((!answered).then(|| Ok(ModelChunk::Text("done".into()))))
    }
}

impl Model for Faultier {
    fn name(&self) -> &str {
        "faultier"
    }
    fn stream(&self, request: ModelRequest) -> ModelStream {
        match self.0 {
            Site::ModelStart => explode(),
            Site::ModelPoll => Box::pin(futures_util::stream::poll_fn(|_| explode())),
            Site::ModelStreamDrop => Box::pin(Lit(false, Fuse)),
            _ => self.1.stream(request),
        }
    }
}

/// Every site where an agent reads a host's panic: the call it touches
/// fails with a sentence (or its answer stands), the turn ends as it would
/// have, and the agent and its gate are free. Each site is run and the
/// ones that went wrong are listed.
#[tokio::test(start_paused = true)]
async fn a_panic_whose_payload_panics_as_it_drops_stays_where_it_was_caught() {
    let mut wrong = Vec::new();
    for site in SITES {
        if let Err(what) = at(site).await {
            wrong.push(format!("{site:?}: {what}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// An agent whose host code panics at `site`: what went wrong, if anything.
async fn at(site: Site) -> Result<(), String> {
    use Site::*;
    let script = ScriptedModel::new(vec![
        Reply::new().tool_call("faulty", "{}"),
        Reply::answer("Done."),
    ]);
    let gate = GateHandle::spawn(1).await.unwrap();
    let (agent, mut events) = AgentBuilder::new(Arc::new(Faultier(site, script)))
        .tools(ToolRegistry::new().with(Faulty(site)))
        .approvals(Arc::new(Deciding))
        .gate(gate.clone())
        .spawn()
        .await
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(3600), agent.run("go"))
        .await
        .map_err(|_| "no result in an hour".to_owned())?
        .map_err(|e| format!("{e:?}"))?;
    let mut log = Vec::new();
    drain(&mut events, &mut log);
    let faulty = results_of(&log, "faulty");
    let crashed = "panic with a non-text payload";
    let (outcome, text, call) = match site {
        ModelStart | ModelPoll => {
            let failed = format!("the model's stream panicked: {crashed}");
            let ok = matches!(&result.outcome, Outcome::Failed(e) if e.ends_with(&failed));
            (ok, true, true)
        }
        ModelStreamDrop => (
            result.outcome == Outcome::Completed,
            result.text == "done",
            true,
        ),
        _ => {
            let call = match (&faulty[..], site) {
                ([(output, false)], ToolFutureDrop | ToolSchema) => output == "done",
                ([(output, true)], _) => output.contains(crashed),
                _ => false,
            };
            (
                result.outcome == Outcome::Completed,
                result.text == "Done.",
                call,
            )
        }
    };
    if !(outcome && text && call) {
        return Err(format!("{result:?}, faulty's results {faulty:?}"));
    }
    if agent.snapshot().await.map_err(|e| format!("{e:?}"))?.busy {
        return Err("the agent is still busy".into());
    }
    let snapshot = gate.snapshot().await.unwrap();
    if (snapshot.in_flight, snapshot.queued) != (0, 0) {
        return Err(format!("the gate is held: {snapshot:?}"));
    }
    Ok(())
}

/// A clock that panics with a [`Bomb`] once, when armed.
struct Flaky(AtomicBool);

impl Clock for Flaky {
    fn now_ms(&self) -> u64 {
        if self.0.swap(false, Ordering::SeqCst) {
            explode();
        }
        1_700_000_000_000
    }
}

/// An observer that panics with a [`Bomb`] in every hook.
struct Explodes;

impl HubObserver for Explodes {
    fn started(&self, _: &Envelope, _: &subagents::messages::ChildRequest) {
        explode()
    }
    fn stepped(&self, _: &AgentId) {
        explode()
    }
    fn finished(&self, _: &Envelope) {
        explode()
    }
}

/// The hub's guards (a host's clock, its observers): the hub goes on, the
/// child is done and its parent woken.
#[tokio::test(start_paused = true)]
async fn a_clock_or_observer_whose_panic_panics_as_it_drops_takes_no_hub_down() {
    for site in ["clock", "observer"] {
        let clock = Arc::new(Flaky(AtomicBool::new(false)));
        let mut builder = DelegationBuilder::new(background_workers(&[5]).shared())
            .tools(ToolRegistry::new().with(Sleep))
            .clock(clock.clone());
        if site == "observer" {
            builder = builder.observer(Arc::new(Explodes));
        }
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        // Armed after the spawn (which reads the clock): the hub's next
        // reading is the child's request's.
        clock.0.store(site == "clock", Ordering::SeqCst);
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_wake(&mut events, &mut log, "agent_1").await;
        assert!(
            !clock.0.load(Ordering::SeqCst),
            "{site}: the clock was read"
        );
        let envelope = thread.envelope(&AgentId::new("agent_1")).await.unwrap();
        let envelope = envelope.expect("agent_1's envelope");
        assert_eq!(envelope.status, SubAgentStatus::Done, "{site}");
        thread.sync().await.expect("the hub runs on");
        thread.close_and_wait().await;
    }
}
