//! A node in this process, reached through bytes: every spec, request
//! and report goes through the wire codec to a `NodeRunner` — the seam
//! the ractor_cluster transport uses (tests/remote.rs, the property test).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use subagents::actors::{Model, NodeLink, NodeRunner, RunReports, ToolRegistry};
use subagents::messages::codec::Wire;
use subagents::messages::remote::{ReportBody, RunReport, RunRequest, RunSpec};
use subagents::messages::{AgentEvent, AgentId, ApprovalId};
use subagents::prelude::GateHandle;

/// A node in this process, reached through bytes.
pub struct Loopback {
    pub name: String,
    pub runner: NodeRunner,
    pub runs: Mutex<HashMap<u64, (RunReports, u64)>>,
    pub down: Arc<AtomicBool>,
    /// Runs started on it.
    pub started: AtomicUsize,
    /// The node is lost in the gap between a run's `Result` event and its
    /// `Ended` report (the `Ended` never arrives).
    pub lost_before_ended: Arc<AtomicBool>,
    /// The node cannot send a run's next event (over the wire's limit):
    /// it goes as `Refused` under the same number, as the cluster's host
    /// sends it, and the flag clears.
    pub refuse_next_event: Arc<AtomicBool>,
    /// The node sends a run's `Ended` without its conversation (as the
    /// cluster's host does for one over the wire's limit).
    pub strip_conversation: Arc<AtomicBool>,
    /// The node asks each approval in this agent's name, not its child's
    /// (a node that lies).
    pub approvals_named: Arc<Mutex<Option<String>>>,
    /// The node sends nothing of a run's turn after its first
    /// `ToolStarted` but its `Ended` (numbered on, no gap): a node that
    /// ends a run without its `ToolResult` or `Result` (a node that lies).
    pub end_after_tool_started: Arc<AtomicBool>,
    /// The node sends each approval request inside a `Child` event, as a
    /// sub-agent's (a node that lies: its child starts none).
    pub nest_approvals: Arc<AtomicBool>,
    /// The node answers each tool call under another id (`ghost`): a
    /// `ToolResult` for a call never started (a node that lies).
    pub misname_tool_results: Arc<AtomicBool>,
    /// The node's next event report is never delivered (a transport that
    /// dropped it, undecodable): a gap the reports after it wait behind.
    pub drop_next_event: Arc<AtomicBool>,
    /// The node cuts a run's turn just before an approval's answer
    /// reaches its agent (its wall clock ran out in that instant): the
    /// answer comes too late.
    pub cut_before_approve: Arc<AtomicBool>,
    /// The node never receives an approval's answer (lost on its way): it
    /// waits on its node's word until the node is lost.
    pub lose_approvals: Arc<AtomicBool>,
    /// The node's `Ended` report takes a second longer than its other
    /// reports (a network hop): its `Result` event is read first.
    pub slow_ended: Arc<AtomicBool>,
    /// A message's verdict (`Steered { taken }`) reaches the proxy after
    /// the turn's `Steered` event that read it (the node's verdict goes
    /// from a task of its own, and the turn can read the message first):
    /// the reports between and the event take the verdict's number, it
    /// the event's; the two come a second after the event was sent.
    pub verdict_after_read: Arc<AtomicBool>,
    /// With `verdict_after_read`: the verdict never comes (lost on its
    /// way); the event that read the message does, at once.
    pub lose_verdict_after_read: Arc<AtomicBool>,
    /// Its labels, for `Placement::Labels`.
    pub labels: Vec<String>,
    /// The node never receives a stop (lost on its way): its run goes on.
    pub lose_stops: Arc<AtomicBool>,
    /// A run's `Ended` report is never delivered; the node stays up.
    pub drop_ended: Arc<AtomicBool>,
    /// No report of a run is delivered; the node stays up.
    pub silent: Arc<AtomicBool>,
    /// `request` and `start` panic (a transport that `expect`s a send on
    /// a link that is down, where the trait asks for `Err`).
    pub panics: Arc<AtomicBool>,
    /// Its panics are [`super::Bomb`]s (a payload whose drop panics).
    pub bombs: Arc<AtomicBool>,
}

impl Loopback {
    /// `request` and `start`: panics when told to (see `panics`).
    fn panic_if_told(&self) {
        if self.panics.load(Ordering::SeqCst) {
            if self.bombs.load(Ordering::SeqCst) {
                super::explode();
            }
            panic!("the link is down");
        }
    }

    /// Node `name` running children on `model`, the demo's `sleep` and
    /// `http_post`, and a gate of its own.
    pub async fn new(name: &str, model: Arc<dyn Model>) -> Arc<Self> {
        let gate = GateHandle::spawn(1).await.unwrap();
        Self::with_gate(name, model, gate)
    }

