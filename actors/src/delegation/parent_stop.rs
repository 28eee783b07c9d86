//! A waiting delegation call's hold on its child: cut while it waits, the
//! child is handed on — detached or stopped, by the parent-stop policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use subagents_messages::AgentId;

use crate::agent::HandOn;
use crate::delegation::ParentStopPolicy;
use crate::hub::HubHandle;

/// Detaches (or stops) the child if the call is cut while it waits: by
/// the close that answers the cut call ([`OnParentStop::hand_on`]), else
/// when the waiting future is dropped — once, whichever comes first.
/// Handed on only as the cut task was dropped, on another worker, the
/// turn's end could reach the thread first: a wake queued after the
/// child's finish went out before it.
pub(super) struct OnParentStop(Arc<Handing>);

struct Handing {
    hub: HubHandle,
    id: AgentId,
    policy: ParentStopPolicy,
    /// Handed on, or disarmed: nothing more to do.
    done: AtomicBool,
}

impl Handing {
    fn run(&self) {
        if self.done.swap(true, Ordering::SeqCst) {
            return;
        }
        match self.policy {
            ParentStopPolicy::Detach => self.hub.detach_now(&self.id),
            ParentStopPolicy::Cascade => self.hub.cascade_now(&self.id),
        }
    }
}

impl OnParentStop {
    /// Armed: dropped, it detaches (or stops) `id` as `policy` says.
    pub(super) fn armed(hub: HubHandle, id: AgentId, policy: ParentStopPolicy) -> Self {
        Self(Arc::new(Handing {
            hub,
            id,
            policy,
            done: AtomicBool::new(false),
        }))
    }

    /// What a cut's close runs to hand the child on (nothing once done or
    /// disarmed).
    pub(super) fn hand_on(&self) -> HandOn {
        let handing = self.0.clone();
        HandOn(Arc::new(move || handing.run()))
    }

    /// From now on it does nothing, dropped or run by a close.
    pub(super) fn disarm(&self) {
        self.0.done.store(true, Ordering::SeqCst);
    }
}

impl Drop for OnParentStop {
    fn drop(&mut self) {
        self.0.run();
    }
}
