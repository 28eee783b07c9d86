//! Steering a running child whose run is then cut before its next model
//! call (docs/lifecycle.md, "Steering"): "a message taken while the child
//! runs but never read because a limit it could not foresee (wall clock,
//! tokens) or a stop ended it first stays in its conversation, after the
//! end". The messages read through the turn loop are in `tests/steer.rs`.

use super::*;

/// A message sent to a child in its 60 s tool (answered `running`: "it
/// reads your message at its next model call") is the turn's only copy of
/// it. The run is then cut before that call — by an interrupt, or by its
/// 10 s wall clock — and a later message resumes it: the new run reads
/// the first message, then the later one, in order. Guards against the
/// turn's close dropping the messages it took but never read (the hub
/// keeps none for a running child), which lost a message the parent was
/// told was delivered.
#[tokio::test(start_paused = true)]
async fn a_message_a_running_child_took_survives_a_cut_before_its_next_model_call() {
    for by_wall_clock in [false, true] {
        let mut turns = vec![
            Reply::new().use_agent(&work_call("Worker", 60, false)),
            Reply::answer("Started."),
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check the logs")),
            Reply::answer("Sent."),
        ];
        turns.extend(if by_wall_clock {
            // The wake of the child's wall-clock partial.
            vec![Reply::answer("Noted.")]
        } else {
            vec![
                Reply::new().use_agent(&UseAgentCall::interrupt("agent_1")),
                Reply::answer("Interrupted."),
            ]
        });
        turns.extend([
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
            Reply::answer("Resumed."),
            Reply::answer("Noted."),
        ]);
        let model = ScriptedModel::new(turns).with_script(
            "Worker",
            vec![
                Reply::new().tool_call("sleep", r#"{"secs":60}"#),
                // The cut run's answer is the second (the scripted model
                // counts the assistant messages so far).
                Reply::answer("(not reached: the run was cut)"),
                Reply::answer("changed plan"),
            ],
        );
        let (model, seen) = spy("model", model);
        let mut builder = DelegationBuilder::new(model);
        if by_wall_clock {
            builder = builder.child_limits(Limits {
                wall_clock: Duration::from_secs(10),
                ..Limits::default()
            });
        }
        let (thread, mut events) = thread_with(builder).await;
        let mut log = Vec::new();
        thread.send_user("start").unwrap();
        until_result(&mut events, &mut log).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        thread.send_user("tell it").unwrap();
        until_result(&mut events, &mut log).await;
        if by_wall_clock {
            until_wake(&mut events, &mut log, "agent_1").await;
            until_result(&mut events, &mut log).await;
        } else {
            thread.send_user("cut it").unwrap();
            until_result(&mut events, &mut log).await;
        }
        thread.send_user("go on").unwrap();
        until_result(&mut events, &mut log).await;
        until_wake(&mut events, &mut log, "agent_2").await;
        until_result(&mut events, &mut log).await;
        check_log(&log, true);
        let outputs = results_of(&log, "use_agent");
        let sent = json(&outputs[1].0);
        assert_eq!(sent["status"], "running", "{sent}");
        let resumed = json(&outputs.last().unwrap().0);
        assert_eq!(resumed["resumed_from"], "agent_1", "{resumed}");
        let worker = requests_of(&seen.lock().unwrap(), "Worker");
        assert_eq!(worker.len(), 2, "the cut run made one call");
        assert_eq!(
            user_messages(&worker[1]),
            [
                "work 60 s".to_owned(),
                format!("{STEER}also check the logs"),
                format!("{STEER}go on"),
            ],
            "by wall clock: {by_wall_clock}"
        );
        thread.close_and_wait().await;
    }
}

/// A message taken during a call whose answer the model's output limit
/// cut, with no calls (answered `running`: "it reads your message at its
/// next model call"): the turn ended at once on the output-limit partial
/// and no call read it — though a call was still possible, as after an
/// answer that looked final. The cut answer stays, the message follows
/// it, and the next call reads it.
#[tokio::test(start_paused = true)]
async fn a_message_during_an_answer_the_output_limit_cut_is_read_by_the_next_call() {
    let model = told_during_its_second_answer(vec![
        Reply::new().tool_call("sleep", r#"{"secs":1}"#),
        Reply::new()
            .text("worked 1")
            .truncated("length")
            .delay(Duration::from_secs(10)),
        Reply::answer("read it"),
    ]);
    let gate = GateHandle::spawn(2).await.unwrap();
    let (thread, mut events) = thread_with(DelegationBuilder::new(model.shared()).gate(gate)).await;
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 60).await;
    check_log(&log, true);
    let (sent, _) = results_of(&log, "use_agent").pop().unwrap();
    assert_eq!(json(&sent)["status"], "running", "{sent}");
    assert!(
        log.iter().any(|e| matches!(e, AgentEvent::Child(_, inner)
            if matches!(&**inner, AgentEvent::Steered(t) if t == "one more thing"))),
        "read by the running turn: {log:#?}"
    );
    let child = thread.hub().status(&AgentId::new("agent_1")).unwrap();
    assert_eq!(child.status, SubAgentStatus::Done, "{child:#?}");
    assert_eq!(child.result.as_deref(), Some("read it"), "{child:#?}");
    thread.close_and_wait().await;
}

/// Killed midway, at the instant it answers (review of this session's
/// diff): a message taken during a child's last answer that no call could
/// read (its token budget spent) stays unread, after the answer. Nothing
/// wrote the answer before the end, whose write is the envelope, then
/// the run: a kill between the two left a run whose last words were the
/// unread message, and the answer, put back from the envelope as the run
/// was read, went after the message it never replied to. The answer is a
/// step of its own then, written before the end.
#[tokio::test(start_paused = true)]
async fn a_final_answer_with_a_message_left_unread_is_a_step() {
    use std::sync::{Mutex, OnceLock};
    use subagents::actors::hub::HubObserver;
    use subagents::messages::{Envelope, Limits};
    struct Reads {
        thread: Arc<OnceLock<ThreadHandle>>,
        read: Mutex<Vec<Vec<String>>>,
    }
    impl HubObserver for Reads {
        fn finished(&self, _: &Envelope) {}
        fn stepped(&self, id: &AgentId) {
            let said = self.thread.get().unwrap().hub().conversation(id);
            let said = said.unwrap_or_default().into_iter().map(|m| m.content);
            self.read.lock().unwrap().push(said.collect());
        }
    }
    let reads = Arc::new(Reads {
        thread: Arc::default(),
        read: Mutex::default(),
    });
    let model = told_during_its_second_answer(spending_its_budget());
    let gate = GateHandle::spawn(2).await.unwrap();
    let (thread, mut events) = thread_with(
        DelegationBuilder::new(model.shared())
            .gate(gate)
            .observer(reads.clone())
            .child_limits(Limits {
                token_budget: 1_000,
                ..Limits::default()
            }),
    )
    .await;
    let _ = reads.thread.set(thread.clone());
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    until_result(&mut events, &mut log).await;
    thread.send_user("tell it").unwrap();
    until_result(&mut events, &mut log).await;
    run_for(&mut events, &mut log, 60).await;
    let (sent, _) = results_of(&log, "use_agent").pop().unwrap();
    assert_eq!(json(&sent)["status"], "running", "{sent}");
    let read = reads.read.lock().unwrap().clone();
    assert!(
        read.iter()
            .any(|said| said.iter().any(|m| m == "worked 1 s")),
        "no step held the final answer: {read:#?}"
    );
    thread.close_and_wait().await;
}