    /// Node `name` with `labels`, as `new` otherwise.
    pub async fn labelled(name: &str, model: Arc<dyn Model>, labels: &[&str]) -> Arc<Self> {
        let node = Self::new(name, model).await;
        let mut node = Arc::try_unwrap(node).ok().unwrap();
        node.labels = labels.iter().map(|l| (*l).to_owned()).collect();
        Arc::new(node)
    }

    /// The same, its model calls through `gate`.
    pub fn with_gate(name: &str, model: Arc<dyn Model>, gate: GateHandle) -> Arc<Self> {
        let tools = ToolRegistry::new()
            .with(subagents_demo::Sleep)
            .with(subagents_demo::Post);
        Self::with_tools(name, model, tools, gate)
    }

    /// The same, with `tools` for its children.
    pub fn with_tools(
        name: &str,
        model: Arc<dyn Model>,
        tools: ToolRegistry,
        gate: GateHandle,
    ) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            runner: NodeRunner::new(vec![model], tools, gate),
            runs: Mutex::new(HashMap::new()),
            down: Arc::new(AtomicBool::new(false)),
            started: AtomicUsize::new(0),
            lost_before_ended: Arc::new(AtomicBool::new(false)),
            refuse_next_event: Arc::new(AtomicBool::new(false)),
            strip_conversation: Arc::new(AtomicBool::new(false)),
            approvals_named: Arc::new(Mutex::new(None)),
            end_after_tool_started: Arc::new(AtomicBool::new(false)),
            nest_approvals: Arc::new(AtomicBool::new(false)),
            misname_tool_results: Arc::new(AtomicBool::new(false)),
            drop_next_event: Arc::new(AtomicBool::new(false)),
            cut_before_approve: Arc::new(AtomicBool::new(false)),
            lose_approvals: Arc::new(AtomicBool::new(false)),
            slow_ended: Arc::new(AtomicBool::new(false)),
            verdict_after_read: Arc::new(AtomicBool::new(false)),
            lose_verdict_after_read: Arc::new(AtomicBool::new(false)),
            labels: Vec::new(),
            lose_stops: Arc::new(AtomicBool::new(false)),
            drop_ended: Arc::new(AtomicBool::new(false)),
            silent: Arc::new(AtomicBool::new(false)),
            panics: Arc::new(AtomicBool::new(false)),
            bombs: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The link breaks and the node does not know it (a partition): the
    /// link says every run it had is lost, and the node's runs go on, as
    /// runs a node keeps for a parent it lost do.
    pub fn partition(&self) {
        self.down.store(true, Ordering::SeqCst);
        let mut runs: Vec<_> = self.runs.lock().unwrap().drain().collect();
        runs.sort_unstable_by_key(|(key, _)| *key);
        for (_, (reports, _)) in runs {
            reports.lost("the connection to it was reset");
        }
    }

    /// The node dies: nothing more comes from it, and the link says so
    /// for every run it had.
    pub fn kill(&self) {
        self.down.store(true, Ordering::SeqCst);
        self.runner.stop_all();
        let mut runs: Vec<_> = self.runs.lock().unwrap().drain().collect();
        runs.sort_unstable_by_key(|(key, _)| *key);
        for (_, (reports, _)) in runs {
            reports.lost("the connection to it was reset");
        }
    }
}

impl NodeLink for Loopback {
    fn node(&self) -> &str {
        &self.name
    }

    fn live(&self) -> Option<usize> {
        Some(self.runner.live())
    }

    fn labels(&self) -> &[String] {
        &self.labels
    }

