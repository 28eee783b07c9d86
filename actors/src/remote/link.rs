//! The seam between the hub and a transport: a [`NodeLink`] starts a run
//! on its node and carries requests to it; the transport hands what the
//! node reports to [`RunReports`], which puts it back in order on the
//! parent's side.

use std::sync::Arc;

use ractor::ActorRef;
use subagents_messages::remote::{RunReport, RunRequest, RunSpec};

use crate::agent::AgentMsg;
use crate::agent::sealed::AgentInternal;

/// Another node children may run on, as a transport reaches it. The
/// runtime calls it from actor handlers: no method may wait on the
/// network (send and return).
pub trait NodeLink: Send + Sync + 'static {
    /// The node's name (in envelopes' errors and logs).
    fn node(&self) -> &str;

    /// Its labels, for [`Placement::Labels`](crate::Placement::Labels).
    fn labels(&self) -> &[String] {
        &[]
    }

    /// How many children it runs now, as it last reported (for
    /// [`Placement::LeastLoaded`](crate::Placement::LeastLoaded)); `None`:
    /// unknown, it is not chosen over a node that reported.
    fn live(&self) -> Option<usize> {
        None
    }

    /// Whether it is known lost (its starts are refused from now on):
    /// [`Placement::Labels`](crate::Placement::Labels) passes over it for
    /// the next node with the label. `false` unless the transport says.
    fn is_lost(&self) -> bool {
        false
    }

    /// Starts `spec` on the node. Every report about it goes to
    /// `reports`, and if the node or the link is lost before the run's
    /// last report, [`RunReports::lost`] — within a bounded time the
    /// transport documents. `Err` (said in a sentence): it could not be
    /// sent at all.
    fn start(&self, spec: RunSpec, reports: RunReports) -> Result<(), String>;

    /// Carries `request` to run `key` ([`RunSpec::key`]). `Err`: it could
    /// not be sent (the node is gone).
    fn request(&self, key: u64, request: RunRequest) -> Result<(), String>;

    /// Run `key` has ended here: nothing the node still reports about it
    /// is read. A transport that keeps state per run (a route, a reorder
    /// buffer) lets go of it — the run may have ended without its node's
    /// last report (a gap or a silence past its grace, a start that never
    /// arrived), and that state was held until the node was lost, for a
    /// healthy node never. Called once as each run ends here, after any
    /// stop it sent; by default, nothing.
    fn forget(&self, key: u64) {
        let _ = key;
    }
}

/// Where a transport hands what a node reports about one run: to the
/// proxy that stands for the child on the parent's node. Reports may
/// arrive repeated or out of order; each is applied once, in order.
#[derive(Clone, Debug)]
pub struct RunReports {
    proxy: ActorRef<AgentMsg>,
}

impl RunReports {
    pub(crate) fn new(proxy: ActorRef<AgentMsg>) -> Self {
        Self { proxy }
    }

    /// A report from the node (decoded by the transport).
    pub fn report(&self, report: RunReport) {
        let _ = self
            .proxy
            .cast(AgentMsg::Internal(AgentInternal::Report(report)));
    }

    /// The node or the link to it is gone (`why`, a sentence): the run
    /// ends failed, its open calls answered, at once.
    pub fn lost(&self, why: impl Into<String>) {
        let _ = self
            .proxy
            .cast(AgentMsg::Internal(AgentInternal::Lost(why.into())));
    }
}

/// A transport's link whose `start` and `request` are read as `Err` when
/// they panic (an `expect` on a link that is down, where the trait asks
/// for `Err`). They run in the proxy's handlers and in its close — from
/// the hub's kill hook and the thread's supervision handler too: a panic
/// there crashed the proxy, lost the child's closing events (its open
/// call's `ToolResult`, its `Result`), or cut a kill's ordered ends short.
pub(crate) struct Guarded(pub(crate) Arc<dyn NodeLink>);

impl Guarded {
    fn call(&self, what: &str, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
            Err(format!(
                "the transport to `{}` panicked as {what}: {}",
                self.0.node(),
                crate::panics::panic_text(panic)
            ))
        })
    }
}

impl NodeLink for Guarded {
    fn node(&self) -> &str {
        self.0.node()
    }

    fn labels(&self) -> &[String] {
        self.0.labels()
    }

    fn live(&self) -> Option<usize> {
        self.0.live()
    }

    fn is_lost(&self) -> bool {
        self.0.is_lost()
    }

    fn start(&self, spec: RunSpec, reports: RunReports) -> Result<(), String> {
        self.call("a run was started", || self.0.start(spec, reports))
    }

    fn request(&self, key: u64, request: RunRequest) -> Result<(), String> {
        self.call("a request was sent", || self.0.request(key, request))
    }

    fn forget(&self, key: u64) {
        let _ = self.call("a run was forgotten", || {
            self.0.forget(key);
            Ok(())
        });
    }
}
