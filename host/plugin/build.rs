//! Compiles the guest plugins in `plugins/` for wasm32-wasip2 so the built-in ones can be embedded
//! in the binary and the others found by tests and the demo. A separate target directory keeps
//! the nested cargo from waiting on the outer build's lock.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest_dir.join("../..");
    // REFRACT_PLUGINS_SRC builds the guests from another checkout of `plugins/` (with its `wit/`
    // beside it), e.g. to build the host while `plugins/` is being edited.
    println!("cargo:rerun-if-env-changed=REFRACT_PLUGINS_SRC");
    let plugins = std::env::var_os("REFRACT_PLUGINS_SRC")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("plugins"));
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("wasm-plugins");

    watch(&plugins.join("Cargo.toml"));
    watch(&plugins.join("Cargo.lock"));
    watch(&plugins.join("../wit"));
    if let Ok(entries) = std::fs::read_dir(&plugins) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "target") {
                watch(&path);
            }
        }
    }

    ensure_wasm_target();

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--target",
        TARGET,
        "--manifest-path",
    ])
    .arg(plugins.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&target_dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "building the guest plugins in {} failed ({s})",
            plugins.display()
        ),
        Err(e) => panic!("cannot run cargo to build the guest plugins: {e}"),
    }
    let out = target_dir.join(TARGET).join("release");
    let out = out.canonicalize().unwrap_or(out);
    println!("cargo:rustc-env=REFRACT_GUEST_DIR={}", out.display());
}

fn watch(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}

/// The guest target is a rustup component; add it when missing so a fresh machine builds.
fn ensure_wasm_target() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if sysroot.is_some_and(|s| s.join("lib/rustlib").join(TARGET).exists()) {
        return;
    }
    println!("cargo:warning=adding the {TARGET} target with rustup to build the guest plugins");
    let ok = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        panic!("the {TARGET} target is missing and `rustup target add {TARGET}` failed; install it and rebuild");
    }
}
