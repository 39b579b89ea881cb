//! Upload-time checks of a module: is it a component, which ABI does it target, does it import
//! anything outside the ABI, does it export what a policy must, is its metadata sane (and within
//! the caps of [`super::caps`]). An error names what is wrong without echoing an oversized value:
//! it quotes a short prefix at most.

use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use rebalancer_policy_sdk::caps::{quote_prefix, truncate};

use super::bindings::rebalancer::policy::types as wit;
use super::caps::{
    MAX_ARGS_SCHEMA_BYTES, MAX_DEFAULT_ARGS_BYTES, MAX_DESCRIPTION_BYTES, MAX_NAME_BYTES,
    MAX_VERSION_BYTES, QUOTED_PREFIX_BYTES,
};
use super::{ABI_VERSION, EngineError, PolicyMeta};

const ABI_PACKAGE: &str = "rebalancer:policy/";
const REQUIRED_EXPORTS: &[&str] = &["info", "validate-args", "deschedule", "balance"];

/// Interfaces that Rust's wasm32-wasip2 std imports even when a program never uses them; they are
/// linked as traps (no capability is granted). Anything else from WASI is refused.
const INERT_WASI: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
];

/// Magic and version/layer words: core modules are version 1, components layer 1 version 0xd.
pub(super) fn check_header(wasm: &[u8]) -> Result<(), EngineError> {
    if wasm.len() < 8 || &wasm[..4] != b"\0asm" {
        return Err(EngineError::NotWasm(
            "the body does not start with the WebAssembly magic bytes `\\0asm`".into(),
        ));
    }
    match wasm[4..8] {
        [1, 0, 0, 0] => Err(EngineError::NotComponent),
        [_, _, 1, 0] => Ok(()),
        _ => Err(EngineError::NotWasm(format!(
            "unknown WebAssembly version/layer {:02x?}",
            &wasm[4..8]
        ))),
    }
}

/// Whether `import` (a versioned interface name) is one of the WASI interfaces Rust's std
/// imports without using them, which are linked as traps.
pub(super) fn is_inert_wasi(import: &str) -> bool {
    let interface = import.split_once('@').map_or(import, |(i, _)| i);
    INERT_WASI.contains(&interface)
}

/// What a component's imports say about it.
pub(super) struct Imports {
    /// Inert WASI imports are present and must be linked as traps.
    pub uses_wasi: bool,
    /// The ABI version the component was built against (the newest `rebalancer:policy` version
    /// among its imports); `None` if it imports none.
    pub abi_version: Option<String>,
}

/// Check imports and exports.
pub(super) fn check_imports_exports(
    engine: &wasmtime::Engine,
    component: &Component,
) -> Result<Imports, EngineError> {
    let ty = component.component_type();
    let mut uses_wasi = false;
    let mut abi_version: Option<(u64, String)> = None;
    let host_major = ABI_VERSION.split('.').next().unwrap_or("1");
    for (name, _) in ty.imports(engine) {
        let (interface, version) = match name.split_once('@') {
            Some((i, v)) => (i, Some(v)),
            None => (name, None),
        };
        if let Some(rest) = interface.strip_prefix(ABI_PACKAGE) {
            let version = version.unwrap_or("");
            let major = version.split('.').next().unwrap_or("");
            if major != host_major {
                return Err(EngineError::AbiMismatch {
                    found: if version.is_empty() {
                        "an unversioned rebalancer:policy".to_string()
                    } else {
                        shown(version)
                    },
                    supported: ABI_VERSION.to_string(),
                });
            }
            if !matches!(rest, "types" | "cluster" | "columns" | "evictor" | "state") {
                return Err(EngineError::ForbiddenImport { name: shown(name) });
            }
            if !minor_supported(version) {
                return Err(EngineError::AbiMismatch {
                    found: shown(version),
                    supported: ABI_VERSION.to_string(),
                });
            }
            let minor = version
                .split('.')
                .nth(1)
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            if abi_version.as_ref().is_none_or(|(seen, _)| minor > *seen) {
                abi_version = Some((minor, version.to_string()));
            }
            continue;
        }
        if INERT_WASI.contains(&interface) {
            uses_wasi = true;
            continue;
        }
        return Err(EngineError::ForbiddenImport { name: shown(name) });
    }
    for required in REQUIRED_EXPORTS {
        let found = ty.exports(engine).any(|(name, item)| {
            name == *required && matches!(item.ty, ComponentItem::ComponentFunc(_))
        });
        if !found {
            return Err(EngineError::MissingExport {
                name: (*required).to_string(),
            });
        }
    }
    Ok(Imports {
        uses_wasi,
        abi_version: abi_version.map(|(_, v)| v),
    })
}

/// A name from the module as an error shows it: whole when short, else a prefix and its length.
fn shown(name: &str) -> String {
    truncate(name, 4 * QUOTED_PREFIX_BYTES).into_owned()
}

