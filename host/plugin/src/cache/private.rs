//! Whether a path is this user's alone: the checks the compile cache makes before it trusts a
//! directory, an artefact or its key. Loading compiled code is only safe from files nobody else
//! could have written, so a path others could write to, or replace through one of its parent
//! directories, is refused.

use std::fs::File;
use std::path::{Path, PathBuf};

/// Creates `dir` and its missing parents with mode 0700.
pub(super) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// The owner of a file this process creates in `dir`: the user refract writes files as.
pub(super) fn file_owner(dir: &Path) -> Result<u32, String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let probe = tempfile::NamedTempFile::new_in(dir).map_err(|e| e.to_string())?;
        Ok(probe.as_file().metadata().map_err(|e| e.to_string())?.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(0)
    }
}

/// Refuses a directory others could write to: group- or world-writable, or not owned by
/// `owner`.
pub(super) fn check_private(path: &Path, owner: u32) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is writable by other users (mode {:o})",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        if meta.uid() != owner {
            return Err(format!(
                "{} belongs to uid {}, not to this user (uid {owner})",
                path.display(),
                meta.uid()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (path, owner);
    Ok(())
}

/// `dir` with every symbolic link resolved, once each of its parent directories was found
/// safe: owned by `owner` or root, and writable by nobody else unless it has the sticky bit
/// (like `/tmp`, where others may add entries but not rename or remove this user's). Otherwise
/// another user could move a directory on the way and put their own files in its place.
pub(super) fn check_ancestors(dir: &Path, owner: u32) -> Result<PathBuf, String> {
    let real = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    #[cfg(unix)]
    for ancestor in real.ancestors().skip(1) {
        use std::os::unix::fs::MetadataExt;
        let meta =
            std::fs::metadata(ancestor).map_err(|e| format!("{}: {e}", ancestor.display()))?;
        let mode = meta.mode();
        if mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(format!(
                "its parent directory {} is writable by other users (mode {:o}, no sticky bit)",
                ancestor.display(),
                mode & 0o7777
            ));
        }
        if meta.uid() != owner && meta.uid() != 0 {
            return Err(format!(
                "its parent directory {} belongs to uid {}, neither this user (uid {owner}) nor root",
                ancestor.display(),
                meta.uid()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = owner;
    Ok(real)
}

/// Opens the file at `path` for reading without following a symbolic link there, and checks
/// the opened file itself: a regular file with one name, owned by `owner`, writable by nobody
/// else (and, when `secret`, readable by nobody else). `Ok(None)` when there is no such file.
pub(super) fn open_private(path: &Path, owner: u32, secret: bool) -> Result<Option<File>, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err("it is a symbolic link".into())
        }
        Err(e) => return Err(e.to_string()),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err("it is not a regular file".into());
        }
        if meta.uid() != owner {
            return Err(format!(
                "it belongs to uid {}, not to this user (uid {owner})",
                meta.uid()
            ));
        }
        let others = if secret { 0o077 } else { 0o022 };
        if meta.mode() & others != 0 {
            return Err(format!(
                "other users may {} it (mode {:o})",
                if secret { "read or write" } else { "write" },
                meta.mode() & 0o7777
            ));
        }
        if meta.nlink() != 1 {
            return Err(format!(
                "it has {} names (hard links); another may be writable",
                meta.nlink()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (owner, secret);
    Ok(Some(file))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn ancestors_writable_by_others_are_refused_unless_sticky() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("shared").join("cache");
        create_private_dir(&dir).unwrap();
        let owner = file_owner(&dir).unwrap();
        let shared = top.path().join("shared");
        let cases = [
            (0o700, true),
            (0o755, true),
            (0o777, false),
            (0o775, false),
            (0o1777, true),
            (0o1775, true),
        ];
        for (mode, ok) in cases {
            chmod(&shared, mode);
            let got = check_ancestors(&dir, owner);
            assert_eq!(got.is_ok(), ok, "{mode:o}: {got:?}");
            if let Err(e) = got {
                assert!(e.contains("writable by other users"), "{e}");
            }
        }
        // Through a symbolic link the real parents are checked, and the real path returned.
        chmod(&shared, 0o700);
        let link = top.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert_eq!(
            check_ancestors(&link, owner).unwrap(),
            dir.canonicalize().unwrap()
        );
    }

    #[test]
    fn only_a_private_regular_file_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let owner = file_owner(dir.path()).unwrap();
        let file = dir.path().join("a");
        std::fs::write(&file, b"x").unwrap();
        chmod(&file, 0o600);
        assert!(open_private(&file, owner, true).unwrap().is_some());
        assert!(open_private(&dir.path().join("missing"), owner, false)
            .unwrap()
            .is_none());
        let refused = |path: &Path, secret: bool| open_private(path, owner, secret).unwrap_err();
        chmod(&file, 0o644);
        assert!(open_private(&file, owner, false).unwrap().is_some());
        assert!(refused(&file, true).contains("read or write"));
        chmod(&file, 0o664);
        assert!(refused(&file, false).contains("mode 664"));
        chmod(&file, 0o600);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(refused(&link, false), "it is a symbolic link");
        let hard = dir.path().join("hard");
        std::fs::hard_link(&file, &hard).unwrap();
        assert!(refused(&file, false).contains("2 names"));
        assert_eq!(refused(dir.path(), false), "it is not a regular file");
        std::fs::remove_file(&hard).unwrap();
        assert!(open_private(&file, owner, false).unwrap().is_some());
        let other = owner.wrapping_add(1);
        assert!(open_private(&file, other, false)
            .unwrap_err()
            .contains("not to this user"));
    }
}
