//! Approvals and the queue: a pending approval is closed before its child
//! ends, and a queued child's start is on the stream.

use super::*;

pub(super) fn poster(system_prompt: &str, wait: bool) -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run(system_prompt, "post")
                .tools(["http_post"])
                .wait(wait),
        ),
        Reply::answer("Done."),
        Reply::answer("Noted."),
    ])
    .with_script(
        system_prompt,
        vec![
            Reply::new().tool_call("http_post", "{}"),
            Reply::answer("posted"),
        ],
    )
}

/// How a child's approval requests were closed, in order.
pub(super) fn approval_outcomes(child: &ChildLog) -> Vec<subagents::messages::ApprovalOutcome> {
    child
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            AgentEvent::ApprovalResolved { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

/// A thread whose child (waited on inline) asks for approval to post: the
/// thread, its stream, the log so far and the request.
async fn a_child_asking() -> (
    ThreadHandle,
    EventStream,
    Vec<AgentEvent>,
    subagents::messages::ApprovalRequest,
) {
    let (thread, mut events) = ThreadHandle::spawn(parent(poster("Poster", true)), None)
        .await
        .unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    (thread, events, log, request)
}

/// Defect 3: a child that asked for approval and then stopped left the
/// request open forever. Whatever ends it (a switch, a stop, the cascade
/// of a stopped parent), `ApprovalResolved(cancelled)` comes before its
/// terminal status, and a late answer is refused as `Ended` — with the
/// thread still open.
#[tokio::test(start_paused = true)]
async fn a_pending_approval_is_closed_before_its_child_ends() {
    use subagents::actors::ParentStopPolicy;
    use subagents::messages::{ApprovalOutcome, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    for ending in ["switch", "stop child", "cascade"] {
        let mut builder = parent(poster("Poster", true));
        if ending == "cascade" {
            builder = builder.parent_stop(ParentStopPolicy::Cascade);
        }
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let request = until_child_approval(&mut events, &mut log).await;
        match ending {
            "switch" => {
                thread.switch_away().await.unwrap();
            }
            "stop child" => {
                thread.hub().stop(&AgentId::new("agent_1")).await.unwrap();
            }
            _ => thread.stop_parent().unwrap(),
        }
        run_for(&mut events, &mut log, 30).await;
        check_log(&log, true);
        let (_, by_id) = check_log(&log, true);
        let child = &by_id[&AgentId::new("agent_1")];
        let (terminal, status) = child.terminal().unwrap();
        assert_eq!(status, SubAgentStatus::Stopped, "{ending}");
        let closed = child
            .events
            .iter()
            .find_map(|(i, e)| match e {
                AgentEvent::ApprovalResolved { id, outcome, .. } if *id == request.id => {
                    Some((*i, outcome.clone()))
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{ending}: the approval was never closed: {log:#?}"));
        assert!(
            closed.0 < terminal,
            "{ending}: closed after the terminal status"
        );
        assert!(
            matches!(closed.1, ApprovalOutcome::Cancelled(_)),
            "{ending}"
        );
        let transcript = subagents::messages::Transcript::from_events(&log);
        let row = transcript.child(&AgentId::new("agent_1")).unwrap();
        assert!(row.transcript.items.iter().any(|i| matches!(
            i,
            subagents::messages::TranscriptItem::Approval {
                resolved: Some(_),
                ..
            }
        )));
        assert_eq!(
            thread
                .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
                .await,
            Err(ThreadError::Approval(ApprovalRefusal::Ended(request.id))),
            "{ending}"
        );
        thread.close_and_wait().await;
    }
}

/// Defect 3, the answered path: an approval answered is closed as
/// approved before the call's result; a second answer is refused with the
/// first one.
#[tokio::test(start_paused = true)]
async fn an_answered_approval_is_closed_once() {
    use subagents::messages::{ApprovalOutcome, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let (thread, mut events, mut log, request) = a_child_asking().await;
    thread
        .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
        .await
        .unwrap();
    assert_eq!(
        thread
            .resolve_approval(request.id.clone(), ApprovalDecision::Deny)
            .await,
        Err(ThreadError::Approval(ApprovalRefusal::AlreadyAnswered {
            id: request.id.clone(),
            decision: ApprovalDecision::Approve
        }))
    );
    until_result(&mut events, &mut log).await;
    check_log(&log, true);
    let resolved: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child(_, inner) => match &**inner {
                AgentEvent::ApprovalResolved { outcome, .. } => Some(outcome.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(resolved, [ApprovalOutcome::Approved]);
    thread.close_and_wait().await;
}

/// Defect 4: a child handed to the background while queued started later
/// with no event, and `status` said "background", elapsed 0. Its start is
/// now `ChildRunning` on the stream, and `status` says queued, with its
/// place in the queue.
#[tokio::test(start_paused = true)]
async fn a_queued_background_childs_start_is_on_the_stream() {
    let model = ScriptedModel::new(vec![
        Reply::new()
            .use_agent(&work_call("Worker 1", 10, false))
            .use_agent(&work_call("Worker 2", 10, false))
            .use_agent(&UseAgentCall::status("agent_2")),
        Reply::answer("Started."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script("Worker 1\n", worker(10))
    .with_script("Worker 2\n", worker(10));
    let (thread, mut events) = ThreadHandle::spawn(parent(model).max_live(1), None)
        .await
        .unwrap();
    thread.send_user("start").unwrap();
    let mut log = Vec::new();
    run_for(&mut events, &mut log, 120).await;
    check_log(&log, true);
    let output = tool_results(&log, "call_1_3")[0].output.clone();
    let status: serde_json::Value = serde_json::from_str(&output).unwrap();
    assert_eq!(status["status"], "queued", "{output}");
    assert_eq!(status["queue_position"], 1);
    assert_eq!(status["background"], true);
    let running: Vec<_> = log
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ChildRunning(id) => Some(id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(running, ["agent_2"]);
    let transcript = subagents::messages::Transcript::from_events(&log);
    assert!(!transcript.child(&AgentId::new("agent_2")).unwrap().queued);
    thread.close_and_wait().await;
}

/// Same instant: a child's approval answered through the thread, then a
/// stop of that child sent right after it, in one tick. The answer went
/// host → supervisor → hub → child, the stop host → hub: the stop
/// overtook the answer, so the host was told `Ended` and the stream read
/// `Cancelled`, though it answered first. Both go through the supervisor
/// now, in the order they were sent.
#[tokio::test(start_paused = true)]
async fn a_childs_approval_then_its_stop_in_one_tick_arrive_in_that_order() {
    use subagents::messages::{ApprovalDecision, ApprovalOutcome};
    let (thread, mut events, mut log, request) = a_child_asking().await;
    let agent_1 = AgentId::new("agent_1");
    let (answered, stopped) = tokio::join!(
        thread.resolve_approval(request.id.clone(), ApprovalDecision::Approve),
        thread.stop_child(&agent_1)
    );
    assert_eq!(answered, Ok(()), "the answer came first");
    assert_eq!(stopped.unwrap(), SubAgentStatus::Stopped);
    run_for(&mut events, &mut log, 30).await;
    let (_, by_id) = check_log(&log, true);
    let outcomes = approval_outcomes(&by_id[&agent_1]);
    assert_eq!(outcomes, [ApprovalOutcome::Approved], "{log:#?}");
    thread.close_and_wait().await;
}

/// The thread's log checked whole once its child ran on, the child's one
/// approval `Approved`; then the thread closed.
async fn approved_once(
    thread: ThreadHandle,
    events: &mut EventStream,
    log: &mut Vec<AgentEvent>,
    child: &AgentId,
) {
    run_for(events, log, 30).await;
    let (_, by_id) = check_log(log, true);
    assert_eq!(
        approval_outcomes(&by_id[child]),
        [subagents::messages::ApprovalOutcome::Approved],
        "{log:#?}"
    );
    thread.close_and_wait().await;
}

/// Same instant, the host's futures not polled in its order: an answer
/// made first and awaited after a stop of that child. The thread's
/// `resolve_approval` and `stop_child` were `async fn`s, which send only
/// when first polled: the stop, awaited here first, overtook the answer
/// (the host read `Ended`, the stream `Cancelled`). An answer whose future
/// a `select!` dropped unpolled was never given at all. Both send when
/// called now.
#[tokio::test(start_paused = true)]
async fn an_answer_sent_before_a_stop_is_first_whoever_polls_first() {
    use subagents::messages::ApprovalDecision;
    let (thread, mut events, mut log, request) = a_child_asking().await;
    let agent_1 = AgentId::new("agent_1");
    // Made first, awaited last: what a host does when it hands the
    // answer to another task and stops the child here.
    let answered = thread.resolve_approval(request.id.clone(), ApprovalDecision::Approve);
    let stopped = thread.stop_child(&agent_1).await.unwrap();
    assert_eq!(answered.await, Ok(()), "the answer came first");
    assert_eq!(stopped, SubAgentStatus::Stopped);
    approved_once(thread, &mut events, &mut log, &agent_1).await;

    // Dropped unpolled: the answer was still given.
    let (thread, mut events, mut log, request) = a_child_asking().await;
    tokio::select! {
        biased;
        () = std::future::ready(()) => {}
        _ = thread.resolve_approval(request.id.clone(), ApprovalDecision::Approve) => {}
    }
    approved_once(thread, &mut events, &mut log, &agent_1).await;
}

/// Forged: an approval id for a child that has ended, which it never
/// asked for (`agent_1-approval-7`), was refused `Ended` — while the child
/// was still ending the same id came back `Unknown`, so the answer
/// depended on timing. `Ended` is for an approval it asked for and no
/// longer waits on; any other is `Unknown`, as the docs say.
#[tokio::test(start_paused = true)]
async fn an_approval_an_ended_child_never_asked_for_is_unknown() {
    use subagents::messages::{ApprovalDecision, ApprovalId, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    let (thread, mut events, mut log, request) = a_child_asking().await;
    thread.stop_child(&AgentId::new("agent_1")).await.unwrap();
    run_for(&mut events, &mut log, 30).await;
    let agent_1 = AgentId::new("agent_1");
    let answer = |n: u64| {
        thread.resolve_approval(
            ApprovalId::for_agent(&agent_1, n),
            ApprovalDecision::Approve,
        )
    };
    assert_eq!(
        answer(1).await,
        Err(ThreadError::Approval(ApprovalRefusal::Ended(
            request.id.clone()
        )))
    );
    let never = ApprovalId::for_agent(&agent_1, 7);
    assert_eq!(
        answer(7).await,
        Err(ThreadError::Approval(ApprovalRefusal::Unknown(never)))
    );
    thread.close_and_wait().await;
}

/// Review of this session's own diff: children number their approvals in
/// their thread's block now, and an ended child's book read every number
/// from 1 to its last as asked — in a block past 0 (a registry's second
/// thread, any thread after a restart), an answer to a number under the
/// block read `Ended`, "the child ended before you answered", for a
/// request it never made. From the block's first number on.
#[tokio::test(start_paused = true)]
async fn an_ended_childs_number_under_its_block_is_unknown() {
    use subagents::messages::{ApprovalDecision, ApprovalId, ApprovalRefusal, ThreadId};
    use subagents::supervisor::{ThreadError, Threads};
    let mut threads = Threads::new();
    let quiet = ScriptedModel::new(vec![Reply::answer("ok")]);
    threads
        .open(ThreadId::new("a"), parent(quiet))
        .await
        .unwrap();
    let mut events = threads
        .open(ThreadId::new("b"), parent(poster("Poster", true)))
        .await
        .unwrap();
    let thread = threads.get(&ThreadId::new("b")).unwrap().clone();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    let agent_1 = AgentId::new("agent_1");
    let (_, asked) = request.id.parts().unwrap();
    assert!(asked > 1, "numbered in the second thread's block: {asked}");
    thread.stop_child(&agent_1).await.unwrap();
    run_for(&mut events, &mut log, 30).await;
    let answer = |n: u64| {
        thread.resolve_approval(
            ApprovalId::for_agent(&agent_1, n),
            ApprovalDecision::Approve,
        )
    };
    assert_eq!(
        answer(asked).await,
        Err(ThreadError::Approval(ApprovalRefusal::Ended(
            request.id.clone()
        )))
    );
    let never = ApprovalId::for_agent(&agent_1, 1);
    assert_eq!(
        answer(1).await,
        Err(ThreadError::Approval(ApprovalRefusal::Unknown(never)))
    );
    thread.close_and_wait().await;
}

/// Same instant: a child's approval answered, then the thread closed, in
/// one tick. `close` says what was sent before it is handled first, and
/// the thread forwarded the answer to the hub — but the close stopped the
/// hub with ractor's stop, which is read before the mailbox: the answer
/// was dropped, the host told the thread was closed, and the child's
/// request ended `Cancelled`, though it was answered first. The hub is
/// drained, as the parent is.
#[tokio::test(start_paused = true)]
async fn a_childs_approval_then_a_close_in_one_tick_arrive_in_that_order() {
    use subagents::messages::{ApprovalDecision, ApprovalOutcome};
    let (thread, mut events, mut log, request) = a_child_asking().await;
    let (answered, ()) = tokio::join!(
        thread.resolve_approval(request.id.clone(), ApprovalDecision::Approve),
        async { thread.close() }
    );
    assert_eq!(answered, Ok(()), "the answer came first");
    while let Some(event) = next_event(&mut events, &log).await {
        log.push(event);
    }
    let (_, by_id) = check_log(&log, true);
    let outcomes = approval_outcomes(&by_id[&AgentId::new("agent_1")]);
    assert_eq!(outcomes, [ApprovalOutcome::Approved], "{log:#?}");
}

/// Stopped midway: a child waited on inline asked for approval, then the
/// parent's turn was stopped and the child went on in the background —
/// where the host had chosen not to be asked (`BackgroundApprovals::Deny`
/// or `Approve`). The policy was read only as a call asked, so the pending
/// request waited for a host that would never answer, holding the child's
/// slot until its wall clock ran out. As a child goes to the background,
/// the policy answers the request it waits on, as it answers every later
/// one.
#[tokio::test(start_paused = true)]
async fn a_pending_approval_of_a_child_sent_to_the_background_follows_the_policy() {
    use subagents::actors::hub::BackgroundApprovals;
    use subagents::messages::{ApprovalDecision, ApprovalOutcome, ApprovalRefusal};
    use subagents::supervisor::ThreadError;
    for (policy, outcome, said, decision) in [
        (
            BackgroundApprovals::Deny,
            ApprovalOutcome::Denied,
            "the user denied",
            ApprovalDecision::Deny,
        ),
        (
            BackgroundApprovals::Approve,
            ApprovalOutcome::Approved,
            "posted",
            ApprovalDecision::Approve,
        ),
    ] {
        let builder = parent(poster("Poster", true)).background_approvals(policy);
        let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
        thread.send_user("go").unwrap();
        let mut log = Vec::new();
        let request = until_child_approval(&mut events, &mut log).await;
        thread.stop_parent().unwrap();
        run_for(&mut events, &mut log, 30).await;
        let (_, by_id) = check_log(&log, true);
        let child = &by_id[&AgentId::new("agent_1")];
        let outcomes = approval_outcomes(child);
        assert_eq!(outcomes, [outcome], "{policy:?}: {log:#?}");
        let posted = child.events.iter().find_map(|(_, e)| match e {
            AgentEvent::ToolResult(r) if r.name == "http_post" => Some(r.output.clone()),
            _ => None,
        });
        assert!(
            posted.as_deref().is_some_and(|o| o.starts_with(said)),
            "{policy:?}: {posted:?}"
        );
        assert_eq!(
            child.terminal().map(|(_, s)| s),
            Some(SubAgentStatus::Done),
            "{policy:?}"
        );
        // The host's answer after the child ended: answered, as the
        // stream says — it read `Ended` ("closed as cancelled"), and
        // `AlreadyAnswered` only while the child still ran.
        assert_eq!(
            thread
                .resolve_approval(request.id.clone(), ApprovalDecision::Approve)
                .await,
            Err(ThreadError::Approval(ApprovalRefusal::AlreadyAnswered {
                id: request.id.clone(),
                decision
            })),
            "{policy:?}"
        );
        thread.close_and_wait().await;
    }
}

/// Once the hub is gone, an answer is refused as its book says: an
/// approval the background policy answered is `AlreadyAnswered` with that
/// decision, one no child asked is `Unknown` — not `Ended` for every id,
/// as the hub's handle said when it could not reach the hub.
#[tokio::test(start_paused = true)]
async fn answers_after_the_hub_is_gone_are_refused_as_its_book_says() {
    use subagents::actors::hub::BackgroundApprovals;
    use subagents::messages::{ApprovalDecision, ApprovalRefusal};
    let builder = parent(poster("Poster", true)).background_approvals(BackgroundApprovals::Deny);
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    let request = until_child_approval(&mut events, &mut log).await;
    thread.stop_parent().unwrap();
    run_for(&mut events, &mut log, 30).await;
    let hub = thread.hub().clone();
    hub.actor().kill();
    hub.actor().wait(None).await.ok();
    assert_eq!(
        hub.resolve_approval(request.id.clone(), ApprovalDecision::Approve)
            .await,
        Err(ApprovalRefusal::AlreadyAnswered {
            id: request.id.clone(),
            decision: ApprovalDecision::Deny
        })
    );
    let never = ApprovalId::new("agent_1-approval-9");
    assert_eq!(
        hub.resolve_approval(never.clone(), ApprovalDecision::Approve)
            .await,
        Err(ApprovalRefusal::Unknown(never))
    );
    thread.close_and_wait().await;
}

/// A grandchild's approval request, nested in its requester's row.
fn a_grandchild_asks(e: &AgentEvent) -> bool {
    matches!(e, AgentEvent::Child(_, inner)
        if matches!(&**inner, AgentEvent::Child(_, asked)
            if matches!(**asked, AgentEvent::ApprovalRequested(_))))
}

/// How `Poster`'s (`agent_2`'s) requests were closed, as its requester
/// `Middle`'s row shows them.
fn posters_outcomes(middle: &ChildLog) -> Vec<subagents::messages::ApprovalOutcome> {
    middle
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            AgentEvent::Child(id, inner) if id.as_str() == "agent_2" => match &**inner {
                AgentEvent::ApprovalResolved { outcome, .. } => Some(outcome.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The parent waits inline on `Middle` (`agent_1`), which waits inline on
/// `Poster` (`agent_2`), which asks to post.
fn middle_and_poster() -> ScriptedModel {
    ScriptedModel::new(vec![
        Reply::new().use_agent(
            &UseAgentCall::run("Middle", "relay")
                .tools(["http_post"])
                .wait(true),
        ),
        Reply::answer("Done."),
        Reply::answer("Noted."),
        Reply::answer("Noted."),
    ])
    .with_script(
        "Middle",
        vec![
            Reply::new().use_agent(
                &UseAgentCall::run("Poster", "post")
                    .tools(["http_post"])
                    .wait(true),
            ),
            Reply::answer("relayed"),
        ],
    )
    .with_script(
        "Poster",
        vec![
            Reply::new().tool_call("http_post", "{}"),
            Reply::answer("posted"),
        ],
    )
}

/// A grandchild (depth 2) waited on inline by a child that goes to the
/// background runs unwatched with it: the background policy answered only
/// the child's own request, and the grandchild's waited for a host that
/// chose not to be asked, holding both slots until the wall clock. Its
/// pending request, and every later one, follow the policy.
#[tokio::test(start_paused = true)]
async fn a_grandchilds_pending_approval_follows_the_policy_as_its_requester_goes_to_the_background()
{
    use subagents::actors::hub::BackgroundApprovals;
    use subagents::messages::ApprovalOutcome;
    let builder = parent(middle_and_poster())
        .max_depth(2)
        .background_approvals(BackgroundApprovals::Deny);
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, a_grandchild_asks).await;
    thread.stop_parent().unwrap();
    run_for(&mut events, &mut log, 30).await;
    let (_, by_id) = check_log(&log, true);
    let middle = &by_id[&AgentId::new("agent_1")];
    let (outcomes, ended): (Vec<_>, Vec<_>) = middle
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            AgentEvent::Child(id, inner) if id.as_str() == "agent_2" => match &**inner {
                AgentEvent::ApprovalResolved { outcome, .. } => Some((Some(outcome.clone()), None)),
                _ => None,
            },
            AgentEvent::ChildStatus(id, status)
                if id.as_str() == "agent_2" && status.is_terminal() =>
            {
                Some((None, Some(*status)))
            }
            _ => None,
        })
        .unzip();
    let outcomes: Vec<_> = outcomes.into_iter().flatten().collect();
    let ended: Vec<_> = ended.into_iter().flatten().collect();
    assert_eq!(outcomes, [ApprovalOutcome::Denied], "{log:#?}");
    assert_eq!(ended, [SubAgentStatus::Done]);
    thread.close_and_wait().await;
}

/// Same instant, two stops (review: approvals in every state): the host
/// stops `Middle` by name and the parent in the same tick, while
/// `Middle`'s inline `Poster` waits on an approval, under
/// `BackgroundApprovals::Approve`. The parent's cut handed `Middle` to the
/// background (Detach; Cascade found its turn over and did the same)
/// before the stop `Middle`'s end casts for `Poster` was read: the policy
/// approved `Poster`'s call — one nobody approved, on the way to a stop.
/// A child being stopped, or whose turn is over, goes with the children
/// it waits on: the policy answers none of their requests. (The parent's
/// stop sent first, the policy's answer may come before `Middle`'s stop
/// is even sent: approved then, as the policy says.)
#[tokio::test(start_paused = true)]
async fn a_grandchild_of_a_child_stopped_as_its_parent_is_cut_is_not_approved_by_the_policy() {
    use subagents::actors::ParentStopPolicy;
    use subagents::actors::hub::BackgroundApprovals;
    use subagents::messages::ApprovalOutcome;
    for policy in [ParentStopPolicy::Detach, ParentStopPolicy::Cascade] {
        for yields in 0..6 {
            let builder = parent(middle_and_poster())
                .max_depth(2)
                .parent_stop(policy)
                .background_approvals(BackgroundApprovals::Approve);
            let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
            thread.send_user("go").unwrap();
            let mut log = Vec::new();
            until(&mut events, &mut log, a_grandchild_asks).await;
            let stop_middle = || {
                let thread = thread.clone();
                tokio::spawn(async move { thread.stop_child(&AgentId::new("agent_1")).await })
            };
            let stopped = stop_middle();
            for _ in 0..yields {
                tokio::task::yield_now().await;
            }
            thread.stop_parent().unwrap();
            let _ = stopped.await.unwrap();
            run_for(&mut events, &mut log, 30).await;
            let (_, by_id) = check_log(&log, true);
            let outcomes = posters_outcomes(&by_id[&AgentId::new("agent_1")]);
            assert!(
                !outcomes.contains(&ApprovalOutcome::Approved),
                "{policy:?}, {yields} yields: {outcomes:?}"
            );
            thread.close_and_wait().await;
        }
    }
}

/// Same instant, at depth 2 (review: check-then-act windows, thirty-seventh
/// session): the host stops `Middle` through the hub in the tick
/// `Middle`'s inline wait on `Poster` runs out, `Poster` waiting on an
/// approval, under `BackgroundApprovals::Approve`. The hub read the stop
/// first (`Middle` going), then `Middle`'s detach of `Poster`: the detach
/// asked whether `Poster` itself was going — not its requester — and the
/// policy approved a call on its way to a stop, which the book's own rule
/// (a child under a requester being stopped goes with it) refuses. (The
/// order is the paused runtime's: the stop, one hop from the test's task
/// woken at the wait's end, is read first. Through the thread — two hops
/// — the detach is read first, and the policy's approval is its to give.)
#[tokio::test(start_paused = true)]
async fn a_grandchild_detached_as_its_requester_is_stopped_is_not_approved_by_the_policy() {
    use subagents::actors::hub::BackgroundApprovals;
    use subagents::messages::ApprovalOutcome;
    let builder = parent(middle_and_poster())
        .max_depth(2)
        .inline_wait(Duration::from_secs(10))
        .background_approvals(BackgroundApprovals::Approve);
    let (thread, mut events) = ThreadHandle::spawn(builder, None).await.unwrap();
    thread.send_user("go").unwrap();
    let mut log = Vec::new();
    until(&mut events, &mut log, a_grandchild_asks).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let middle = AgentId::new("agent_1");
    let _ = thread.hub().stop(&middle).await;
    run_for(&mut events, &mut log, 30).await;
    let (_, by_id) = check_log(&log, true);
    let outcomes = posters_outcomes(&by_id[&middle]);
    assert!(
        matches!(&outcomes[..], [ApprovalOutcome::Cancelled(_)]),
        "{outcomes:?} {log:#?}"
    );
    thread.close_and_wait().await;
}
