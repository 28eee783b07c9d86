//! A tab's leave: the switch sent as it is called, then waited for; the
//! tab shown again if the step holding it is given up.

use subagents_messages::ThreadId;

use crate::thread::{ThreadError, ThreadHandle};
use crate::threads::Threads;

impl Threads {
    /// The thread `left` is left for good (the one switched or opened to
    /// is shown): the wakes its leave held go (ended in
    /// [`Threads::leave_current`], before the target was shown, they went
    /// also when the target failed and the thread came back on screen).
    pub(super) fn done_leaving(&self, left: Option<&ThreadId>) {
        if let Some(handle) = left.and_then(|left| self.threads.get(left)) {
            let _ = handle.on_screen(false);
        }
    }

    /// Switches away from the thread on screen (see
    /// [`done_or_closed`]: a closed one is left as it is — an error
    /// here would fail the open or switch that called it, after the new
    /// thread was spawned).
    pub(super) async fn leave_current(&mut self) -> Result<Option<ThreadId>, ThreadError> {
        let leave = self.begin_leave()?;
        self.end_leave(leave).await
    }

    /// The leave of the thread on screen, sent now: its switch, and the
    /// thread off screen right behind it.
    ///
    /// Off screen from the moment its switch is sent (no child wakes it
    /// while its children stop), and the registry's thread on screen until
    /// it is left: a switch given up half-way (its future dropped while
    /// the children stop) shows it again — it had been taken out of the
    /// registry first, so the next switch never left it.
    pub(super) fn begin_leave(&mut self) -> Result<Leave, ThreadError> {
        let Some(current) = self.on_screen.clone() else {
            return Ok(Leave(None));
        };
        let Some(handle) = self.threads.get(&current) else {
            return Ok(Leave(Some((current, None))));
        };
        let shown = IfGivenUp(Some(handle.clone()), |h| {
            let _ = h.on_screen(true);
        });
        // Off screen as the switch is sent, right behind it: told only
        // once the children had stopped (a remote child's stop may take
        // its grace), a child the still-running turn started meanwhile
        // finished and woke the tab the user had left. Held, not dropped,
        // while it is left: a leave given up shows the tab again, and a
        // child that finished in it wakes it (told off screen, its wake was
        // dropped — the tab the user never left was never woken for it).
        let switched = handle.switch_away();
        match handle.leaving() {
            Ok(()) | Err(ThreadError::Closed) => {}
            Err(other) => return Err(other),
        }
        Ok(Leave(Some((current, Some((Box::pin(switched), shown))))))
    }

    /// Waits for the leave [`Threads::begin_leave`] sent: returns the one
    /// left, still holding the wakes of children finishing in its leave
    /// until the caller shows the target ([`Threads::done_leaving`]).
    pub(super) async fn end_leave(
        &mut self,
        leave: Leave,
    ) -> Result<Option<ThreadId>, ThreadError> {
        let Some((current, sent)) = leave.0 else {
            return Ok(None);
        };
        if let Some((switched, mut shown)) = sent {
            done_or_closed(switched.await)?;
            shown.0 = None;
        }
        self.on_screen = None;
        Ok(Some(current))
    }
}

/// A leave of the thread on screen, sent ([`Threads::begin_leave`]): the
/// thread, and — when it is still registered — its switch's answer and
/// what shows it again if the leave is given up. `None`: nothing on screen.
pub(super) struct Leave(Option<(ThreadId, Option<(Switched, IfGivenUp)>)>);

/// A switch's answer, awaited (boxed: one type for the registry's steps).
pub(super) type Switched =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<usize, ThreadError>> + Send>>;

/// What is done to a thread if the step holding it is given up (its
/// future dropped) or fails before it lets go (`.0 = None`): an open
/// closes the thread it made, which nobody else holds and would run for
/// ever; a leave shows the thread it was leaving again — it stays on
/// screen, and its switch gave an earlier session's wakes back to the
/// store for a next showing nothing else would bring (a switch to the
/// thread on screen does nothing; a close settled them undelivered).
pub(super) struct IfGivenUp(
    pub(super) Option<ThreadHandle>,
    pub(super) fn(&ThreadHandle),
);

impl Drop for IfGivenUp {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            (self.1)(&handle);
        }
    }
}

/// A switch's answer: one of a thread closed by itself is done too.
pub(super) fn done_or_closed(switched: Result<usize, ThreadError>) -> Result<(), ThreadError> {
    match switched {
        Ok(_) | Err(ThreadError::Closed) => Ok(()),
        Err(other) => Err(other),
    }
}
