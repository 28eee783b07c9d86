//! A turn a host sends from inside the library's callbacks starts a trace
//! of its own.

use super::*;
use std::sync::OnceLock;
use subagents::actors::hub::HubObserver;
use subagents::messages::{AgentId, Envelope};

/// Sends a user turn the first time each hook is told.
struct Sends {
    thread: Arc<OnceLock<ThreadHandle>>,
    sent: Mutex<Vec<&'static str>>,
}

impl Sends {
    fn once(&self, hook: &'static str) {
        let mut sent = self.sent.lock().unwrap();
        if !sent.contains(&hook)
            && let Some(thread) = self.thread.get()
        {
            sent.push(hook);
            thread.send_user(format!("after {hook}")).unwrap();
            // And once under a span of the host's own, entered here.
            if hook == "finished" {
                // A root of its own: opened here, a span takes the
                // library's current one (the hub's `Actor`) as parent.
                let persist = tracing::info_span!(parent: None, "host_persist");
                persist.in_scope(|| thread.send_user("under the host's span").unwrap());
            }
        }
    }
}

impl HubObserver for Sends {
    fn finished(&self, _: &Envelope) {
        self.once("finished");
    }
    fn stepped(&self, _: &AgentId) {
        self.once("stepped");
    }
}

/// Review (host code called back): a user turn an observer sent — told in
/// the hub's handler, or in a sub-agent's run — ran under ractor's
/// `Actor` span of the hub (a trace that ends only with the thread) or
/// inside the child's run. Each starts a trace of its own, as a turn sent
/// with no span does.
#[tokio::test(start_paused = true)]
async fn a_turn_an_observer_sends_starts_a_trace_of_its_own() {
    let (capture, _guard) = capture();
    let handle = Arc::new(OnceLock::new());
    let sends = Arc::new(Sends {
        thread: handle.clone(),
        sent: Mutex::new(Vec::new()),
    });
    let builder = DelegationBuilder::new(background_workers(&[1]).shared())
        .tools(ToolRegistry::new().with(Sleep))
        .observer(sends.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    let _ = handle.set(thread.clone());
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    assert_eq!(*sends.sent.lock().unwrap(), ["stepped", "finished"]);
    let spans = capture.spans();
    let parent_runs: Vec<&Captured> = spans
        .iter()
        .filter(|s| s.name == "invoke_agent" && field(s, "gen_ai.agent.id") == "parent")
        .collect();
    assert!(parent_runs.len() >= 4, "{parent_runs:#?}");
    let unders: Vec<Option<&str>> = parent_runs
        .iter()
        .map(|run| {
            run.parent
                .and_then(|p| spans.iter().find(|s| s.id == p))
                .map(|s| s.name)
        })
        .collect();
    // Roots, but the one the host sent under its own span: a span the
    // host entered in its callback is its own (review of this change).
    assert_eq!(
        unders.iter().filter(|u| u.is_some()).collect::<Vec<_>>(),
        [&Some("host_persist")],
        "{unders:?}"
    );
    thread.close_and_wait().await;
}

/// A ractor host whose actor sends a user turn from its own handler: the
/// turn ran under that actor's `Actor` span, which lives as long as the
/// actor (a trace that never ends). It starts a trace of its own.
#[tokio::test(start_paused = true)]
async fn a_turn_a_ractor_hosts_handler_sends_starts_a_trace_of_its_own() {
    use ractor::{Actor, ActorProcessingErr, ActorRef};
    struct Host;
    impl Actor for Host {
        type Msg = ThreadHandle;
        type State = ();
        type Arguments = ();
        async fn pre_start(
            &self,
            _: ActorRef<Self::Msg>,
            (): (),
        ) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
        async fn handle(
            &self,
            _: ActorRef<Self::Msg>,
            thread: ThreadHandle,
            _: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            thread.send_user("from the host's handler").unwrap();
            Ok(())
        }
    }
    let (capture, _guard) = capture();
    let (thread, mut events) = thread(ScriptedModel::new(vec![Reply::answer("One.")])).await;
    let (host, _) = Actor::spawn(None, Host, ()).await.unwrap();
    host.cast(thread.clone()).unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let run = spans.iter().find(|s| s.name == "invoke_agent").unwrap();
    let under = run
        .parent
        .and_then(|p| spans.iter().find(|s| s.id == p))
        .map(|s| s.name);
    assert_eq!(under, None, "a root, not under {under:?}");
    host.stop(None);
    thread.close_and_wait().await;
}

/// Asks for a child the first time it is told a child finished.
struct Chains {
    thread: Arc<OnceLock<ThreadHandle>>,
    asked: std::sync::atomic::AtomicBool,
}

impl HubObserver for Chains {
    fn finished(&self, _: &Envelope) {
        use subagents::messages::{ChildRequest, ToolUseId};
        if !self.asked.swap(true, std::sync::atomic::Ordering::SeqCst)
            && let Some(thread) = self.thread.get()
        {
            let request = ChildRequest::new(
                thread.parent_id().clone(),
                0,
                ToolUseId::new("host-1"),
                "Worker 9\nYou work.",
                "work 1 s",
            );
            tokio::spawn(thread.hub().request(request));
        }
    }
}

/// Review of this session's own change: `HubHandle::request` read the
/// current span when called (it is sent when called now): a host asking
/// for a child from an observer — told in the hub's handler — had that
/// child's run under the hub's `Actor` span, a trace that ends only with
/// the thread. A host's request runs under the host's span, or starts a
/// trace of its own, as a turn it sends does.
#[tokio::test(start_paused = true)]
async fn a_child_an_observer_asks_for_starts_a_trace_of_its_own() {
    let (capture, _guard) = capture();
    let handle = Arc::new(OnceLock::new());
    let chains = Arc::new(Chains {
        thread: handle.clone(),
        asked: Default::default(),
    });
    let model = background_workers(&[1]).with_script("Worker 9\n", worker(1));
    let builder = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Sleep))
        .observer(chains.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    let _ = handle.set(thread.clone());
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    let spans = capture.spans();
    let asked: Vec<&Captured> = spans
        .iter()
        .filter(|s| s.name == "invoke_agent" && field(s, "gen_ai.agent.id") == "agent_2")
        .collect();
    assert_eq!(asked.len(), 1, "{spans:#?}");
    let under = asked[0]
        .parent
        .and_then(|p| spans.iter().find(|s| s.id == p))
        .map(|s| s.name);
    assert_eq!(under, None, "the host's child under the library's span");
    thread.close_and_wait().await;
}

