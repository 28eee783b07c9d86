//! A thread closed as its background child finishes: the child's run
//! span, kept for a wake that will never come, goes with the thread.

use super::*;
use std::sync::OnceLock;

/// Closes its thread as `agent_1`'s end reaches the hub's observers
/// (the host's run before the thread's own).
struct CloseOnFinish(Arc<OnceLock<ThreadHandle>>);

impl subagents::actors::hub::HubObserver for CloseOnFinish {
    fn finished(&self, envelope: &subagents::messages::Envelope) {
        if envelope.id.as_str() == "agent_1"
            && let Some(thread) = self.0.get()
        {
            thread.close();
        }
    }
}

/// Held (review: the host's view of the stream): a background child that
/// finished `done` as its thread closed kept its run span for a wake —
/// the notice of its end reached the thread after its close, and was
/// never read — and with it the `use_agent` call and the parent's turn
/// that started it, open (never exported) for as long as the host kept
/// the thread's handle. A closed thread owes no wake: it lets go of them.
#[tokio::test(start_paused = true)]
async fn a_child_finishing_as_its_thread_closes_holds_nothing_open() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Victim", 100, false)),
        Reply::answer("Started."),
    ])
    .with_script("Victim", worker(100));
    let slot = Arc::new(OnceLock::new());
    let builder = DelegationBuilder::new(model.shared())
        .system_prompt("Planner\nYou are the parent.")
        .tools(ToolRegistry::new().with(Sleep))
        .observer(Arc::new(CloseOnFinish(slot.clone())));
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    slot.set(thread.clone()).unwrap();
    thread.send_user("go").unwrap();
    // Ends once the close is done.
    while events.recv().await.is_some() {}
    let spans = capture.spans();
    let victim = run_of(&spans, "agent_1");
    assert_eq!(field(victim, "subagents.outcome"), "completed");
    // The handle is still held (`thread`, and the observer's).
    edges::assert_the_victims_run_holds_nothing_open(&spans);
    drop(thread);
}

/// Held, the kill door (review of this session's own diff): a thread
/// killed while a finished child's wake waited behind the user's typing
/// ran no `post_stop`; the child's run span, kept for that wake, stayed
/// open with the turn that started it while the host held the handle.
/// The killed thread's state lets go of it as it drops.
#[tokio::test(start_paused = true)]
async fn a_thread_killed_while_a_wake_waits_holds_nothing_open() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Victim", 100, false)),
        Reply::answer("Started."),
    ])
    .with_script("Victim", worker(100));
    let (thread, mut events) = thread(model).await;
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.typing(true).unwrap();
    until(
        &mut events,
        &mut log,
        |e| matches!(e, AgentEvent::ChildStatus(_, status) if status.is_terminal()),
    )
    .await;
    thread.sync().await.unwrap();
    thread.actor().kill();
    while events.recv().await.is_some() {}
    let spans = capture.spans();
    assert_eq!(
        field(run_of(&spans, "agent_1"), "subagents.outcome"),
        "completed"
    );
    // The handle is still held.
    edges::assert_the_victims_run_holds_nothing_open(&spans);
    drop(thread);
}

/// Held (review: observability at the edges, thirty-fourth session): a
/// parent without a thread (`DelegationBuilder::spawn`) shut down with a
/// finished background child kept that child's run span for a wake — and
/// with it the `use_agent` call and the parent's turn — open, never
/// exported, as long as the host kept the agent's handle: only a thread
/// let them go. The agent's shutdown lets go of them.
#[tokio::test(start_paused = true)]
async fn a_parent_shut_down_without_a_thread_holds_nothing_open() {
    let (capture, _guard) = capture();
    let (parent, mut events, mut log) = a_parent_whose_worker_runs_1_s().await;
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done))
    })
    .await;
    parent.shutdown_and_wait().await;
    let open: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| !s.closed)
        .map(|s| (s.name, s.fields.get("gen_ai.agent.id").cloned()))
        .collect();
    assert!(open.is_empty(), "held open: {open:?}");
    drop(parent);
}

/// The last read of this session's change: first let go at the hub's own
/// stop, the spans went under a thread too — which goes on delivering
/// wakes after its hub stopped, and the wake's turn lost its link to the
/// run of the child that woke it.
#[tokio::test(start_paused = true)]
async fn a_wake_after_its_hubs_stop_still_follows_the_childs_run() {
    let (capture, _guard) = capture();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", worker(1));
    let (thread, mut events) = thread(model).await;
    thread.typing(true).unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    until(&mut events, &mut log, |e| {
        matches!(e, AgentEvent::ChildStatus(_, SubAgentStatus::Done))
    })
    .await;
    let hub = thread.hub().actor().clone();
    hub.stop(None);
    hub.wait(None).await.ok();
    thread.typing(false).unwrap();
    until(&mut events, &mut log, is_wake).await;
    until_result(&mut events, &mut log).await;
    let spans = capture.spans();
    let child = run_of(&spans, "agent_1");
    assert!(
        spans
            .iter()
            .any(|s| s.name == "invoke_agent" && s.follows.contains(&child.id)),
        "the wake's turn follows no child run: {spans:#?}"
    );
    thread.close_and_wait().await;
}

