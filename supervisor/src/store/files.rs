//! The files: names, the store's own temporary files, atomic writes,
//! corrupt files moved aside, ages.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use subagents_actors::hub::ChildIds;
use subagents_messages::{AgentId, Envelope};

/// The extension of an envelope file.
pub(super) const JSON_EXT: &str = ".json";
/// The extension given to a corrupt file moved aside.
pub(super) const CORRUPT_EXT: &str = ".corrupt";
/// The extension of the store's own temporary files.
pub(super) const TEMP_EXT: &str = ".subagents-tmp";
/// The lock file a store holds for its life (one store per directory).
pub(super) const LOCK_NAME: &str = ".subagents-lock";
/// Hex digits in a temporary file's unique part.
pub(super) const TEMP_UNIQUE_LEN: usize = 16;

/// The file name of envelope `id`: `[A-Za-z0-9_-]` kept, every other byte
/// as `%XX`, then `.json`. The empty id is `%.json` (a lone `%` is never
/// produced otherwise), so the mapping is one-to-one and never starts with
/// a dot.
pub(super) fn file_name_for(id: &AgentId) -> String {
    let id = id.as_str();
    let mut name = String::with_capacity(id.len() + JSON_EXT.len() + 1);
    if id.is_empty() {
        name.push('%');
    }
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            name.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(name, "%{b:02X}");
        }
    }
    name.push_str(JSON_EXT);
    name
}

/// The child a file name in the store names, whatever became of the
/// file — an envelope, its run, one moved aside as corrupt, one of the
/// store's temporary files: `agent_3` for each of `agent_3.json`,
/// `agent_3.json.corrupt`, `.agent_3.json.<hex>.subagents-tmp`. Its id is
/// taken, so a restart never hands it out again. Only a name whose stem
/// [`file_name_for`] writes as itself (a child's id is such a name), and
/// only the store's own names: another tool's (`agent_3.json.bak`, a
/// user's copy) named any number — the last one a store may hand out
/// (`agent_9007199254740991`) took every id left, for good.
pub(super) fn named_child(name: &str) -> Option<AgentId> {
    let (hidden, name) = match name.strip_prefix('.') {
        Some(rest) => (true, rest),
        None => (false, name),
    };
    let (stem, rest) = name.split_once(JSON_EXT)?;
    let plain = !stem.is_empty()
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    // `.json`, `.json.corrupt`, `.json.<n>.corrupt`; hidden, a temporary
    // name's `.json.<hex>.subagents-tmp`.
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let ours = match hidden {
        false => {
            rest.is_empty()
                || rest == CORRUPT_EXT
                || rest
                    .strip_prefix('.')
                    .and_then(|r| r.strip_suffix(CORRUPT_EXT))
                    .is_some_and(digits)
        }
        // As the store writes them (16 lowercase hex digits).
        true => rest.starts_with('.') && is_temp_name(&format!(".{name}")),
    };
    (plain && ours).then(|| AgentId::new(stem))
}

/// The store's own temporary names:
/// `.<envelope file>.<16 hex digits>.subagents-tmp`, where the envelope
/// file is a name [`file_name_for`] can produce.
pub(super) fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix('.')
        .and_then(|r| r.strip_suffix(TEMP_EXT))
    else {
        return false;
    };
    let Some((target, unique)) = rest.rsplit_once('.') else {
        return false;
    };
    let unique_ok = unique.len() == TEMP_UNIQUE_LEN
        && unique
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    // The session count's own (`..subagents-session.<hex>.subagents-tmp`),
    // and the kept child number's (one a kill left was listed as foreign
    // at every open, never removed).
    if target == super::lock::SESSION_NAME || target == super::kept_ids::IDS_NAME {
        return unique_ok;
    }
    let Some(stem) = target.strip_suffix(JSON_EXT) else {
        return false;
    };
    unique_ok
        && !stem.is_empty()
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'%')
}

