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
        // A fixed hash (FNV-1a), not `DefaultHasher`: its algorithm is
        // unspecified across toolchains, and a replay must not change with
        // the compiler.
        let mut hash = Fnv::new();
        hash.write(&self.seed.to_le_bytes());
        hash.write_str(request.system_prompt());
        hash.write_str(
            request
                .messages
                .iter()
                .find(|m| m.role == Role::User)
                .map(|m| m.content.as_str()),
        );
        hash.write(&(request.assistant_messages() as u64).to_le_bytes());
        // Whole milliseconds, from 0 to `max` (to 1 ms for a smaller
        // one): tokio's timer rounds a sleep up to its next millisecond,
        // so a delay drawn in nanoseconds under 1 ms was 1 ms whatever the
        // seed — a jitter of 999 µs varied nothing, one of 2 ns waited
        // 500,000 times its maximum. A maximum past `u64` (in nanoseconds
        // once: 584 years) is that many.
        let max = u64::try_from(self.max.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let delay = Duration::from_millis(hash.0 % max.saturating_add(1));
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
    use super::Fnv;

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
