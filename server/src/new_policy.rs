//! `rebalancer new-policy DIR`: a policy crate of its own, outside this repository, from the
//! worked example of `docs/writing-a-policy.md` (`policies-wasm/example-pod-age`, embedded in
//! the binary when it is built, so the template is the crate CI tests).
//!
//! The crate depends on the SDK by path (the `policy-sdk` directory of a checkout), carries the
//! workspace's `Cargo.lock` (the dependency versions the SDK is tested with; cargo drops what
//! the crate does not use), the pinned toolchain (`rust-toolchain.toml`, with `wasm32-wasip2`)
//! and a `policy` profile, so that `cargo test` and
//! `cargo build --target wasm32-wasip2 --profile policy` work in it as they do here.
//!
//! Owns: the template and its renaming (`PodAgeExample` → the plugin name, `example-pod-age` →
//! the crate name). Must not: run cargo or touch anything outside DIR.

use std::path::{Path, PathBuf};

use crate::config::NewPolicyArgs;

const TEMPLATE_LIB: &str = include_str!("../../policies-wasm/example-pod-age/src/lib.rs");
const TEMPLATE_TESTS: &str = include_str!("../../policies-wasm/example-pod-age/tests/pod_age.rs");
const TOOLCHAIN: &str = include_str!("../../rust-toolchain.toml");
const LOCKFILE: &str = include_str!("../../Cargo.lock");
/// The template's names, replaced by the new crate's.
const TEMPLATE_PLUGIN: &str = "PodAgeExample";
const TEMPLATE_CRATE: &str = "example-pod-age";

/// What [`create`] wrote.
#[derive(Debug)]
pub struct Created {
    pub dir: PathBuf,
    pub crate_name: String,
    pub plugin: String,
    pub sdk: PathBuf,
}

impl Created {
    /// What to do next, for the terminal.
    pub fn next_steps(&self) -> String {
        let wasm = self.crate_name.replace('-', "_");
        format!(
            "created policy crate {crate_name} (plugin {plugin}) in {dir}, with the SDK from {sdk}\n\
             \n\
             next:\n  \
             cd {dir}\n  \
             cargo test\n  \
             cargo build --target wasm32-wasip2 --profile policy\n  \
             curl -sS -X POST http://127.0.0.1:8080/api/v1/policies -H \"Authorization: Bearer $TOKEN\" \\\n      \
             -H 'Content-Type: application/wasm' --data-binary @target/wasm32-wasip2/policy/{wasm}.wasm\n",
            crate_name = self.crate_name,
            plugin = self.plugin,
            dir = self.dir.display(),
            sdk = self.sdk.display(),
        )
    }
}

/// Write the crate; nothing is written when an argument is wrong, and a directory that is not
/// empty is never touched.
pub fn create(args: &NewPolicyArgs) -> Result<Created, String> {
    let dir = &args.dir;
    let base = dir.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        format!(
            "{}: the directory needs a name (it names the crate)",
            dir.display()
        )
    })?;
    let crate_name = crate_name(base)?;
    let plugin = match &args.name {
        Some(name) => plugin_name(name)?,
        None => camel_case(&crate_name),
    };
    let sdk = sdk_dir(args.sdk.as_deref())?;
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: cannot read the directory: {e}", dir.display()))?;
        if entries.next().is_some() {
            return Err(format!(
                "{}: the directory exists and is not empty; give a new directory",
                dir.display()
            ));
        }
    }

    let crate_ident = crate_name.replace('-', "_");
    let rename = |text: &str| {
        text.replace(TEMPLATE_PLUGIN, &plugin)
            .replace(TEMPLATE_CRATE, &crate_name)
            .replace(&TEMPLATE_CRATE.replace('-', "_"), &crate_ident)
    };
    let files = [
        ("Cargo.toml", manifest(&crate_name, &sdk)),
        ("Cargo.lock", LOCKFILE.to_string()),
        ("rust-toolchain.toml", TOOLCHAIN.to_string()),
        (".gitignore", "/target\n".to_string()),
        ("src/lib.rs", rename(TEMPLATE_LIB)),
        ("tests/policy.rs", rename(TEMPLATE_TESTS)),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        let parent = path.parent().expect("every file is inside the directory");
        std::fs::create_dir_all(parent)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(Created {
        dir: dir.clone(),
        crate_name,
        plugin,
        sdk,
    })
}

