//! The node side: runs children for other nodes. Each [`RunSpec`] becomes
//! a local agent on this node's models, tools and gate; everything it
//! emits goes back numbered, then its result and conversation. The
//! transport (a node host actor over ractor_cluster, or a loopback in
//! tests) only carries bytes between a [`NodeLink`](crate::NodeLink) and
//! this.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use subagents_messages::remote::{ReportBody, RunReport, RunRequest, RunSpec};
use subagents_messages::{AgentEvent, ApprovalRefusal, ChatMessage};

use crate::agent::{AgentConfig, AgentError, AgentHandle, AgentMsg, Probe, TurnReply, UserTurn};
use crate::gate::GateHandle;
use crate::model::Model;
use crate::sink::EventSink;
use crate::tool::ToolRegistry;

/// Where a run's reports go (the transport sends them to the parent's
/// node).
type Out = Arc<dyn Fn(RunReport) + Send + Sync>;

/// A run's next report number, held while the report is handed on: the
/// reports leave in the order of their numbers whatever task sends them.
type Seq = Arc<std::sync::Mutex<u64>>;

/// Runs children for other nodes on this node's models, tools and gate.
/// Cheap to clone; clones share the runs.
#[derive(Clone)]
pub struct NodeRunner {
    inner: Arc<Inner>,
}

struct Inner {
    models: Vec<Arc<dyn Model>>,
    tools: ToolRegistry,
    gate: GateHandle,
    runs: Mutex<HashMap<u64, Run>>,
    next: AtomicU64,
}

struct Run {
    /// Its agent, once spawned and every request that came before it
    /// handed on; requests until then wait in `pending`, in order.
    agent: Option<AgentHandle>,
    pending: Vec<RunRequest>,
    key: u64,
    out: Out,
    seq: Seq,
}

impl std::fmt::Debug for NodeRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRunner")
            .field("tools", &self.inner.tools)
            .field("live", &self.live())
            .finish_non_exhaustive()
    }
}

impl NodeRunner {
    /// Runs children on `models` (a run names its model; the first serves
    /// a run whose model is none of them only if its name matches), with
    /// `tools`, every model call through `gate` (one gate per node).
    pub fn new(models: Vec<Arc<dyn Model>>, tools: ToolRegistry, gate: GateHandle) -> Self {
        Self {
            inner: Arc::new(Inner {
                models,
                tools,
                gate,
                runs: Mutex::new(HashMap::new()),
                next: AtomicU64::new(0),
            }),
        }
    }

