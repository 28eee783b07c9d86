//! Persisted envelopes: one small JSON file per child, kept for a day.
//!
//! # File layout
//!
//! An [`EnvelopeStore`] owns one directory. Each envelope lives in its own
//! file, `<id>.json`, holding exactly the [`Envelope`](subagents_messages::Envelope)'s fields as compact
//! JSON (no wrapper, no history). Characters of the id outside
//! `[A-Za-z0-9_-]` are written as `%XX` (so `agent_3` is `agent_3.json` and
//! an id like `a/b` cannot escape the directory); the mapping is one-to-one.
//! Other files in the directory are left alone, except for the two kinds
//! described below (temporary files and corrupt files). The store's own
//! beside them are its lock (`.subagents-lock`), its count of opens
//! (`.subagents-session`) and the last child number it handed out before
//! it removed a file (`.subagents-ids`).
//!
//! The directory has one owner: one store in one process at a time. One
//! store may be shared by any number of threads of that process.
//!
//! # Atomicity
//!
//! [`EnvelopeStore::save`] never writes the target file in place. It writes
//! a temporary file in the same directory
//! (`.<id>.json.<16 hex digits>.subagents-tmp`, created exclusively), fsyncs
//! it, renames it over `<id>.json`, and fsyncs the directory. A reader (or the next [`EnvelopeStore::open`]) sees
//! either the old file or the new one, never a torn mix, even if the
//! process is killed in the middle.
//!
//! A write that fails (full disk, read-only or vanished directory, any I/O
//! error) returns [`StoreError::Write`] naming the target path; the
//! envelope is kept in memory anyway, so it stays answerable by id for the
//! rest of the session. A later `save` of the same id tries again.
//!
//! Stray temporary files, left behind when a process died between creating
//! one and renaming it, are **removed** on open (they never hold a write
//! that was reported complete) and listed in [`LoadReport::temp_removed`].
//! Only names of exactly that shape are removed: any other file in the
//! directory — `.notes.json.backup`, another tool's temporary file — is
//! left where it is and listed in [`LoadReport::foreign`].
//!
//! # Ids
//!
//! Envelopes are keyed by id alone, so every hub writing to one store must
//! draw its child ids from the store's own counter
//! ([`EnvelopeStore::child_ids`]), which starts past every id loaded: two
//! threads sharing a store never both make an `agent_1`, and a restart
//! never reuses an id — one whose files were pruned included: before a
//! prune removes a file, the last number handed out is written to
//! `.subagents-ids`, and the counter starts past it too (it started past
//! the ids the directory still named, and handed a pruned one out
//! again). A stored child id past
//! `ChildIds::MAX` is a
//! corrupt file (reported and moved aside), never a crash; `save` refuses
//! one ([`StoreError::OutOfRange`]) rather than write what the next open
//! sets aside.
//!
//! # Corrupt files
//!
//! On open, a `*.json` file that is not JSON, is not an [`Envelope`](subagents_messages::Envelope), or
//! holds an envelope whose id does not match its file name is *corrupt*.
//! It is skipped, reported in [`LoadReport::corrupt`] with its path (and
//! with a `tracing` warning), and moved aside to `<name>.corrupt`
//! (`<name>.<n>.corrupt` if that is taken). It is never deleted. All other
//! files still load. A file that cannot be read at all (an I/O error) is
//! reported in [`LoadReport::unreadable`] and left where it is.
//!
//! # Pruning and clock jumps
//!
//! An envelope's age is measured from its `finished_at_ms`, or from its
//! `requested_at_ms` while unfinished, against the injected [`Clock`](subagents_actors::clock::Clock).
//! [`EnvelopeStore::prune`] removes (from memory and disk) every finished
//! envelope older than the retention (an unfinished one never: it ages
//! from its end) ([`EnvelopeStore::DEFAULT_RETENTION`], 24 h, unless opened
//! with another: [`EnvelopeStore::open_with_retention`]); exactly 24 h old is kept. `open` prunes once
//! after loading; a thread's writes, at most once a minute by the clock.
//!
//! Pruning is a pure function of the clock's current reading, with no
//! remembered high-water mark, so:
//!
//! - a backward jump only makes envelopes look younger: it never prunes
//!   anything that the same prune would not have pruned before the jump;
//! - an envelope stamped in the future (stamp > now, e.g. written before the
//!   clock was set back) is never pruned; it starts ageing once the clock
//!   passes its stamp;
//! - a forward jump prunes early, as a real day passing would. Nothing can
//!   tell the two apart.
//!
//! An envelope whose file cannot be removed stays (in memory and on disk),
//! is reported in [`PruneReport::failed`], and is retried on the next prune.

//!
//! | file | holds |
//! |---|---|
//! | `envelopes.rs` | [`EnvelopeStore`] |
//! | `listing.rs` | its envelopes listed and counted |
//! | `report.rs` | [`StoreError`], [`LoadReport`], [`PruneReport`], [`CorruptFile`] |
//! | `files.rs` | file names, the store's temporary files, atomic writes, corrupt files |
//! | `lock.rs` | the directory's lock, its count of sessions, approval blocks |
//! | `kept_ids.rs` | the last child number, kept before a prune |
//! | `runs.rs` | run files (a child's conversation), resume links |
//! | `resumes.rs` | an earlier session's child's resume begun, or its cancel |
//! | `live.rs` | one live thread per id on a store; whose a child is |
//! | `prune.rs` | the retention's prune; a deleted thread's children forgotten |
//! | `schedule.rs` | a thread's writes prune at most once a minute |

mod envelopes;
mod files;
mod kept_ids;
mod listing;
pub(crate) mod live;
mod lock;
mod prune;
mod report;
mod restart;
mod resumes;
mod runs;
mod schedule;

pub use envelopes::EnvelopeStore;
pub(crate) use listing::child_order;
pub(crate) use live::LiveThread;
pub(crate) use lock::APPROVALS_PER_BLOCK;
pub use report::{CorruptFile, LoadReport, PruneReport, StoreError};
