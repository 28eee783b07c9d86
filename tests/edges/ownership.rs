//! Ownership: what a thread holds goes when it goes, and a host's own
//! observer and names stay the host's.

use super::*;

/// Defect 10: a gate nobody refers to any more kept running.
#[tokio::test(start_paused = true)]
async fn a_gate_stops_when_its_last_handle_is_dropped() {
    let gate = GateHandle::spawn(1).await.unwrap();
    let actor = gate.actor().clone();
    let clone = gate.clone();
    drop(gate);
    assert!(clone.snapshot().await.is_ok(), "a clone still holds it");
    drop(clone);
    tokio::time::timeout(Duration::from_secs(1), actor.wait(None))
        .await
        .expect("the gate stops with its last handle")
        .ok();

    // An agent's private gate stops with the agent: see the unit test
    // `agent::config::tests::a_private_gate_stops_with_its_agent`.

    // A registry's gates stop with the last copy of the registry.
    let mut registry = subagents::actors::registry::ModelRegistry::new();
    registry
        .register("local", "m", ScriptedModel::new(vec![]).shared(), 1)
        .await
        .unwrap();
    let registered = registry.gate("local", "m").unwrap().actor().clone();
    drop(registry);
    tokio::time::timeout(Duration::from_secs(1), registered.wait(None))
        .await
        .expect("a registry's gate stops with the registry")
        .ok();
}

/// A host's observer that notes each child's end.
#[derive(Default)]
struct Seen(Mutex<Vec<(String, SubAgentStatus)>>);

impl HubObserver for Seen {
    fn finished(&self, envelope: &Envelope) {
        self.0
            .lock()
            .unwrap()
            .push((envelope.id.to_string(), envelope.status));
    }
}

/// Defect 11: the thread replaced a host's observer with its own.
#[tokio::test(start_paused = true)]
async fn a_hosts_observer_is_told_alongside_the_threads_own() {
    let seen = Arc::new(Seen::default());
    let builder = parent(background_workers(&[5])).observer(seen.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    assert_eq!(
        *seen.0.lock().unwrap(),
        [("agent_1".to_owned(), SubAgentStatus::Done)]
    );
    // The thread's own observer still works: the child woke the parent.
    assert!(log.iter().any(is_wake));
    thread.close_and_wait().await;
}

/// A host's observer that panics in every call (docs/supervisor.md: "an
/// observer that panics is logged; the others are still told and the hub
/// goes on") — with none panicking, removing any of the hub's three
/// guards failed no test. Placed first: the host's next observer and the
/// thread's own (its wake) are still told, and the child's events go on.
#[tokio::test(start_paused = true)]
async fn an_observer_that_panics_leaves_the_others_told() {
    struct Panics;
    impl HubObserver for Panics {
        fn finished(&self, _: &Envelope) {
            panic!("a host's bug in finished");
        }
        fn started(&self, _: &Envelope, _: &subagents::messages::ChildRequest) {
            panic!("a host's bug in started");
        }
        fn stepped(&self, _: &AgentId) {
            panic!("a host's bug in stepped");
        }
    }
    let (logged, _guard) = panics_logged();
    let seen = Arc::new(Seen::default());
    let builder = parent(background_workers(&[5]))
        .observer(Arc::new(Panics))
        .observer(seen.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    // Each panic logged, naming its hook (only `finished`'s were: a host
    // whose persistence observer panicked at every step lost every run
    // write without a trace).
    let hooks: std::collections::BTreeSet<String> =
        logged.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        hooks.into_iter().collect::<Vec<_>>(),
        ["finished", "started", "stepped"]
    );
    assert_eq!(
        *seen.0.lock().unwrap(),
        [("agent_1".to_owned(), SubAgentStatus::Done)]
    );
    assert!(
        log.iter().any(is_wake),
        "the thread's own observer was told"
    );
    thread.close_and_wait().await;
}

/// Defect 12: control and bidi characters in an inline child's name, and
/// newlines in its task, reached `ChildStarted`, `status` and the wake
/// line.
#[tokio::test(start_paused = true)]
async fn names_and_wake_lines_are_one_clean_line() {
    let nasty = "\u{202e}Evil\u{0007} \u{1b}[31mRed\u{1b}[0m";
    let call = UseAgentCall::run(
        format!("{nasty}\nYou work."),
        "line one\nline two\nline three",
    )
    .tools(["sleep"])
    .background();
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&call),
        Reply::new().use_agent(&UseAgentCall::status("agent_1")),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ])
    .with_script("Evil", worker(5));
    let (thread, mut events) = ThreadHandle::spawn(parent(model), None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    let clean = |s: &str| {
        !s.chars().any(|c| {
            c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
    };
    let info = first_child_started(&log);
    assert_eq!(info.name, "Evil Red");
    let status_output = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolResult(r) if r.output.contains("elapsed_s") => Some(r.output.clone()),
            _ => None,
        })
        .next()
        .unwrap();
    let status: serde_json::Value = serde_json::from_str(&status_output).unwrap();
    assert_eq!(status["name"], "Evil Red");
    let wake = log
        .iter()
        .find_map(|e| match e {
            AgentEvent::Wake { line, .. } => Some(line.clone()),
            _ => None,
        })
        .unwrap();
    assert!(clean(&wake), "{wake:?}");
    assert!(
        wake.contains("task: \"line one line two line three\""),
        "{wake}"
    );
    thread.close_and_wait().await;
}

