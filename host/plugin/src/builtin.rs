//! Plugins compiled from `plugins/` by the build script.

use std::path::PathBuf;

macro_rules! guest {
    ($file:literal) => {
        include_bytes!(concat!(env!("REFRACT_GUEST_DIR"), "/", $file))
    };
}

const DEFAULT_POLICY: &[u8] = guest!("default_policy.wasm");
const IDENTITY_POLICY: &[u8] = guest!("identity_policy.wasm");

/// The rename policy's component, embedded so `refract demo` can write it out and load it as a
/// file the way a user's own plugin is loaded.
pub const BUILTIN_RENAME_WASM: &[u8] = guest!("rename.wasm");

/// Built-in names and their components.
const BUILTINS: &[(&str, &[u8])] = &[
    ("builtin:default", DEFAULT_POLICY),
    ("builtin:identity", IDENTITY_POLICY),
    ("builtin:filter", guest!("filter_processor.wasm")),
    ("builtin:headers", guest!("headers_processor.wasm")),
    ("builtin:json-mask", guest!("json_mask_processor.wasm")),
    ("builtin:route", guest!("route_processor.wasm")),
];

/// The component bytes of a `builtin:` plugin.
pub(crate) fn builtin_bytes(name: &str) -> Option<&'static [u8]> {
    BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// The folder where the build placed every guest plugin compiled from `plugins/`
/// (used by tests to load plugins from their files).
pub fn guest_dir() -> PathBuf {
    PathBuf::from(env!("REFRACT_GUEST_DIR"))
}

#[cfg(test)]
mod tests {
    use super::BUILTINS;

    /// The config crate validates pipelines against its list of built-in names; this crate
    /// embeds the components. The two lists must name the same plugins.
    #[test]
    fn the_embedded_plugins_are_the_ones_the_config_accepts() {
        let mut embedded: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
        let mut accepted: Vec<&str> = refract_config::BUILTIN_POLICIES
            .iter()
            .chain(refract_config::BUILTIN_PROCESSORS)
            .copied()
            .collect();
        embedded.sort_unstable();
        accepted.sort_unstable();
        assert_eq!(embedded, accepted);
    }
}
