//! The one way refract reads a file its configuration names (the pipeline file, a MirrorMaker 2
//! properties file, a `${file:…}` secret): only a regular file, and only up to a stated size.
//!
//! A path can name a FIFO (opening it blocks until a writer appears), `/dev/zero` (reading it
//! never ends) or a directory; none of these is ever opened, let alone read. The file is looked
//! at with `stat` first (which opens nothing), then opened and looked at again through the open
//! handle, and must be the same regular file both times. What is left: a regular file swapped
//! for a FIFO between those two calls still blocks the open; only someone who may already
//! rewrite the configuration can do that.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

/// The largest pipeline file (TOML or MirrorMaker 2 `.properties`) refract reads: 4 MiB.
pub const MAX_PIPELINE_FILE_BYTES: u64 = 4 << 20;

/// The largest file a `${file:/path}` or `${file:/path:key}` reference may name: 1 MiB.
pub const MAX_SECRET_FILE_BYTES: u64 = 1 << 20;

/// Reads `path` as UTF-8 text when it is a regular file of at most `limit` bytes. `what` names
/// the kind of file in errors ("pipeline file", "secret file"); errors name the path, never
/// anything read from the file.
pub fn read_config_file(path: &Path, limit: u64, what: &str) -> Result<String, String> {
    let file = open_regular(path, what)?;
    let mut bytes = Vec::new();
    // One byte past the limit tells a file that grew since `stat` from one that fits exactly.
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| cannot_read(path, &e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(path, limit, what));
    }
    String::from_utf8(bytes).map_err(|_| format!("`{}` is not UTF-8 text", path.display()))
}

/// The first `n` bytes of `path` (fewer when it is shorter), or `None` when it is not a regular
/// file or cannot be read: for sniffing a file's format.
pub(crate) fn read_head(path: &Path, n: u64) -> Option<Vec<u8>> {
    let file = open_regular(path, "file").ok()?;
    let mut head = Vec::new();
    file.take(n).read_to_end(&mut head).ok()?;
    Some(head)
}

/// Opens `path` for reading when it is a regular file, without opening anything else.
fn open_regular(path: &Path, what: &str) -> Result<File, String> {
    // `metadata` follows symbolic links, as opening does.
    let before = std::fs::metadata(path).map_err(|e| cannot_read(path, &e))?;
    if !before.is_file() {
        return Err(not_regular(path, &before, what));
    }
    let file = File::open(path).map_err(|e| cannot_read(path, &e))?;
    let after = file.metadata().map_err(|e| cannot_read(path, &e))?;
    if !after.is_file() {
        return Err(not_regular(path, &after, what));
    }
    if !same_file(&before, &after) {
        return Err(format!(
            "`{}` was replaced while being opened; try again",
            path.display()
        ));
    }
    Ok(file)
}

/// Whether two `stat`s describe the same file.
#[cfg(unix)]
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &Metadata, _: &Metadata) -> bool {
    true
}

fn cannot_read(path: &Path, e: &std::io::Error) -> String {
    format!("cannot read `{}`: {e}", path.display())
}

fn not_regular(path: &Path, meta: &Metadata, what: &str) -> String {
    format!(
        "`{}` is {}, not a regular file: a {what} must be a regular file",
        path.display(),
        kind_of(meta)
    )
}

fn too_large(path: &Path, limit: u64, what: &str) -> String {
    format!(
        "`{}` is larger than {}, the most refract reads for a {what}",
        path.display(),
        human_bytes(limit)
    )
}

/// What a file that is not a regular file is, for an error.
fn kind_of(meta: &Metadata) -> &'static str {
    if meta.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// `4 MiB`, `512 KiB` or `100 bytes`.
fn human_bytes(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO in a fresh directory (made with the `mkfifo` tool, so no FFI is needed).
    fn fifo(dir: &Path) -> std::path::PathBuf {
        let path = dir.join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "mkfifo failed");
        path
    }

    #[test]
    fn reads_a_regular_file_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, "x = 1\n").unwrap();
        assert_eq!(
            read_config_file(&path, 6, "pipeline file"),
            Ok("x = 1\n".into())
        );
        // Through a symbolic link too: only what it points to counts.
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert_eq!(
            read_config_file(&link, 6, "pipeline file"),
            Ok("x = 1\n".into())
        );
        assert_eq!(read_head(&path, 3), Some(b"x =".to_vec()));
        std::fs::write(&path, [0xFF, 0xFE]).unwrap();
        assert_eq!(
            read_config_file(&path, 6, "pipeline file"),
            Err(format!("`{}` is not UTF-8 text", path.display()))
        );
    }

    #[test]
    fn refuses_a_file_over_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![b'a'; (MAX_SECRET_FILE_BYTES + 1) as usize]).unwrap();
        assert_eq!(
            read_config_file(&path, MAX_SECRET_FILE_BYTES, "secret file"),
            Err(format!(
                "`{}` is larger than 1 MiB, the most refract reads for a secret file",
                path.display()
            ))
        );
        assert_eq!(human_bytes(MAX_PIPELINE_FILE_BYTES), "4 MiB");
        assert_eq!(human_bytes(7), "7 bytes");
    }

    #[test]
    fn refuses_special_files_without_reading_them() {
        let dir = tempfile::tempdir().unwrap();
        // Opening the FIFO for reading would block until a writer appears; reading /dev/zero
        // would never end. Neither may be opened.
        let pipe = fifo(dir.path());
        let cases = [
            (
                Path::new("/dev/zero"),
                "`/dev/zero` is a character device, not a regular file: a pipeline file must be a regular file".to_string(),
            ),
            (
                pipe.as_path(),
                format!(
                    "`{}` is a FIFO (named pipe), not a regular file: a pipeline file must be a regular file",
                    pipe.display()
                ),
            ),
            (
                dir.path(),
                format!(
                    "`{}` is a directory, not a regular file: a pipeline file must be a regular file",
                    dir.path().display()
                ),
            ),
        ];
        for (path, want) in cases {
            // On a thread of its own, so that a regression fails the test instead of hanging it.
            let (tx, rx) = std::sync::mpsc::channel();
            let owned = path.to_path_buf();
            std::thread::spawn(move || {
                let read = read_config_file(&owned, MAX_PIPELINE_FILE_BYTES, "pipeline file");
                let head = read_head(&owned, 4);
                let _ = tx.send((read, head));
            });
            let (read, head) = rx
                .recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("reading {} blocked", path.display()));
            assert_eq!(read, Err(want));
            assert_eq!(head, None, "{}", path.display());
        }
    }

    #[test]
    fn a_missing_file_says_so() {
        let err = read_config_file(Path::new("/nonexistent/p.toml"), 10, "pipeline file");
        assert_eq!(
            err,
            Err("cannot read `/nonexistent/p.toml`: No such file or directory (os error 2)".into())
        );
    }
}