    /// How many runs are live on this node now.
    pub fn live(&self) -> usize {
        self.runs().len()
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Run>> {
        self.inner
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts `spec`; its reports go to `out`, numbered from 0, ending
    /// with `Ended` (or `Refused` when this node lacks its model or a
    /// tool). Returns at once (the run goes on in a task) with the run's
    /// number on this node, which its requests name
    /// ([`NodeRunner::request`]). Numbers are never reused: two parents'
    /// runs of the same key are two numbers.
    pub fn start(&self, spec: RunSpec, out: impl Fn(RunReport) + Send + Sync + 'static) -> u64 {
        let out: Out = Arc::new(out);
        let seq = Seq::default();
        let slot = self.inner.next.fetch_add(1, Ordering::Relaxed);
        self.runs().insert(
            slot,
            Run {
                agent: None,
                pending: Vec::new(),
                key: spec.key,
                out: out.clone(),
                seq: seq.clone(),
            },
        );
        let runner = self.clone();
        tokio::spawn(async move {
            let key = spec.key;
            if let Err(why) = runner.spawn(slot, spec, out.clone(), seq.clone()).await {
                runner.runs().remove(&slot);
                send(&out, &seq, key, ReportBody::Refused(why));
            }
        });
        slot
    }

    async fn spawn(&self, slot: u64, spec: RunSpec, out: Out, seq: Seq) -> Result<(), String> {
        let model = self
            .inner
            .models
            .iter()
            .find(|m| m.name() == spec.model)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = self.inner.models.iter().map(|m| m.name()).collect();
                format!(
                    "no model `{}` on this node (it has: {})",
                    spec.model,
                    known.join(", ")
                )
            })?;
        let tools = self
            .inner
            .tools
            .subset(&spec.tools)
            .map_err(|e| format!("{e} on this node"))?;
        let probe = Probe::default();
        let config = AgentConfig {
            id: spec.id.clone(),
            system_prompt: spec.system_prompt,
            model,
            gate: self.inner.gate.clone(),
            tool_names: tools.shared_names(),
            tools,
            limits: spec.limits,
            depth: spec.depth,
            approvals: None,
            options: spec.options,
            probe: Some(probe.clone()),
            on_killed: None,
            // Its requester runs on another node, whose proxy span says
            // how it was requested: this node's own run is `node` (it
            // recorded "", outside the documented values).
            trace: crate::agent::spans::TraceParent {
                mode: "node",
                ..Default::default()
            },
        };
        let (events, mut stream) = EventSink::channel();
        let agent = crate::agent::spawn_agent(Arc::new(config), events, spec.conversation, None)
            .await
            .map_err(|e: AgentError| e.to_string())?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        agent
            .actor_ref()
            .cast(AgentMsg::Turn {
                turn: UserTurn {
                    text: spec.input,
                    followups: spec.followups,
                    follows: None,
                    parent: None,
                },
                reply: Some(TurnReply::Port(tx.into())),
            })
            .map_err(|_| "its agent stopped before it started".to_owned())?;
        let key = spec.key;
        // What came before the agent, in order; the agent is set only once
        // none is left, so a request arriving meanwhile waits behind them
        // (set first, a `Stop` that came then was cast at once and
        // overtook a `Steer` sent before it: the message read "finished").
        loop {
            let (pending, to) = {
                let mut runs = self.runs();
                let Some(run) = runs.get_mut(&slot) else {
                    break;
                };
                if run.pending.is_empty() {
                    run.agent = Some(agent.clone());
                    break;
                }
                let to = (run.out.clone(), run.seq.clone(), run.key);
                (std::mem::take(&mut run.pending), to)
            };
            for request in pending {
                deliver(&agent, &to, request);
            }
        }
        // Every event, up to and with its `Result`, then the end.
        let mut streamed = None;
        while let Some(event) = stream.recv().await {
            if let AgentEvent::Result(result) = &event {
                streamed = Some(result.as_ref().clone());
            }
            send(&out, &seq, key, ReportBody::Event(event));
            if streamed.is_some() {
                break;
            }
        }
        // An agent killed mid-turn (a crash, not a stop) puts its failed
        // `Result` on the stream but drops the turn's reply: the run still
        // ends, with that result.
        let result = rx.await.ok().or(streamed).unwrap_or_else(|| {
            let text = "the run's agent stopped before it reported a result";
            crate::agent::nothing_done(text, subagents_messages::Outcome::Failed(text.to_owned()))
        });
        self.runs().remove(&slot);
        agent.shutdown();
        let conversation: Vec<ChatMessage> = probe
            .conversation_at_end()
            .map(Arc::unwrap_or_clone)
            .unwrap_or_default();
        send(
            &out,
            &seq,
            key,
            ReportBody::Ended {
                result,
                conversation,
            },
        );
        Ok(())
    }

    /// Run number `run` ended (or never started): its last report is sent.
    pub fn ended(&self, run: u64) -> bool {
        !self.runs().contains_key(&run)
    }

    /// Carries a request from the parent's node to run number `run`
    /// (ignored once it ended: its last report says so).
    pub fn request(&self, run: u64, request: RunRequest) {
        let slot = run;
        let (agent, to) = {
            let mut runs = self.runs();
            let Some(run) = runs.get_mut(&slot) else {
                return;
            };
            let Some(agent) = run.agent.clone() else {
                run.pending.push(request);
                return;
            };
            (agent, (run.out.clone(), run.seq.clone(), run.key))
        };
        deliver(&agent, &to, request);
    }