/// A file's JSON without the UTF-8 byte-order mark an editor may have put
/// first (PowerShell 5's `Set-Content -Encoding UTF8`, editors saving
/// "UTF-8 with BOM"; RFC 8259 lets a parser ignore it): serde_json reads
/// it as a syntax error, and an envelope fixed by hand was moved aside as
/// corrupt, its run pruned as an orphan.
pub(super) fn json_text(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// Decodes an envelope file, checking it is filed under its own id.
pub(super) fn parse_envelope(name: &str, bytes: &[u8]) -> Result<Envelope, String> {
    let envelope: Envelope = serde_json::from_slice(json_text(bytes)).map_err(|e| {
        if e.is_data() {
            format!("not an envelope: {e}")
        } else {
            format!("not valid JSON: {e}")
        }
    })?;
    if ChildIds::is_out_of_range(&envelope.id) {
        return Err(format!(
            "the id {:?} is out of range: child ids go up to agent_{}",
            envelope.id.as_str(),
            ChildIds::MAX
        ));
    }
    let expected = file_name_for(&envelope.id);
    if expected != name {
        return Err(format!(
            "holds envelope {:?}, which belongs in {expected}",
            envelope.id.as_str()
        ));
    }
    Ok(envelope)
}

/// What an open says of another version's envelope it leaves unread.
pub(super) const KEPT_UNTIL: &str = "left in place, until twice the retention old";

/// A JSON object filed under its own id that this version cannot decode
/// (a status, or a field's type, of another version of the library): not
/// corrupt — left in place for the version that wrote it (moved aside, it
/// was lost to that version for good, and its run pruned as an orphan).
pub(super) fn from_another_version(name: &str, bytes: &[u8]) -> bool {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice(json_text(bytes)) else {
        return false;
    };
    fields
        .get("id")
        .and_then(serde_json::Value::as_str)
        .map(AgentId::new)
        .is_some_and(|id| !ChildIds::is_out_of_range(&id) && file_name_for(&id) == name)
}

/// The stamp an envelope ages from.
pub(super) fn age_stamp(envelope: &Envelope) -> u64 {
    envelope.finished_at_ms.unwrap_or(envelope.requested_at_ms)
}

/// Older than `retention` at `now`. Future-dated (stamp > now): never.
pub(super) fn is_expired(envelope: &Envelope, now_ms: u64, retention: Duration) -> bool {
    match now_ms.checked_sub(age_stamp(envelope)) {
        Some(age) => u128::from(age) > retention.as_millis(),
        None => false,
    }
}

impl super::EnvelopeStore {
    /// Whether an envelope that finished at `finished_at_ms` (by the
    /// clock that stamped it) is within the retention by this store's
    /// clock: `false` means the next prune removes it.
    pub fn retains(&self, finished_at_ms: u64) -> bool {
        match self.clock.now_ms().checked_sub(finished_at_ms) {
            Some(age) => u128::from(age) <= self.retention.as_millis(),
            None => true,
        }
    }
}

/// Temporary file (created exclusively, named by [`is_temp_name`]'s
/// shape), write, fsync, rename over `path`, fsync the directory. The
/// temporary is removed on error.
pub(super) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    let unique = format!(
        "{:08x}{:08x}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let temp = dir.join(format!(".{name}.{unique}{TEMP_EXT}"));
    let written = (|| {
        // A rewrite keeps the file's permissions (a host that made its
        // envelopes private keeps them so, not the umask's default).
        let existing = fs::metadata(path).ok();
        let mut file = create_temp(&temp, existing.as_ref())?;
        if let Some(existing) = existing {
            file.set_permissions(existing.permissions())?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
        return written;
    }
    fs::File::open(dir)?.sync_all()
}

/// Renames a corrupt file to `<name>.corrupt` (or `<name>.<n>.corrupt`),
/// never over an existing file. `None` if it could not be moved.
pub(super) fn move_aside(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let dir = path.parent()?;
    for n in 0u32..1000 {
        let target = if n == 0 {
            dir.join(format!("{name}{CORRUPT_EXT}"))
        } else {
            dir.join(format!("{name}.{n}{CORRUPT_EXT}"))
        };
        // A hard link fails if the target exists: no clobbering.
        match fs::hard_link(path, &target) {
            Ok(()) => {
                return match fs::remove_file(path) {
                    Ok(()) => Some(target),
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "could not move corrupt file aside");
                        None
                    }
                };
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => {
                // No hard links here: fall back to a checked rename.
                if target.exists() {
                    continue;
                }
                return match fs::rename(path, &target) {
                    Ok(()) => Some(target),
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "could not move corrupt file aside");
                        None
                    }
                };
            }
        }
    }
    None
}

/// Makes renames and removals in `dir` durable; failures are logged only
/// (the data files themselves are already complete).
pub(super) fn sync_dir_best_effort(dir: &Path) {
    if let Err(error) = fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), %error, "could not fsync envelope directory");
    }
}

