//! Child ids: `agent_1`, `agent_2`, … handed out by one shared counter, so
//! every hub drawing from the same [`ChildIds`] (two threads on one
//! envelope store, say) gets ids no other one has.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use subagents_messages::AgentId;

/// See [`ChildIds::MAX`].
pub(crate) const MAX_CHILD_NUMBER: u64 = (1 << 53) - 1;

/// The prefix of every child id.
const PREFIX: &str = "agent_";

/// A shared counter of child numbers. Cheap to clone; clones share it.
#[doc(hidden)] // plumbing for subagents-supervisor's store, not API
#[derive(Debug, Clone)]
pub struct ChildIds {
    next: Arc<AtomicU64>,
}

impl Default for ChildIds {
    fn default() -> Self {
        Self::starting_at(1)
    }
}

impl ChildIds {
    /// A counter whose first id is `agent_<first>` (`first` is at least 1).
    pub fn starting_at(first: u64) -> Self {
        Self {
            next: Arc::new(AtomicU64::new(first.max(1))),
        }
    }

    /// A counter whose first id comes after every id in `taken` (ids that
    /// are not child ids are ignored); `None` when one of them is past
    /// [`ChildIds::MAX`].
    pub fn after<'a>(taken: impl IntoIterator<Item = &'a AgentId>) -> Self {
        let last = taken
            .into_iter()
            .filter_map(child_number)
            .max()
            .unwrap_or(0);
        Self::starting_at(last.saturating_add(1))
    }

    /// The next id, never handed out before by this counter or its
    /// clones; `None` once every number up to [`ChildIds::MAX`] is taken.
    pub fn next(&self) -> Option<AgentId> {
        let taken = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n <= MAX_CHILD_NUMBER).then(|| n + 1)
            })
            .ok()?;
        Some(child_id(taken))
    }

    /// The next id comes after `agent_<last>` (at once if it already
    /// does): a number given elsewhere — by another counter of the same
    /// conversation, or a host saving an envelope under an id of its own
    /// — is not handed out by this one.
    pub fn skip_past(&self, last: u64) {
        let next = last.saturating_add(1).min(MAX_CHILD_NUMBER + 1);
        self.next.fetch_max(next, Ordering::Relaxed);
    }

    /// The number of the last id handed out (0 before the first).
    pub fn last(&self) -> u64 {
        (self.next.load(Ordering::Relaxed) - 1).min(MAX_CHILD_NUMBER)
    }

    /// The largest child number: `agent_9007199254740991` (2⁵³ − 1, the
    /// largest integer a JSON reader using doubles holds exactly).
    pub const MAX: u64 = MAX_CHILD_NUMBER;

    /// True for an id shaped like a child id (`agent_` and digits) whose
    /// number is past [`ChildIds::MAX`] or does not fit a `u64`: a stored
    /// envelope with such an id is corrupt.
    pub fn is_out_of_range(id: &AgentId) -> bool {
        is_out_of_range(id)
    }

    /// The number of an id these hand out (`agent_12` → 12); `None` for
    /// any other id (`agent_012`, `notes`): one no `ChildIds` made.
    pub fn number(id: &AgentId) -> Option<u64> {
        child_number(id)
    }
}

/// `agent_<n>`, written on the stack: the id's one allocation is its
/// `Arc<str>` (`format!` made a `String` first, then copied it).
fn child_id(n: u64) -> AgentId {
    // "agent_" and at most 20 digits (u64::MAX).
    let mut buf = [0u8; 26];
    buf[..PREFIX.len()].copy_from_slice(PREFIX.as_bytes());
    let (digits, at) = decimal(n);
    let len = PREFIX.len() + digits.len() - at;
    buf[PREFIX.len()..len].copy_from_slice(&digits[at..]);
    // ASCII throughout; the fallback is never taken.
    AgentId::new(std::str::from_utf8(&buf[..len]).unwrap_or(PREFIX))
}

/// `n` in decimal, written on the stack: the digits are `buf[at..]` of
/// the returned `(buf, at)` (ids and the answers' counts, without
/// `format!`).
pub(crate) fn decimal(n: u64) -> ([u8; 20], usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    (digits, at)
}

/// The number of a child id (`agent_12` → 12): digits only, no sign, no
/// leading zero, at most [`ChildIds::MAX`]. `None` for any other id.
pub(crate) fn child_number(id: &AgentId) -> Option<u64> {
    let digits = id.as_str().strip_prefix(PREFIX)?;
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits
        .parse::<u64>()
        .ok()
        .filter(|n| *n <= MAX_CHILD_NUMBER)
}

/// True for an id shaped like a child id (`agent_` and digits) whose
/// number is past [`ChildIds::MAX`] or does not fit a `u64`.
pub(crate) fn is_out_of_range(id: &AgentId) -> bool {
    let Some(digits) = id.as_str().strip_prefix(PREFIX) else {
        return false;
    };
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.parse::<u64>().map_or(true, |n| n > MAX_CHILD_NUMBER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> AgentId {
        AgentId::new(s)
    }

    #[test]
    fn clones_share_the_counter_and_ids_never_repeat() {
        let a = ChildIds::default();
        let b = a.clone();
        assert_eq!(a.next(), Some(id("agent_1")));
        assert_eq!(b.next(), Some(id("agent_2")));
        assert_eq!(a.next(), Some(id("agent_3")));
    }

    #[test]
    fn the_counter_ends_at_the_maximum_without_overflow() {
        let ids = ChildIds::starting_at(MAX_CHILD_NUMBER);
        assert_eq!(ids.next(), Some(id(&format!("agent_{MAX_CHILD_NUMBER}"))));
        assert_eq!(ids.next(), None);
        assert_eq!(ids.next(), None);
        let past = ChildIds::starting_at(u64::MAX);
        assert_eq!(past.next(), None);
    }

    #[test]
    fn after_skips_foreign_and_out_of_range_ids() {
        let taken = [
            id("agent_4"),
            id("notes"),
            id("agent_18446744073709551615"),
            id("agent_0x9"),
        ];
        let ids = ChildIds::after(&taken);
        assert_eq!(ids.next(), Some(id("agent_5")));
        assert_eq!(ChildIds::after(&[]).next(), Some(id("agent_1")));
    }

    #[test]
    fn ids_are_written_as_format_would() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, MAX_CHILD_NUMBER, u64::MAX] {
            assert_eq!(child_id(n), id(&format!("agent_{n}")), "{n}");
        }
    }

    #[test]
    fn numbers_and_ranges() {
        assert_eq!(child_number(&id("agent_12")), Some(12));
        assert_eq!(child_number(&id("agent_012")), None);
        assert_eq!(child_number(&id("agent_")), None);
        assert_eq!(child_number(&id("agent_+1")), None);
        assert!(is_out_of_range(&id("agent_18446744073709551615")));
        assert!(is_out_of_range(&id("agent_99999999999999999999999")));
        assert!(is_out_of_range(&id(&format!(
            "agent_{}",
            MAX_CHILD_NUMBER + 1
        ))));
        assert!(!is_out_of_range(&id(&format!("agent_{MAX_CHILD_NUMBER}"))));
        assert!(!is_out_of_range(&id("notes")));
    }
}
