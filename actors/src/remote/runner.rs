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
use answers::{Answering, Answers};

/// Where a run's reports go (the transport sends them to the parent's
/// node).
type Out = Arc<dyn Fn(RunReport) + Send + Sync>;

/// A run's next report number, held while the report is handed on: the
/// reports leave in the order of their numbers whatever task sends them.
type Seq = Arc<std::sync::Mutex<u64>>;

/// Runs children for other nodes on this node's models, tools and gate.
/// Cheap to clone; clones share the runs — give each node a runner of its
/// own: a node's shutdown stops every run of its runner, and the load it
/// tells its peers is the runner's.
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
    /// The runtime it was made on: its tasks run there, so a transport
    /// may hand it starts and requests from a thread outside it.
    runtime: Option<tokio::runtime::Handle>,
    /// Made outside one: the last runtime a call came from, for a call
    /// from a plain thread after it.
    last: Mutex<Option<tokio::runtime::Handle>>,
}

impl Inner {
    /// Spawns `task` on its runtime, else the caller's (kept for a plain
    /// thread's call after it); `false` when
    /// there is neither (made and called outside one: `tokio::spawn`
    /// panicked in the transport's thread, the run's slot counted live).
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) -> bool {
        let runtime = match (&self.runtime, tokio::runtime::Handle::try_current()) {
            (Some(runtime), _) => runtime.clone(),
            // The caller's, kept: a request from a plain thread after it
            // (a message's `Steered`) had nowhere to run, and its report
            // was lost. The latest: one kept for good may be gone, and a
            // task spawned there is dropped unrun.
            (None, Ok(current)) => {
                let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
                last.insert(current).clone()
            }
            (None, Err(_)) => {
                let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
                match last.as_ref() {
                    Some(runtime) => runtime.clone(),
                    None => return false,
                }
            }
        };
        drop(runtime.spawn(task));
        true
    }
}