/// The oldest minor of the current major this host serves. 1.0 guests read snapshot layout 1,
/// which this host no longer builds (layout 2 split the archive into sections in 1.1); they are
/// refused at upload rather than failing every run. The project had no release with 1.0.
const OLDEST_MINOR: u64 = 1;

/// The snapshot layout a guest built against ABI `version` reads: layout 2 (sections 0–9) for
/// 1.1 and 1.2, layout 3 (plus node annotations and usage) from 1.3 (1.4 added the `columns`
/// import, not a layout).
pub(super) fn layout_of(version: &str) -> u32 {
    let minor = version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse::<u64>().ok())
        .unwrap_or(0);
    if minor >= 3 { 3 } else { 2 }
}

/// A guest built against a newer minor than the host serves needs functions the host lacks; one
/// built against a minor older than [`OLDEST_MINOR`] reads a snapshot layout the host no longer
/// builds.
fn minor_supported(version: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    };
    match (parse(version), parse(ABI_VERSION)) {
        (Some((_, guest_minor)), Some((_, host_minor))) => {
            (OLDEST_MINOR..=host_minor).contains(&guest_minor)
        }
        _ => false,
    }
}

/// Turn the guest's `info` into metadata, checking every field.
pub(super) fn check_info(
    info: wit::PolicyInfo,
    base: &PolicyMeta,
) -> Result<PolicyMeta, EngineError> {
    fn bad<T>(m: String) -> Result<T, EngineError> {
        Err(EngineError::InvalidMetadata(m))
    }
    if info.name.is_empty()
        || info.name.len() > MAX_NAME_BYTES
        || !info
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return bad(format!(
            "name {} must be 1–{MAX_NAME_BYTES} characters of letters, digits, '-', '_' or '.'",
            quote_prefix(&info.name, QUOTED_PREFIX_BYTES)
        ));
    }
    if info.version.is_empty() || info.version.len() > MAX_VERSION_BYTES {
        return bad(format!(
            "version {} must be 1–{MAX_VERSION_BYTES} characters",
            quote_prefix(&info.version, QUOTED_PREFIX_BYTES)
        ));
    }
    if info.extension_points.is_empty() {
        return bad("extension-points is empty: implement deschedule and/or balance".into());
    }
    within("description", info.description.len(), MAX_DESCRIPTION_BYTES)?;
    within("args-schema", info.args_schema.len(), MAX_ARGS_SCHEMA_BYTES)?;
    within(
        "default-args",
        info.default_args.len(),
        MAX_DEFAULT_ARGS_BYTES,
    )?;
    let args_schema: serde_json::Value = serde_json::from_str(&info.args_schema)
        .or_else(|e| bad(format!("args-schema is not JSON: {e}")))?;
    let default_args: serde_json::Value = serde_json::from_str(&info.default_args)
        .or_else(|e| bad(format!("default-args is not JSON: {e}")))?;
    if !args_schema.is_object() {
        return bad("args-schema must be a JSON object (a JSON Schema)".into());
    }
    // As stored and served: parsing may grow a value (`1e9` is stored as `1000000000.0`).
    within("args-schema", json_len(&args_schema), MAX_ARGS_SCHEMA_BYTES)?;
    within(
        "default-args",
        json_len(&default_args),
        MAX_DEFAULT_ARGS_BYTES,
    )?;
    // Each point once, in the order first listed (a list of a million points keeps two).
    let mut points: Vec<String> = Vec::with_capacity(2);
    for point in &info.extension_points {
        let point = match point {
            wit::ExtensionPoint::Deschedule => "deschedule",
            wit::ExtensionPoint::Balance => "balance",
        };
        if !points.iter().any(|p| p == point) {
            points.push(point.to_string());
        }
    }
    Ok(PolicyMeta {
        name: info.name,
        version: info.version,
        description: info.description,
        extension_points: points,
        args_schema,
        default_args,
        ..base.clone()
    })
}

/// `field` of `info` is `size` bytes: refused when over `limit`, named without its value.
fn within(field: &str, size: usize, limit: usize) -> Result<(), EngineError> {
    if size > limit {
        return Err(EngineError::InvalidMetadata(format!(
            "{field} is {size} bytes, over the limit of {limit} bytes"
        )));
    }
    Ok(())
}