/// Reads `agent_1`'s envelope from another OS thread as any span named
/// `span` (`invoke_agent` by default) closes (as a synchronous exporter
/// sends it then): for each close, whose run it was and whether the read
/// came back.
#[derive(Clone, Default)]
pub(super) struct ReadsAtClose {
    pub(super) hub: Arc<OnceLock<subagents::actors::hub::HubHandle>>,
    pub(super) answered: Arc<Mutex<Vec<(String, bool)>>>,
    pub(super) span: Option<&'static str>,
}

/// A run span's `gen_ai.agent.id`.
struct RunOf(String);

impl<S> Layer<S> for ReadsAtClose
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        if let (Some(agent), Some(span)) = (fields.remove("gen_ai.agent.id"), ctx.span(id)) {
            span.extensions_mut().insert(RunOf(agent));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let name = self.span.unwrap_or("invoke_agent");
        let Some(span) = ctx.span(&id).filter(|s| s.name() == name) else {
            return;
        };
        let run = span.extensions().get::<RunOf>().map(|r| r.0.clone());
        let Some(hub) = self.hub.get().cloned() else {
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(hub.status(&AgentId::new("agent_1")).is_some());
        });
        // A minute bounds a read that waits on a lock this close holds.
        let came_back = rx.recv_timeout(std::time::Duration::from_secs(60)).is_ok();
        let run = run.unwrap_or_default();
        self.answered.lock().unwrap().push((run, came_back));
    }
}

impl ReadsAtClose {
    /// `agent_1`'s run span closed, and every close found the book free.
    fn assert_free(&self) {
        let answered = self.answered.lock().unwrap().clone();
        assert!(
            answered.iter().any(|(run, _)| run == "agent_1"),
            "{answered:?}"
        );
        assert!(answered.iter().all(|(_, free)| *free), "{answered:?}");
    }
}

impl ReadsAtClose {
    /// `model`'s thread under this layer (while the guard lives), its
    /// user's first turn sent and answered.
    async fn thread_on(
        model: ScriptedModel,
    ) -> (
        Self,
        tracing::subscriber::DefaultGuard,
        ThreadHandle,
        EventStream,
    ) {
        let layer = ReadsAtClose::default();
        let guard =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(layer.clone()));
        let (thread, mut events) = thread(model).await;
        layer.hub.set(thread.hub().clone()).unwrap();
        thread.send_user("go").unwrap();
        until_result(&mut events, &mut Vec::new()).await;
        (layer, guard, thread, events)
    }
}

/// `agent_1` ended, its wake held (the user typing): its run span kept.
async fn until_agent_1_ended_unwoken(thread: &ThreadHandle, events: &mut EventStream) {
    thread.typing(true).unwrap();
    let agent_1 = AgentId::new("agent_1");
    until(
        events,
        &mut Vec::new(),
        |e| matches!(e, AgentEvent::ChildStatus(id, s) if *id == agent_1 && s.is_terminal()),
    )
    .await;
}

/// Held under a lock (review: streams that never yield): a parent taking
/// a finished background child's result dropped the child's run span —
/// the book's last hold on it — with the book's entry locked (and the
/// parent's turn): closing it ran every tracing layer there, a
/// synchronous exporter's network send included, and every read of the
/// book (`status`, the hub's own handler, the child events' tap) waited
/// behind it. The span goes after the locks.
#[tokio::test(start_paused = true)]
async fn a_claimed_childs_run_span_closes_outside_the_books_lock() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::result("agent_1")),
        Reply::answer("Read."),
    ])
    .with_script("Worker", worker(1));
    let (layer, _guard, thread, mut events) = ReadsAtClose::thread_on(model).await;
    // Its wake held: the parent's next turn takes the result.
    until_agent_1_ended_unwoken(&thread, &mut events).await;
    thread.send_user("read it").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    layer.assert_free();
    thread.close_and_wait().await;
}

/// The same for a child stopped by the host: its run span, kept for no
/// wake, closed with the book's entry locked.
#[tokio::test(start_paused = true)]
async fn a_stopped_childs_run_span_closes_outside_the_books_lock() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 100, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker", worker(100));
    let (layer, _guard, thread, _events) = ReadsAtClose::thread_on(model).await;
    thread.stop_child(&AgentId::new("agent_1")).await.unwrap();
    layer.assert_free();
    thread.close_and_wait().await;
}

/// The same at a close: a finished child's span kept for a wake the
/// user's typing held closed as the thread let go of every kept span,
/// inside the book's map's guards.
#[tokio::test(start_paused = true)]
async fn a_kept_run_span_let_go_at_a_close_closes_outside_the_books_lock() {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker", worker(1));
    let (layer, _guard, thread, mut events) = ReadsAtClose::thread_on(model).await;
    until_agent_1_ended_unwoken(&thread, &mut events).await;
    thread.close_and_wait().await;
    layer.assert_free();
}

