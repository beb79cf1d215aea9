//! The integrity tag of a cached artefact: HMAC-SHA-256, under a key only this user can read,
//! of the artefact's name and bytes, stored at the end of the artefact file. wasmtime's
//! deserialization trusts its input completely (a changed byte may run as code), so the cache
//! loads only artefacts whose tag this user's refract computed: a file changed, truncated, swapped
//! for another plugin's artefact or written by anyone without the key is compiled again instead.
//!
//! The key lives outside the cache directory (`$XDG_STATE_HOME/refract/cache.key`, else
//! `~/.local/state/refract/cache.key`, mode 0600), so whoever can write to the cache directory
//! alone (a shared volume, a restored backup) still cannot make refract load their file. Without
//! a usable key file the process makes up a key of its own: the cache then serves only that
//! process (its reloads), and earlier artefacts are compiled again.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::private::{create_private_dir, open_private};

/// Bytes of a tag (and of the key).
pub(super) const TAG_LEN: usize = 32;

/// What every tag covers first, so a tag of this cache means nothing anywhere else.
const DOMAIN: &[u8] = b"refract compile cache artefact v1\0";

/// The key the cache's tags are computed with.
#[derive(Clone)]
pub(super) struct TagKey([u8; TAG_LEN]);

impl std::fmt::Debug for TagKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TagKey(..)")
    }
}

/// Where the key lives unless the environment says nothing about a home: see the module doc.
pub(super) fn default_key_path() -> Option<PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .map(|base| base.join("refract").join("cache.key"))
}

impl TagKey {
    /// A key from the system's random source, for this process only.
    pub(super) fn ephemeral() -> Result<Self, String> {
        let mut key = [0u8; TAG_LEN];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
        Ok(Self(key))
    }

    /// The key in the file `path` (created, mode 0600 in a 0700 directory, when missing), if
    /// that file is this user's alone (see [`open_private`]) and holds a key.
    pub(super) fn load_or_create(path: &Path, owner: u32) -> Result<Self, String> {
        let shown = |e: String| format!("{}: {e}", path.display());
        if let Some(key) = Self::read(path, owner).map_err(shown)? {
            return Ok(key);
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| shown(e.to_string()))?;
        let key = Self::ephemeral()?;
        // Written whole under a temporary name (mode 0600), then linked into place unless
        // another process was first; then whichever key won is read back.
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| shown(e.to_string()))?;
        tmp.write_all(&key.0)
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| shown(e.to_string()))?;
        match tmp.persist_noclobber(path) {
            Ok(_) => {}
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(shown(e.error.to_string())),
        }
        Self::read(path, owner)
            .map_err(shown)?
            .ok_or_else(|| shown("vanished after it was written".into()))
    }

    fn read(path: &Path, owner: u32) -> Result<Option<Self>, String> {
        let Some(mut file) = open_private(path, owner, true)? else {
            return Ok(None);
        };
        let mut key = [0u8; TAG_LEN];
        let mut rest = Vec::new();
        file.read_exact(&mut key)
            .and_then(|()| file.read_to_end(&mut rest))
            .map_err(|e| format!("not a cache key: {e}"))?;
        if !rest.is_empty() {
            return Err(format!("not a cache key: longer than {TAG_LEN} bytes"));
        }
        Ok(Some(Self(key)))
    }

    /// A key of the given bytes, for tests.
    #[cfg(test)]
    pub(super) fn fixed(key: [u8; TAG_LEN]) -> Self {
        Self(key)
    }

    /// The tag of the artefact `bytes` stored under `name`.
    fn tag(&self, name: &str, bytes: &[u8]) -> [u8; TAG_LEN] {
        hmac_sha256(&self.0, &[DOMAIN, name.as_bytes(), b"\0", bytes])
    }

    /// `artefact` with its tag appended, as it is stored under `name`.
    pub(super) fn seal(&self, name: &str, mut artefact: Vec<u8>) -> Vec<u8> {
        let tag = self.tag(name, &artefact);
        artefact.extend_from_slice(&tag);
        artefact
    }

    /// The artefact in `stored` (read from the file `name`), if its tag is right.
    pub(super) fn open<'a>(&self, name: &str, stored: &'a [u8]) -> Option<&'a [u8]> {
        let split = stored.len().checked_sub(TAG_LEN)?;
        let (artefact, tag) = stored.split_at(split);
        let expected = self.tag(name, artefact);
        // Compared in constant time: how far a guess matched must not show in the timing.
        let difference = expected
            .iter()
            .zip(tag)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        (difference == 0).then_some(artefact)
    }
}

/// HMAC-SHA-256 (RFC 2104) of the concatenation of `parts` under `key` (at most one SHA-256
/// block, 64 bytes).
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; TAG_LEN] {
    const BLOCK: usize = 64;
    let mut inner_pad = [0x36u8; BLOCK];
    let mut outer_pad = [0x5cu8; BLOCK];
    for (i, k) in key.iter().take(BLOCK).enumerate() {
        inner_pad[i] ^= k;
        outer_pad[i] ^= k;
    }
    let mut inner = Sha256::new();
    inner.update(inner_pad);
    for part in parts {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(outer_pad);
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// RFC 4231's test cases 1 and 2.
    #[test]
    fn hmac_matches_the_rfc_vectors() {
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], &[b"Hi ", b"There"])),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", &[b"what do ya want for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn only_an_unchanged_artefact_under_its_own_name_opens() {
        let key = TagKey([7; TAG_LEN]);
        let sealed = key.seal("a.cwasm", b"compiled code".to_vec());
        assert_eq!(key.open("a.cwasm", &sealed), Some(&b"compiled code"[..]));
        // Another name (another plugin's artefact moved here), another key, a changed byte, a
        // truncated file.
        assert_eq!(key.open("b.cwasm", &sealed), None);
        assert_eq!(TagKey([8; TAG_LEN]).open("a.cwasm", &sealed), None);
        let mut changed = sealed.clone();
        changed[3] ^= 1;
        assert_eq!(key.open("a.cwasm", &changed), None);
        assert_eq!(key.open("a.cwasm", &sealed[..sealed.len() - 1]), None);
        assert_eq!(key.open("a.cwasm", &sealed[..10]), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_key_file_is_made_once_and_must_stay_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("cache.key");
        let owner = super::super::private::file_owner(dir.path()).unwrap();
        let first = TagKey::load_or_create(&path, owner).unwrap();
        let again = TagKey::load_or_create(&path, owner).unwrap();
        assert_eq!(first.0, again.0, "the same key is read back");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = TagKey::load_or_create(&path, owner).unwrap_err();
        assert!(err.contains("read or write"), "{err}");
    }
}
