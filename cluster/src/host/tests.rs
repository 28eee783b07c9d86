#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use subagents_actors::{GateHandle, Reply, ScriptedModel, ToolRegistry};
use subagents_messages::remote::RunSpec;
use subagents_messages::{AgentId, Limits};

use super::*;
use crate::wire::{decode_report, encode_start};

/// The `(key, token)` of every report any test's inbox was sent.
static TOKENS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// Stands for a node's inbox (`a`'s, or another name's: tests run at
/// once, and two in one group took each other's reports): keeps every
/// report it is sent.
struct Inbox;

impl Actor for Inbox {
    type Msg = InboxMsg;
    type State = Arc<Mutex<Vec<RunReport>>>;
    type Arguments = (&'static str, Arc<Mutex<Vec<RunReport>>>);

    async fn pre_start(
        &self,
        myself: ActorRef<InboxMsg>,
        (node, seen): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(inbox_group(node), vec![myself.get_cell()]);
        Ok(seen)
    }

    async fn handle(
        &self,
        _myself: ActorRef<InboxMsg>,
        message: InboxMsg,
        seen: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let InboxMsg::Report(header, body) = message {
            let (report, token) = decode_report(&header, &body).unwrap();
            lock(&TOKENS).push((report.key, token));
            lock(seen).push(report);
        }
        Ok(())
    }
}

/// Node `b`'s host running `model` (a gate of two), and the inbox of
/// node `node` (a name of each test's own: the host sends a report to
/// its group's first member, and a test's inbox left in the group by a
/// runtime dropped at its end took the next test's reports).
async fn host_b_and_inbox(
    model: Arc<dyn subagents_actors::Model>,
    node: &'static str,
) -> (
    ActorRef<HostMsg>,
    ActorRef<InboxMsg>,
    Arc<Mutex<Vec<RunReport>>>,
) {
    let gate = GateHandle::spawn(2).await.unwrap();
    let runner = NodeRunner::new(vec![model], ToolRegistry::new(), gate);
    let (host, _) = Actor::spawn(None, NodeHost, HostState::new("b".into(), runner, 77))
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (inbox, _) = Actor::spawn(None, Inbox, (node, seen.clone()))
        .await
        .unwrap();
    (host, inbox, seen)
}

fn spec(model: &str, who: &str, keep_if_orphaned: bool) -> RunSpec {
    RunSpec {
        key: 1,
        id: AgentId::new("agent_1"),
        system_prompt: who.into(),
        input: "go".into(),
        followups: Vec::new(),
        conversation: Vec::new(),
        model: model.into(),
        tools: Vec::new(),
        limits: Limits::default(),
        depth: 1,
        options: Default::default(),
        keep_if_orphaned,
        approvals_after: 0,
    }
}

/// Node `a` starts run 1 here with `Detach`, is lost, comes back under
/// the same name and starts a run that draws key 1 again (its keys
/// start over in a new process). The orphan's result is kept here, and
/// the new session's inbox hears of its own run only: before, the new
/// start cleared the node's lost mark, so the orphan's reports went to
/// the new inbox (its result was never kept, and its `Ended` ended the
/// new run's route there).
#[tokio::test(start_paused = true)]
async fn a_parent_node_back_under_its_name_does_not_inherit_its_orphans() {
    // The loss of its session is read between the two starts.
    orphan_then_newcomer("a1", 1, true).await;
}

/// Node `node` starts run 1 here with `Detach` (incarnation 1), then —
/// its session's loss read in between when `lost`, otherwise as process
/// `incarnation` — a run that draws key 1 again. The orphan's result is
/// kept here; the new run's reports alone reach the inbox.
async fn orphan_then_newcomer(node: &'static str, incarnation: u64, lost: bool) {
    let answer = |text: &str| vec![Reply::new().delay(Duration::from_secs(60)).text(text)];
    let model = ScriptedModel::new(Vec::new())
        .with_script("Orphan", answer("orphan's answer"))
        .with_script("Newcomer", answer("new run's answer"))
        .shared();
    let name = model.name().to_owned();
    let (host, inbox, seen) = host_b_and_inbox(model, node).await;
    host.cast(encode_start(&spec(&name, "Orphan", true), node, 5, 1).unwrap())
        .unwrap();
    if lost {
        host.cast(HostMsg::parent_lost(node.into())).unwrap();
    }
    host.cast(encode_start(&spec(&name, "Newcomer", false), node, 6, incarnation).unwrap())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(300)).await;
    let kept = kept_of(&host, "b").await.unwrap();
    let kept: Vec<&str> = kept.iter().map(|k| k.result.text.as_str()).collect();
    assert_eq!(kept, ["orphan's answer"]);
    let ended: Vec<String> = lock(&seen)
        .iter()
        .filter_map(|r| match &r.body {
            ReportBody::Ended { result, .. } => Some(result.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ended, ["new run's answer"]);
    host.stop(None);
    inbox.stop(None);
}

/// Node `a` restarted under its name and started a run here before its
/// old session's close was read (within the half second a closed session
/// is given, or over a half-open one that never closes): its keys start
/// over, so the new process's run 1 was refused as live ("a run of that
/// key is live here already"), the old process's Detach run sent its end
/// to the new inbox (lost, never kept) and a Cascade run was never
/// stopped. A start from another incarnation of a node orphans the runs
/// of the earlier one, as the loss of its session does.
#[tokio::test(start_paused = true)]
async fn a_parent_node_back_as_another_process_orphans_the_earlier_ones_runs() {
    // No loss read: the start says it is another process.
    orphan_then_newcomer("a-restarted", 2, false).await;
}

/// A node says who it is: the wire's version, its incarnation and its
/// live count (the heartbeat's one question).
#[tokio::test(start_paused = true)]
async fn a_host_says_its_version_incarnation_and_live_count() {
    let model = ScriptedModel::new(Vec::new())
        .with_script("Slow", vec![Reply::new().text("thinking").hang()])
        .shared();
    let name = model.name().to_owned();
    let (host, inbox, _) = host_b_and_inbox(model, "a2").await;
    let hello = crate::host::hello_of(&host, "b", Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(
        hello,
        crate::wire::Hello {
            version: crate::wire::WIRE_VERSION,
            incarnation: 77,
            live: 0
        }
    );
    host.cast(encode_start(&spec(&name, "Slow", false), "a2", 5, 1).unwrap())
        .unwrap();
    tokio::task::yield_now().await;
    let hello = crate::host::hello_of(&host, "b", Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(hello.live, 1);
    host.stop(None);
    inbox.stop(None);
}

/// Repeated: a second `Start` of a run still live here (a retry, or
/// anyone holding the cookie) took the first's place in the map: the
/// first went on unowned — the asking node's loss never stopped it —
/// and both sent reports numbered from 0 under one key.
#[tokio::test(start_paused = true)]
async fn a_second_start_of_a_live_run_starts_nothing() {
    let model = ScriptedModel::new(Vec::new())
        .with_script("Slow", vec![Reply::new().text("thinking").hang()])
        .shared();
    let name = model.name().to_owned();
    let (host, inbox, seen) = host_b_and_inbox(model, "a3").await;
    for _ in 0..2 {
        host.cast(encode_start(&spec(&name, "Slow", false), "a3", 5, 1).unwrap())
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ractor::call!(host, HostMsg::Live).unwrap(), 1);
    host.cast(HostMsg::parent_lost("a3".into())).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        ractor::call!(host, HostMsg::Live).unwrap(),
        0,
        "a run left unowned"
    );
    let numbers: Vec<u64> = lock(&seen).iter().map(|r| r.seq).collect();
    let expected: Vec<u64> = (0..numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "two runs' reports under one key");
    host.stop(None);
    inbox.stop(None);
}

/// Foreign input (another version's node, a forged start): a `Start`
/// whose spec this node could not read was logged and dropped — the
/// asking node's child stayed `running`, waiting for reports, for ever.
/// Its header still says who asked and which run: the run is refused to
/// that node's inbox, saying why; a start whose header cannot be read
/// either starts nothing and tells no one.
#[tokio::test(start_paused = true)]
async fn a_start_whose_spec_cannot_be_read_is_refused_to_its_asker() {
    let model = ScriptedModel::new(Vec::new()).shared();
    let name = model.name().to_owned();
    let (host, inbox, seen) = host_b_and_inbox(model, "a4").await;
    let HostMsg::Start(header, spec_bytes) =
        encode_start(&spec(&name, "Any", false), "a4", 5, 1).unwrap()
    else {
        unreachable!("a start")
    };
    // A field this version does not know, read as a truncated spec.
    let mut foreign = spec_bytes.clone();
    foreign.push(0x07);
    host.cast(HostMsg::Start(header.clone(), foreign)).unwrap();
    host.cast(HostMsg::Start(vec![0xff; 3], spec_bytes))
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ractor::call!(host, HostMsg::Live).unwrap(), 0);
    let seen = lock(&seen).clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].key, seen[0].seq), (1, 0));
    assert!(
        matches!(&seen[0].body, ReportBody::Refused(why)
            if why.contains("could not read the run's request") && !why.contains("Error")),
        "{:?}",
        seen[0].body
    );
    host.stop(None);
    inbox.stop(None);
}

