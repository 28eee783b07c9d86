//! Every `finish_reason` docs/openai.md names as a cut or a failure reads
//! so.

use super::*;

/// The documented reasons, then any the list has that the docs do not
/// name yet (so an entry added later is covered too).
fn documented_and(documented: &[&'static str], list: &[&'static str]) -> Vec<&'static str> {
    let mut all = documented.to_vec();
    all.extend(list.iter().filter(|r| !documented.contains(r)));
    all
}

/// docs/openai.md: `length` (or `max_tokens`, on some servers), the
/// content filter, vLLM's `repetition` and Mistral's `model_length`
/// are a cut answer — `Truncated`, before the calls, so a call in a cut
/// answer never runs. No test sent `max_tokens`, so dropping it from
/// the cut reasons passed: a server naming the cut so had its half
/// answer complete the turn as whole, and a call whose arguments
/// happened to be complete JSON ran.
#[test]
fn every_cut_reason_says_truncated_before_the_calls() {
    let reasons = documented_and(
        &[
            "length",
            "max_tokens",
            "content_filter",
            "repetition",
            "model_length",
        ],
        &CUT_REASONS,
    );
    for reason in reasons {
        let event = format!(
            r#"{{"choices":[{{"delta":{{"tool_calls":[{{"index":0,"id":"a","function":{{"name":"f","arguments":"{{}}"}}}}]}},"finish_reason":"{reason}"}}]}}"#
        );
        let (out, end) = feed(&[&event]);
        assert_eq!(end, Ok(false), "{reason}");
        assert_eq!(
            out,
            vec![ModelChunk::Truncated(reason.into()), call("a", "f", "{}")],
            "`{reason}` is a cut, said before the call"
        );
    }
}

/// docs/openai.md: vLLM's `abort` and `error`, and DeepSeek's
/// `insufficient_system_resource`, end the call as `MidStream` — the
/// text before them is half an answer, not a result. No test sent
/// `error`, so dropping it from the failed reasons passed: vLLM's failed
/// request completed the turn with its half answer as the child's
/// result.
#[test]
fn every_failed_reason_ends_the_call_mid_stream() {
    let reasons = documented_and(
        &["abort", "error", "insufficient_system_resource"],
        &FAILED_REASONS,
    );
    for reason in reasons {
        let finish = format!(r#"{{"choices":[{{"delta":{{}},"finish_reason":"{reason}"}}]}}"#);
        let (out, end) = feed(&[r#"{"choices":[{"delta":{"content":"half"}}]}"#, &finish]);
        assert_eq!(out, vec![ModelChunk::Text("half".into())], "{reason}");
        assert!(
            matches!(&end, Err(ModelError::MidStream { message }) if message.contains(&format!("`finish_reason: {reason}`"))),
            "`{reason}` fails the call mid-stream, naming it: {end:?}"
        );
    }
}