/// The crate's `Cargo.toml`: the SDK by path (with `host` for the tests), serde, the `policy`
/// profile of this workspace, and an empty `[workspace]` so that it is a workspace of its own
/// wherever it is put.
fn manifest(crate_name: &str, sdk: &Path) -> String {
    let sdk = toml_string(&sdk.display().to_string());
    format!(
        r#"[package]
name = "{crate_name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
# cdylib: the component (for wasm32-wasip2); rlib: what the native tests link.
crate-type = ["cdylib", "rlib"]

[dependencies]
rebalancer-policy-sdk = {{ path = {sdk} }}
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"

[dev-dependencies]
# The evictor and the `testing` module, for the native tests only.
rebalancer-policy-sdk = {{ path = {sdk}, features = ["host"] }}

# `cargo build --target wasm32-wasip2 --profile policy`: a small, fast component.
[profile.policy]
inherits = "release"
opt-level = 3
lto = true
codegen-units = 1
panic = "abort"
debug = false
strip = true

# A workspace of its own, even inside another one's directory.
[workspace]
"#
    )
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut quoted = String::from('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// A crate name cargo takes and that differs from the crates the policy uses: lowercase ASCII
/// letters, digits, `-` and `_`, starting with a letter.
fn crate_name(base: &str) -> Result<String, String> {
    let valid = base.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && base
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && base.len() <= 64;
    if !valid {
        return Err(format!(
            "{base:?} cannot name the crate: use 1–64 lowercase ASCII letters, digits, '-' or '_', \
             starting with a letter (e.g. my-policy)"
        ));
    }
    let ident = base.replace('-', "_");
    if [
        "rebalancer_policy_sdk",
        "serde",
        "serde_json",
        "test",
        "std",
        "core",
    ]
    .contains(&ident.as_str())
    {
        return Err(format!(
            "{base:?} cannot name the crate: it is the name of a crate the policy uses"
        ));
    }
    Ok(base.to_string())
}

/// `--name`: what profiles enable, a Rust type name too: an ASCII letter, then letters and
/// digits.
fn plugin_name(name: &str) -> Result<String, String> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && name.len() <= 63;
    if valid {
        Ok(name.to_string())
    } else {
        Err(format!(
            "--name {name:?}: a plugin name here is 1–63 ASCII letters and digits starting with \
             an uppercase letter (e.g. MyPolicy): it names the Rust type too"
        ))
    }
}

/// `my-policy_2` → `MyPolicy2`.
fn camel_case(crate_name: &str) -> String {
    crate_name
        .split(['-', '_'])
        .flat_map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase())
                .into_iter()
                .chain(chars)
        })
        .collect()
}

/// `--sdk`, else the `policy-sdk` directory this binary was built from, if it is still there;
/// made absolute, and checked to be the SDK.
fn sdk_dir(given: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match given {
        Some(dir) => dir.to_path_buf(),
        None => {
            let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy-sdk");
            if !built_from.join("Cargo.toml").is_file() {
                return Err(format!(
                    "this binary was built from {}, which no longer holds the SDK: pass --sdk \
                     with the policy-sdk directory of a Rebalancer checkout",
                    built_from.display()
                ));
            }
            built_from
        }
    };
    let dir = std::fs::canonicalize(&dir).map_err(|e| format!("--sdk {}: {e}", dir.display()))?;
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
    if !manifest.contains("name = \"rebalancer-policy-sdk\"") {
        return Err(format!(
            "--sdk {}: not the policy SDK (its Cargo.toml does not name rebalancer-policy-sdk); \
             give the policy-sdk directory of a Rebalancer checkout",
            dir.display()
        ));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(dir: PathBuf) -> NewPolicyArgs {
        NewPolicyArgs {
            dir,
            name: None,
            sdk: None,
        }
    }

    #[test]
    fn names() {
        assert_eq!(camel_case("my-policy_2"), "MyPolicy2");
        assert_eq!(camel_case("evict"), "Evict");
        assert!(crate_name("my-policy").is_ok());
        for bad in [
            "My-Policy",
            "1policy",
            "",
            "my policy",
            "serde",
            "rebalancer-policy-sdk",
        ] {
            assert!(crate_name(bad).is_err(), "{bad:?}");
        }
        assert!(plugin_name("OldPods").is_ok());
        for bad in ["oldPods", "Old-Pods", "", "Old.Pods"] {
            assert!(plugin_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(toml_string(r#"/a "b"\c"#), r#""/a \"b\"\\c""#);
    }

    #[test]
    fn writes_a_renamed_crate_and_refuses_to_overwrite() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("old-pods");
        let created = create(&args(dir.clone())).unwrap();
        assert_eq!(
            (created.crate_name.as_str(), created.plugin.as_str()),
            ("old-pods", "OldPods")
        );
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"old-pods\""), "{manifest}");
        let sdk =
            std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy-sdk"))
                .unwrap();
        assert!(
            manifest.contains(&format!(
                "path = {}",
                toml_string(&sdk.display().to_string())
            )),
            "{manifest}"
        );
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct OldPods;"));
        assert!(lib.contains("export_policy!(OldPods)"));
        assert!(!lib.contains(TEMPLATE_PLUGIN) && !lib.contains("example_pod_age"));
        let tests = std::fs::read_to_string(dir.join("tests/policy.rs")).unwrap();
        assert!(tests.contains("use old_pods::"), "{tests}");
        assert!(!tests.contains(TEMPLATE_PLUGIN));
        for file in ["Cargo.lock", "rust-toolchain.toml", ".gitignore"] {
            assert!(dir.join(file).is_file(), "{file}");
        }

        // Not empty any more: refused, and nothing is changed.
        std::fs::write(dir.join("src/lib.rs"), "mine").unwrap();
        let err = create(&args(dir.clone())).unwrap_err();
        assert!(err.contains("not empty"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
            "mine"
        );

        let err = create(&NewPolicyArgs {
            name: Some("bad-name".into()),
            ..args(root.path().join("other"))
        })
        .unwrap_err();
        assert!(err.contains("--name"), "{err}");
        let err = create(&NewPolicyArgs {
            sdk: Some(root.path().to_path_buf()),
            ..args(root.path().join("other"))
        })
        .unwrap_err();
        assert!(err.contains("not the policy SDK"), "{err}");
        assert!(!root.path().join("other").exists());
    }
}
