//! Compiled components kept on disk, keyed by the SHA-256 of the component's bytes and of the
//! engine's compatibility hash, so a plugin is compiled by Cranelift once per machine and later
//! starts (and reloads) only read and deserialize the compiled artefact: a Python or JavaScript component takes
//! seconds to compile and milliseconds to deserialize.
//!
//! Deserializing compiled code is only safe for files this host wrote itself, so the cache is used
//! only when its directory belongs to the user running refract, nobody else can write to it, and
//! none of its parent directories lets another user move it (module `private`); an artefact is
//! opened without following a symbolic link and loaded only when the opened file is this user's
//! alone and its integrity tag, computed with a key kept outside the cache, is right (module
//! `tag`). A refused artefact is named in a warning and the plugin compiled again instead; a
//! file that fails to load (a different wasmtime) is compiled again and replaced; any other cache
//! failure only costs the compile it would have saved.
//!
//! The cache is bounded: past `$REFRACT_CACHE_MAX_MIB` (1024 MiB by default) the least recently
//! used artefacts are removed after each store, so hot swaps and plugin builds that each bring new
//! bytes do not fill the disk (a Python component compiles to 37 MB).

use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

mod private;
mod tag;

use private::{check_ancestors, check_private, create_private_dir, file_owner, open_private};
use tag::{default_key_path, TagKey};

/// Environment variable naming the cache directory; `off` disables the cache.
pub const CACHE_DIR_ENV: &str = "REFRACT_CACHE_DIR";

/// Environment variable bounding the cache's size, in MiB.
pub const CACHE_MAX_MIB_ENV: &str = "REFRACT_CACHE_MAX_MIB";

/// The cache's size bound unless `$REFRACT_CACHE_MAX_MIB` says otherwise.
const DEFAULT_MAX_MIB: u64 = 1024;

/// The cache's size bound in bytes: `$REFRACT_CACHE_MAX_MIB` when it is a whole number of MiB,
/// else the default (with a warning when it is set but not a number).
fn max_bytes_from_env() -> u64 {
    let mib = match std::env::var(CACHE_MAX_MIB_ENV) {
        Ok(v) => v.trim().parse::<u64>().unwrap_or_else(|_| {
            tracing::warn!(
                "{CACHE_MAX_MIB_ENV}={v:?} is not a whole number of MiB; using {DEFAULT_MAX_MIB}"
            );
            DEFAULT_MAX_MIB
        }),
        Err(_) => DEFAULT_MAX_MIB,
    };
    mib.saturating_mul(1 << 20)
}

/// The cache directory refract uses unless told otherwise: `$REFRACT_CACHE_DIR` (`off` for
/// none), else `$XDG_CACHE_HOME/refract/components`, else `$HOME/.cache/refract/components`.
pub fn default_cache_dir() -> Option<PathBuf> {
    match std::env::var_os(CACHE_DIR_ENV) {
        Some(v) if v == "off" || v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .map(|base| base.join("refract").join("components")),
    }
}

/// Where compiled components live, once the directory passed the ownership check.
#[derive(Debug, Clone)]
pub(crate) struct CompileCache {
    /// The directory, every symbolic link resolved (its parents were checked on this path).
    dir: PathBuf,
    /// Mixed into every key: artefacts of another wasmtime or engine config never match.
    engine_key: [u8; 8],
    /// The user this process writes files as (what every artefact's owner must be).
    owner: u32,
    /// Past this many bytes of artefacts, the least recently used are removed.
    max_bytes: u64,
    /// The key of the artefacts' integrity tags.
    key: TagKey,
}

/// What a lookup did, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheUse {
    /// Loaded the compiled artefact from disk.
    Hit,
    /// Compiled, and stored the result.
    Stored,
    /// Compiled; storing failed (logged).
    Compiled,
}

impl CompileCache {
    /// A cache in `dir` (created with mode 0700 when missing), or `None` with a warning when it
    /// cannot be created or others could write to it or to one of its parents. Its tags use the
    /// user's key file (see module `tag`), or a key of this process's own when that is unusable.
    pub(crate) fn open(dir: &Path, engine: &Engine) -> Option<Self> {
        Self::open_with(dir, engine, |owner| {
            let path = default_key_path()
                .ok_or_else(|| "neither XDG_STATE_HOME nor HOME is set".to_string())?;
            TagKey::load_or_create(&path, owner)
        })
    }

