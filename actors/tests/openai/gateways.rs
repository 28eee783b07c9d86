//! What a gateway in front of the server answers when the server behind it
//! is away for a moment, and when a server dates the wait it asks for.

use super::*;

/// A gateway's page for a status (Cloudflare's, an APIM's): HTML, no
/// `Retry-After`.
fn gateway_page(status: u16) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "text/html".into())],
        delay: Duration::ZERO,
        body: vec![Piece::Send(format!(
            "<html><body><h1>{status}</h1>The upstream did not answer.</body></html>"
        ))],
    }
}

/// Foreign (review: real servers' answers, thirty-seventh session): a
/// gateway in front of the service (OpenRouter's, Together's, Groq's
/// behind Cloudflare, Azure behind APIM) answers 502 or 504 for a moment
/// while the service behind it is away, and the same request goes
/// through a moment later — openai-python sends it again. Only 503 and
/// 529 were, and a 502 failed the turn. Each is sent again as a 503 is
/// (llama-server's 500, which would fail again, is still not); one that
/// persists says its own status.
#[tokio::test]
async fn a_gateways_502_or_504_is_sent_again() {
    let passes = |status: u16| async move {
        let events = [text("ready"), finish("stop"), "[DONE]".to_owned()];
        let server =
            MockServer::start(vec![gateway_page(status), Reply::sse(&strs(&events))]).await;
        let out = collect(&server.model(None), request("hi")).await;
        assert_eq!(out, vec![Ok(ModelChunk::Text("ready".into()))], "{status}");
        assert_eq!(server.seen().len(), 2, "{status}");
    };
    let persists = |status: u16| async move {
        let server = MockServer::start(vec![gateway_page(status), gateway_page(status)]).await;
        let model = OpenAiCompatible::builder(&server.base_url, "test-model")
            .max_retries(1)
            .build()
            .unwrap();
        let out = collect(&model, request("hi")).await;
        assert!(
            matches!(&out[..], [Err(ModelError::Server { status: s, .. })] if *s == status),
            "{out:?}"
        );
        assert_eq!(server.seen().len(), 2, "{status}");
    };
    // Each waits the backoff's first second (no `Retry-After`): at once.
    // Cloudflare's own 520 to 524 in front of a service (thirty-ninth
    // session: they failed at once) too.
    tokio::join!(
        passes(502),
        passes(504),
        passes(520),
        passes(524),
        persists(502),
        persists(504),
        persists(522)
    );
}

/// Replay (review: same seed, same log, thirty-eighth session): a
/// `Retry-After` given as an HTTP date was read against the system's
/// clock, whatever clock the host ran on — a mock server dating its 429 in
/// a simulation's time (ten seconds past `Scenario::EPOCH_MS`) was read as
/// long past (no wait, today), or as months ahead (failing at once,
/// before 2026): the outcome depended on the calendar. It is read against
/// the adapter's clock (`OpenAiBuilder::clock`).
#[tokio::test]
async fn a_retry_after_date_is_read_against_the_adapters_clock() {
    use std::sync::Arc;
    use subagents_actors::clock::ManualClock;
    // 2026-01-01T00:00:00Z, the simulation's epoch.
    const EPOCH_MS: u64 = 1_767_225_600_000;
    let limited = || {
        Reply::error(429, json!({"error": {"message": "slow down"}}))
            .header("retry-after", "Thu, 01 Jan 2026 00:00:10 GMT")
    };
    let server = MockServer::start(vec![limited(), limited()]).await;
    let model = OpenAiCompatible::builder(&server.base_url, "test-model")
        .max_retries(0)
        .clock(Arc::new(ManualClock::new(EPOCH_MS)))
        .build()
        .unwrap();
    let out = collect(&model, request("hi")).await;
    assert_eq!(
        out,
        vec![Err(ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(10)),
            message: "slow down".into()
        })]
    );
    // A second later by the same clock, nine seconds are left.
    let model = OpenAiCompatible::builder(&server.base_url, "test-model")
        .max_retries(0)
        .clock(Arc::new(ManualClock::new(EPOCH_MS + 1_000)))
        .build()
        .unwrap();
    let out = collect(&model, request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::RateLimited { retry_after: Some(wait), .. })] if *wait == Duration::from_secs(9)),
        "{out:?}"
    );
}
