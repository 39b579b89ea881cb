//! Guest glue: connects a [`Policy`] to the WIT world when compiled for wasm32.
//!
//! Owns the generated guest bindings and the [`crate::export_policy!`] machinery. Must not hold
//! any policy logic: it only converts between WIT values and the SDK's types.

use crate::policy::{BatchOutcome, ExtensionPoint, Host, LogLevel, Policy, Refusal};
use std::sync::OnceLock;

use crate::model::Section;
use crate::view::Cluster;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "policy",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "rebalancer_policy_sdk::guest::bindings",
    });
}

use bindings::rebalancer::policy::{cluster, evictor, state, types};

/// [`Host`] over the WIT imports.
struct WasmHost;

impl Host for WasmHost {
    fn nodes(&mut self) -> Vec<u32> {
        cluster::nodes()
    }
    fn filter(&mut self, pods: &[u32]) -> Vec<u32> {
        evictor::filter(pods)
    }
    fn pre_eviction_filter(&mut self, pods: &[u32]) -> Vec<u32> {
        evictor::pre_eviction_filter(pods)
    }
    fn propose_eviction(&mut self, pod: u32, reason: &str) -> Result<(), Refusal> {
        evictor::propose_eviction(pod, reason).map_err(from_wit_refusal)
    }
    fn propose_evictions(&mut self, pods: &[u32], reason: &str) -> BatchOutcome {
        let outcome = evictor::propose_evictions(pods, reason);
        BatchOutcome {
            admitted: outcome.admitted as usize,
            refusal: outcome.refusal.map(from_wit_refusal),
        }
    }
    fn node_fit(&mut self, pod: u32, candidates: &[u32]) -> Vec<u32> {
        evictor::node_fit(pod, candidates)
    }
    fn object_json(&mut self, kind: &str, index: u32) -> Option<String> {
        cluster::object_json(kind, index)
    }
    fn log(&mut self, level: LogLevel, message: &str) {
        cluster::log(to_wit_level(level), message)
    }
    fn state_get(&mut self, key: &str) -> Option<Vec<u8>> {
        state::get(key)
    }
    fn state_put(&mut self, key: &str, value: &[u8]) -> Result<(), String> {
        state::put(key, value)
    }
    fn state_remove(&mut self, key: &str) -> bool {
        state::remove(key)
    }
    fn state_keys(&mut self) -> Vec<String> {
        state::keys()
    }
}

fn from_wit_refusal(refusal: types::Refusal) -> Refusal {
    match refusal {
        types::Refusal::NodeLimit => Refusal::NodeLimit,
        types::Refusal::NamespaceLimit => Refusal::NamespaceLimit,
        types::Refusal::TotalLimit => Refusal::TotalLimit,
        types::Refusal::DisruptionBudget(m) => Refusal::DisruptionBudget(m),
        types::Refusal::NotEvictable(m) => Refusal::NotEvictable(m),
        types::Refusal::UnknownPod => Refusal::UnknownPod,
    }
}

fn to_wit_level(level: LogLevel) -> types::LogLevel {
    match level {
        LogLevel::Trace => types::LogLevel::Trace,
        LogLevel::Debug => types::LogLevel::Debug,
        LogLevel::Info => types::LogLevel::Info,
        LogLevel::Warn => types::LogLevel::Warn,
        LogLevel::Error => types::LogLevel::Error,
    }
}

/// Route panics to the host log before the trap, so the recorded error says what went wrong
/// (the default hook writes to stderr, which a policy does not have).
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        cluster::log(types::LogLevel::Error, &format!("policy panicked: {info}"));
    }));
}

/// The wasm page size: the unit of `memory.grow`, and the alignment `map-section` asks for.
const WASM_PAGE: usize = 64 << 10;

/// Section `section` of the snapshot, read in place in this module's memory for the rest of the
/// evaluation. Fresh pages are grown for it, used by nothing else, and the host places the
/// section there (`cluster.map-section`: a copy-on-write mapping of the host's archive, not a
/// copy); a host that cannot write this module's memory hands over a copy instead
/// (`cluster.snapshot-section`). Nothing is freed: the instance is thrown away after the
/// evaluation. `None` when the host's layout has no such section.
fn place_section(section: Section) -> Option<&'static [u8]> {
    match map_section(section)? {
        Some(placed) => Some(placed),
        None => cluster::snapshot_section(section.id()).map(leak_aligned),
    }
}

