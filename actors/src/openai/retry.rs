//! Retrying a call the service rate-limited (HTTP 429) or could not take
//! for now (HTTP 503). All waiting goes through `tokio::time::sleep`, so a
//! paused runtime drives it.

use std::future::Future;
use std::time::Duration;

use crate::model::ModelError;

/// How rate-limited calls are retried.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// Retries after the first attempt.
    pub(crate) max_retries: u32,
    /// The longest single wait; a `Retry-After` longer than this is not
    /// waited for (the call fails as rate limited at once).
    pub(crate) max_wait: Duration,
    /// The first wait when the service does not say (doubled each retry).
    pub(crate) base_backoff: Duration,
    /// How long a service still loading its model is waited for, in all
    /// (the adapter's `timeout`): those waits are not counted as retries.
    pub(crate) loading_budget: Duration,
}

/// A 503 that says the service is still loading its model: llama-server
/// answers every request `"Loading model"` (no `Retry-After`) from the
/// moment it listens until the model is loaded — tens of seconds for a
/// large one — and Hugging Face's `"Model … is currently loading"`.
fn still_loading(status: u16, message: &str) -> bool {
    status == 503 && message.to_ascii_lowercase().contains("loading")
}

/// The statuses that say the service is unavailable for now, waited out
/// as a rate limit is ([`Attempt::Unavailable`]) — before the stream, and
/// said inside it: llama-server's 503 "Loading model" until its model is
/// loaded, a busy service's 503 "overloaded" (Anthropic's: 529), a
/// gateway's 502 or 504 while the service behind it is away, and
/// Cloudflare's own 520 to 524 in front of one (OpenRouter, Groq: its
/// origin answered nothing it could read, was down, or timed out).
pub(crate) const UNAVAILABLE: [u16; 9] = [502, 503, 504, 520, 521, 522, 523, 524, 529];

/// What one attempt gave.
#[derive(Debug)]
pub(crate) enum Attempt<T> {
    /// It went through.
    Done(T),
    /// HTTP 429.
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    /// HTTP 502, 503, 504, 520 to 524 or 529: unavailable for now (a model still
    /// loading, a service overloaded, a gateway whose service is away);
    /// once the retries run out,
    /// [`ModelError::Server`] with that status.
    Unavailable {
        status: u16,
        retry_after: Option<Duration>,
        message: String,
    },
}

/// Runs `attempt` until it goes through, fails otherwise, or the retries
/// run out (then [`ModelError::RateLimited`], or [`ModelError::Server`]
/// for a 503).
pub(crate) async fn with_retries<T, F, Fut>(
    policy: RetryPolicy,
    mut attempt: F,
) -> Result<T, ModelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, ModelError>>,
{
    let mut retries: u32 = 0;
    // Waits for a model still loading: counted apart (three retries, 7 s
    // in all, failed the first call after llama-server started), bounded
    // by the time since the first such answer.
    let (mut loading_waits, mut loading_since) = (0u32, None);
    loop {
        let mut loading = false;
        let (retry_after, error) = match attempt().await? {
            Attempt::Done(value) => return Ok(value),
            Attempt::RateLimited {
                retry_after,
                message,
            } => (
                retry_after,
                ModelError::RateLimited {
                    retry_after,
                    message,
                },
            ),
            Attempt::Unavailable {
                status,
                retry_after,
                message,
            } => {
                loading = still_loading(status, &message);
                (retry_after, ModelError::Server { status, message })
            }
        };
        if loading && policy.max_retries > 0 {
            // Never shorter than the backoff: a `Retry-After: 0` (or a
            // date past) sent the request again at once, for ever.
            let backoff = backoff(policy, loading_waits);
            let wait = retry_after.map_or(backoff, |after| after.max(backoff));
            let since = *loading_since.get_or_insert_with(tokio::time::Instant::now);
            let waited = since.elapsed().saturating_add(wait);
            if wait > policy.max_wait || waited > policy.loading_budget {
                return Err(error);
            }
            loading_waits += 1;
            tracing::warn!(?wait, ?waited, %error, "the model service is still loading its model; retrying");
            tokio::time::sleep(wait).await;
            continue;
        }
        let wait = retry_after.unwrap_or_else(|| backoff(policy, retries));
        if retries >= policy.max_retries || wait > policy.max_wait {
            return Err(error);
        }
        retries += 1;
        tracing::warn!(
            retry = retries,
            of = policy.max_retries,
            ?wait,
            %error,
            "the model service cannot take the call now; retrying"
        );
        tokio::time::sleep(wait).await;
    }
}

/// The wait before retry `retries + 1` when the service names none:
/// `base_backoff * 2^retries`, at most `max_wait`.
pub(crate) fn backoff(policy: RetryPolicy, retries: u32) -> Duration {
    let factor = 2u32.saturating_pow(retries.min(16));
    policy
        .base_backoff
        .saturating_mul(factor)
        .min(policy.max_wait)
}

