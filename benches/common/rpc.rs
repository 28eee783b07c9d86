//! Reference floors for one request/reply round trip: ractor's `call!` to
//! an echo actor, and a raw tokio mpsc + oneshot to an echo task. Every
//! gate acquire and hub request is built on one of these.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::{mpsc, oneshot};

/// Replies to each request at once.
pub(crate) struct Echo;

impl Actor for Echo {
    type Msg = RpcReplyPort<u64>;
    type State = u64;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        reply: RpcReplyPort<u64>,
        state: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        *state += 1;
        let _ = reply.send(*state);
        Ok(())
    }
}

/// `n` `call!`s to a fresh echo actor.
pub(crate) async fn ractor_calls(n: usize) {
    let (echo, handle) = Actor::spawn(None, Echo, ()).await.expect("spawn echo");
    for _ in 0..n {
        let got = ractor::call!(echo, |reply| reply).expect("echo replies");
        std::hint::black_box(got);
    }
    echo.stop(None);
    handle.await.expect("echo stops");
}

/// `n` round trips over an unbounded mpsc carrying a oneshot sender.
pub(crate) async fn mpsc_calls(n: usize) {
    let (tx, mut rx) = mpsc::unbounded_channel::<oneshot::Sender<u64>>();
    let server = tokio::spawn(async move {
        let mut count = 0;
        while let Some(reply) = rx.recv().await {
            count += 1;
            let _ = reply.send(count);
        }
    });
    for _ in 0..n {
        let (reply, answer) = oneshot::channel();
        tx.send(reply).expect("server alive");
        std::hint::black_box(answer.await.expect("server replies"));
    }
    drop(tx);
    server.await.expect("server stops");
}