    /// Stops every run on this node (its host is going away); each still
    /// reports its end.
    pub fn stop_all(&self) {
        let mut runs = self.runs();
        // In the order they started: nothing depends on a map's order.
        let mut slots: Vec<u64> = runs.keys().copied().collect();
        slots.sort_unstable();
        for slot in slots {
            let Some(run) = runs.get_mut(&slot) else {
                continue;
            };
            match &run.agent {
                Some(agent) => {
                    let _ = agent.stop_turn();
                }
                // Not spawned yet: stopped as soon as it is.
                None => run.pending.push(RunRequest::Stop),
            }
        }
    }
}

/// Hands on a run's next report. The number is taken and the report handed
/// on under one lock: numbered first and handed on apart, a `Steered`
/// from its task could leave after the run's `Ended` from another (on a
/// multi-threaded runtime), and a transport that ends a run's route at its
/// `Ended` dropped it — a gap the parent's node waited on for ever.
fn send(out: &Out, seq: &Seq, key: u64, body: ReportBody) {
    let mut next = seq
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    out(RunReport {
        key,
        seq: *next,
        body,
    });
    *next += 1;
}

/// Where a run's reports go: the transport, its next number, its key.
type To = (Out, Seq, u64);

/// Hands `request` to a run's agent (the reply is awaited elsewhere).
fn deliver(agent: &AgentHandle, to: &To, request: RunRequest) {
    match request {
        RunRequest::Stop => {
            let _ = agent.stop_turn();
        }
        // Each request reaches the agent's mailbox here, in the order
        // the requests came (a `Stop` cast after an `Approve` sent from
        // a task of its own overtook it: an answer the parent's node
        // was told was taken read `Cancelled`); only the replies are
        // awaited elsewhere.
        RunRequest::Approve {
            id: approval,
            decision,
        } => {
            let (reply, answered) = tokio::sync::oneshot::channel();
            let _ = agent.actor_ref().cast(AgentMsg::ResolveApproval {
                id: approval,
                decision,
                reply: reply.into(),
            });
            tokio::spawn(async move {
                if let Ok(Err(ApprovalRefusal::Unknown(_))) = answered.await {
                    tracing::debug!("an approval answer for a run that never asked");
                }
            });
        }
        RunRequest::Steer { n, text } => {
            let (out, seq, key) = (to.0.clone(), to.1.clone(), to.2);
            let (reply, answer) = tokio::sync::oneshot::channel();
            let _ = agent.actor_ref().cast(AgentMsg::Steer {
                text,
                reply: reply.into(),
            });
            tokio::spawn(async move {
                let taken = answer.await.is_ok_and(|answer| answer.is_ok());
                send(&out, &seq, key, ReportBody::Steered { n, taken });
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use subagents_messages::{AgentId, Limits, Outcome, RequestOptions};

    use super::*;
    use crate::scripted::{Reply, ScriptedModel};

    fn spec() -> RunSpec {
        RunSpec {
            key: 1,
            id: AgentId::new("agent_1"),
            system_prompt: "Worker".into(),
            input: "go".into(),
            followups: Vec::new(),
            conversation: Vec::new(),
            model: "scripted".into(),
            tools: Vec::new(),
            limits: Limits::default(),
            depth: 1,
            options: RequestOptions::default(),
            keep_if_orphaned: true,
        }
    }

    /// The run's `Ended` result, failing if none comes within an hour of
    /// virtual time (a lost stop or end) or the reports end without one.
    async fn ended_of(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<RunReport>,
    ) -> subagents_messages::AgentResult {
        tokio::time::timeout(Duration::from_secs(3600), async {
            while let Some(report) = rx.recv().await {
                if let ReportBody::Ended { result, .. } = report.body {
                    return Some(result);
                }
            }
            None
        })
        .await
        .expect("the run never ended")
        .expect("its reports ended without an end")
    }

    /// Same instant: a node told to stop everything right after a start,
    /// before that run's agent exists, stops that run too (once spawned).
    #[tokio::test(start_paused = true)]
    async fn a_run_stopped_before_its_agent_exists_ends_stopped() {
        let model = ScriptedModel::new(vec![Reply::new().text("hi").hang()]).shared();
        let runner = NodeRunner::new(
            vec![model],
            ToolRegistry::new(),
            GateHandle::spawn(1).await.unwrap(),
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        runner.start(spec(), move |report| {
            let _ = tx.send(report);
        });
        runner.stop_all();
        let ended = ended_of(&mut rx).await;
        assert_eq!(ended.outcome, Outcome::Stopped);
        assert_eq!(runner.live(), 0);
    }

    /// Stopped midway: a run whose agent is killed mid-turn (no stop: a
    /// crash) still sends its `Ended`, with the failed result the agent's
    /// kill put on the stream. The agent drops its turn's reply then, and
    /// the run sent nothing more: the parent's node waited for ever.
    #[tokio::test(start_paused = true)]
    async fn a_run_whose_agent_is_killed_mid_turn_still_ends() {
        let model = ScriptedModel::new(vec![Reply::new().text("hi").hang()]).shared();
        let runner = NodeRunner::new(
            vec![model],
            ToolRegistry::new(),
            GateHandle::spawn(1).await.unwrap(),
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let slot = runner.start(spec(), move |report| {
            let _ = tx.send(report);
        });
        // Its first event: the agent is in its model call.
        let first = rx.recv().await.expect("a first report");
        assert!(matches!(first.body, ReportBody::Event(_)), "{first:?}");
        let agent = runner.runs().get(&slot).and_then(|run| run.agent.clone());
        agent.expect("spawned").actor_ref().kill();
        let ended = ended_of(&mut rx).await;
        assert!(matches!(ended.outcome, Outcome::Failed(_)), "{ended:?}");
        assert_eq!(runner.live(), 0);
    }

    /// Same instant, two workers (review: shared state): a message sent to
    /// a run before its agent existed waited, and was handed on after the
    /// agent was set — a stop that came in between was cast at once and
    /// overtook it: the message read "finished" though it came first. The
    /// agent is set once every earlier request is handed on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_as_the_agent_is_set_waits_behind_the_earlier_ones() {
        let model = ScriptedModel::new(vec![Reply::new().text("hi").hang()]).shared();
        let runner = NodeRunner::new(
            vec![model],
            ToolRegistry::new(),
            GateHandle::spawn(1).await.unwrap(),
        );
        for round in 0..2000 {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let slot = runner.start(spec(), move |report| {
                let _ = tx.send(report);
            });
            runner.request(
                slot,
                RunRequest::Steer {
                    n: 0,
                    text: "also".into(),
                },
            );
            while runner
                .runs()
                .get(&slot)
                .is_none_or(|run| run.agent.is_none())
            {
                std::hint::spin_loop();
            }
            runner.request(slot, RunRequest::Stop);
            // The message's answer and the run's end, in either order.
            let (taken, ended) = tokio::time::timeout(Duration::from_secs(60), async {
                let (mut taken, mut ended) = (None, false);
                while let Some(report) = rx.recv().await {
                    match report.body {
                        ReportBody::Steered { taken: t, .. } => taken = Some(t),
                        ReportBody::Ended { .. } => ended = true,
                        _ => {}
                    }
                    if taken.is_some() && ended {
                        break;
                    }
                }
                (taken, ended)
            })
            .await
            .expect("no answer to the message, or no end");
            assert_eq!(taken, Some(true), "round {round}: the stop overtook it");
            assert!(ended, "round {round}: the run never ended");
        }
    }

    /// Shared: reports sent from two threads at once leave in the order of
    /// their numbers (a transport may end a run's route at its `Ended`, so
    /// a lower number behind it would be lost).
    #[test]
    fn reports_from_two_threads_leave_in_number_order() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let out: Out = {
            let seen = seen.clone();
            Arc::new(move |report: RunReport| seen.lock().unwrap().push(report.seq))
        };
        let seq = Seq::default();
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let (out, seq) = (out.clone(), seq.clone());
                std::thread::spawn(move || {
                    for n in 0..20_000 {
                        send(&out, &seq, 1, ReportBody::Steered { n, taken: true });
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().unwrap();
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 40_000);
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "out of order");
    }
}