/// The same for a resumed child: a message to a finished child whose
/// wake waited let go of its kept run span (the new run wakes the parent)
/// inside the book's entry guard.
#[tokio::test(start_paused = true)]
async fn a_resumed_childs_run_span_closes_outside_the_books_lock() {
    let mut script = worker(1);
    script.push(Reply::answer("again"));
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
        Reply::new().use_agent(&UseAgentCall::send("agent_1", "once more")),
        Reply::answer("Sent."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker", script);
    let (layer, _guard, thread, mut events) = ReadsAtClose::thread_on(model).await;
    until_agent_1_ended_unwoken(&thread, &mut events).await;
    thread.send_user("tell it more").unwrap();
    until_result(&mut events, &mut Vec::new()).await;
    layer.assert_free();
    thread.close_and_wait().await;
}

/// Replay (review: orders that reach a host): kept run spans let go at a
/// shutdown closed in the book's map order — what every layer and
/// exporter saw. They close in child-number order (`agent_2` before
/// `agent_10`).
#[tokio::test(start_paused = true)]
async fn kept_run_spans_let_go_close_in_child_number_order() {
    let layer = ReadsAtClose::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(layer.clone()));
    let mut fan_out = Reply::new();
    for n in 1..=11 {
        fan_out = fan_out.use_agent(&work_call(&format!("Worker {n}"), 1, false));
    }
    let mut model = ScriptedModel::new(vec![fan_out, Reply::answer("Started.")]);
    for n in 1..=11 {
        model = model.with_script(format!("Worker {n}\n"), worker(1));
    }
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(Sleep))
        .spawn()
        .await
        .unwrap();
    layer.hub.set(parent.hub.clone()).unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    let ended = std::cell::Cell::new(0);
    until(&mut events, &mut log, |e| {
        let end = matches!(e, AgentEvent::ChildStatus(_, s) if s.is_terminal());
        ended.set(ended.get() + usize::from(end));
        ended.get() == 11
    })
    .await;
    parent.shutdown_and_wait().await;
    let runs: Vec<String> = layer
        .answered
        .lock()
        .unwrap()
        .iter()
        .map(|(run, _)| run.clone())
        .filter(|run| run.starts_with("agent_"))
        .collect();
    let expected: Vec<String> = (1..=11).map(|n| format!("agent_{n}")).collect();
    assert_eq!(runs, expected);
}

/// Held (review: cancellation of host futures, thirty-eighth session): a
/// parent without a thread shut down (`shutdown`, or a `shutdown_and_wait`
/// dropped before its end) as its background child's end was in the
/// hub's mailbox: the drain read that end after the shutdown had let go
/// of the kept spans, and kept the child's run span for a wake that never
/// comes — the `use_agent` call and the parent's turn held open with it.
/// Once let go, no span is kept again. Swept over the instants around the
/// child's end.
#[tokio::test(start_paused = true)]
async fn a_child_ending_as_its_parent_shuts_down_holds_nothing_open() {
    let (capture, _guard) = capture();
    let mut finished_after = 0;
    for yields in 0..24 {
        let (parent, _events, _log) = a_parent_whose_worker_runs_1_s().await;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        let running = parent
            .hub
            .status(&AgentId::new("agent_1"))
            .is_some_and(|e| !e.status.is_terminal());
        parent.shutdown();
        parent.agent.actor().wait(None).await.unwrap();
        parent.hub.actor().wait(None).await.unwrap();
        let done = parent
            .hub
            .status(&AgentId::new("agent_1"))
            .is_some_and(|e| e.status == SubAgentStatus::Done);
        finished_after += usize::from(running && done);
        let open: Vec<_> = capture
            .spans()
            .into_iter()
            .filter(|s| !s.closed)
            .map(|s| (s.name, s.fields.get("gen_ai.agent.id").cloned()))
            .collect();
        assert!(open.is_empty(), "{yields} yields, held open: {open:?}");
        drop(parent);
    }
    // The window was reached: a child running at the shutdown ended done
    // (its end read by the drain).
    assert!(finished_after > 0, "no child ended as its parent shut down");
}

/// A parent without a thread whose first turn started `Worker` (1 s of
/// work) in the background and ended; its stream and log so far.
async fn a_parent_whose_worker_runs_1_s() -> (
    subagents::actors::DelegatingAgent,
    EventStream,
    Vec<AgentEvent>,
) {
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker", 1, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker", worker(1));
    let (parent, mut events) = DelegationBuilder::new(model.shared())
        .system_prompt("Planner\nYou are the parent.")
        .tools(ToolRegistry::new().with(Sleep))
        .spawn()
        .await
        .unwrap();
    parent.agent.send_user("go").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    (parent, events, log)
}
