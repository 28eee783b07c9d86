//! Base URLs, keys and answers written by other tools: what is posted
//! where, what is shown, and what a server's refusal or redirect reads as.

use super::*;

/// A base URL with a query (Azure's `?api-version=`): the chat path was
/// appended after the query, so the server saw the deployment root with
/// `api-version=2024-10-21/chat/completions`.
#[tokio::test]
async fn a_base_urls_query_stays_after_the_chat_path() {
    let server = MockServer::start(vec![Reply::sse(&strs(&[
        text("ok"),
        finish("stop"),
        "[DONE]".to_owned(),
    ]))])
    .await;
    let base = format!("{}?api-version=2024-10-21", server.base_url);
    let model = OpenAiCompatible::new(&base, None, "test-model").unwrap();
    let out = collect(&model, request("hi")).await;
    assert_eq!(
        out.first(),
        Some(&Ok(ModelChunk::Text("ok".into()))),
        "{out:?}"
    );
    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].query.as_deref(), Some("api-version=2024-10-21"));
    assert_eq!(model.base_url(), base);
}

/// `user:password@` in the base URL (basic auth in front of a local
/// server) works, and was printed whole in every error naming the URL —
/// text the parent model reads.
#[tokio::test]
async fn credentials_in_the_base_url_are_sent_but_never_shown() {
    let server = MockServer::start(vec![Reply::error(404, json!({"error": "not here"}))]).await;
    let base = server.base_url.replace("http://", "http://alice:s3cret@");
    let model = OpenAiCompatible::new(&base, None, "test-model").unwrap();
    let out = collect(&model, request("hi")).await;
    let [Err(error @ ModelError::ModelNotFound { .. })] = &out[..] else {
        panic!("expected not found, got {out:?}");
    };
    for shown in [
        error.to_string(),
        format!("{model:?}"),
        model.base_url().to_owned(),
    ] {
        assert!(
            !shown.contains("s3cret") && !shown.contains("alice"),
            "{shown}"
        );
    }
    let auth = server.seen()[0].headers["authorization"].clone();
    assert_eq!(auth, "Basic YWxpY2U6czNjcmV0");
    // With a key as well, two `Authorization` headers: refused.
    assert!(matches!(
        OpenAiCompatible::new(&base, Some("sk-1".into()), "test-model"),
        Err(subagents_actors::openai::OpenAiConfigError::InvalidBaseUrl { .. })
    ));
}

/// Servers and gateways that refuse `stream_options` ("Unknown
/// parameter") failed every call: the refusal is answered once without
/// it, and the usage is estimated.
#[tokio::test]
async fn a_refused_stream_options_is_sent_again_without_it() {
    let refusal = json!({"error": {
        "message": "Unknown parameter: 'stream_options'.",
        "param": "stream_options",
        "code": "unknown_parameter"
    }});
    let server = MockServer::start(vec![
        Reply::error(400, refusal),
        Reply::sse(&strs(&[text("ok"), finish("stop"), "[DONE]".to_owned()])),
    ])
    .await;
    let out: Vec<_> = server.model(None).stream(request("hi")).collect().await;
    assert_eq!(
        out.first(),
        Some(&Ok(ModelChunk::Text("ok".into()))),
        "{out:?}"
    );
    assert!(
        matches!(out.last(), Some(Ok(ModelChunk::UsageEstimate(_)))),
        "{out:?}"
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].body.get("stream_options").is_some());
    assert!(
        seen[1].body.get("stream_options").is_none(),
        "{:?}",
        seen[1].body
    );
    // Any other 400 is still answered as it is, once.
    let other = MockServer::start(vec![Reply::error(
        400,
        json!({"error": {"message": "messages: too long"}}),
    )])
    .await;
    let out = collect(&other.model(None), request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Server { status: 400, .. })]),
        "{out:?}"
    );
    assert_eq!(other.seen().len(), 1);
}

/// A redirect was followed as reqwest does: the POST went again as a GET
/// with no body (and, on another host, no key), and the service's answer
/// to that request was read as this one's.
#[tokio::test]
async fn a_redirect_is_not_followed_but_named() {
    let to = "http://127.0.0.1:1/v2/chat/completions";
    let mut moved = Reply::error(301, json!({}));
    moved = moved.header("location", to);
    let server = MockServer::start(vec![moved, Reply::error(200, json!({}))]).await;
    let out = collect(&server.model(Some("sk-1")), request("hi")).await;
    let [
        Err(ModelError::Server {
            status: 301,
            message,
        }),
    ] = &out[..]
    else {
        panic!("expected the redirect, got {out:?}");
    };
    assert!(message.contains(to), "{message}");
    assert_eq!(server.seen().len(), 1);
}

