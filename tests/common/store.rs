//! Store helpers: what a killed process leaves on disk.

/// What a killed process leaves, without the kill: the store directory
/// copied while its thread runs (files are written atomically, so a copy
/// is what a `kill -9` at that moment leaves on disk).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