    fn is_lost(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    fn start(&self, spec: RunSpec, reports: RunReports) -> Result<(), String> {
        self.panic_if_told();
        if self.down.load(Ordering::SeqCst) {
            return Err("it is down".into());
        }
        let spec = RunSpec::from_wire(&spec.to_wire().map_err(|e| e.to_string())?).unwrap();
        self.started.fetch_add(1, Ordering::SeqCst);
        let key = spec.key;
        let down = self.down.clone();
        let lost_before_ended = self.lost_before_ended.clone();
        let refuse_next_event = self.refuse_next_event.clone();
        let strip_conversation = self.strip_conversation.clone();
        let approvals_named = self.approvals_named.clone();
        let end_after_tool_started = self.end_after_tool_started.clone();
        let nest_approvals = self.nest_approvals.clone();
        let misname_tool_results = self.misname_tool_results.clone();
        let drop_next_event = self.drop_next_event.clone();
        let slow_ended = self.slow_ended.clone();
        let drop_ended = self.drop_ended.clone();
        let silent = self.silent.clone();
        let verdict_after_read = self.verdict_after_read.clone();
        let lose_verdict = self.lose_verdict_after_read.clone();
        let held_verdict: Mutex<Option<RunReport>> = Mutex::new(None);
        // (a `ToolStarted` went by, reports dropped since)
        let skipping: Mutex<(bool, u64)> = Mutex::new((false, 0));
        let to_proxy = reports.clone();
        let run = self.runner.start(spec, move |mut report| {
            let reports = &to_proxy;
            if down.load(Ordering::SeqCst) || silent.load(Ordering::SeqCst) {
                return;
            }
            if drop_ended.load(Ordering::SeqCst) && matches!(report.body, ReportBody::Ended { .. })
            {
                return;
            }
            if end_after_tool_started.load(Ordering::SeqCst) {
                let mut skipping = skipping.lock().unwrap();
                report.seq -= skipping.1;
                if skipping.0 && matches!(report.body, ReportBody::Event(_)) {
                    skipping.1 += 1;
                    return;
                }
                if matches!(report.body, ReportBody::Event(AgentEvent::ToolStarted(_))) {
                    skipping.0 = true;
                }
            }
            if let ReportBody::Ended { conversation, .. } = &mut report.body
                && strip_conversation.load(Ordering::SeqCst)
            {
                conversation.clear();
            }
            if let ReportBody::Event(AgentEvent::ApprovalRequested(request)) = &mut report.body
                && let Some(owner) = approvals_named.lock().unwrap().as_ref()
            {
                request.id = ApprovalId::for_agent(&AgentId::new(owner.as_str()), 1);
            }
            if matches!(report.body, ReportBody::Event(_))
                && drop_next_event.swap(false, Ordering::SeqCst)
            {
                return;
            }
            if let ReportBody::Event(AgentEvent::ToolResult(result)) = &mut report.body
                && misname_tool_results.load(Ordering::SeqCst)
            {
                result.tool_use_id = subagents::messages::ToolUseId::new("ghost");
            }
            if let ReportBody::Event(event) = &mut report.body
                && matches!(event, AgentEvent::ApprovalRequested(_))
                && nest_approvals.load(Ordering::SeqCst)
            {
                let asked = std::mem::replace(event, AgentEvent::SwitchedAway);
                *event = AgentEvent::Child(AgentId::new("agent_9"), Box::new(asked));
            }
            if matches!(report.body, ReportBody::Event(_))
                && refuse_next_event.swap(false, Ordering::SeqCst)
            {
                report.body = ReportBody::Refused("a report of the run could not be sent".into());
            }
            if lost_before_ended.load(Ordering::SeqCst)
                && matches!(report.body, ReportBody::Ended { .. })
            {
                reports.lost("the connection to it was reset");
                return;
            }
            let bytes = report.to_wire().unwrap();
            if slow_ended.load(Ordering::SeqCst) && matches!(report.body, ReportBody::Ended { .. })
            {
                let reports = reports.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    reports.report(RunReport::from_wire(&bytes).unwrap());
                });
                return;
            }
            let mut report = match RunReport::from_wire(&bytes) {
                Ok(report) => report,
                Err(e) => return reports.lost(e.to_string()),
            };
            if verdict_after_read.load(Ordering::SeqCst) {
                let mut held = held_verdict.lock().unwrap();
                if matches!(report.body, ReportBody::Steered { .. }) {
                    *held = Some(report);
                    return;
                }
                if let Some(verdict) = held.as_mut() {
                    std::mem::swap(&mut report.seq, &mut verdict.seq);
                    if matches!(report.body, ReportBody::Event(AgentEvent::Steered(_)))
                        && lose_verdict.load(Ordering::SeqCst)
                    {
                        held.take();
                        reports.report(report);
                        return;
                    }
                    if matches!(report.body, ReportBody::Event(AgentEvent::Steered(_))) {
                        // A second later (a hop): what came before is
                        // handled (written) first.
                        let (reports, verdict) = (reports.clone(), held.take().unwrap());
                        tokio::spawn(async move {
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                            reports.report(report);
                            reports.report(verdict);
                        });
                        return;
                    }
                }
            }
            reports.report(report);
        });
        self.runs.lock().unwrap().insert(key, (reports, run));
        Ok(())
    }

    fn request(&self, key: u64, request: RunRequest) -> Result<(), String> {
        self.panic_if_told();
        if self.down.load(Ordering::SeqCst) {
            return Err("it is down".into());
        }
        // As the cluster's link: a request over the wire's limit is not
        // sent (an error, the node untouched).
        let request =
            RunRequest::from_wire(&request.to_wire().map_err(|e| e.to_string())?).unwrap();
        if matches!(request, RunRequest::Approve { .. })
            && self.lose_approvals.load(Ordering::SeqCst)
        {
            return Ok(());
        }
        if matches!(request, RunRequest::Stop) && self.lose_stops.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some((_, run)) = self.runs.lock().unwrap().get(&key) {
            if matches!(request, RunRequest::Approve { .. })
                && self.cut_before_approve.load(Ordering::SeqCst)
            {
                self.runner.request(*run, RunRequest::Stop);
            }
            self.runner.request(*run, request);
        }
        Ok(())
    }
}
