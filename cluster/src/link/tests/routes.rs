//! A run's route on this node: kept until every report up to the last
//! has come, in whatever order; let go when the run ends here.

use super::*;

/// Foreign order (review: the cluster as foreign input): a run's last
/// report that came before an earlier one (another session's frame, a
/// reordering on the way) took the route with it — the earlier one found
/// none and was dropped, and the mirror, holding the end behind that gap,
/// failed the child at the gap's grace, its answer sent whole. The route
/// goes once every report up to the last has come.
#[tokio::test]
async fn a_last_report_ahead_of_an_earlier_one_keeps_the_route() {
    let (inbox, _routes, thread, mut events, key) = a_child_on_b("a-ahead", "b-ahead").await;
    let result = answered("the answer");
    let ended = ReportBody::Ended {
        result: result.clone(),
        conversation: Vec::new(),
    };
    let earlier = ReportBody::Event(AgentEvent::Result(Box::new(result)));
    for (seq, body) in [(1, ended), (0, earlier)] {
        let report = RunReport { key, seq, body };
        inbox.cast(encode_report(&report, TOKEN).unwrap()).unwrap();
    }
    let agent_1 = AgentId::new("agent_1");
    let status = terminal_status(&mut events, &agent_1, 60).await;
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(status, Ok(SubAgentStatus::Done), "{envelope:?}");
    assert_eq!(envelope.result.as_deref(), Some("the answer"));
    thread.close_and_wait().await;
    inbox.stop(None);
}

/// Review of this session's own change: the route counted the reports
/// that came, not their numbers — one past a `Refused` (the run goes on
/// there until its stop lands) counted for a gap before it, the route
/// went, the late report in the gap was dropped, and the child failed
/// with the gap's words, not the refusal's. Every number up to the last.
#[tokio::test]
async fn a_report_past_the_last_fills_no_gap() {
    let (inbox, routes, thread, mut events, key) = a_child_on_b("a-past", "b-past").await;
    let why = "a report of the run could not be sent (over the wire's limit)";
    let text = |t: &str| ReportBody::Event(AgentEvent::Text(t.into()));
    let reports = [
        (0, text("one")),
        (2, ReportBody::Refused(why.into())),
        (3, text("after the refusal")),
        (1, text("two")),
    ];
    for (seq, body) in reports {
        let report = RunReport { key, seq, body };
        inbox.cast(encode_report(&report, TOKEN).unwrap()).unwrap();
    }
    let agent_1 = AgentId::new("agent_1");
    let ended = terminal_status(&mut events, &agent_1, 60).await;
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(ended, Ok(SubAgentStatus::Failed), "{envelope:?}");
    let error = envelope.error.unwrap_or_default();
    assert!(error.contains("could not be sent"), "{error}");
    assert!(routes.lock().is_empty(), "the route is held");
    thread.close_and_wait().await;
    inbox.stop(None);
}

/// Held at rest, across nodes (review: a remote child stopped midway): a
/// run the proxy ended here without its node's last report — a report
/// lost, the gap's grace run out — kept its route (the numbers ahead of
/// the gap, the dead child's reports port) until the node was lost, for
/// a healthy node never. The proxy forgets the run as it ends.
#[tokio::test(start_paused = true)]
async fn a_run_ended_here_at_a_gap_lets_go_of_its_route() {
    let (inbox, routes, thread, mut events, key) = a_child_on_b("a-gap", "b-gap").await;
    let result = answered("the answer");
    let reports = [
        (0, ReportBody::Event(AgentEvent::Text("one".into()))),
        (
            2,
            ReportBody::Ended {
                result,
                conversation: Vec::new(),
            },
        ),
    ];
    for (seq, body) in reports {
        let report = RunReport { key, seq, body };
        inbox.cast(encode_report(&report, TOKEN).unwrap()).unwrap();
    }
    let agent_1 = AgentId::new("agent_1");
    let ended = terminal_status(&mut events, &agent_1, 3600).await;
    assert_eq!(ended, Ok(SubAgentStatus::Failed));
    thread.sync().await.unwrap();
    assert!(routes.lock().is_empty(), "the route is held");
    thread.close_and_wait().await;
    inbox.stop(None);
}

/// The same for a proxy killed at the gap (its hub killed: no grace runs
/// out, its drop ends the run): the route stayed (review of this
/// session's own diff).
#[tokio::test(start_paused = true)]
async fn a_run_whose_proxy_is_killed_at_a_gap_lets_go_of_its_route() {
    let (inbox, routes, thread, _events, key) = a_child_on_b("a-kill", "b-kill").await;
    let report = RunReport {
        key,
        seq: 2,
        body: ReportBody::Ended {
            result: answered("the answer"),
            conversation: Vec::new(),
        },
    };
    inbox.cast(encode_report(&report, TOKEN).unwrap()).unwrap();
    thread.sync().await.unwrap();
    assert!(!routes.lock().is_empty(), "routed, behind its gap");
    thread.hub().actor().kill();
    thread.hub().actor().wait(None).await.unwrap();
    thread.sync().await.unwrap();
    assert!(routes.lock().is_empty(), "the route is held");
    thread.close_and_wait().await;
    inbox.stop(None);
}

/// Repeated (review: the cluster as an adversary, a frame twice): a late
/// copy of an earlier report whose body did not read — its header did —
/// became a `Refused` at its old number: the route took it as the last
/// report, went, and the node was asked to stop the run; its later
/// reports, its end among them, found no route, and the child stayed
/// `running`. A number that already came is dropped, unread or not.
#[tokio::test]
async fn a_garbled_repeat_of_an_earlier_report_ends_nothing() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (host, _) = Actor::spawn(None, HostOfB, ("b-repeat", asked.clone()))
        .await
        .unwrap();
    let (inbox, _routes, thread, mut events, key) = a_child_on_b("a-repeat", "b-repeat").await;
    let report = |seq, body| encode_report(&RunReport { key, seq, body }, TOKEN).unwrap();
    for seq in 0..3 {
        let text = ReportBody::Event(AgentEvent::Text(format!("part {seq}")));
        inbox.cast(report(seq, text)).unwrap();
    }
    let InboxMsg::Report(header, _) = report(1, ReportBody::Event(AgentEvent::Text("x".into())))
    else {
        unreachable!("a report")
    };
    inbox.cast(InboxMsg::Report(header, vec![0xff])).unwrap();
    let result = answered("the answer");
    let ended = ReportBody::Ended {
        result: result.clone(),
        conversation: Vec::new(),
    };
    inbox
        .cast(report(
            3,
            ReportBody::Event(AgentEvent::Result(Box::new(result))),
        ))
        .unwrap();
    inbox.cast(report(4, ended)).unwrap();
    let agent_1 = AgentId::new("agent_1");
    let status = terminal_status(&mut events, &agent_1, 60).await;
    let envelope = thread.hub().status(&agent_1).unwrap();
    assert_eq!(status, Ok(SubAgentStatus::Done), "{envelope:?}");
    assert!(
        asked.lock().unwrap().is_empty(),
        "the run was asked to stop"
    );
    thread.close_and_wait().await;
    inbox.stop(None);
    host.stop(None);
}
