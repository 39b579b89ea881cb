//! # TestOversizedInfo
//!
//! A deliberately hostile policy for the engine's upload tests: its `info` export returns one
//! oversized field — a name, version, description, args schema or default args of any size, or an
//! extension-point list of any length — so the host's metadata caps can be shown to hold.
//!
//! `info` takes no arguments, so what it returns is chosen by [`SELECTOR`]: 48 bytes of ASCII in
//! the module's data, `rebalancer-oversize:<field>:<size>` padded with spaces, which a test
//! overwrites in the `.wasm` bytes before uploading them (same length, so the module stays valid;
//! a different digest, so each variant is compiled on its own). [`selector`] writes one. As
//! built, the selector says `none`: the policy is well-formed and does nothing.
//!
//! It is **not** a built-in: the server never embeds it; tests load the component from the
//! directory the builtins crate's build script fills (`rebalancer_builtins::WASM_DIR`).
//!
//! Owns nothing but oversized metadata.

use rebalancer_policy_sdk::{ExtensionPoint, Policy, PolicyInfo};
use serde::{Deserialize, Serialize};

/// How the selector starts.
pub const SELECTOR_PREFIX: &str = "rebalancer-oversize:";
/// The selector's length in bytes.
pub const SELECTOR_BYTES: usize = 48;

/// What `info` returns: see the crate's docs. Read through a volatile load so the optimiser
/// cannot fold it into the code: it must stay in the module's data, where tests patch it.
#[used]
pub static SELECTOR: [u8; SELECTOR_BYTES] = *b"rebalancer-oversize:none:0                      ";

/// The selector that makes `info` return `field` (`name`, `version`, `description`,
/// `args-schema`, `default-args` or `extension-points`) with `size` bytes (entries, for
/// `extension-points`). `None` when it does not fit in [`SELECTOR_BYTES`].
pub fn selector(field: &str, size: u64) -> Option<[u8; SELECTOR_BYTES]> {
    let text = format!("{SELECTOR_PREFIX}{field}:{size}");
    let mut out = [b' '; SELECTOR_BYTES];
    out.get_mut(..text.len())?.copy_from_slice(text.as_bytes());
    Some(out)
}

/// The field and size [`SELECTOR`] names.
fn selected() -> (String, usize) {
    // SAFETY: a plain read of an initialised static; volatile only to keep it in the data.
    let bytes = unsafe { std::ptr::read_volatile(&SELECTOR) };
    parse(&bytes).unwrap_or_else(|| ("none".into(), 0))
}

fn parse(bytes: &[u8]) -> Option<(String, usize)> {
    let text = std::str::from_utf8(bytes).ok()?.trim_end();
    let rest = text.strip_prefix(SELECTOR_PREFIX)?;
    let (field, size) = rest.split_once(':')?;
    Some((field.to_string(), size.parse().ok()?))
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestOversizedInfoArgs {}

/// The policy with oversized metadata.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestOversizedInfo;

/// `size` bytes of `fill`.
fn text(fill: char, size: usize) -> String {
    std::iter::repeat_n(fill, size).collect()
}

impl Policy for TestOversizedInfo {
    type Args = TestOversizedInfoArgs;

    fn info() -> PolicyInfo {
        let mut info = PolicyInfo {
            name: "TestOversizedInfo".into(),
            version: "0.1.0".into(),
            description: "Upload test fixture: returns oversized metadata when patched to.".into(),
            extension_points: vec![ExtensionPoint::Deschedule],
            args_schema: serde_json::json!({"type": "object", "additionalProperties": false}),
            default_args: serde_json::json!({}),
        };
        let (field, size) = selected();
        match field.as_str() {
            "name" => info.name = text('n', size),
            "version" => info.version = text('v', size),
            "description" => info.description = text('d', size),
            "args-schema" => {
                info.args_schema =
                    serde_json::json!({"type": "object", "description": text('s', size)})
            }
            "default-args" => info.default_args = serde_json::json!({"pad": text('a', size)}),
            "extension-points" => {
                info.extension_points = (0..size)
                    .map(|i| {
                        if i % 2 == 0 {
                            ExtensionPoint::Deschedule
                        } else {
                            ExtensionPoint::Balance
                        }
                    })
                    .collect()
            }
            _ => {}
        }
        info
    }

    fn deschedule(
        _: &mut rebalancer_policy_sdk::Context<'_>,
        _: &Self::Args,
    ) -> Result<(), String> {
        Ok(())
    }
}

rebalancer_policy_sdk::export_policy!(TestOversizedInfo);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_selector_says_none_and_selectors_round_trip() {
        assert_eq!(parse(&SELECTOR), Some(("none".into(), 0)));
        let patched = selector("description", 41_943_040).unwrap();
        assert_eq!(parse(&patched), Some(("description".into(), 41_943_040)));
        assert!(selector("a-field-name-far-far-too-long", 123_456_789).is_none());
    }

    #[test]
    fn info_as_built_is_well_formed() {
        let info = TestOversizedInfo::info();
        assert_eq!(info.name, "TestOversizedInfo");
        assert!(info.args_schema.is_object());
    }
}