    /// [`CompileCache::open`] with the tag key `key` gives for the cache's owner.
    fn open_with(
        dir: &Path,
        engine: &Engine,
        key: impl FnOnce(u32) -> Result<TagKey, String>,
    ) -> Option<Self> {
        if let Err(e) = create_private_dir(dir) {
            tracing::warn!(
                "plugin compile cache {} unusable, compiling every plugin at start: {e}",
                dir.display()
            );
            return None;
        }
        let checked = file_owner(dir).and_then(|owner| {
            check_private(dir, owner)?;
            Ok((owner, check_ancestors(dir, owner)?))
        });
        let (owner, real_dir) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                tracing::warn!(
                    "plugin compile cache {} not used, compiling every plugin at start: {e}",
                    dir.display()
                );
                return None;
            }
        };
        let key = key(owner).or_else(|e| {
            tracing::warn!(
                "plugin compile cache {}: no usable key file ({e}); this process tags and loads only its own compiled plugins",
                dir.display()
            );
            TagKey::ephemeral()
        });
        let key = match key {
            Ok(key) => key,
            Err(e) => {
                tracing::warn!(
                    "plugin compile cache {} not used, compiling every plugin at start: {e}",
                    dir.display()
                );
                return None;
            }
        };
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Some(Self {
            dir: real_dir,
            engine_key: hasher.finish().to_le_bytes(),
            owner,
            max_bytes: max_bytes_from_env(),
            key,
        })
    }

    /// The artefact path for component bytes `wasm`.
    pub(crate) fn path_for(&self, wasm: &[u8]) -> PathBuf {
        let mut digest = Sha256::new();
        // The artefact format: artefacts of a refract that did not seal them with a tag get
        // other names, so an upgrade compiles them again quietly instead of warning about each
        // as if it had been tampered with (the least recently used bound removes them).
        digest.update(ARTEFACT_FORMAT);
        digest.update(wasmtime_version().as_bytes());
        digest.update(self.engine_key);
        digest.update(wasm);
        let hex: String = digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.dir.join(format!("{hex}.cwasm"))
    }

    /// The compiled component for `wasm`: from disk when a usable artefact is there, else
    /// compiled with `compile` and stored.
    pub(crate) fn load_or_compile<E>(
        &self,
        engine: &Engine,
        wasm: &[u8],
        plugin: &str,
        compile: impl FnOnce() -> Result<Component, E>,
    ) -> Result<(Component, CacheUse), E> {
        let path = self.path_for(wasm);
        match self.load(engine, &path) {
            Ok(Some(component)) => {
                tracing::debug!(plugin, "loaded compiled plugin from {}", path.display());
                return Ok((component, CacheUse::Hit));
            }
            Ok(None) => {}
            Err(Refused::Untrusted(why)) => tracing::warn!(
                plugin,
                "plugin compile cache: not loading {}: {why}; compiling the plugin instead",
                path.display()
            ),
            Err(Refused::Unusable(why)) => {
                tracing::debug!(plugin, "recompiling {}: {why}", path.display())
            }
        }
        let component = compile()?;
        let used = match component
            .serialize()
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                let sealed = self.key.seal(&file_name(&path), bytes);
                write_atomically(&path, &sealed).map_err(|e| e.to_string())
            }) {
            Ok(()) => {
                self.prune(&path);
                CacheUse::Stored
            }
            Err(e) => {
                tracing::warn!(
                    plugin,
                    "cannot store the compiled plugin in {}: {e}",
                    path.display()
                );
                CacheUse::Compiled
            }
        };
        Ok((component, used))
    }

    /// The compiled component stored at `path`: `Ok(None)` when there is none, refused when it is
    /// not this user's alone or its tag is wrong, unusable when wasmtime cannot load it.
    fn load(&self, engine: &Engine, path: &Path) -> Result<Option<Component>, Refused> {
        let Some(mut file) = open_private(path, self.owner, false).map_err(Refused::Untrusted)?
        else {
            return Ok(None);
        };
        // Read, not mapped: a mapped file truncated under us would crash the process.
        let mut stored = Vec::new();
        file.read_to_end(&mut stored)
            .map_err(|e| Refused::Unusable(e.to_string()))?;
        let artefact = self.key.open(&file_name(path), &stored).ok_or_else(|| {
            Refused::Untrusted(
                "its integrity tag is wrong: it changed since this user's refract wrote it, or another wrote it".into(),
            )
        })?;
        // SAFETY: the file is this user's alone (opened without following a link, owned by this
        // user, writable by nobody else, one name) in a directory only this user can write and
        // nobody can move, and its tag, computed over these very bytes with a key only this user
        // can read, proves this user's refract wrote them; wasmtime also checks that the
        // artefact was built by this version and engine configuration before use.
        let component = unsafe { Component::deserialize(engine, artefact) }
            .map_err(|e| Refused::Unusable(e.to_string()))?;
        touch(&file, path);
        Ok(Some(component))
    }

    /// Removes the least recently used artefacts (oldest modification time: a load touches its
    /// file) until the rest fit in `max_bytes`; `keep`, the one just stored, stays.
    fn prune(&self, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut artefacts: Vec<(SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter_map(|entry| {
                let path = entry.path();
                if path.extension().is_none_or(|e| e != "cwasm") {
                    return None;
                }
                let meta = entry.metadata().ok().filter(|m| m.is_file())?;
                Some((meta.modified().unwrap_or(UNIX_EPOCH), meta.len(), path))
            })
            .collect();
        let mut total: u64 = artefacts.iter().map(|(_, len, _)| len).sum();
        if total <= self.max_bytes {
            return;
        }
        artefacts.sort();
        let (mut removed, mut freed) = (0usize, 0u64);
        for (_, len, path) in artefacts {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    total -= len;
                    removed += 1;
                    freed += len;
                }
                Err(e) => tracing::debug!("cannot remove {}: {e}", path.display()),
            }
        }
        if removed > 0 {
            tracing::info!(
                "plugin compile cache {}: removed {removed} least recently used artefact(s) ({} MiB) to stay within {} MiB",
                self.dir.display(),
                freed >> 20,
                self.max_bytes >> 20
            );
        }
    }
}