/// The length of `value` serialized as compact JSON, without building the text.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a value that cannot serialize counts as infinite.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_distinguishes_core_modules_components_and_junk() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(EngineError::NotWasm(_))
        ));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(EngineError::NotComponent)
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
        assert!(matches!(
            check_header(b"\0asm"),
            Err(EngineError::NotWasm(_))
        ));
    }

    fn info() -> wit::PolicyInfo {
        wit::PolicyInfo {
            name: "Fine".into(),
            version: "1.0.0".into(),
            description: "a policy".into(),
            extension_points: vec![wit::ExtensionPoint::Balance],
            args_schema: r#"{"type":"object"}"#.into(),
            default_args: "{}".into(),
        }
    }

    fn base() -> PolicyMeta {
        PolicyMeta {
            name: String::new(),
            version: String::new(),
            description: String::new(),
            abi_version: ABI_VERSION.into(),
            digest: "0".repeat(64),
            size_bytes: 1,
            extension_points: Vec::new(),
            args_schema: serde_json::Value::Null,
            default_args: serde_json::Value::Null,
        }
    }

    fn refusal(info: wit::PolicyInfo) -> String {
        match check_info(info, &base()) {
            Err(EngineError::InvalidMetadata(m)) => m,
            other => panic!("expected invalid metadata, got {other:?}"),
        }
    }

    #[test]
    fn oversized_info_fields_are_refused_by_name_size_and_limit_without_their_value() {
        let mib = 1 << 20;
        let cases = [
            (
                "description",
                wit::PolicyInfo {
                    description: "d".repeat(40 * mib),
                    ..info()
                },
                40 * mib,
                MAX_DESCRIPTION_BYTES,
            ),
            (
                "args-schema",
                wit::PolicyInfo {
                    args_schema: format!(r#"{{"description":"{}"}}"#, "s".repeat(16 * mib)),
                    ..info()
                },
                16 * mib + 18,
                MAX_ARGS_SCHEMA_BYTES,
            ),
            (
                "default-args",
                wit::PolicyInfo {
                    default_args: format!(r#"{{"pad":"{}"}}"#, "a".repeat(mib)),
                    ..info()
                },
                mib + 10,
                MAX_DEFAULT_ARGS_BYTES,
            ),
        ];
        for (field, info, size, limit) in cases {
            let message = refusal(info);
            assert_eq!(
                message,
                format!("{field} is {size} bytes, over the limit of {limit} bytes")
            );
        }
    }

    #[test]
    fn a_schema_that_grows_when_stored_is_measured_as_stored() {
        // `1e9` is stored as `1000000000.0`: 3 bytes sent, 12 kept.
        let items = vec!["1e9"; 60_000].join(",");
        let schema = format!(r#"{{"enum":[{items}]}}"#);
        assert!(schema.len() < MAX_ARGS_SCHEMA_BYTES);
        let message = refusal(wit::PolicyInfo {
            args_schema: schema,
            ..info()
        });
        assert!(message.starts_with("args-schema is "), "{message}");
        assert!(message.ends_with(&format!("over the limit of {MAX_ARGS_SCHEMA_BYTES} bytes")));
    }

    #[test]
    fn a_bad_name_or_version_is_quoted_by_a_short_prefix() {
        let message = refusal(wit::PolicyInfo {
            name: "n".repeat(16 << 20),
            ..info()
        });
        assert!(message.len() < 250, "{message}");
        assert!(message.contains("(16777216 bytes)"), "{message}");
        let message = refusal(wit::PolicyInfo {
            version: "v".repeat(1 << 20),
            ..info()
        });
        assert!(message.len() < 200, "{message}");
        // A short bad name is shown whole.
        let message = refusal(wit::PolicyInfo {
            name: "no spaces".into(),
            ..info()
        });
        assert!(message.contains("\"no spaces\""), "{message}");
    }

    #[test]
    fn extension_points_are_kept_once_each_in_first_listed_order() {
        let many = (0..1_000_000)
            .map(|i| {
                if i % 2 == 0 {
                    wit::ExtensionPoint::Balance
                } else {
                    wit::ExtensionPoint::Deschedule
                }
            })
            .collect();
        let meta = check_info(
            wit::PolicyInfo {
                extension_points: many,
                ..info()
            },
            &base(),
        )
        .unwrap();
        assert_eq!(meta.extension_points, ["balance", "deschedule"]);
    }

    #[test]
    fn long_import_names_are_shown_by_a_prefix() {
        let name = format!("wasi:{}/x@0.2.6", "a".repeat(1 << 20));
        let shown = shown(&name);
        assert!(shown.len() <= 4 * QUOTED_PREFIX_BYTES, "{shown}");
        assert!(shown.starts_with("wasi:aaa"), "{shown}");
        assert_eq!(super::shown("wasi:io/poll@0.2.6"), "wasi:io/poll@0.2.6");
    }

    #[test]
    fn a_minor_whose_snapshot_layout_is_gone_is_refused() {
        assert!(!minor_supported("1.0.0"));
    }

    #[test]
    fn newer_minor_than_the_host_is_refused() {
        assert!(minor_supported(ABI_VERSION));
        assert!(minor_supported("1.1.0"));
        assert!(!minor_supported("1.99.0"));
        assert!(!minor_supported("garbage"));
    }
}
