//! Which files of a profile directory are read: every `*.md` and `*.toml`
//! file in it and in its sub-folders (Claude Code reads its agents folders
//! so), in path order.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::error::{ProfileError, ProfileWarning};
use super::load::warn;

/// How deep below a profile directory files are still read: a folder
/// linked into itself (or a tree that deep) ends there, said.
const MAX_DEPTH: usize = 8;

/// The candidate profile files of `dir` and its sub-folders, sorted by
/// path. Sub-folders were skipped in silence: a project's agent kept in
/// `.claude/agents/review/` never replaced the user's agent of that name,
/// which may have every tool, and a collection linked in as a folder loaded
/// nothing.
pub(super) fn profile_files(dir: &Path, warnings: &mut Vec<ProfileWarning>) -> Vec<PathBuf> {
    let mut walk = Walk::default();
    if let Ok(canonical) = std::fs::canonicalize(dir) {
        walk.seen.insert(canonical);
    }
    // Breadth first, each folder's entries in path order: a folder reached
    // by two paths (a link) is read under the shallowest, the first in
    // path order. Depth first in the directory's own order, a link one
    // level down could take a folder's files a level deeper, where a
    // same-named profile won over them — or past the depth limit, where
    // they were not read at all — as `read_dir` listed it, machine by
    // machine.
    let mut level = walk.folder(dir, true);
    for depth in 1.. {
        if level.is_empty() {
            break;
        }
        let mut below = Vec::new();
        for folder in level {
            if walk.sub_folder(&folder, depth) {
                below.extend(walk.folder(&folder, false));
            }
        }
        below.sort();
        level = below;
    }
    // The folder's own files first, then each level down (in path order
    // within a level): by path alone, `archive/reviewer.md` (every tool)
    // came before `reviewer.md` (read only) and took its name.
    walk.files
        .sort_by_cached_key(|path| (path.components().count(), path.clone()));
    // In name order, as the files are: never the directory's own order.
    walk.broken
        .sort_by(|a: &ProfileError, b| a.path().cmp(b.path()));
    for error in walk.broken {
        warn(warnings, ProfileWarning::Skipped(error));
    }
    walk.unreadable.sort_by(|a, b| a.path().cmp(b.path()));
    for warning in walk.unreadable {
        warn(warnings, warning);
    }
    walk.files
}

#[derive(Default)]
struct Walk {
    files: Vec<PathBuf>,
    broken: Vec<ProfileError>,
    unreadable: Vec<ProfileWarning>,
    /// Folders read, by their canonical path: one linked in twice, or
    /// into itself, is read once.
    seen: BTreeSet<PathBuf>,
}

impl Walk {
    /// Takes `dir`'s profile files; its sub-folders, in path order.
    fn folder(&mut self, dir: &Path, top: bool) -> Vec<PathBuf> {
        let unreadable = |e: std::io::Error| ProfileWarning::UnreadableDir {
            path: dir.to_path_buf(),
            message: e.to_string(),
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            // The directory asked for may not exist; a folder listed a
            // moment ago that is gone now is said.
            Err(e) if top && e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                self.unreadable.push(unreadable(e));
                return Vec::new();
            }
        };
        let mut folders = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    self.unreadable.push(unreadable(e));
                    continue;
                }
            };
            let path = entry.path();
            let hidden = path
                .file_name()
                .and_then(OsStr::to_str)
                .is_some_and(|n| n.starts_with('.'));
            if hidden {
                continue;
            }
            let ext = path.extension();
            let profile = ext == Some(OsStr::new("md")) || ext == Some(OsStr::new("toml"));
            if path.is_dir() {
                folders.push(path);
            } else if profile {
                if path.is_file() {
                    self.files.push(path);
                } else if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    // A link to nothing (or a loop): said, not silently
                    // skipped — a profile of that name elsewhere would
                    // stand in for it unnoticed.
                    let why = match std::fs::metadata(&path) {
                        Err(e) => e.to_string(),
                        Ok(_) => "it links to something that is not a file".to_owned(),
                    };
                    let message = format!("a symbolic link that cannot be read as a file: {why}");
                    self.broken.push(ProfileError::Read { path, message });
                }
            }
        }
        folders.sort();
        folders
    }

    /// Whether the sub-folder `path`, `depth` folders down, is to be read:
    /// not one read already (by another path), nor past [`MAX_DEPTH`].
    fn sub_folder(&mut self, path: &Path, depth: usize) -> bool {
        let Ok(canonical) = std::fs::canonicalize(path) else {
            return false;
        };
        if !self.seen.insert(canonical) {
            return false;
        }
        if depth > MAX_DEPTH {
            self.unreadable.push(ProfileWarning::UnreadableDir {
                path: path.to_path_buf(),
                message: format!(
                    "more than {MAX_DEPTH} folders below the profile directory: not read"
                ),
            });
            return false;
        }
        true
    }
}