struct Run {
    /// Its agent, once spawned and every request that came before it
    /// handed on; requests until then wait in `pending`, in order.
    agent: Option<AgentHandle>,
    pending: Vec<RunRequest>,
    key: u64,
    out: Out,
    seq: Seq,
    /// Its answers to messages not sent yet: its `Ended` waits for them.
    answers: Arc<Answers>,
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
    /// Made inside a runtime (as `gate` was), its runs go on there, and
    /// [`NodeRunner::start`] and [`NodeRunner::request`] may be called
    /// from any thread; made outside one, they run on the caller's runtime
    /// (a plain thread's, on the last one a call came from), and a start
    /// before any from outside one is refused (its `Refused` report says
    /// so).
    pub fn new(models: Vec<Arc<dyn Model>>, tools: ToolRegistry, gate: GateHandle) -> Self {
        Self {
            inner: Arc::new(Inner {
                models,
                tools,
                gate,
                runs: Mutex::new(HashMap::new()),
                next: AtomicU64::new(0),
                runtime: tokio::runtime::Handle::try_current().ok(),
                last: Mutex::default(),
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
                answers: Arc::default(),
            },
        );
        let runner = self.clone();
        let (key, refused_to, refused_seq) = (spec.key, out.clone(), seq.clone());
        let spawned = self.inner.spawn(async move {
            if let Err(why) = runner.spawn(slot, spec, out.clone(), seq.clone()).await {
                runner.runs().remove(&slot);
                send(&out, &seq, key, ReportBody::Refused(why));
            }
        });
        if !spawned {
            self.runs().remove(&slot);
            let why = "this node's runner was made outside a tokio runtime and is called from \
                outside one: it has nowhere to run the child";
            send(
                &refused_to,
                &refused_seq,
                key,
                ReportBody::Refused(why.into()),
            );
        }
        slot
    }

    async fn spawn(&self, slot: u64, spec: RunSpec, out: Out, seq: Seq) -> Result<(), String> {
        // Checked as a host's agent is: a peer's spec (any holder of the
        // cookie) ran with options no agent here is spawned with, or no
        // model call at all. A spent token budget or wall clock is no
        // such thing: a waiting requester's cap ran out (it ends at once
        // with its partial result, as a child started here does).
        crate::agent::check_options(&spec.options).map_err(|e| e.to_string())?;
        if spec.limits.max_model_calls == 0 {
            return Err("the limit `max_model_calls` is 0: the run could do nothing".to_owned());
        }
        let model = self
            .inner
            .models
            .iter()
            .find(|m| m.name() == spec.model)
            .cloned()
            .ok_or_else(|| {
                // What it has stays here (a log line): the refusal reaches
                // the asking node's model, and so its provider — another
                // host's whole registry, tools it was never given.
                let known: Vec<&str> = self.inner.models.iter().map(|m| m.name()).collect();
                tracing::warn!(model = %spec.model, has = ?known, "a run asked for a model this node lacks");
                format!("no model `{}` on this node", spec.model)
            })?;
        let missing: Vec<&str> = (spec.tools.iter())
            .filter(|t| !self.inner.tools.contains(t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            tracing::warn!(?missing, has = ?self.inner.tools.names(), "a run asked for tools this node lacks");
            return Err(format!("no tool `{}` on this node", missing.join("`, `")));
        }
        let tools = (self.inner.tools)
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
            delegation_denied: false,
            approvals: None,
            approvals_recheck: false,
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
        let (conversation, after) = (spec.conversation, spec.approvals_after);
        let agent =
            crate::agent::spawn_numbered(Arc::new(config), events, conversation, None, after)
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
                let to = (
                    run.out.clone(),
                    run.seq.clone(),
                    run.key,
                    run.answers.clone(),
                );
                (std::mem::take(&mut run.pending), to)
            };
            for request in pending {
                deliver(&agent, &to, request, &self.inner);
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
        let ran = self.runs().remove(&slot);
        agent.shutdown();
        // Its answers on messages first: a message it took is said taken
        // before its end.
        if let Some(ran) = ran {
            ran.answers.all_sent().await;
        }
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
            (
                agent,
                (
                    run.out.clone(),
                    run.seq.clone(),
                    run.key,
                    run.answers.clone(),
                ),
            )
        };
        deliver(&agent, &to, request, &self.inner);
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
///
/// A transport whose `out` panics (an `expect` on a closed link, a
/// `to_wire().unwrap()` on a report past the codec's limit) loses that
/// report, not the run: unwound in the run's task, it skipped the run's
/// end — its agent lived on, `live` counted it for good, no `Ended` went
/// out. The number is spent, so the parent's node reads a gap.
fn send(out: &Out, seq: &Seq, key: u64, body: ReportBody) {
    let mut next = seq
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let report = RunReport {
        key,
        seq: *next,
        body,
    };
    *next += 1;
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| out(report))) {
        crate::panics::dispose(panic);
        tracing::warn!(
            key,
            seq = *next - 1,
            "the transport panicked on a run's report: lost"
        );
    }
}

/// Where a run's reports go: the transport, its next number, its key.
type To = (Out, Seq, u64, Arc<Answers>);

/// Hands `request` to a run's agent (the reply is awaited elsewhere).
fn deliver(agent: &AgentHandle, to: &To, request: RunRequest, tasks: &Inner) {
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
            tasks.spawn(async move {
                if let Ok(Err(ApprovalRefusal::Unknown(_))) = answered.await {
                    tracing::debug!("an approval answer for a run that never asked");
                }
            });
        }
        RunRequest::Steer { n, text } => {
            let (out, seq, key) = (to.0.clone(), to.1.clone(), to.2);
            // Counted before the message reaches the agent: counted after,
            // a turn that took it and ended on another worker sent its
            // `Ended` first. Done as the task ends — or is dropped unrun
            // (a runtime gone): the end never waits for ever.
            let sending = Answering::begin(&to.3);
            let (reply, answer) = tokio::sync::oneshot::channel();
            let _ = agent.actor_ref().cast(AgentMsg::Steer {
                text,
                asking: crate::agent::CallSlot::default(),
                reply: reply.into(),
            });
            tasks.spawn(async move {
                let taken = answer.await.is_ok_and(|answer| answer.is_ok());
                send(&out, &seq, key, ReportBody::Steered { n, taken });
                drop(sending);
            });
        }
    }
}

mod answers;
#[cfg(test)]
mod tests;
