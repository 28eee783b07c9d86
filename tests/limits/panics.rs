//! A host's model whose stream panics — in `poll_next`, in `Drop`, or
//! both — as a tool's future may: the call fails with a sentence (or its
//! answer stands), the turn ends as it would have, and nothing reaches
//! the host's process.

use super::*;

/// Where a [`Bomb`]'s stream panics.
#[derive(Clone, Copy)]
struct Panics {
    on_poll: bool,
    on_drop: bool,
}

/// A model answering "done" (unless its poll panics first), its stream
/// panicking where told.
struct Bomb(Panics);

struct BombStream {
    panics: Panics,
    answered: bool,
}

impl futures_util::Stream for BombStream {
    type Item = Result<ModelChunk, subagents::actors::model::ModelError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        assert!(!self.panics.on_poll, "adapter bug in poll");
        if self.answered {
            return std::task::Poll::Ready(None);
        }
        self.answered = true;
        std::task::Poll::Ready(Some(Ok(ModelChunk::Text("done".into()))))
    }
}

impl Drop for BombStream {
    fn drop(&mut self) {
        // Not while unwinding from the poll's own panic: that aborts in
        // any code (ours can only keep it from being a second panic).
        if self.panics.on_drop && !std::thread::panicking() {
            panic!("adapter bug in drop");
        }
    }
}

impl Model for Bomb {
    fn name(&self) -> &str {
        "bomb"
    }

    fn stream(&self, _request: ModelRequest) -> ModelStream {
        Box::pin(BombStream {
            panics: self.0,
            answered: false,
        })
    }
}

async fn run(panics: Panics) -> AgentResult {
    let (agent, _events, gate) = common::spawn_agent(
        Arc::new(Bomb(panics)),
        ToolRegistry::new(),
        Limits::default(),
    )
    .await;
    let result = agent.run("go").await.unwrap();
    common::assert_gate_free(&gate).await;
    // The agent still answers.
    assert!(!agent.snapshot().await.unwrap().busy);
    result
}

/// Misbehaving model: a stream whose `Drop` panicked turned a finished
/// answer into "the agent's turn crashed" (a tool's future had this guard,
/// a model's stream not); one that panicked in `poll_next` crashed the
/// whole turn, and with a `Drop` that panicked too the drop came while
/// unwinding — the process aborted. The stream is polled and dropped
/// inside a guard: a panic in its poll is the call's error, naming it; one
/// in its drop is logged, and the answer stands.
#[tokio::test(start_paused = true)]
async fn a_model_stream_that_panics_fails_the_call_not_the_process() {
    let dropped = run(Panics {
        on_poll: false,
        on_drop: true,
    })
    .await;
    assert_eq!(dropped.outcome, Outcome::Completed, "{dropped:?}");
    assert_eq!(dropped.text, "done");

    for on_drop in [false, true] {
        let polled = run(Panics {
            on_poll: true,
            on_drop,
        })
        .await;
        assert!(
            matches!(&polled.outcome, Outcome::Failed(e)
                if e.contains("the model's stream panicked: adapter bug in poll")),
            "{polled:?}"
        );
    }
}