/// The clock a `Retry-After` date is read against
/// (`OpenAiBuilder::clock`).
#[derive(Clone)]
pub(crate) struct DateClock(pub(crate) std::sync::Arc<dyn crate::clock::Clock>);

impl std::fmt::Debug for DateClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DateClock")
    }
}

/// A `Retry-After` header in seconds (`"2"`, `"0.5"`), or as an HTTP
/// date (`"Wed, 21 Oct 2026 07:28:00 GMT"`, RFC 9110: the wait until
/// then from `now_ms`, the adapter's clock — none if it passed). Anything
/// else unreadable gives `None` (the backoff applies instead: a date was
/// read so, and the server got its retries within seconds of asking for
/// an hour).
pub(crate) fn parse_retry_after(value: &str, now_ms: u64) -> Option<Duration> {
    if let Ok(at) = httpdate::parse_http_date(value.trim()) {
        // Checked: a clock past what a `SystemTime` holds (a host's far
        // out) reads the date as passed, not a panic in the call.
        let now = std::time::UNIX_EPOCH.checked_add(Duration::from_millis(now_ms));
        return Some(now.map_or(Duration::ZERO, |now| {
            at.duration_since(now).unwrap_or(Duration::ZERO)
        }));
    }
    parse_seconds(value)
}

/// A wait in seconds (`"2"`, `"0.5"`).
fn parse_seconds(value: &str) -> Option<Duration> {
    let seconds: f64 = value.trim().parse().ok()?;
    if seconds >= 0.0 {
        // Past what a `Duration` holds is still a wait, the longest one —
        // an infinite one too (`1e400` reads as infinity): it fails at
        // once against `max_wait` (read as no value, it was retried on the
        // default backoff).
        Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
    } else {
        None
    }
}

