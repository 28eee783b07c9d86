//! The clamp rule at the same instant: a `delegate_task` call cut in the
//! tick its queued child is admitted. Nobody waits on that child any
//! more, so the caller's cap does not carry over.

use super::*;
use subagents::actors::DelegatingAgent;

/// A parent of 100 s whose children have 150 s, one live at a time,
/// with `delegate_task` and `sleep`.
pub(super) fn capped(model: ScriptedModel) -> DelegationBuilder {
    DelegationBuilder::new(model.shared())
        .tools(ToolRegistry::new().with(subagents_demo::Sleep))
        .limits(Limits {
            wall_clock: Duration::from_secs(100),
            ..Limits::default()
        })
        .child_limits(Limits {
            wall_clock: Duration::from_secs(150),
            ..Limits::default()
        })
        .max_live(1)
        .delegate_task_tool(true)
}

/// A parent that starts a hanging background `Blocker` and, in the same
/// answer, a `delegate_task` `Worker` of `works` seconds (queued behind
/// it); then `answer`, then "noted again".
pub(super) fn blocked_then_delegates(answer: &str, works: u64) -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::run("Blocker\nYou block.", "hold the slot").background())
            .tool_call(
                "delegate_task",
                r#"{"task":"x","system_prompt":"Worker\nw"}"#,
            ),
        Reply::answer(answer),
        Reply::answer("noted again"),
    ])
    .with_script("Blocker", vec![Reply::new().hang()])
    .with_script("Worker", common::worker(works))
}

/// `id`'s envelope once its end is on the stream.
pub(super) async fn ended(
    parent: &DelegatingAgent,
    events: &mut EventStream,
    id: &AgentId,
) -> subagents::messages::Envelope {
    loop {
        match events.recv().await.unwrap() {
            AgentEvent::ChildStatus(at, status) if at == *id && status.is_terminal() => {
                return parent.hub.status(id).expect("known");
            }
            _ => {}
        }
    }
}

/// Same instant (review: limits): a `delegate_task` child waits in the
/// queue; the host stops the child holding the slot and then the caller's
/// turn, in one tick. The caller's call was answered `pending` (the child
/// goes on in the background) — but the hub read the freed slot before
/// the detach, which went out only when the cut turn's task was dropped,
/// and started the child with the caller's cap: spent (nine tenths of
/// 100 s, counted from the request, 95 s ago), it ended at once with a
/// partial of nothing done; with time left (stopped at 50 s), it ran
/// cut to 40 s in the background. The cut marks the child as waited on
/// by nobody before the hub can read the freed slot.
#[tokio::test(start_paused = true)]
async fn a_queued_synchronous_child_whose_caller_is_cut_as_its_slot_frees_drops_the_cap() {
    use subagents::messages::SubAgentStatus;
    for (stop_at, works) in [(95, 5), (50, 60)] {
        let (parent, mut events) = capped(blocked_then_delegates("noted", works))
            .spawn()
            .await
            .unwrap();
        parent.agent.send_user("go").unwrap();
        let mut log = Vec::new();
        common::run_for(&mut events, &mut log, stop_at).await;
        let (blocker, worker) = (AgentId::new("agent_1"), AgentId::new("agent_2"));
        assert_eq!(parent.hub.queue_position(&worker), Some(1), "{log:#?}");
        // One tick: the slot's holder, then the caller.
        let stopped = parent.hub.stop(&blocker);
        parent.agent.stop_turn().unwrap();
        stopped.await.unwrap();
        let envelope = ended(&parent, &mut events, &worker).await;
        assert_eq!(
            envelope.status,
            SubAgentStatus::Done,
            "{stop_at}: {envelope:?}"
        );
        assert_eq!(
            envelope.result,
            Some(format!("worked {works} s")),
            "{stop_at}: {envelope:?}"
        );
        parent.shutdown_and_wait().await;
    }
}

/// Stops the parent's turn as `agent_2` is registered — inside the hub's
/// handling of its request, before the call that asked has read its id.
struct StopOnStart(Arc<std::sync::OnceLock<subagents::actors::AgentHandle>>);

impl subagents::actors::hub::HubObserver for StopOnStart {
    fn finished(&self, _: &subagents::messages::Envelope) {}

    fn started(
        &self,
        envelope: &subagents::messages::Envelope,
        _: &subagents::messages::ChildRequest,
    ) {
        if envelope.id.as_str() == "agent_2"
            && let Some(parent) = self.0.get()
        {
            let _ = parent.stop_turn();
        }
    }
}

/// Same instant, one step earlier (review of this session's own diff):
/// the caller's turn cut while its request was still unanswered — the
/// call had not read the child's id, so nothing of the call could mark
/// the child — and the slot freeing in that tick: the child started on
/// the cut caller's cap. The hub reads whether the call still waits,
/// where the child starts.
#[tokio::test(start_paused = true)]
async fn a_queued_synchronous_child_whose_caller_is_cut_before_it_read_the_id_drops_the_cap() {
    use subagents::messages::SubAgentStatus;
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&UseAgentCall::run("Blocker\nYou block.", "hold the slot").background())
            .tool_call("sleep", r#"{"secs":95}"#),
        Reply::new().tool_call(
            "delegate_task",
            r#"{"task":"x","system_prompt":"Worker\nw"}"#,
        ),
        Reply::answer("noted"),
        Reply::answer("noted again"),
    ])
    .with_script("Blocker", common::worker(95))
    .with_script("Worker", common::worker(5));
    let parent_slot = Arc::new(std::sync::OnceLock::new());
    let (parent, mut events) = capped(model)
        .observer(Arc::new(StopOnStart(parent_slot.clone())))
        .spawn()
        .await
        .unwrap();
    parent_slot.set(parent.agent.clone()).unwrap();
    parent.agent.send_user("go").unwrap();
    let worker = AgentId::new("agent_2");
    let envelope = ended(&parent, &mut events, &worker).await;
    assert_eq!(envelope.status, SubAgentStatus::Done, "{envelope:?}");
    assert_eq!(
        envelope.result.as_deref(),
        Some("worked 5 s"),
        "{envelope:?}"
    );
    parent.shutdown_and_wait().await;
}