/// Forged (any holder of the cookie): a request named its run by the
/// asking node's name and the run's key — both in the clear, the key a
/// small number — so any node could stop or answer another's run. A
/// request carries the run's token; one without it does nothing.
#[tokio::test(start_paused = true)]
async fn a_request_without_its_runs_token_does_nothing() {
    let model = ScriptedModel::new(Vec::new())
        .with_script("Slow", vec![Reply::new().text("thinking").hang()])
        .shared();
    let name = model.name().to_owned();
    let (host, inbox, _seen) = host_b_and_inbox(model, "a5").await;
    host.cast(encode_start(&spec(&name, "Slow", false), "a5", 5, 1).unwrap())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stop = |token| {
        let bytes = crate::wire::encode_request("a5", 1, token, &RunRequest::Stop).unwrap();
        host.cast(HostMsg::Request(bytes)).unwrap();
    };
    stop(6);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        ractor::call!(host, HostMsg::Live).unwrap(),
        1,
        "a forged stop"
    );
    stop(5);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ractor::call!(host, HostMsg::Live).unwrap(), 0);
    host.stop(None);
    inbox.stop(None);
}

/// Repeated under another token: a second start of a run live here
/// (the asking node restarted and drew the key again before its loss was
/// read, or the live run was forged) was dropped with a log line — and
/// the live run's reports carry its own token, which the new run's route
/// never matches: its child waited for ever. The start is refused to its
/// asker under its own token; the live run goes on.
#[tokio::test(start_paused = true)]
async fn a_second_start_under_another_token_is_refused_to_its_asker() {
    let model = ScriptedModel::new(Vec::new())
        .with_script("Slow", vec![Reply::new().text("thinking").hang()])
        .shared();
    let name = model.name().to_owned();
    let (host, inbox, seen) = host_b_and_inbox(model, "a6").await;
    let spec = RunSpec {
        key: 77,
        ..spec(&name, "Slow", false)
    };
    host.cast(encode_start(&spec, "a6", 5, 1).unwrap()).unwrap();
    host.cast(encode_start(&spec, "a6", 6, 1).unwrap()).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ractor::call!(host, HostMsg::Live).unwrap(), 1);
    let refused: Vec<u64> = lock(&seen)
        .iter()
        .zip(lock(&TOKENS).iter().filter(|(key, _)| *key == 77))
        .filter(|(r, _)| matches!(&r.body, ReportBody::Refused(why) if why.contains("live here already")))
        .map(|(_, (_, token))| *token)
        .collect();
    assert_eq!(refused, [6], "{:?}", lock(&seen));
    host.stop(None);
    inbox.stop(None);
}

