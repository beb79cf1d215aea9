//! Plugins compiled from `plugins/` by the build script.

use std::path::PathBuf;

const DEFAULT_POLICY: &[u8] =
    include_bytes!(concat!(env!("REFRACT_GUEST_DIR"), "/default_policy.wasm"));
const IDENTITY_POLICY: &[u8] =
    include_bytes!(concat!(env!("REFRACT_GUEST_DIR"), "/identity_policy.wasm"));

/// The rename policy's component, embedded so `refract demo` can write it out and load it as a
/// file the way a user's own plugin is loaded.
pub const BUILTIN_RENAME_WASM: &[u8] =
    include_bytes!(concat!(env!("REFRACT_GUEST_DIR"), "/rename.wasm"));

/// The component bytes of a `builtin:` plugin.
pub(crate) fn builtin_bytes(name: &str) -> Option<&'static [u8]> {
    match name {
        "builtin:default" => Some(DEFAULT_POLICY),
        "builtin:identity" => Some(IDENTITY_POLICY),
        _ => None,
    }
}

/// The folder where the build placed every guest plugin compiled from `plugins/`
/// (used by tests to load plugins from their files).
pub fn guest_dir() -> PathBuf {
    PathBuf::from(env!("REFRACT_GUEST_DIR"))
}