/// `Some(None)` when the host declined to place the section.
fn map_section(section: Section) -> Option<Option<&'static [u8]>> {
    let size = cluster::section_size(section.id())? as usize;
    if size == 0 {
        return Some(Some(&[]));
    }
    let first_page = core::arch::wasm32::memory_grow(0, size.div_ceil(WASM_PAGE));
    if first_page == usize::MAX {
        panic!(
            "out of memory: snapshot section {} ({size} bytes) does not fit under the memory cap",
            section.name()
        );
    }
    let offset = first_page * WASM_PAGE;
    let placed = u32::try_from(offset)
        .map(|at| cluster::map_section(section.id(), at))
        .unwrap_or(false);
    if !placed {
        return Some(None);
    }
    // SAFETY: the pages from `offset` were grown just above and nothing else points into them
    // (the allocator only uses memory it grew itself); the host has filled their first `size`
    // bytes with the section, which is 64 KiB-aligned as rkyv needs (8).
    let bytes =
        unsafe { std::slice::from_raw_parts(std::ptr::with_exposed_provenance(offset), size) };
    Some(Some(bytes))
}

/// Keep a copy the host handed over for the rest of the evaluation, 8-byte aligned as rkyv
/// needs. `list<u8>` arrives through `cabi_realloc(align = 1)`; the allocator returns 8-aligned
/// blocks in practice, but copy rather than trust it.
fn leak_aligned(bytes: Vec<u8>) -> &'static [u8] {
    if (bytes.as_ptr() as usize).is_multiple_of(8) {
        return Vec::leak(bytes);
    }
    let mut aligned = rkyv::util::AlignedVec::<16>::with_capacity(bytes.len());
    aligned.extend_from_slice(&bytes);
    let aligned: &'static rkyv::util::AlignedVec<16> = Box::leak(Box::new(aligned));
    aligned.as_slice()
}

/// A column of the snapshot, placed the first time a policy reads it.
fn fetch_section(section: Section) -> &'static [u8] {
    static SECTIONS: [OnceLock<&'static [u8]>; Section::ALL.len()] =
        [const { OnceLock::new() }; Section::ALL.len()];
    SECTIONS[section.id() as usize].get_or_init(|| match place_section(section) {
        Some(bytes) => bytes,
        None => panic!(
            "the host has no snapshot section {} (layout {})",
            section.name(),
            crate::model::LAYOUT_VERSION
        ),
    })
}

#[doc(hidden)]
pub fn info<P: Policy>() -> types::PolicyInfo {
    install_panic_hook();
    let info = P::info();
    types::PolicyInfo {
        name: info.name,
        version: info.version,
        description: info.description,
        extension_points: info
            .extension_points
            .iter()
            .map(|p| match p {
                ExtensionPoint::Deschedule => types::ExtensionPoint::Deschedule,
                ExtensionPoint::Balance => types::ExtensionPoint::Balance,
            })
            .collect(),
        args_schema: info.args_schema.to_string(),
        default_args: info.default_args.to_string(),
    }
}

#[doc(hidden)]
pub fn validate_args<P: Policy>(args: String) -> Result<(), Vec<types::ArgError>> {
    install_panic_hook();
    crate::policy::parse_args::<P>(&args)
        .map(|_| ())
        .map_err(|errors| {
            errors
                .into_iter()
                .map(|e| types::ArgError {
                    field: e.field,
                    message: e.message,
                })
                .collect()
        })
}

#[doc(hidden)]
pub fn run<P: Policy>(point: ExtensionPoint, args: String) -> Result<(), String> {
    install_panic_hook();
    let info = cluster::info();
    if info.layout_version != crate::model::LAYOUT_VERSION {
        return Err(format!(
            "the host's snapshot layout is version {}, this policy was built with an SDK that reads \
             version {}: rebuild the policy against a matching rebalancer-policy-sdk",
            info.layout_version,
            crate::model::LAYOUT_VERSION
        ));
    }
    let Some(core) = place_section(Section::Core) else {
        return Err("the host did not place the snapshot's core section".into());
    };
    if core.len() as u64 != info.byte_len {
        return Err(format!(
            "snapshot is {} bytes, the host announced {}",
            core.len(),
            info.byte_len
        ));
    }
    // The archive comes from the host, which built it with `model::to_bytes` for the layout
    // version checked above: the guest trusts its host (the sandbox protects the host from the
    // guest, not the reverse), so the structural validation is skipped. On the reference cluster
    // (150k pods) validating costs more than most policies' whole work.
    // SAFETY: `core` and every section `fetch_section` returns are the host's `model::to_bytes`
    // sections for this layout version, 64 KiB-aligned.
    let cluster = unsafe { Cluster::from_sections_unchecked(core, fetch_section) };
    let mut host = WasmHost;
    let mut ctx = crate::policy::Context::new(cluster, &mut host);
    crate::policy::evaluate::<P>(&mut ctx, point, &args)
}