/// A report over the wire's limit (here a text delta of 64 MiB + 1,
/// then the result and the end that carry it) was dropped after its
/// number was taken: the asking node waited on that gap for ever, so
/// the run never ended there. Each number goes out, with a body that
/// fits.
#[tokio::test(start_paused = true)]
async fn a_report_over_the_wire_limit_leaves_no_gap() {
    let huge = "x".repeat((64 << 20) + 1);
    let model = ScriptedModel::new(Vec::new())
        .with_script("Verbose", vec![Reply::answer(huge)])
        .shared();
    let name = model.name().to_owned();
    let (host, inbox, seen) = host_b_and_inbox(model, "a7").await;
    host.cast(encode_start(&spec(&name, "Verbose", false), "a7", 5, 1).unwrap())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let seen = lock(&seen);
    let numbers: Vec<u64> = seen.iter().map(|r| r.seq).collect();
    let expected: Vec<u64> = (0..numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "a gap in the run's reports");
    let last = &seen.last().expect("reports").body;
    assert!(
        matches!(last, ReportBody::Refused(why) if why.contains("over the wire's limit")),
        "{last:?}"
    );
    drop(seen);
    host.stop(None);
    inbox.stop(None);
}

/// An `Ended` too large for the wire goes without its conversation
/// when that makes it fit; what else does not fit says why.
#[test]
fn a_report_that_does_not_fit_is_made_one_that_does() {
    use subagents_messages::ChatMessage;
    let too_large = CodecError::TooLarge {
        bytes: 70 << 20,
        limit: 64 << 20,
    };
    let result = done();
    let ended = RunReport {
        key: 1,
        seq: 7,
        body: ReportBody::Ended {
            result: result.clone(),
            conversation: vec![ChatMessage::user("a long one")],
        },
    };
    let fitted = fit(ended, &too_large);
    assert_eq!(fitted.seq, 7);
    assert!(
        matches!(&fitted.body, ReportBody::Ended { result: r, conversation } if r.text == "done" && conversation.is_empty()),
        "{fitted:?}"
    );
    let event = RunReport {
        key: 1,
        seq: 3,
        body: ReportBody::Steered { n: 1, taken: true },
    };
    let fitted = fit(event, &too_large);
    assert_eq!(fitted.seq, 3);
    assert!(
        matches!(&fitted.body, ReportBody::Refused(why) if why.contains("73400320 bytes, over the wire's limit of 67108864")),
        "{fitted:?}"
    );
}