/// A host's tool that queues a follow-up turn (a "keep going" tool) the
/// first time it runs.
struct FollowUp {
    thread: Arc<OnceLock<ThreadHandle>>,
    sent: std::sync::atomic::AtomicBool,
}

impl Tool for FollowUp {
    fn name(&self) -> &str {
        "follow_up"
    }
    fn description(&self) -> String {
        "queues a follow-up turn".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        if !self.sent.swap(true, std::sync::atomic::Ordering::SeqCst)
            && let Some(thread) = self.thread.get()
        {
            thread.send_user("continue with step 2").unwrap();
        }
        Box::pin(async { Ok("queued".into()) })
    }
}

/// Review (host code misbehaving: re-entrant): a turn a host's tool sent
/// ran under that call's `execute_tool` span — one the library entered
/// around the host's code — so the next turn nested inside the previous
/// one's, and a tool sending on every turn made the whole session one
/// trace that never ended. It starts a trace of its own, as a turn an
/// observer sends does.
#[tokio::test(start_paused = true)]
async fn a_turn_a_hosts_tool_sends_starts_a_trace_of_its_own() {
    let (capture, _guard) = capture();
    let handle = Arc::new(OnceLock::new());
    let model = ScriptedModel::new(vec![
        Reply::new().tool_call("follow_up", "{}"),
        Reply::answer("step 1 done"),
        Reply::answer("step 2 done"),
    ]);
    let tool = FollowUp {
        thread: handle.clone(),
        sent: Default::default(),
    };
    let builder = DelegationBuilder::new(model.shared()).tools(ToolRegistry::new().with(tool));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    let _ = handle.set(thread.clone());
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    let spans = capture.spans();
    let runs: Vec<&Captured> = spans
        .iter()
        .filter(|s| s.name == "invoke_agent" && field(s, "gen_ai.agent.id") == "parent")
        .collect();
    assert_eq!(runs.len(), 2, "{runs:#?}");
    for run in runs {
        let under = run
            .parent
            .and_then(|p| spans.iter().find(|s| s.id == p))
            .map(|s| s.name);
        assert_eq!(under, None, "a turn under the library's span");
    }
    thread.close_and_wait().await;
}
