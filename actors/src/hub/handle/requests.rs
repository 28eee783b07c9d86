//! A child requested: by a host, or by a delegation tool on its turn's
//! behalf — sent when called, not when first polled.

use std::sync::Arc;

use subagents_messages::{AgentId, ChildRequest};

use crate::hub::HubHandle;
use crate::hub::error::Refused;
use crate::hub::msg::HubMsg;
use crate::hub::pending::PendingSpawn;

impl HubHandle {
    /// Requests a child; its id, or a sentence saying why not. If this
    /// future is dropped before it returns (the caller's turn was cut),
    /// the child is not lost: nobody learnt its id, so the hub abandons it
    /// — to the background, or stopped with `stop_if_abandoned`. Never
    /// [`Refused::UnknownChild`] (that is a stop's). A requester whose
    /// turn has ended is [`Refused::RequesterEnded`]; one still waiting in
    /// the queue [`Refused::RequesterNotStarted`]; one deeper than the
    /// maximum depth (the parent, at a depth of 0) [`Refused::TooDeep`];
    /// options no server takes [`Refused::Options`]; one naming a run to
    /// go on from (`resumed_from`: only a message resumes a finished
    /// child) [`Refused::ResumeRequested`]; one with an empty task
    /// (`input`) [`Refused::EmptyTask`].
    ///
    /// A host's child runs in the background whatever `background` says:
    /// waiting on a child is a delegation tool's, which a host cannot do,
    /// so an inline one (`ChildRequest::new`'s default) finished with its
    /// result delivered to nobody — no wake, never claimed. Asked in the
    /// parent's name, in a thread, its result wakes the parent as any
    /// background child's does; asked in a child's name it wakes nobody
    /// (wakes go to the parent only, and the child was never told the
    /// id): read it by its id ([`HubHandle::status`]), and it stops with
    /// that child if still running then. Its approvals follow
    /// `background_approvals` as any background child's do (`Ask`, the
    /// default, asks the host).
    ///
    /// Sent when called, not when first polled (as [`HubHandle::stop`]):
    /// a request made before a switch away is stopped by it (sent at the
    /// first poll, after the switch, its child ran on unswitched).
    pub fn request(
        &self,
        mut request: ChildRequest,
    ) -> impl std::future::Future<Output = Result<AgentId, Refused>> + Send + 'static + use<> {
        request.background = true;
        // Under the host's span, or a trace of its own: never the
        // library's current one where a host's callback (an observer, a
        // ractor host's handler) called this — the hub's `Actor` span or
        // another child's run, held open for this child's life.
        let span = crate::agent::sender_span().unwrap_or_else(tracing::Span::none);
        // The tool's future itself, not one around it: a second layer
        // copied the request and its future once more per child.
        self.request_child(request, span, None)
    }

    /// [`HubHandle::request`] as a delegation tool makes it (under its
    /// `execute_tool` span): an inline child is waited on by the tool
    /// that asked (`call`: none is made once that call was cut). Sent
    /// when called.
    pub(crate) fn request_child(
        &self,
        request: ChildRequest,
        span: tracing::Span,
        call: Option<crate::agent::CallSlot>,
    ) -> impl std::future::Future<Output = Result<AgentId, Refused>> + Send + 'static + use<> {
        let stop = request.stop_if_abandoned;
        // A run goes on from another only as a message reaches it (the
        // hub's own resume): a request naming one skipped every check of
        // that. Refused here, not sent (checked in the hub's handler, it
        // widened the future every hub keeps for its life).
        let forged = request.resumed_from.clone();
        let empty = request.input.trim().is_empty();
        let pending = (forged.is_none() && !empty).then(|| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let sent = self.actor.cast(HubMsg::Spawn {
                request: Arc::new(request),
                span,
                call,
                reply: tx.into(),
            });
            sent.is_ok().then(|| PendingSpawn {
                hub: self.actor.clone(),
                rx: Some(rx),
                stop,
            })
        });
        async move {
            if let Some(id) = forged {
                return Err(Refused::ResumeRequested { id });
            }
            if empty {
                return Err(Refused::EmptyTask);
            }
            let mut pending = pending.flatten().ok_or(Refused::Closed)?;
            let answer = match pending.rx.as_mut() {
                Some(rx) => rx.await,
                None => return Err(Refused::Closed),
            };
            pending.rx = None;
            answer.map_err(|_| Refused::Closed)?
        }
    }
}
