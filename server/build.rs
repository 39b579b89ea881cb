//! Build information for `descheduler_build_info` (`src/metrics.rs`): the Rust compiler's
//! version, and the git branch and commit the server is built from.
//!
//! Owns: the `REBALANCER_RUSTC_VERSION`, `REBALANCER_GIT_SHA` and `REBALANCER_GIT_BRANCH`
//! compile-time variables. The git values come from `REBALANCER_GIT_SHA` /
//! `REBALANCER_GIT_BRANCH` in the build's environment when set (a container build has no `.git`),
//! else, in release builds only, from the local repository through `git`; without either they
//! are empty. Debug builds do not look at git, so a commit does not rebuild the server crate in
//! the edit-test loop. Nothing here touches the network.
//! Must not: fail the build over missing information — an empty label says "unknown".

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = output(Command::new(rustc).arg("--version")).unwrap_or_default();
    println!("cargo:rustc-env=REBALANCER_RUSTC_VERSION={rustc_version}");

    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let git = |args: &[&str]| {
        release
            .then(|| output(Command::new("git").arg("-C").arg(&dir).args(args)))
            .flatten()
    };
    let sha = from_env("REBALANCER_GIT_SHA").or_else(|| git(&["rev-parse", "HEAD"]));
    let branch = from_env("REBALANCER_GIT_BRANCH").or_else(|| {
        // `HEAD` when detached: no branch.
        git(&["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| b != "HEAD")
    });
    println!(
        "cargo:rustc-env=REBALANCER_GIT_SHA={}",
        sha.unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=REBALANCER_GIT_BRANCH={}",
        branch.as_deref().unwrap_or_default()
    );

    // Build again when the commit changes: HEAD itself (another branch checked out), the
    // branch's ref (a new commit) and packed-refs (where `git gc` moves refs).
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = &branch {
        watched.push(format!("refs/heads/{branch}"));
    }
    for name in watched {
        let path = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]);
        if let Some(path) = path.filter(|p| Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

/// A variable of the build's environment, when set and not empty (rebuilds when it changes).
fn from_env(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The trimmed standard output of a command that succeeded, if it printed anything.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}
