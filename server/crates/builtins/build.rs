//! Builds the policy modules under `policies-wasm/` for `wasm32-wasip2` and embeds the built-ins.
//!
//! The policies are members of this workspace (so their unit tests run natively with
//! `cargo test`); here they are compiled a second time, as components, by a nested cargo with its
//! own target directory (a sibling of this build's, shared by debug/release/clippy builds), so
//! building the server needs no manual step. Only what a module is built from is watched (the
//! sources and manifests of the SDK and the policy crates, the lock file): editing a policy's
//! unit tests, the SDK's host-only modules or the perf crate does not rebuild the modules.
//! Outputs in `OUT_DIR`:
//! - `builtin_policies.rs`: `&[(&str, &[u8])]` of the built-in modules (file stem, bytes);
//! - every module as `<crate>.wasm`, whose directory is exported as `REBALANCER_POLICY_WASM_DIR`
//!   for tests (the hostile test policies, the docs example and the Python example's Rust twin
//!   are built but not embedded).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates compiled to components; `true` = embedded as a built-in policy.
const POLICY_CRATES: &[(&str, bool)] = &[
    ("remove-duplicates", true),
    ("low-node-utilization", true),
    ("test-misbehaving", false),
    ("test-oversized-info", false),
    ("test-columns", false),
    ("example-pod-age", false),
    ("example-python-twin", false),
    ("remove-pods-violating-node-taints", true),
    ("remove-pods-violating-node-affinity", true),
    ("remove-pods-having-too-many-restarts", true),
    ("pod-life-time", true),
    ("remove-failed-pods", true),
    ("remove-pods-violating-inter-pod-anti-affinity", true),
    ("high-node-utilization", true),
    ("remove-pods-violating-topology-spread-constraint", true),
    ("low-node-load", true),
    ("cpu-orchestration", true),
];

const TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "policy";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // server/crates/builtins → the workspace root.
    let root = manifest_dir
        .ancestors()
        .nth(3)
        .expect("server/crates/builtins is three levels below the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));

    for file in ["Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let mut watched = Vec::new();
    watch_sources(&root.join("policy-sdk"), &mut watched);
    watch_sources(&root.join("policies-wasm"), &mut watched);
    watched.sort();
    for file in watched {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    println!("cargo:rerun-if-env-changed=REBALANCER_POLICY_TARGET_DIR");

    let target_dir = env::var_os("REBALANCER_POLICY_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared_target_dir(&out_dir).join("policies-wasm"));

    ensure_wasm_target();

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .arg("build")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["--target", TARGET, "--profile", PROFILE])
        .arg("--target-dir")
        .arg(&target_dir);
    for (name, _) in POLICY_CRATES {
        cmd.args(["-p", name]);
    }
    // The outer build's compiler settings must not leak into the wasm build (clippy's wrapper,
    // host RUSTFLAGS, coverage instrumentation, a forced target).
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "RUSTDOCFLAGS",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().unwrap_or_else(|e| {
        panic!("could not start cargo to build the policy modules: {e}");
    });
    if !status.success() {
        panic!(
            "building the policy modules for {TARGET} failed (see the output above). \
             If the target is missing, install it with `rustup target add {TARGET}`."
        );
    }

    let built = target_dir.join(TARGET).join(PROFILE);
    let mut builtins = String::from("&[\n");
    for (name, builtin) in POLICY_CRATES {
        let file = format!("{}.wasm", name.replace('-', "_"));
        let src = built.join(&file);
        let dst = out_dir.join(&file);
        copy_if_changed(&src, &dst);
        if *builtin {
            builtins.push_str(&format!(
                "    ({name:?}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\")) as &[u8]),\n"
            ));
        }
    }
    builtins.push(']');
    std::fs::write(out_dir.join("builtin_policies.rs"), builtins)
        .expect("write builtin_policies.rs");
    println!(
        "cargo:rustc-env=REBALANCER_POLICY_WASM_DIR={}",
        out_dir.display()
    );
}

/// Files under `dir` a policy module is built from: Rust sources, WIT files and manifests, but
/// not unit tests (`tests.rs`, `*_tests.rs`, `tests/`), the SDK's host-only modules (`evictor`,
/// `testing`, compiled only with its `host` feature, never into a guest), the native perf crate,
/// nor build output. A new source file is picked up through the `mod` line that names it, in a
/// file that is watched.
fn watch_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    const SKIPPED_DIRS: &[&str] = &["tests", "target", "perf", "evictor", "testing"];
    const SKIPPED_FILES: &[&str] = &["tests.rs", "evictor.rs", "testing.rs"];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_ref()) && !name.starts_with('.') {
                watch_sources(&path, out);
            }
        } else if (name.ends_with(".rs") || name.ends_with(".wit") || name == "Cargo.toml")
            && !SKIPPED_FILES.contains(&name.as_ref())
            && !name.ends_with("_tests.rs")
        {
            out.push(path);
        }
    }
}

/// Install the wasm target's standard library when the toolchain lacks it.
///
/// rustup installs the targets `rust-toolchain.toml` names only when it installs the toolchain
/// itself; on a machine that already had the pinned toolchain (a CI image, an earlier project),
/// the target is missing and the nested build below would fail. The README promises that
/// `cargo run --release` is all a fresh machine needs, so add it here, once, through rustup.
fn ensure_wasm_target() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(&rustc).args(["--print", "sysroot"]).output() else {
        return; // the nested cargo reports a missing compiler better than we can
    };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if sysroot
        .join("lib/rustlib")
        .join(TARGET)
        .join("lib")
        .is_dir()
    {
        return;
    }
    let mut rustup = Command::new("rustup");
    rustup.args(["target", "add", TARGET]);
    if let Some(toolchain) = env::var_os("RUSTUP_TOOLCHAIN") {
        rustup.arg("--toolchain").arg(toolchain);
    }
    println!("cargo:warning=installing the {TARGET} target with `rustup target add {TARGET}`");
    match rustup.status() {
        Ok(status) if status.success() => {}
        // Fall through: the nested build fails with the hint to install the target by hand.
        Ok(status) => println!("cargo:warning=`rustup target add {TARGET}` failed ({status})"),
        Err(e) => println!("cargo:warning=could not run rustup to add {TARGET}: {e}"),
    }
}

/// `<target>/<profile>/build/<pkg>/out` → `<target>`; falls back to `OUT_DIR` itself.
fn shared_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out_dir.to_path_buf())
}

fn copy_if_changed(src: &Path, dst: &Path) {
    let bytes = std::fs::read(src)
        .unwrap_or_else(|e| panic!("policy module {} was not produced: {e}", src.display()));
    if std::fs::read(dst).ok().as_deref() != Some(bytes.as_slice()) {
        std::fs::write(dst, &bytes)
            .unwrap_or_else(|e| panic!("could not write {}: {e}", dst.display()));
    }
}
