//! A `Spawn` whose answer is still awaited: dropped unread, the child it
//! made is not lost.

use subagents_messages::AgentId;

use crate::hub::error::Refused;
use crate::hub::msg::HubMsg;
use crate::hub::msg::sealed::HubInternal;
use ractor::ActorRef;

/// A `Spawn` whose answer is still awaited. Dropped unread (the caller's
/// turn was cut), a child already made is abandoned; a delegation call's
/// child not made yet is not made (the hub reads that its call was cut),
/// and a host's is abandoned by the hub when its reply finds nobody.
pub(super) struct PendingSpawn {
    pub(super) hub: ActorRef<HubMsg>,
    pub(super) rx: Option<tokio::sync::oneshot::Receiver<Result<AgentId, Refused>>>,
    pub(super) stop: bool,
}

impl Drop for PendingSpawn {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take()
            && let Some(Ok(id)) = unread_answer(&mut rx)
        {
            let _ = self.hub.cast(HubMsg::Internal(HubInternal::Abandoned {
                id,
                stop: self.stop,
            }));
        }
    }
}

/// The answer in `rx` nobody read, if one came; closed first, so an answer
/// sent after this look fails to send (its sender then knows nobody took
/// it) rather than dropped unread with `rx` — the hub, on another worker,
/// could send between a bare `try_recv` and the drop, and neither side
/// abandoned the child.
fn unread_answer<T>(rx: &mut tokio::sync::oneshot::Receiver<T>) -> Option<T> {
    rx.close();
    rx.try_recv().ok()
}

#[cfg(test)]
mod tests {
    use super::unread_answer;

    /// Same instant, across workers: the hub's reply to a spawn sent just
    /// after the requester's cut turn looked for it (and before the
    /// receiver was dropped) was taken by the channel and dropped with
    /// it: the child was neither abandoned by the requester nor by the
    /// hub, whose send had succeeded — not in the background, never
    /// stopped, its result never delivered. After the look, a send fails.
    #[test]
    fn an_answer_sent_after_the_look_is_refused_not_lost() {
        let (tx, mut rx) = tokio::sync::oneshot::channel::<u32>();
        assert_eq!(unread_answer(&mut rx), None);
        assert_eq!(tx.send(1), Err(1), "taken by a receiver nobody reads");
        let (tx, mut rx) = tokio::sync::oneshot::channel::<u32>();
        tx.send(2).unwrap();
        assert_eq!(unread_answer(&mut rx), Some(2));
    }
}
