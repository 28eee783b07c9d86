//! What a running child holds between two of its steps is on disk: a
//! process killed then (`kill -9`: no close runs, the store is as the last
//! write left it) resumes the child from it.

use super::remote::{
    a_thread_placing, a_worker_that_naps_thinking, in_the_second_nap, told_in_the_second_nap,
};
use super::*;
use std::time::Duration;

/// The saved run of `agent_1` as the store holds it now (every write the
/// thread queued done), the thread left running — as a kill finds it.
async fn saved_now(
    thread: &ThreadHandle,
    store: &Arc<EnvelopeStore>,
) -> Vec<subagents::messages::ChatMessage> {
    thread.sync().await.unwrap();
    thread.flush_persistence().await.unwrap();
    store.run(&AgentId::new("agent_1")).unwrap().1
}

/// Stopped midway (a kill in a tool): a child's run was written only as a
/// tool answered, so the model's answer whose call was running was on no
/// disk — a child killed in its 600 s nap was saved as it stood after its
/// first nap, and its resume ran the call again with no "not run" (a
/// repeated POST, a second grandchild). The answer is written as it is
/// given, here and on another node.
#[tokio::test(start_paused = true)]
async fn the_answer_whose_call_runs_is_saved_before_the_call_ends() {
    for remote in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        // Its second answer a second after its first nap's result: the
        // step's write came before it (a real model's answer takes that
        // long; the scripted one's instant answer could be read by it).
        let model =
            a_worker_that_naps_thinking(vec![Reply::answer("Noted.")], Duration::from_secs(1));
        let (thread, mut events, _node) = a_thread_placing(model, &store, remote).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until(&mut events, &mut log, in_the_second_nap).await;
        let saved = saved_now(&thread, &store).await;
        let nap = saved
            .iter()
            .flat_map(|m| &m.tool_calls)
            .any(|c| c.arguments.contains("600"));
        assert!(nap, "remote {remote}: {saved:#?}");
        thread.close_and_wait().await;
    }
}

/// Stopped midway (a kill while a message waits): a message a running
/// child took (`use_agent send`: "it reads your message at its next model
/// call") waited in its turn, in no saved run, until that call and the
/// step after it — a kill in between lost an instruction its parent was
/// told it had taken (a queued child's message was kept; a running one's
/// was not). It is in the saved run from when it is taken, where the
/// child will read it, here and on another node.
#[tokio::test(start_paused = true)]
async fn a_message_a_running_child_took_is_saved_before_it_reads_it() {
    let steered = "[message from the agent that started you]\nalso check X";
    for remote in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let (thread, _events, log, _node) = told_in_the_second_nap(&store, remote, vec![]).await;
        let sent = results_of(&log, "use_agent").pop().unwrap();
        assert_eq!(json(&sent.0)["status"], "running", "{}", sent.0);
        let saved = saved_now(&thread, &store).await;
        assert_eq!(
            saved.last().map(|m| m.content.as_str()),
            Some(steered),
            "remote {remote}: {saved:#?}"
        );
        thread.close_and_wait().await;
    }
}

/// Review of this session's own change: the messages a running child took
/// and had not read were put at the end of its conversation as a host
/// reads it — but they move (read at its next call, after the tool result
/// that comes first): a copy taken while one waited went on, by
/// `conversation_since`, to a conversation with the result lost and the
/// message twice. The conversation a host reads only grows; what waits is
/// saved apart (`HubHandle::conversation_since`'s promise holds).
#[tokio::test(start_paused = true)]
async fn a_conversation_copied_while_a_message_waits_goes_on_from_that_copy() {
    for remote in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path());
        let model = ScriptedModel::new(vec![
            starting_the_worker(),
            Reply::answer("Started."),
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check X")),
            Reply::answer("Told it."),
            Reply::answer("Noted."),
        ])
        .with_script(
            "Worker",
            vec![
                Reply::new().tool_call("sleep", r#"{"secs":60}"#),
                Reply::answer("done").delay(Duration::from_secs(60)),
            ],
        )
        .shared();
        let (thread, mut events, _node) = a_thread_placing(model, &store, remote).await;
        let agent_1 = AgentId::new("agent_1");
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        thread.send_user("tell it").unwrap();
        until_result(&mut events, &mut log).await;
        let copy = thread.hub().conversation(&agent_1).unwrap();
        // Taken and waiting (not in the copy): the instant this is about.
        let waiting = thread
            .hub()
            .conversation_and_unread(&agent_1, None)
            .map(|(_, unread)| unread.len());
        assert_eq!(waiting, Some(1));
        assert!(!copy.iter().any(|m| m.content.ends_with("also check X")));
        // Its nap answered, the message read at its next call.
        until(&mut events, &mut log, |e| {
            matches!(e, AgentEvent::Child(_, inner) if matches!(**inner, AgentEvent::Steered(_)))
        })
        .await;
        thread.sync().await.unwrap();
        let rest = thread.hub().conversation_since(&agent_1, copy.len());
        let whole = thread.hub().conversation(&agent_1).unwrap();
        assert_eq!(
            rest.map(|rest| [copy.clone(), rest].concat()),
            Some(whole.clone()),
            "remote {remote}"
        );
        // Saved as it reads it: the nap's result, then the message.
        let saved = saved_now(&thread, &store).await;
        assert_eq!(saved, whole, "remote {remote}");
        thread.close_and_wait().await;
    }
}