/// An error body without end (a proxy relaying one, a 500 left open) was
/// read whole until the read timeout, then thrown away: the message was
/// the status's name. The start of it is read, and said.
#[tokio::test]
async fn an_endless_error_body_is_read_only_as_far_as_its_message() {
    let never = Arc::new(Notify::new());
    let mut body = vec![Piece::Send(format!(
        "upstream failed: {}",
        "x".repeat(70_000)
    ))];
    body.push(Piece::Gate(never));
    let reply = Reply {
        status: 500,
        headers: vec![("content-type", "text/plain".into())],
        delay: Duration::ZERO,
        body,
    };
    let server = MockServer::start(vec![reply]).await;
    let model = OpenAiCompatible::builder(&server.base_url, "test-model")
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let started = Instant::now();
    let out = collect(&model, request("hi")).await;
    let [
        Err(ModelError::Server {
            status: 500,
            message,
        }),
    ] = &out[..]
    else {
        panic!("expected a server error, got {out:?}");
    };
    assert!(message.starts_with("upstream failed: xxx"), "{message}");
    // Not the read timeout: the body was not waited out.
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// A key with a line break at the end (read from a file) built, then
/// every call failed as "could not reach the model service". It is
/// trimmed; one with a control character inside is refused at build.
#[tokio::test]
async fn a_key_is_trimmed_and_one_that_cannot_be_a_header_is_refused() {
    let server = MockServer::start(vec![Reply::sse(&strs(&[
        text("ok"),
        finish("stop"),
        "[DONE]".to_owned(),
    ]))])
    .await;
    let out = collect(&server.model(Some("sk-1\n")), request("hi")).await;
    assert_eq!(
        out.first(),
        Some(&Ok(ModelChunk::Text("ok".into()))),
        "{out:?}"
    );
    assert_eq!(server.seen()[0].headers["authorization"], "Bearer sk-1");
    let refused = OpenAiCompatible::new(&server.base_url, Some("sk-1\r\nX-A: b".into()), "m");
    let Err(e @ subagents_actors::openai::OpenAiConfigError::InvalidApiKey { .. }) = refused else {
        panic!("expected the key refused, got {refused:?}");
    };
    assert!(!e.to_string().contains("sk-1"), "{e}");
}

/// vLLM ends an answer it aborted (new weights, a shutdown) with
/// `finish_reason: "abort"` after the text so far: that half answer
/// completed the turn. A repetition cut is a cut, as `length` is.
#[tokio::test]
async fn an_aborted_answer_fails_and_a_repetition_cut_is_truncated() {
    let server = MockServer::start(vec![
        Reply::sse(&strs(&[
            text("half"),
            finish("abort"),
            usage(3, 4),
            "[DONE]".to_owned(),
        ])),
        Reply::sse(&strs(&[
            text("again"),
            finish("repetition"),
            "[DONE]".to_owned(),
        ])),
    ])
    .await;
    let model = server.model(None);
    let out = collect(&model, request("hi")).await;
    assert!(
        matches!(&out[..], [Ok(ModelChunk::Text(_)), Err(ModelError::MidStream { message })] if message.contains("abort")),
        "{out:?}"
    );
    let out = collect(&model, request("hi")).await;
    assert!(
        out.contains(&Ok(ModelChunk::Truncated("repetition".into()))),
        "{out:?}"
    );
}

/// A timeout of 0 built, then every call failed `Timeout(0s)` (a
/// zero-length wait ends at its first look): refused at build, as zero
/// limits and `max_tokens` 0 are.
#[test]
fn a_zero_timeout_is_refused_at_build() {
    use subagents_actors::openai::OpenAiConfigError;
    for (setting, built) in [
        (
            "timeout",
            OpenAiCompatible::builder("http://127.0.0.1:9", "m")
                .timeout(std::time::Duration::ZERO)
                .build(),
        ),
        (
            "connect_timeout",
            OpenAiCompatible::builder("http://127.0.0.1:9", "m")
                .connect_timeout(std::time::Duration::ZERO)
                .build(),
        ),
    ] {
        match built {
            Err(OpenAiConfigError::ZeroTimeout { setting: said }) => assert_eq!(said, setting),
            other => panic!("{setting} 0: {other:?}"),
        }
    }
    let ok = OpenAiCompatible::builder("http://127.0.0.1:9", "m")
        .timeout(std::time::Duration::from_millis(1))
        .build();
    assert!(ok.is_ok(), "{ok:?}");
}

/// A key written in the base URL's query (Azure's `?api-key=`) was shown
/// `<redacted>` in every error but a failed connection: reqwest names the
/// URL whole ("error sending request for url (…?api-key=…)"), and that
/// text reaches the parent model, the child's envelope on disk and the
/// logs.
#[tokio::test]
async fn a_failed_connection_does_not_show_a_key_in_the_query() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let base = format!("http://127.0.0.1:{port}/v1?api-version=2&api-key=SECRET123");
    let model = OpenAiCompatible::builder(&base, "m")
        .max_retries(0)
        .build()
        .unwrap();
    let out = collect(&model, request("hi")).await;
    let [Err(ModelError::Connection(text))] = &out[..] else {
        panic!("expected a failed connection, got {out:?}");
    };
    assert!(!text.contains("SECRET123"), "{text}");
    assert!(
        text.contains("api-key=%3Credacted%3E") || text.contains("<redacted>"),
        "{text}"
    );
}