/// Why a stored artefact was not loaded.
#[derive(Debug)]
enum Refused {
    /// It may not be what this user's refract wrote: never loaded, and said so.
    Untrusted(String),
    /// It is, but cannot be loaded (another wasmtime, a read error).
    Unusable(String),
}

/// The name an artefact is stored under (what its tag covers, so it cannot pass for another).
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Marks the artefact open as `file` as just used (its modification time), for
/// [`CompileCache::prune`].
fn touch(file: &std::fs::File, path: &Path) {
    if let Err(e) = file.set_modified(SystemTime::now()) {
        tracing::debug!("cannot mark {} as used: {e}", path.display());
    }
}

/// The format of a stored artefact: wasmtime's serialized component, then an HMAC-SHA-256 tag.
const ARTEFACT_FORMAT: &[u8] = b"refract artefact 2: serialized component + HMAC-SHA-256 tag";

fn wasmtime_version() -> &'static str {
    // The crate's exact version is pinned in Cargo.toml; the compatibility hash covers the rest.
    "wasmtime-48.0.8"
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::builtin::builtin_bytes;

    fn engine() -> Engine {
        Engine::new(&crate::compile::engine_config()).unwrap()
    }

    /// A cache in `dir` with a fixed tag key (the user's key file is left alone).
    fn open(dir: &Path, engine: &Engine) -> Option<CompileCache> {
        CompileCache::open_with(dir, engine, |_| Ok(TagKey::fixed([7; tag::TAG_LEN])))
    }

    /// Compiles `wasm` through `cache`, counting compilations in `compiles`.
    fn through(
        cache: &CompileCache,
        engine: &Engine,
        wasm: &[u8],
        compiles: &Cell<u32>,
    ) -> CacheUse {
        let compile = || {
            compiles.set(compiles.get() + 1);
            Component::from_binary(engine, wasm)
        };
        cache.load_or_compile(engine, wasm, "p", compile).unwrap().1
    }

    /// An artefact changed in place, another plugin's artefact moved in, and one written with
    /// another key are never loaded: each is compiled again and replaced.
    #[test]
    fn a_tampered_artefact_is_compiled_again_not_loaded() {
        let engine = engine();
        let dir = tempfile::tempdir().unwrap();
        let cache = open(dir.path(), &engine).unwrap();
        let compiles = Cell::new(0);
        let wasm = builtin_bytes("builtin:identity").unwrap();
        assert_eq!(through(&cache, &engine, wasm, &compiles), CacheUse::Stored);
        let path = cache.path_for(wasm);
        let stored = std::fs::read(&path).unwrap();

        // One byte in the middle of the compiled code, the length unchanged.
        let mut changed = stored.clone();
        let middle = changed.len() / 2;
        changed[middle] ^= 0x40;
        std::fs::write(&path, &changed).unwrap();
        assert_eq!(through(&cache, &engine, wasm, &compiles), CacheUse::Stored);
        assert_eq!(std::fs::read(&path).unwrap(), stored, "replaced");
        assert_eq!(through(&cache, &engine, wasm, &compiles), CacheUse::Hit);

        // Another plugin's valid artefact under this plugin's name.
        let other = builtin_bytes("builtin:default").unwrap();
        assert_eq!(through(&cache, &engine, other, &compiles), CacheUse::Stored);
        std::fs::copy(cache.path_for(other), &path).unwrap();
        assert_eq!(through(&cache, &engine, wasm, &compiles), CacheUse::Stored);

        // Written by a refract with another key (another user's, or a forger's).
        let forger = CompileCache::open_with(dir.path(), &engine, |_| {
            Ok(TagKey::fixed([9; tag::TAG_LEN]))
        })
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(through(&forger, &engine, wasm, &compiles), CacheUse::Stored);
        assert_eq!(through(&cache, &engine, wasm, &compiles), CacheUse::Stored);
        assert_eq!(compiles.get(), 6);
    }

    /// An artefact that is a symbolic link (even to a valid artefact), is writable by others or
    /// has a second name is not loaded; it is compiled again and replaced by a file of its own.
    #[cfg(unix)]
    #[test]
    fn an_artefact_not_private_to_this_user_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let engine = engine();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (cache_a, cache_b) = (
            open(a.path(), &engine).unwrap(),
            open(b.path(), &engine).unwrap(),
        );
        let compiles = Cell::new(0);
        let wasm = builtin_bytes("builtin:identity").unwrap();
        assert_eq!(
            through(&cache_a, &engine, wasm, &compiles),
            CacheUse::Stored
        );
        let (in_a, in_b) = (cache_a.path_for(wasm), cache_b.path_for(wasm));
        std::os::unix::fs::symlink(&in_a, &in_b).unwrap();
        assert_eq!(
            through(&cache_b, &engine, wasm, &compiles),
            CacheUse::Stored
        );
        assert!(!std::fs::symlink_metadata(&in_b).unwrap().is_symlink());
        assert_eq!(through(&cache_b, &engine, wasm, &compiles), CacheUse::Hit);

        std::fs::set_permissions(&in_b, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(
            through(&cache_b, &engine, wasm, &compiles),
            CacheUse::Stored
        );

        let second = b.path().join("second-name");
        std::fs::hard_link(&in_b, &second).unwrap();
        assert_eq!(
            through(&cache_b, &engine, wasm, &compiles),
            CacheUse::Stored
        );
        assert_eq!(compiles.get(), 4);
    }

    /// A private cache directory inside a parent others may write to is refused, unless that
    /// parent has the sticky bit (as `/tmp` has).
    #[cfg(unix)]
    #[test]
    fn refuses_a_directory_whose_parent_others_can_write() {
        use std::os::unix::fs::PermissionsExt;
        let engine = engine();
        let top = tempfile::tempdir().unwrap();
        let parent = top.path().join("parent");
        let dir = parent.join("cache");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        for (mode, used) in [(0o777, false), (0o1777, true), (0o755, true)] {
            std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(open(&dir, &engine).is_some(), used, "parent mode {mode:o}");
        }
    }

    #[test]
    fn compiles_once_then_loads_and_recovers_from_a_bad_file() {
        let engine = engine();
        let dir = tempfile::tempdir().unwrap();
        let cache = open(&dir.path().join("c"), &engine).expect("private dir");
        let wasm = builtin_bytes("builtin:identity").unwrap();
        let compiles = Cell::new(0);
        let compile = || {
            compiles.set(compiles.get() + 1);
            Component::from_binary(&engine, wasm)
        };
        let (_, used) = cache.load_or_compile(&engine, wasm, "p", compile).unwrap();
        assert_eq!((used, compiles.get()), (CacheUse::Stored, 1));
        let path = cache.path_for(wasm);
        assert!(std::fs::metadata(&path).unwrap().len() > 0);

        let (component, used) = cache.load_or_compile(&engine, wasm, "p", compile).unwrap();
        assert_eq!((used, compiles.get()), (CacheUse::Hit, 1));
        assert!(component
            .component_type()
            .exports(&engine)
            .any(|(name, _)| name.starts_with("refract:plugin/replication-policy")));

        // A truncated artefact is compiled again and replaced.
        std::fs::write(&path, b"not an artefact").unwrap();
        let (_, used) = cache.load_or_compile(&engine, wasm, "p", compile).unwrap();
        assert_eq!((used, compiles.get()), (CacheUse::Stored, 2));
        let (_, used) = cache.load_or_compile(&engine, wasm, "p", compile).unwrap();
        assert_eq!((used, compiles.get()), (CacheUse::Hit, 2));

        // Other bytes, another key.
        let other = builtin_bytes("builtin:default").unwrap();
        assert_ne!(cache.path_for(other), path);
    }

    #[test]
    fn keeps_within_its_bound_by_removing_the_least_recently_used() {
        let engine = engine();
        let dir = tempfile::tempdir().unwrap();
        let mut cache = open(dir.path(), &engine).expect("private dir");
        let wasms = ["builtin:identity", "builtin:default", "builtin:filter"]
            .map(|name| builtin_bytes(name).unwrap());
        let load = |cache: &CompileCache, wasm: &[u8]| {
            let (_, used) = cache
                .load_or_compile(&engine, wasm, "p", || Component::from_binary(&engine, wasm))
                .unwrap();
            used
        };
        for wasm in &wasms[..2] {
            assert_eq!(load(&cache, wasm), CacheUse::Stored);
        }
        let [a, b, c] = wasms.map(|w| cache.path_for(w));
        // a and b in the past, b more recently; then loading a makes it the most recent.
        let ago = |secs| SystemTime::now() - std::time::Duration::from_secs(secs);
        for (path, when) in [(&a, ago(60)), (&b, ago(30))] {
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(when).unwrap();
        }
        assert_eq!(load(&cache, wasms[0]), CacheUse::Hit);
        // Room for two artefacts of these sizes, not three: storing c removes b, not a.
        let len = |p: &PathBuf| std::fs::metadata(p).unwrap().len();
        let c_len = {
            let bytes = Component::from_binary(&engine, wasms[2])
                .unwrap()
                .serialize()
                .unwrap();
            (bytes.len() + tag::TAG_LEN) as u64
        };
        cache.max_bytes = len(&a) + c_len;
        assert_eq!(load(&cache, wasms[2]), CacheUse::Stored);
        assert!(
            a.is_file() && c.is_file(),
            "the recently used and the new one stay"
        );
        assert!(!b.is_file(), "the least recently used is removed");
        // A bound smaller than one artefact keeps the one just stored.
        cache.max_bytes = 0;
        assert_eq!(load(&cache, wasms[1]), CacheUse::Stored);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .collect();
        assert_eq!(left, [b]);
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_directory_others_can_write() {
        use std::os::unix::fs::PermissionsExt;
        let engine = engine();
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(open(dir.path(), &engine).is_none());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(open(dir.path(), &engine).is_some());
    }

    #[test]
    fn runtime_compiles_through_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let runtime =
            crate::PluginRuntime::with_cache(crate::PluginLimits::default(), Some(dir.path()))
                .unwrap();
        assert!(runtime.cache().is_some());
        let location = refract_config::PluginLocation::Builtin("builtin:identity".into());
        let limits = crate::PluginLimits::default();
        let bytes = runtime.read(&location, &limits).unwrap();
        runtime
            .compile("builtin:identity", &bytes, &limits)
            .unwrap();
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, 1, "one artefact per component");
        runtime
            .compile("builtin:identity", &bytes, &limits)
            .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_component_of_the_wrong_kind_is_rejected_before_it_is_compiled() {
        let dir = tempfile::tempdir().unwrap();
        let runtime =
            crate::PluginRuntime::with_cache(crate::PluginLimits::default(), Some(dir.path()))
                .unwrap();
        // builtin:filter is a filter: loading it as a policy fails on its exports alone.
        let spec = refract_config::PluginSpec {
            location: refract_config::PluginLocation::Builtin("builtin:filter".into()),
            config: "header = \"env\"".into(),
            key: "policy".into(),
            limits: Default::default(),
        };
        let err = crate::PolicyPlugin::load(&runtime, &spec).unwrap_err();
        assert!(
            matches!(err, crate::PluginError::WrongWorld { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("a filter plugin"), "{err}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing was compiled into the cache"
        );
        // The right kind compiles (and is cached) as before.
        crate::ProcessorPlugin::load(&runtime, &spec).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
