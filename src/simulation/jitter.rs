//! Seeded latency before each model call, from a fixed hash.

use std::sync::Arc;
use std::time::Duration;

use subagents_actors::{Model, ModelStream};
use subagents_messages::{ModelRequest, Role};

/// Seeded latency before each call, derived from the request alone (so it
/// does not depend on call order).
pub(super) struct Jitter {
    pub(super) inner: Arc<dyn Model>,
    pub(super) seed: u64,
    pub(super) max: Duration,
}

impl Model for Jitter {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if self.max.is_zero() {
            return self.inner.stream(request);
        }
        let delay = draw(self.seed, &request, self.max);
        let inner = self.inner.stream(request);
        Box::pin(futures_util::stream::unfold(
            (Some(delay), inner),
            |(delay, mut inner)| async move {
                if let Some(delay) = delay {
                    tokio::time::sleep(delay).await;
                }
                let next = futures_util::StreamExt::next(&mut inner).await?;
                Some((next, (None, inner)))
            },
        ))
    }
}

/// The delay before `request`'s call, for `seed`: from 0 to `max` whole
/// milliseconds, a function of the seed and the request alone.
fn draw(seed: u64, request: &ModelRequest, max: Duration) -> Duration {
    // A fixed hash (FNV-1a), not `DefaultHasher`: its algorithm is
    // unspecified across toolchains, and a replay must not change with
    // the compiler.
    let mut hash = Fnv::new();
    hash.write(&seed.to_le_bytes());
    hash.write_str(request.system_prompt());
    hash.write_str(
        request
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.as_str()),
    );
    hash.write(&(request.assistant_messages() as u64).to_le_bytes());
    // Whole milliseconds, from 0 to `max` (to 1 ms for a smaller one):
    // tokio's timer rounds a sleep up to its next millisecond, so a delay
    // drawn in nanoseconds under 1 ms was 1 ms whatever the seed — a
    // jitter of 999 µs varied nothing, one of 2 ns waited 500,000 times
    // its maximum. A maximum past `u64` (in nanoseconds once: 584 years)
    // is that many.
    let max = u64::try_from(max.as_millis()).unwrap_or(u64::MAX).max(1);
    // Mixed, then scaled from its high bits: FNV's low k bits depend on
    // the input's low k bits alone, so `hash % 2^k` saw the seed through
    // 2^k values — a 1 ms jitter (`% 2`) gave two runs over every seed —
    // and its top bit alone still ties draws of one seed together.
    let span = u128::from(max) + 1;
    let ms = (u128::from(mix(hash.0)) * span) >> 64;
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// SplitMix64's finalizer: every output bit depends on every input bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a, 64 bits: a hash whose every output is fixed by its definition.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// A string, or its absence, framed so that no two inputs collide by
    /// concatenation.
    fn write_str(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.write(&[1]);
                self.write(&(s.len() as u64).to_le_bytes());
                self.write(s.as_bytes());
            }
            None => self.write(&[0]),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::Duration;

    use subagents_messages::{ChatMessage, ModelRequest};

    use super::{Fnv, draw};

    /// Every seed is a run of its own: over 4,096 seeds, the delays drawn
    /// for 12 requests differ between nearly every two seeds, at any
    /// maximum — a jitter of 2^k − 1 ms (1, 3, 15, 255, 1,023) saw the
    /// seed through 2^k values (two runs over every seed at 1 ms).
    #[test]
    fn nearly_every_seed_draws_delays_of_its_own() {
        let requests: Vec<ModelRequest> = (0..12)
            .map(|i| ModelRequest {
                messages: vec![
                    ChatMessage::system(format!("Worker {}\nYou work.", i % 4)),
                    ChatMessage::user(format!("part {}", i / 4)),
                ],
                tools: Vec::new(),
                options: Default::default(),
            })
            .collect();
        for max_ms in [1, 3, 15, 99, 255, 1_000, 1_023] {
            let max = Duration::from_millis(max_ms);
            let runs: HashSet<Vec<Duration>> = (0..4_096)
                .map(|seed| requests.iter().map(|r| draw(seed, r, max)).collect())
                .collect();
            // At 1 ms, 2^12 outcomes for 4,096 seeds: about 2,590 distinct
            // if each seed draws its own.
            assert!(runs.len() > 2_400, "{max_ms} ms: {} runs", runs.len());
            let all: Vec<Duration> = runs.iter().flatten().copied().collect();
            assert!(all.iter().all(|d| *d <= max), "{max_ms} ms");
            assert!(
                all.contains(&max) && all.contains(&Duration::ZERO),
                "{max_ms} ms"
            );
        }
    }

    #[test]
    fn the_jitter_hash_is_fixed_by_its_definition() {
        // FNV-1a's published test vectors.
        let mut h = Fnv::new();
        h.write(b"");
        assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
        let mut h = Fnv::new();
        h.write(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
        let mut h = Fnv::new();
        h.write(b"foobar");
        assert_eq!(h.0, 0x8594_4171_f739_67e8);
    }
}