/// The same echo after a 200 (review: what the model reads): a gateway
/// relaying an upstream failure mid-stream (`data: {"error": …}`), or an
/// event that is no chunk (quoted in `Malformed`), passed the key whole
/// to the parent model; and where it was left out, the message was cut
/// first — a key echoed late in a long refusal showed its start. Every
/// error leaves without it, whole or cut short.
#[tokio::test]
async fn a_key_echoed_mid_stream_or_cut_short_is_left_out() {
    let key = "sk-SECRET-0123456789";
    let echo =
        json!({"error": {"message": format!("upstream: Incorrect API key provided: {key}")}});
    let odd = json!({"note": format!("key {key}")}).to_string();
    let long = format!("{} key: {key}", "x".repeat(485));
    let server = MockServer::start(vec![
        Reply::sse(&[echo.to_string().as_str()]),
        Reply::sse(&[odd.as_str()]),
        Reply::error(401, json!({"error": {"message": long}})),
    ])
    .await;
    let model = OpenAiCompatible::new(&server.base_url, Some(key.into()), "m").unwrap();
    // A gateway escaping `/` in its JSON (PHP's `json_encode`): the key is
    // whole only once the message is read (review: it was left whole).
    let slashed = "sk-AB/CD-0123456789";
    let escaped = format!(
        r#"{{"error":{{"message":"bad key {}"}}}}"#,
        slashed.replace('/', "\\/")
    );
    let raw = Reply {
        body: vec![Piece::Send(escaped)],
        ..Reply::error(401, json!({}))
    };
    let server_escaped = MockServer::start(vec![raw]).await;
    let model_escaped =
        OpenAiCompatible::new(&server_escaped.base_url, Some(slashed.into()), "m").unwrap();
    let out = collect(&model_escaped, request("hi")).await;
    let text = format!("{out:?}");
    assert!(
        !text.contains("sk-AB") && text.contains("<redacted>"),
        "escaped: {text}"
    );
    for case in ["mid-stream", "no chunk", "cut short"] {
        let out = collect(&model, request("hi")).await;
        let Some(Err(error)) = out.last() else {
            panic!("{case}: expected an error, got {out:?}");
        };
        let text = error.to_string();
        assert!(!text.contains(&key[..8]), "{case}: {text}");
        assert!(text.contains("<redact"), "{case}: {text}");
    }
}

/// A gateway that echoes the key in its refusal (`Incorrect API key
/// provided: sk-…`): the text went whole into `Unauthorized`, which a
/// parent model reads as its child's failure, and onto disk. The key the
/// adapter sent is left out of any service's message.
#[tokio::test]
async fn a_key_the_service_echoes_is_left_out_of_its_message() {
    let key = "sk-SECRET-0123456789";
    let server = MockServer::start(vec![Reply::error(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {key}.")}}),
    )])
    .await;
    let model = OpenAiCompatible::new(&server.base_url, Some(key.into()), "m").unwrap();
    let out = collect(&model, request("hi")).await;
    let [Err(error)] = &out[..] else {
        panic!("expected one error, got {out:?}");
    };
    let text = error.to_string();
    assert!(!text.contains(key), "{text}");
    assert!(
        text.contains("Incorrect API key provided: <redacted>"),
        "{text}"
    );
}

/// Foreign input (review: the adapter's bytes, thirty-fourth session): no
/// encoding is asked for and none decoded, but a server may encode its
/// answer anyway (RFC 9110 lets it): a gzipped stream was read as lines
/// of U+FFFD, `EmptyAnswer` ("its log says why"). It names the encoding.
#[tokio::test]
async fn an_encoded_answer_names_its_encoding() {
    let reply = Reply::sse(&strs(&[text("hi"), finish("stop"), "[DONE]".into()]))
        .header("content-encoding", "gzip");
    let server = MockServer::start(vec![reply]).await;
    let model = OpenAiCompatible::new(&server.base_url, None, "test-model").unwrap();
    let out = collect(&model, request("hi")).await;
    assert!(
        matches!(&out[..], [Err(ModelError::Malformed(m))] if m.contains("content-encoding: gzip")),
        "{out:?}"
    );
    // No coding (diff review: `none` is an SSE idiom against a proxy's
    // buffering — OpenDify's bridge sends it; `UTF-8` a server's mistake):
    // read as events, as before.
    for none in ["identity", "none", "UTF-8"] {
        let reply = Reply::sse(&strs(&[text("hi"), finish("stop"), "[DONE]".into()]))
            .header("content-encoding", none);
        let server = MockServer::start(vec![reply]).await;
        let model = OpenAiCompatible::new(&server.base_url, None, "test-model").unwrap();
        let out = collect(&model, request("hi")).await;
        assert!(out.iter().all(Result::is_ok), "{none}: {out:?}");
    }
}
