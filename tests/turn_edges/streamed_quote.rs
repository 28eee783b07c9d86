//! A stop as the reply streams, on two workers: what its result quotes is
//! what the host saw.

use std::sync::Arc;

use futures_util::StreamExt;
use subagents::actors::Model;
use subagents::actors::model::ModelStream;
use subagents::messages::{ModelChunk, ModelRequest};

use super::*;

/// Numbered pieces, `n` of them, each ready at once: a reply that streams
/// for as long as a stop takes to land.
struct Pieces(usize);

impl Model for Pieces {
    fn name(&self) -> &str {
        "pieces"
    }

    fn stream(&self, _request: ModelRequest) -> ModelStream {
        futures_util::stream::iter((0..self.0).map(|n| Ok(ModelChunk::Text(format!("{n} ")))))
            .boxed()
    }
}

/// Same instant, two workers (review 27: backpressure): a delta was kept
/// in the turn's state under its lock and emitted after it: a stop on the
/// other worker in between quoted it ("The last thing written was: …")
/// and closed the stream before it — the host saw a reply one piece
/// shorter than the result said, and the conversation held text the
/// user never saw. Kept and emitted under the lock: quoted only if seen.
#[test]
fn a_stop_mid_stream_quotes_only_what_the_host_saw() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for round in 0..2_000 {
            let (agent, mut events) = AgentBuilder::new(Arc::new(Pieces(100_000)))
                .spawn()
                .await
                .unwrap();
            agent.send_user("go").unwrap();
            let mut seen = String::new();
            let mut pieces = 0;
            let wanted = 1 + round % 50;
            let result = loop {
                match events.recv().await.unwrap() {
                    AgentEvent::Text(piece) => {
                        seen.push_str(&piece);
                        pieces += 1;
                        if pieces == wanted {
                            agent.stop_turn().unwrap();
                        }
                    }
                    AgentEvent::Result(result) => break result,
                    _ => {}
                }
            };
            let quoted = result
                .text
                .split_once("The last thing written was: ")
                .map_or("", |(_, quoted)| quoted);
            assert_eq!(quoted, seen.trim(), "round {round}: {}", result.text);
            agent.shutdown();
        }
    });
}
