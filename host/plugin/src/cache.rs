//! Compiled components kept on disk, keyed by the SHA-256 of the component's bytes and of the
//! engine's compatibility hash, so a plugin is compiled by Cranelift once per machine and later
//! starts (and reloads) only read and deserialize the compiled artefact: a Python or JavaScript component takes
//! seconds to compile and milliseconds to deserialize.
//!
//! Deserializing compiled code is only safe for files this host wrote itself, so the cache is used
//! only when its directory belongs to the user running refract and nobody else can write to it.
//! A file that fails to load (a different wasmtime, a truncated write) is compiled again and
//! replaced; any other cache failure only costs the compile it would have saved.
//!
//! The cache is bounded: past `$REFRACT_CACHE_MAX_MIB` (1024 MiB by default) the least recently
//! used artefacts are removed after each store, so hot swaps and plugin builds that each bring new
//! bytes do not fill the disk (a Python component compiles to 37 MB).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

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
    dir: PathBuf,
    /// Mixed into every key: artefacts of another wasmtime or engine config never match.
    engine_key: [u8; 8],
    /// The user this process writes files as (what every artefact's owner must be).
    owner: u32,
    /// Past this many bytes of artefacts, the least recently used are removed.
    max_bytes: u64,
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
    /// cannot be created or others could write to it.
    pub(crate) fn open(dir: &Path, engine: &Engine) -> Option<Self> {
        if let Err(e) = create_private_dir(dir) {
            tracing::warn!(
                "plugin compile cache {} unusable, compiling every plugin at start: {e}",
                dir.display()
            );
            return None;
        }
        let owner = match file_owner(dir).and_then(|owner| {
            check_private(dir, owner)?;
            Ok(owner)
        }) {
            Ok(owner) => owner,
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
            dir: dir.to_path_buf(),
            engine_key: hasher.finish().to_le_bytes(),
            owner,
            max_bytes: max_bytes_from_env(),
        })
    }

    /// The artefact path for component bytes `wasm`.
    pub(crate) fn path_for(&self, wasm: &[u8]) -> PathBuf {
        let mut digest = Sha256::new();
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
        if path.is_file() {
            // Read, not mapped: a mapped file truncated under us would crash the process.
            let loaded = check_private(&path, self.owner)
                .and_then(|()| std::fs::read(&path).map_err(|e| e.to_string()))
                .and_then(|artefact| {
                    // SAFETY: the file is in a directory only this user can write, and only this
                    // cache writes there (atomically, by rename); wasmtime checks that the
                    // artefact was built by this version and engine configuration before use.
                    unsafe { Component::deserialize(engine, &artefact) }.map_err(|e| e.to_string())
                });
            match loaded {
                Ok(component) => {
                    tracing::debug!(plugin, "loaded compiled plugin from {}", path.display());
                    touch(&path);
                    return Ok((component, CacheUse::Hit));
                }
                Err(e) => {
                    tracing::debug!(plugin, "recompiling {}: {e}", path.display());
                }
            }
        }
        let component = compile()?;
        let used = match component
            .serialize()
            .map_err(|e| e.to_string())
            .and_then(|bytes| write_atomically(&path, &bytes).map_err(|e| e.to_string()))
        {
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

/// Marks an artefact as just used (its modification time), for [`CompileCache::prune`].
fn touch(path: &Path) {
    let touched = std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(e) = touched {
        tracing::debug!("cannot mark {} as used: {e}", path.display());
    }
}

fn wasmtime_version() -> &'static str {
    // The crate's exact version is pinned in Cargo.toml; the compatibility hash covers the rest.
    "wasmtime-48.0.8"
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
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
fn file_owner(dir: &Path) -> Result<u32, String> {
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

/// Refuses a path others could have written: group- or world-writable, or not owned by `owner`.
fn check_private(path: &Path, owner: u32) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is writable by other users (mode {:o})",
                path.display(),
                meta.mode() & 0o777
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
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        Engine::new(&config).unwrap()
    }

    #[test]
    fn compiles_once_then_loads_and_recovers_from_a_bad_file() {
        let engine = engine();
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::open(&dir.path().join("c"), &engine).expect("private dir");
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
        let mut cache = CompileCache::open(dir.path(), &engine).expect("private dir");
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
            bytes.len() as u64
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
        assert!(CompileCache::open(dir.path(), &engine).is_none());
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(CompileCache::open(dir.path(), &engine).is_some());
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