/// The kept list grew without a bound on what one fetch could carry: one
/// orphan answering about 33 MiB (its `Ended` kept whole, though its live
/// report would have gone trimmed) took the list past the wire's 64 MiB,
/// the fetch's reply was dropped, and every later fetch — `kept()` here
/// too — failed for good. A run that cannot fit alone is kept without its
/// conversation, and a list past the limit is sent as its newest runs
/// that fit.
#[test]
fn the_kept_list_is_always_fetchable() {
    use subagents_messages::ChatMessage;
    let result = done();
    let run = |n: &str, mib: usize| {
        kept_run(
            "a".into(),
            AgentId::new(n),
            result.clone(),
            vec![ChatMessage::user("x".repeat(mib << 20))],
        )
    };
    assert!(
        run("agent_0", 70).conversation.is_empty(),
        "too large alone"
    );
    assert!(!run("agent_0", 1).conversation.is_empty());
    let kept = vec![run("agent_1", 40), run("agent_2", 40)];
    let bytes = encode_kept(kept).expect("fetchable");
    let fetched = Vec::<KeptRun>::from_wire(&bytes).unwrap();
    let ids: Vec<&str> = fetched.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["agent_2"]);
}

/// A run's result that says it completed.
fn done() -> subagents_messages::AgentResult {
    subagents_messages::AgentResult {
        text: "done".into(),
        outcome: subagents_messages::Outcome::Completed,
        model_calls: 1,
        tool_calls: 0,
        usage: subagents_messages::Usage::default(),
        children_usage: subagents_messages::Usage::default(),
        elapsed: Duration::ZERO,
    }
}

/// Another version (review: a host upgrading the library): a later
/// version's hello of another shape (a field added: wire v5's plans) was
/// read whole or not at all — no answer, asked again for 5 s, then said
/// to be an *earlier* version. Its version is read first.
#[test]
fn a_later_versions_grown_hello_is_read_for_its_version() {
    let grown = (WIRE_VERSION + 1, 1u64, 0u64, 9u64).to_wire().unwrap();
    let later = WIRE_VERSION + 1;
    assert!(matches!(read_hello(&grown), Err(Unread::Version(v)) if v == later));
    let far = (300u32, 1u64, 0u64, 9u64).to_wire().unwrap();
    assert!(matches!(read_hello(&far), Err(Unread::Version(300))));
    // This version's, whole: read; cut short: not a hello.
    let ours = Hello {
        version: WIRE_VERSION,
        incarnation: 7,
        live: 2,
    };
    let bytes = ours.to_wire().unwrap();
    assert_eq!(read_hello(&bytes).unwrap().incarnation, 7);
    assert!(matches!(
        read_hello(&bytes[..bytes.len() - 1]),
        Err(Unread::Bytes(_))
    ));
    assert!(matches!(read_hello(&[]), Err(Unread::Bytes(_))));
}

/// Never yields (review: hostile or faulty peers, thirty-ninth session):
/// a fetch of the kept results copied and encoded the whole list inside
/// the host actor, which answers the heartbeats — a list of hundreds of
/// MiB, fetched a few times, held each `Hello` past its second, and three
/// in a row lost the node to every parent. Here the list is held (its
/// lock taken, as a long copy holds it): the host answers a `Hello` all
/// the same, and the fetch once the list is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::await_holding_lock)] // held on purpose: a copy that takes long
async fn a_fetch_of_the_kept_results_does_not_hold_the_heartbeat() {
    let kept: Kept = Arc::default();
    let gate = GateHandle::spawn(2).await.unwrap();
    let runner = NodeRunner::new(Vec::new(), ToolRegistry::new(), gate);
    let mut state = HostState::new("b".into(), runner, 77);
    state.kept = kept.clone();
    let (host, _) = Actor::spawn(None, NodeHost, state).await.unwrap();
    let held = lock(&kept);
    // The fetch first, the hello behind it in the host's mailbox.
    let (reply, fetched) = tokio::sync::oneshot::channel();
    host.cast(HostMsg::Kept(reply.into())).unwrap();
    let hello = hello_of(&host, "b", Duration::from_secs(5)).await;
    drop(held);
    assert!(hello.is_ok(), "the hello waited on the fetch: {hello:?}");
    use subagents_messages::codec::Wire;
    let fetched = Vec::<KeptRun>::from_wire(&fetched.await.unwrap()).unwrap();
    assert_eq!(fetched, Vec::new());
    host.stop(None);
}
