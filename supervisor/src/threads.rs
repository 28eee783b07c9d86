//! The host's threads: open, switch, clear, delete — each switch applies
//! the stop-all policy to the thread left behind.

use std::collections::HashMap;

use subagents_actors::EventStream;
use subagents_messages::ThreadId;

use crate::thread::{ThreadConfig, ThreadError, ThreadHandle};

/// Every open thread, and which one is on screen.
#[derive(Debug, Default)]
pub struct Threads {
    threads: HashMap<ThreadId, ThreadHandle>,
    on_screen: Option<ThreadId>,
}

/// What a thread operation could not do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadsError {
    /// No thread has that id.
    #[error("there is no open thread `{0}`")]
    Unknown(ThreadId),
    /// A thread of that id is already open.
    #[error("a thread `{0}` is already open")]
    AlreadyOpen(ThreadId),
    /// The thread failed.
    #[error(transparent)]
    Thread(#[from] ThreadError),
}

impl Threads {
    /// No threads.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a new thread and puts it on screen (the one on screen before
    /// is switched away from). Returns its event stream.
    pub async fn open(
        &mut self,
        id: ThreadId,
        config: impl Into<ThreadConfig>,
    ) -> Result<EventStream, ThreadsError> {
        if self.threads.contains_key(&id) {
            return Err(ThreadsError::AlreadyOpen(id));
        }
        let (handle, stream) = ThreadHandle::spawn(config, None).await?;
        self.leave_current().await?;
        handle.on_screen(true)?;
        self.threads.insert(id.clone(), handle);
        self.on_screen = Some(id);
        Ok(stream)
    }

    /// Puts another open thread on screen; the one left stops its
    /// children and drops its wakes.
    pub async fn switch_to(&mut self, id: &ThreadId) -> Result<(), ThreadsError> {
        let target = self.get(id)?.clone();
        if self.on_screen.as_ref() == Some(id) {
            return Ok(());
        }
        self.leave_current().await?;
        target.on_screen(true)?;
        self.on_screen = Some(id.clone());
        Ok(())
    }

    /// Clears a thread: its children stop, its wakes drop; returns how many
    /// children were stopped.
    pub async fn clear(&mut self, id: &ThreadId) -> Result<usize, ThreadsError> {
        Ok(self.get(id)?.switch_away().await?)
    }

    /// Deletes a thread: its children stop and it closes.
    pub async fn delete(&mut self, id: &ThreadId) -> Result<(), ThreadsError> {
        let handle = self.get(id)?.clone();
        handle.switch_away().await?;
        handle.close();
        self.threads.remove(id);
        if self.on_screen.as_ref() == Some(id) {
            self.on_screen = None;
        }
        Ok(())
    }

    /// The thread with this id.
    pub fn get(&self, id: &ThreadId) -> Result<&ThreadHandle, ThreadsError> {
        self.threads
            .get(id)
            .ok_or_else(|| ThreadsError::Unknown(id.clone()))
    }

    /// The thread on screen.
    pub fn on_screen(&self) -> Option<&ThreadId> {
        self.on_screen.as_ref()
    }

    async fn leave_current(&mut self) -> Result<(), ThreadsError> {
        if let Some(current) = self.on_screen.take()
            && let Some(handle) = self.threads.get(&current)
        {
            handle.switch_away().await?;
            handle.on_screen(false)?;
        }
        Ok(())
    }
}