/// The two saves above, read back (review: this session's tests — the
/// file was checked, the resume from it was not): a child killed in its
/// 600 s nap (a message waiting, or none), resumed by a message in the
/// next process, reads its answer's call answered "not run" (not asked
/// again), then the message it had taken, then the new one.
#[tokio::test(start_paused = true)]
async fn a_child_killed_in_its_call_resumes_reading_its_call_interrupted_then_its_message() {
    use subagents::messages::{ChatMessage, Role};
    for told in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let live = tmp.path().join("live");
        let store = open(&live);
        let then = match told {
            true => vec![
                Reply::new().use_agent(&UseAgentCall::send("agent_1", "also check X")),
                Reply::answer("Told it."),
            ],
            false => Vec::new(),
        };
        let model = a_worker_that_naps_thinking(then, Duration::from_secs(1));
        let (thread, mut events, _node) = a_thread_placing(model, &store, false).await;
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        until(&mut events, &mut log, in_the_second_nap).await;
        if told {
            thread.send_user("tell it").unwrap();
            until_result(&mut events, &mut log).await;
        }
        let _ = saved_now(&thread, &store).await;
        let killed = tmp.path().join("killed");
        copy_dir(&live, &killed);
        thread.close_and_wait().await;
        drop((thread, store));

        let model = ScriptedModel::new(vec![
            Reply::answer("Noted the restart."),
            Reply::new().use_agent(&UseAgentCall::send("agent_1", "go on")),
            Reply::answer("Sent."),
            Reply::answer("Noted."),
        ])
        .with_script("Worker", vec![Reply::answer("done")]);
        let (model, seen) = spy("model", model);
        let store = open(&killed);
        let (thread, mut events) = thread_on(model, store.clone(), 3).await;
        let mut log = Vec::new();
        until_result(&mut events, &mut log).await;
        thread.send_user("tell it to go on").unwrap();
        until_result(&mut events, &mut log).await;
        run_for(&mut events, &mut log, 10).await;
        let resumed = (seen.lock().unwrap().iter())
            .find(|r| r.messages.iter().any(|m| m.content.ends_with("\ngo on")))
            .cloned()
            .unwrap_or_else(|| panic!("told {told}: no resumed request: {log:#?}"));
        let messages = &resumed.messages;
        let at = |pred: &dyn Fn(&ChatMessage) -> bool| {
            (messages.iter().position(pred)).unwrap_or_else(|| panic!("told {told}: {messages:#?}"))
        };
        let call = at(&|m| m.tool_calls.iter().any(|c| c.arguments.contains("600")));
        let interrupted = &messages[call + 1];
        assert_eq!(interrupted.role, Role::Tool, "{messages:#?}");
        // Not "not run" (review: kills between writes): it may have run —
        // a POST made, a grandchild started — and a model told it had not
        // did it again.
        assert!(
            interrupted.content.starts_with("interrupted: ")
                && interrupted.content.contains("may have taken effect"),
            "{interrupted:?}"
        );
        let new = at(&|m| m.content.ends_with("\ngo on"));
        if told {
            let taken = at(&|m| m.content.ends_with("\nalso check X"));
            assert!(call + 1 < taken && taken < new, "{messages:#?}");
        }
        assert!(call + 1 < new, "{messages:#?}");
        assert!(
            !log.iter().any(|e| matches!(e, AgentEvent::Child(_, inner)
                if matches!(&**inner, AgentEvent::ToolStarted(s) if s.arguments.contains("600")))),
            "told {told}: the call ran again"
        );
        thread.close_and_wait().await;
    }
}