/// A host's observer that reads a child's conversation at each step, as
/// `HubObserver::stepped`'s docs invite: it was told under the child's
/// turn lock, which the read takes too — the read never returned (here,
/// on a helper thread, it gives up after 2 s). Told once that lock is let
/// go, it reads the step it was told of.
#[tokio::test(start_paused = true)]
async fn an_observer_reading_a_childs_conversation_at_each_step_gets_it() {
    struct Reads {
        thread: Arc<std::sync::OnceLock<ThreadHandle>>,
        read: Mutex<Vec<Option<usize>>>,
    }
    impl HubObserver for Reads {
        fn finished(&self, _: &Envelope) {}
        fn stepped(&self, id: &AgentId) {
            let hub = self.thread.get().unwrap().hub().clone();
            let (tx, rx) = std::sync::mpsc::channel();
            let id = id.clone();
            std::thread::spawn(move || {
                let _ = tx.send(hub.conversation(&id).map(|c| c.len()));
            });
            let got = rx
                .recv_timeout(std::time::Duration::from_secs(2))
                .ok()
                .flatten();
            self.read.lock().unwrap().push(got);
        }
    }
    let reads = Arc::new(Reads {
        thread: Arc::default(),
        read: Mutex::default(),
    });
    let builder = parent(background_workers(&[5])).observer(reads.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    let _ = reads.thread.set(thread.clone());
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let read = reads.read.lock().unwrap().clone();
    // The worker's two steps: its answer with a call (its task, the
    // answer), then the call's answer.
    assert_eq!(read, [Some(2), Some(3)], "{read:?}");
    thread.close_and_wait().await;
}

/// A thread killed (`ThreadHandle::actor().kill()`: no `post_stop` runs)
/// with a child running and one queued behind it, then let go: each
/// child's book entry kept the sink that ends it on the stream, and that
/// sink's tap held the book itself — a cycle. The whole book (every
/// envelope, conversation and seed the thread ever had) stayed in memory
/// for good, and the host's stream, whose sender it held, never ended.
#[tokio::test(start_paused = true)]
async fn a_killed_thread_let_go_holds_nothing_and_its_stream_ends() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Worker 1", 600, false))
            .use_agent(&work_call("Worker 2", 600, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker 1\n", worker(600))
    .with_script("Worker 2\n", worker(600));
    let (thread, mut events) = ThreadHandle::spawn(parent(model).max_live(1), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    assert!(
        log.iter()
            .any(|e| matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::ToolStarted { .. }))),
        "{log:#?}"
    );
    thread.actor().kill();
    thread.actor().wait(None).await.ok();
    drop(thread);
    let ended = tokio::time::timeout(Duration::from_secs(3600), async {
        while events.recv().await.is_some() {}
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream of a killed thread let go never ended"
    );
}

/// Shared (one model, one gate): a parent whose model the registry also
/// serves to children ran behind a gate of its own, so the parent's calls
/// and a child's naming that model went out at once — two calls on a
/// capacity-1 server, though a registry keeps one gate per set of
/// weights. The parent takes the registry's gate for that very model (and
/// leaves it running when its thread closes: it is the registry's).
#[tokio::test(start_paused = true)]
async fn a_parent_on_a_registered_model_shares_its_gate() {
    let (model, registry, gate) = a_model_registered_as_m().await;
    let builder = DelegationBuilder::new(model).models(registry);
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    assert_eq!(thread.gate().actor().get_id(), gate.actor().get_id());
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    // The parent's three calls and the child's one, all through it.
    assert_eq!(gate.snapshot().await.unwrap().granted_total, 4);
    thread.close_and_wait().await;
    assert!(gate.snapshot().await.is_ok(), "the registry's gate runs on");
}

/// Stopped midway (a thread killed in-process, its handle kept): ractor
/// kills a stopping actor's linked children, so a ractor host that links
/// a thread under its own actor kills it when that actor stops. The hub
/// let go its store only in its `post_stop`, which a kill skips: the
/// host's handle kept the store's directory locked (a new store on it
/// was refused, so nothing could pick the children up in this process),
/// its running child read `running` for ever, and its stream never
/// ended. A hub dropped without its stop now does what its death means:
/// its unfinished children fail (in the book; on disk they stay as a
/// kill leaves them, `interrupted` at the next open) and its store is let
/// go.
#[tokio::test(start_paused = true)]
async fn a_killed_thread_whose_handle_is_kept_holds_no_store_and_ends_its_children() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let model = ScriptedModel::new(vec![
        Reply::new().use_agent(&work_call("Worker 1", 600, false)),
        Reply::answer("Started."),
    ])
    .with_script("Worker 1\n", worker(600));
    let config = ThreadConfig::new(parent(model)).store(store(&dir));
    let (thread, mut events) = ThreadHandle::spawn(config, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    let agent_1 = AgentId::new("agent_1");
    assert_eq!(
        thread.hub().status(&agent_1).map(|e| e.status),
        Some(SubAgentStatus::Background)
    );
    thread.actor().kill();
    thread.actor().wait(None).await.ok();
    thread.hub().actor().wait(None).await.ok();
    let status = thread.hub().status(&agent_1).map(|e| e.status);
    assert_eq!(
        status,
        Some(SubAgentStatus::Failed),
        "the killed hub's child"
    );
    let reopened = EnvelopeStore::open(&dir, Arc::new(subagents::actors::clock::SystemClock));
    assert!(reopened.is_ok(), "{:?}", reopened.err());
    drop(reopened);
    let ended = tokio::time::timeout(Duration::from_secs(3600), async {
        while events.recv().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the stream of a killed thread never ended");
    drop(thread);
}

/// Review (host code called back): a hub that died without its stop (a
/// kill, a crash, a ractor host stopping) failed every child it had not
/// ended on the stream and in the thread's store, but a host's observer —
/// "told about every child that reaches a terminal status" — heard of
/// none: a host persisting through it kept them `running` for good. Its
/// observers are told of each, once; none wakes the parent.
#[tokio::test(start_paused = true)]
async fn a_hosts_observer_is_told_of_the_children_a_hubs_death_failed() {
    let seen = Arc::new(Seen::default());
    let builder = parent(background_workers(&[600, 600])).observer(seen.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 10).await;
    kill_the_hub(&thread).await;
    run_for(&mut events, &mut log, 60).await;
    assert_eq!(
        *seen.0.lock().unwrap(),
        [
            ("agent_1".to_owned(), SubAgentStatus::Failed),
            ("agent_2".to_owned(), SubAgentStatus::Failed)
        ]
    );
    assert!(!log.iter().any(is_wake), "{log:#?}");
    thread.close_and_wait().await;
}

/// The `hook` of every "a hub observer panicked" error logged on this
/// thread while the guard lives.
fn panics_logged() -> (Arc<Mutex<Vec<String>>>, tracing::subscriber::DefaultGuard) {
    use tracing_subscriber::layer::SubscriberExt;
    struct Hooks(Arc<Mutex<Vec<String>>>);
    struct Hook<'a>(&'a mut Option<String>, &'a mut bool);
    impl tracing::field::Visit for Hook<'_> {
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            if field.name() == "hook" {
                *self.0 = Some(value.to_owned());
            }
        }
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                *self.1 = format!("{value:?}") == "a hub observer panicked";
            }
        }
    }
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Hooks {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let (mut hook, mut panicked) = (None, false);
            event.record(&mut Hook(&mut hook, &mut panicked));
            if let (Some(hook), true) = (hook, panicked) {
                self.0.lock().unwrap().push(hook);
            }
        }
    }
    let hooks = Arc::new(Mutex::new(Vec::new()));
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(Hooks(hooks.clone())));
    (hooks, guard)
}

