//! Upload-time checks of a module: is it a component, which ABI does it target, does it import
//! anything outside the ABI, does it export what a policy must, is its metadata sane.

use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::bindings::rebalancer::policy::types as wit;
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
                        version.to_string()
                    },
                    supported: ABI_VERSION.to_string(),
                });
            }
            if !matches!(rest, "types" | "cluster" | "evictor" | "state") {
                return Err(EngineError::ForbiddenImport {
                    name: name.to_string(),
                });
            }
            if !minor_supported(version) {
                return Err(EngineError::AbiMismatch {
                    found: version.to_string(),
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
        return Err(EngineError::ForbiddenImport {
            name: name.to_string(),
        });
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

/// The oldest minor of the current major this host serves. 1.0 guests read snapshot layout 1,
/// which this host no longer builds (layout 2 split the archive into sections in 1.1); they are
/// refused at upload rather than failing every run. The project had no release with 1.0.
const OLDEST_MINOR: u64 = 1;

/// The snapshot layout a guest built against ABI `version` reads: layout 2 (sections 0–9) for
/// 1.1 and 1.2, layout 3 (plus node annotations and usage) from 1.3.
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
        || info.name.len() > 128
        || !info
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return bad(format!(
            "name {:?} must be 1–128 characters of letters, digits, '-', '_' or '.'",
            info.name
        ));
    }
    if info.version.is_empty() || info.version.len() > 64 {
        return bad(format!(
            "version {:?} must be 1–64 characters",
            info.version
        ));
    }
    if info.extension_points.is_empty() {
        return bad("extension-points is empty: implement deschedule and/or balance".into());
    }
    let args_schema: serde_json::Value = serde_json::from_str(&info.args_schema)
        .or_else(|e| bad(format!("args-schema is not JSON: {e}")))?;
    let default_args: serde_json::Value = serde_json::from_str(&info.default_args)
        .or_else(|e| bad(format!("default-args is not JSON: {e}")))?;
    if !args_schema.is_object() {
        return bad("args-schema must be a JSON object (a JSON Schema)".into());
    }
    let mut points: Vec<String> = info
        .extension_points
        .iter()
        .map(|p| match p {
            wit::ExtensionPoint::Deschedule => "deschedule".to_string(),
            wit::ExtensionPoint::Balance => "balance".to_string(),
        })
        .collect();
    points.dedup();
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
