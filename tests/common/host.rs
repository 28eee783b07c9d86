//! An actor-based host: a ractor actor that supervises what is linked
//! under it (overriding ractor's default, which would stop it when one
//! of them stops) and runs work inside its own handler — where the
//! termination events of what stopped under it wait unread, as a real
//! host's do while it handles a message.

use std::future::Future;
use std::pin::Pin;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};

type Work = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

struct HostActor;

impl Actor for HostActor {
    type Msg = Work;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Work>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<Work>,
        work: Work,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        work().await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<Work>,
        _: SupervisionEvent,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// A host actor, running.
pub struct Host(ActorRef<Work>);

impl Host {
    pub async fn spawn() -> Host {
        Host(Actor::spawn(None, HostActor, ()).await.unwrap().0)
    }

    /// Its cell, to link a thread, an agent or a gate under.
    pub fn cell(&self) -> ActorCell {
        self.0.get_cell()
    }

    /// Runs `work` inside the host's handler; its output.
    pub async fn run<T, F>(&self, work: F) -> T
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let work: Work = Box::new(move || {
            Box::pin(async move {
                let _ = tx.send(work.await);
            })
        });
        self.0.cast(work).unwrap();
        rx.await.unwrap()
    }
}