/// Shared (review: a host's view): a gate given with
/// `DelegationBuilder::gate` (shared across threads, as `ThreadHandle::gate`
/// advises) for a parent whose model the registry holds too: the parent
/// queued at the given gate, a child naming the model at the registry's —
/// one model behind two queues, two of its calls out at once. The
/// children on the parent's model queue at the gate given for it — also
/// (this session's own review) under a second name registered behind that
/// gate on another model object (`register_with_gate`: the same weights),
/// and under a second name of the parent's own model object with a gate
/// of its own.
#[tokio::test(start_paused = true)]
async fn a_gate_given_for_a_registered_parent_model_is_its_childrens_too() {
    // The last read of this session's change: a name behind the gate of
    // the parent object's second name, and the object registered twice
    // with no gate given (the parent on the first name's gate, a child on
    // the second's).
    for (name, how) in [
        ("m", "the same"),
        ("m-fast", "behind it"),
        ("m2", "twice"),
        ("m2-fast", "behind the second"),
        ("m2", "twice, none given"),
    ] {
        let (given, other) = calls_through_the_given_gate_and_the_other(name, how).await;
        assert_eq!(
            (given, other),
            (4, 0),
            "{how}: the parent's three and the child's one"
        );
    }
}

/// A parent on a model registered as `m`, given a gate of its own, whose
/// child names `child_model` — `m` itself (`"the same"`), a name on
/// another object behind `m`'s gate (`"behind it"`), the parent's object
/// registered again with a gate of its own (`"twice"`; with no gate given:
/// `"twice, none given"`), or a name behind that second gate (`"behind the
/// second"`): the calls through the parent's gate (the given one, else
/// `m`'s), and through the registry's gate of the child's name.
async fn calls_through_the_given_gate_and_the_other(child_model: &str, how: &str) -> (u64, u64) {
    let script = vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Worker\nYou work.", "work")
                .model(child_model)
                .background(),
        ),
        Reply::answer("Started."),
        Reply::answer("Noted."),
    ];
    let worker = || vec![Reply::answer("done")];
    let model = match how {
        "behind it" | "behind the second" => ScriptedModel::new(script),
        _ => ScriptedModel::new(script).with_script("Worker", worker()),
    }
    .shared();
    let mut registry = subagents::actors::registry::ModelRegistry::new();
    registry
        .register("local", "m", model.clone(), 1)
        .await
        .unwrap();
    match how {
        "behind it" => {
            let fast = ScriptedModel::new(vec![]).with_script("Worker", worker());
            let gate = registry.gate("local", "m").unwrap().clone();
            registry.register_with_gate("local", child_model, fast.shared(), gate);
        }
        "twice" | "twice, none given" => {
            let twice = registry.register("local", child_model, model.clone(), 1);
            twice.await.unwrap();
        }
        "behind the second" => {
            let twice = registry.register("local", "m2", model.clone(), 1);
            twice.await.unwrap();
            let fast = ScriptedModel::new(vec![]).with_script("Worker", worker());
            let gate = registry.gate("local", "m2").unwrap().clone();
            registry.register_with_gate("local", child_model, fast.shared(), gate);
        }
        _ => {}
    }
    let other = registry.gate("local", child_model).unwrap().clone();
    let first = registry.gate("local", "m").unwrap().clone();
    let none_given = how == "twice, none given";
    let given = match none_given {
        true => first,
        false => subagents::actors::GateHandle::spawn(1).await.unwrap(),
    };
    let mut builder = DelegationBuilder::new(model).models(registry);
    if !none_given {
        builder = builder.gate(given.clone());
    }
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until_wake(&mut events, &mut log, "agent_1").await;
    until_result(&mut events, &mut log).await;
    let counts = (
        given.snapshot().await.unwrap().granted_total,
        other.snapshot().await.unwrap().granted_total,
    );
    thread.close_and_wait().await;
    counts
}

/// Held for good (review of this session's own diff): the hub's handle
/// kept its observers (to tell them of a stop after the hub's death), and
/// an observer holding its thread's handle — as `stepped`'s docs invite,
/// to read a conversation — then held itself, through the thread's hub
/// handle: the observer, the thread's book and every conversation it
/// kept stayed in memory after the close. Nothing holds the observer
/// once the thread has closed.
#[tokio::test(start_paused = true)]
async fn an_observer_holding_its_thread_is_let_go_at_its_close() {
    struct Holds(std::sync::OnceLock<ThreadHandle>);
    impl HubObserver for Holds {
        fn finished(&self, _: &Envelope) {}
    }
    let holds = Arc::new(Holds(std::sync::OnceLock::new()));
    let weak = Arc::downgrade(&holds);
    let builder = parent(background_workers(&[5])).observer(holds.clone());
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    let _ = holds.0.set(thread.clone());
    drop(holds);
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 60).await;
    thread.close_and_wait().await;
    drop(thread);
    drain(&mut events, &mut log);
    for _ in 0..1_000 {
        tokio::task::yield_now().await;
    }
    assert!(weak.upgrade().is_none(), "the observer is still held");
}