/// A `retry-after-ms` header (OpenAI, Azure): milliseconds, as
/// [`parse_retry_after`] reads seconds.
pub(crate) fn parse_retry_after_ms(value: &str) -> Option<Duration> {
    let millis: f64 = value.trim().parse().ok()?;
    parse_seconds(&(millis / 1000.0).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use tokio::time::Instant;

    const POLICY: RetryPolicy = RetryPolicy {
        max_retries: 3,
        max_wait: Duration::from_secs(60),
        base_backoff: Duration::from_secs(1),
        loading_budget: Duration::from_secs(300),
    };

    fn unavailable<T>(message: &str) -> Result<Attempt<T>, ModelError> {
        Ok(Attempt::Unavailable {
            status: 503,
            retry_after: None,
            message: message.into(),
        })
    }

    /// Foreign input (review: real model servers, thirty-ninth session):
    /// llama-server listens before its model is loaded and answers every
    /// request 503 "Loading model", with no `Retry-After`. Three retries
    /// (1 + 2 + 4 s) failed the first call after it started, for any model
    /// taking longer than 7 s to load. Those waits go on, backing off,
    /// until the adapter's `timeout` is spent; not counted as retries.
    #[tokio::test(start_paused = true)]
    async fn a_service_still_loading_its_model_is_waited_for_past_the_retries() {
        let start = Instant::now();
        let loaded_at = Duration::from_secs(40);
        let out = with_retries(POLICY, || async move {
            match start.elapsed() < loaded_at {
                true => unavailable("Loading model"),
                false => Ok(Attempt::Done("answered")),
            }
        })
        .await;
        assert_eq!(out, Ok("answered"));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1 + 2 + 4 + 8 + 16 + 32)
        );
        // Bounded by the budget: one still loading after it fails.
        let policy = RetryPolicy {
            loading_budget: Duration::from_secs(20),
            ..POLICY
        };
        let start = Instant::now();
        let out: Result<(), _> = with_retries(policy, || async {
            unavailable("Model gpt2 is currently loading")
        })
        .await;
        assert_eq!(start.elapsed(), Duration::from_secs(1 + 2 + 4 + 8));
        assert!(
            matches!(out, Err(ModelError::Server { status: 503, .. })),
            "{out:?}"
        );
        // Another 503 is retried as before: three times.
        let start = Instant::now();
        let out: Result<(), _> = with_retries(POLICY, || async { unavailable("overloaded") }).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1 + 2 + 4));
        assert!(out.is_err());
        // And `max_retries(0)` is no retry at all.
        let policy = RetryPolicy {
            max_retries: 0,
            ..POLICY
        };
        let start = Instant::now();
        let out: Result<(), _> =
            with_retries(policy, || async { unavailable("Loading model") }).await;
        assert_eq!((start.elapsed(), out.is_err()), (Duration::ZERO, true));
        // A `Retry-After` of 0 (review of this session's diff: retried at
        // once, for ever) waits the backoff, and the budget holds.
        let calls = Cell::new(0u32);
        let start = Instant::now();
        let out: Result<(), _> = with_retries(POLICY, || {
            calls.set(calls.get() + 1);
            async {
                Ok(Attempt::Unavailable {
                    status: 503,
                    retry_after: Some(Duration::ZERO),
                    message: "Loading model".into(),
                })
            }
        })
        .await;
        assert!(out.is_err());
        assert_eq!(
            calls.get(),
            10,
            "waits of 1, 2, … 32, then 60 s; the next past 300 s"
        );
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1 + 2 + 4 + 8 + 16 + 32 + 60 + 60 + 60)
        );
    }

    fn limited<T>(after: Option<u64>) -> Result<Attempt<T>, ModelError> {
        Ok(Attempt::RateLimited {
            retry_after: after.map(Duration::from_secs),
            message: "slow down".into(),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_honoured_then_the_call_goes_through() {
        let calls = Cell::new(0);
        let start = Instant::now();
        let out = with_retries(POLICY, || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 3 {
                    limited(Some(5))
                } else {
                    Ok(Attempt::Done(n))
                }
            }
        })
        .await;
        assert_eq!(out, Ok(3));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn without_retry_after_the_backoff_doubles_and_retries_run_out() {
        let calls = Cell::new(0u32);
        let start = Instant::now();
        let out: Result<(), _> = with_retries(POLICY, || {
            calls.set(calls.get() + 1);
            async { limited(None) }
        })
        .await;
        assert_eq!(calls.get(), 4);
        assert_eq!(start.elapsed(), Duration::from_secs(1 + 2 + 4));
        assert_eq!(
            out,
            Err(ModelError::RateLimited {
                retry_after: None,
                message: "slow down".into()
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_longer_than_the_cap_fails_at_once() {
        let start = Instant::now();
        let out: Result<(), _> = with_retries(POLICY, || async { limited(Some(3600)) }).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(matches!(
            out,
            Err(ModelError::RateLimited { retry_after: Some(d), .. }) if d == Duration::from_secs(3600)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_are_not_retried() {
        let calls = Cell::new(0u32);
        let out: Result<(), _> = with_retries(POLICY, || {
            calls.set(calls.get() + 1);
            async { Err(ModelError::Connection("refused".into())) }
        })
        .await;
        assert_eq!(calls.get(), 1);
        assert_eq!(out, Err(ModelError::Connection("refused".into())));
    }

    /// The backoff doubles up to `max_wait` and then stays there: with
    /// eight retries and no `Retry-After`, the seventh and eighth waits
    /// are 60 s, not 64 s and 128 s. Uncapped, the seventh backoff was
    /// over `max_wait` and the call failed at once as rate limited, two
    /// retries early — the tests' policies (three retries at most) never
    /// reached the cap.
    #[tokio::test(start_paused = true)]
    async fn the_backoff_is_capped_at_the_longest_wait_and_the_retries_go_on() {
        let policy = RetryPolicy {
            max_retries: 8,
            ..POLICY
        };
        let calls = Cell::new(0u32);
        let start = Instant::now();
        let out: Result<(), _> = with_retries(policy, || {
            calls.set(calls.get() + 1);
            async { limited(None) }
        })
        .await;
        assert_eq!(calls.get(), 9, "one try and eight retries");
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1 + 2 + 4 + 8 + 16 + 32 + 60 + 60)
        );
        assert!(
            matches!(out, Err(ModelError::RateLimited { .. })),
            "{out:?}"
        );
    }

    #[test]
    fn retry_after_parses_seconds_and_dates() {
        let now = crate::clock::Clock::now_ms(&crate::clock::SystemClock);
        let parse_retry_after = |value: &str| parse_retry_after(value, now);
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        // An HTTP date: passed, no wait; far ahead, the wait until then
        // (read as none, the backoff retried within seconds).
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        let ahead = parse_retry_after("Fri, 01 Jan 2100 00:00:00 GMT");
        assert!(
            ahead.is_some_and(|d| d > Duration::from_secs(3600 * 24 * 365)),
            "{ahead:?}"
        );
        assert_eq!(parse_retry_after("Someday, soon"), None);
        assert_eq!(parse_retry_after("-1"), None);
        // Finite but past a `Duration`: the longest wait, over any
        // `max_wait` (it read as absent, and was retried on the backoff).
        assert_eq!(
            parse_retry_after("99999999999999999999"),
            Some(Duration::MAX)
        );
        // Past an `f64` (`1e400` parses as infinity), in seconds or in
        // milliseconds: the longest wait too, not none (it was retried on
        // the backoff, three requests in 7 s to a server asking for more).
        assert_eq!(parse_retry_after("1e400"), Some(Duration::MAX));
        assert_eq!(parse_retry_after("inf"), Some(Duration::MAX));
        assert_eq!(parse_retry_after_ms("1e309"), Some(Duration::MAX));
        assert_eq!(parse_retry_after("NaN"), None);
    }
}