/// Makes `dir` (and the folders above it that are missing) readable by
/// its owner alone (0700 on Unix): the store's files hold whole
/// conversations, and made with the umask's default (0755 folders, 0644
/// files) any local user could read them. A folder that exists keeps its
/// mode (a host that chose one keeps it).
pub(super) fn create_private_dir(dir: &Path, recursive: bool) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(recursive);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Removes a temporary file a killed write left; `true` if it went (it is
/// listed in the report).
pub(super) fn remove_temp(path: PathBuf, report: &mut crate::store::LoadReport) -> bool {
    match fs::remove_file(&path) {
        Ok(()) => {
            tracing::debug!(path = %path.display(), "removed stray temporary file");
            report.temp_removed.push(path);
            true
        }
        Err(error) => {
            tracing::warn!(
                path = %path.display(),
                %error,
                "could not remove stray temporary file; ignored"
            );
            false
        }
    }
}

/// Creates a rewrite's temporary file, on Unix with no more permission
/// than the file it replaces (`like`): made with the umask's default and
/// narrowed after, a file the host keeps private was readable by anyone in
/// between, while the conversation was written into it.
fn create_temp(temp: &Path, like: Option<&fs::Metadata>) -> io::Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if let Some(like) = like {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(like.permissions().mode() & 0o777);
    }
    #[cfg(not(unix))]
    let _ = like;
    options.open(temp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Foreign input (review: forged or repeated): a name another tool
    /// left (`agent_9007199254740991.json.bak`) took its number from the
    /// store's ids — the last one, and every delegation was refused, for
    /// good once a prune wrote it down. Only the store's own names count.
    #[test]
    fn only_the_stores_own_names_take_a_childs_number() {
        for ours in [
            "agent_3.json",
            "agent_3.json.corrupt",
            "agent_3.json.2.corrupt",
            ".agent_3.json.0123456789abcdef.subagents-tmp",
        ] {
            assert_eq!(named_child(ours), Some(AgentId::new("agent_3")), "{ours}");
        }
        for foreign in [
            "agent_3.json.bak",
            "agent_3.json~",
            "agent_3.json.x.corrupt",
            ".agent_3.json",
            ".agent_3.json.bak.subagents-tmp",
            "agent_3.json.0123.subagents-tmp",
            ".agent_3.json.0123.subagents-tmp",
            ".agent_3.json.0123456789ABCDEF.subagents-tmp",
            "agent_3.jsonl",
        ] {
            assert_eq!(named_child(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn file_names_are_safe_and_one_to_one() {
        assert_eq!(file_name_for(&AgentId::new("agent_3")), "agent_3.json");
        assert_eq!(file_name_for(&AgentId::new("a/b")), "a%2Fb.json");
        assert_eq!(file_name_for(&AgentId::new("../x")), "%2E%2E%2Fx.json");
        assert_eq!(file_name_for(&AgentId::new("%")), "%25.json");
        assert_eq!(file_name_for(&AgentId::new("")), "%.json");
        assert_ne!(
            file_name_for(&AgentId::new("a.b")),
            file_name_for(&AgentId::new("a%2Eb"))
        );
    }

    #[test]
    fn temp_names_are_recognised() {
        assert!(is_temp_name(".agent_1.json.0000abcd00000001.subagents-tmp"));
        assert!(is_temp_name(".a%2Fb.json.0123456789abcdef.subagents-tmp"));
        assert!(!is_temp_name(".agent_1.json.aB3xY9"));
        assert!(!is_temp_name(".notes.json.backup"));
        assert!(!is_temp_name(
            ".agent_1.json.0000ABCD00000001.subagents-tmp"
        ));
        assert!(!is_temp_name(".agent_1.json.0000abcd0000001.subagents-tmp"));
        assert!(!is_temp_name("agent_1.json.0000abcd00000001.subagents-tmp"));
        assert!(!is_temp_name(".a.b.json.0000abcd00000001.subagents-tmp"));
        assert!(!is_temp_name("agent_1.json"));
        assert!(!is_temp_name(".agent_1.json"));
        assert!(!is_temp_name(".agent_1.json.corrupt"));
    }

    /// Shared (store review, thirty-fourth session): a rewrite's temporary
    /// file took the umask's mode (0644), then the private file's — a
    /// local user watching the directory could open it in between and read
    /// the conversation written into it next. Made private from the start.
    #[cfg(unix)]
    #[test]
    fn a_rewrites_temporary_file_is_never_more_open_than_the_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let private = tmp.path().join("agent_1.json");
        fs::write(&private, b"{}").unwrap();
        fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).unwrap();
        let like = fs::metadata(&private).unwrap();
        let temp = tmp.path().join(".agent_1.json.x.subagents-tmp");
        let file = create_temp(&temp, Some(&like)).unwrap();
        let mode = file.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }
}
