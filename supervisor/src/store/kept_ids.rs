//! The last child number a store handed out, kept on disk before any of
//! its files is removed: the counter of the next open starts past every id
//! the directory names, and an id pruned from it was named nowhere — the
//! next open but one handed `agent_1` out again, and a host's row kept
//! from before (an approval `agent_1-approval-1`, a restored transcript's
//! `agent_1`) matched the new child.

use std::path::Path;
use std::sync::PoisonError;

use subagents_actors::hub::ChildIds;
use subagents_messages::AgentId;

use crate::store::EnvelopeStore;
use crate::store::files::write_atomic;
use crate::store::lock::read_count;
use crate::store::report::StoreError;

/// The file holding the number (a decimal number).
pub(super) const IDS_NAME: &str = ".subagents-ids";

/// The number the directory's ids file holds (0 for none); one that
/// cannot be read, holds no number or one past [`ChildIds::MAX`] is
/// [`StoreError::OwnFile`]: taken as none, the ids it kept would be handed
/// out again.
pub(super) fn last_child_number(dir: &Path) -> Result<u64, StoreError> {
    let path = dir.join(IDS_NAME);
    let last = read_count(&path, "a child number")?;
    if last > ChildIds::MAX {
        return Err(StoreError::OwnFile {
            path,
            problem: format!(
                "holds {last}, past the last child number ({})",
                ChildIds::MAX
            ),
            source: None,
        });
    }
    Ok(last)
}

impl EnvelopeStore {
    /// Called (under the io lock) before the files of `removed` are
    /// removed: the last number the store's counter handed out (or one of
    /// `removed`'s, saved by a host under an id of its own choosing) is
    /// written down, once it is past the number already kept. An error
    /// when it cannot be: the caller removes nothing (a kept file keeps
    /// its number).
    pub(super) fn keep_child_numbers<'a>(
        &self,
        removed: impl IntoIterator<Item = &'a AgentId>,
    ) -> Result<(), StoreError> {
        let last = (removed.into_iter())
            .filter_map(ChildIds::number)
            .fold(self.ids.last(), u64::max);
        let mut kept = self.ids_kept.lock().unwrap_or_else(PoisonError::into_inner);
        if last <= *kept {
            return Ok(());
        }
        let path = self.dir.join(IDS_NAME);
        write_atomic(&path, last.to_string().as_bytes()).map_err(|source| StoreError::OwnFile {
            path,
            problem: "cannot be written".to_owned(),
            source: Some(source),
        })?;
        *kept = last;
        Ok(())
    }
}
