//! A host's adapter passing on chunks of nothing: empty text deltas (a
//! server's keep-alive, its first chunk) and calls with no name and no
//! arguments. Review 27 (backpressure): each became an event, or a call,
//! and cost nothing against the budget.

use super::*;

/// A model whose first answer is `texts` empty text deltas and `calls`
/// calls of nothing, then "done"; every later answer "done".
struct Nothing {
    texts: usize,
    calls: usize,
}

impl Model for Nothing {
    fn name(&self) -> &str {
        "nothing"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let done = || ModelChunk::Text("done".into());
        if request.assistant_messages() > 0 {
            return futures_util::stream::iter([Ok(done())]).boxed();
        }
        let call = |_| {
            ModelChunk::ToolCall(Box::new(subagents::messages::ToolCall {
                id: subagents::messages::ToolUseId::new(""),
                name: String::new(),
                arguments: String::new(),
                extra_content: None,
            }))
        };
        let chunks = (0..self.texts)
            .map(|_| ModelChunk::Text(String::new()))
            .chain((0..self.calls).map(call))
            .chain(std::iter::once(done()));
        futures_util::stream::iter(chunks.map(Ok)).boxed()
    }
}

/// 100,000 empty deltas were 100,000 `Text("")` events in the host's
/// unbounded stream, under no limit but the wall clock. Nothing is not
/// text: none is emitted.
#[tokio::test(start_paused = true)]
async fn empty_text_deltas_are_no_events() {
    let model = Arc::new(Nothing {
        texts: 100_000,
        calls: 0,
    });
    let (agent, mut events) = AgentBuilder::new(model).spawn().await.unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.text, "done");
    let mut texts = 0;
    while let Some(event) = events.try_recv() {
        if let AgentEvent::Text(text) = event {
            assert!(!text.is_empty(), "an empty Text event");
            texts += 1;
        }
    }
    assert_eq!(texts, 1);
}

/// 100,000 calls of nothing cost nothing against a budget of 1,000
/// tokens: each ran (an unknown tool's answer listing every tool, a
/// `ToolStarted` and a `ToolResult` each). A call costs a token at least.
#[tokio::test(start_paused = true)]
async fn calls_of_nothing_are_held_to_the_budget() {
    let model = Arc::new(Nothing {
        texts: 0,
        calls: 100_000,
    });
    let (agent, mut events) = AgentBuilder::new(model)
        .limits(Limits {
            token_budget: 1_000,
            ..Limits::default()
        })
        .spawn()
        .await
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.outcome, Outcome::LimitReached(LimitKind::Tokens));
    let mut started = 0;
    while let Some(event) = events.try_recv() {
        if let AgentEvent::ToolStarted(_) = event {
            started += 1;
        }
    }
    assert_eq!(started, 0, "calls of nothing ran");
}
