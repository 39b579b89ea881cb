//! # TestMisbehaving
//!
//! A deliberately hostile policy for the engine's sandbox tests: it loops forever, exhausts memory,
//! overflows the stack, panics, traps, floods the evictor with proposals or the log with bytes or
//! lines, hands the host oversized strings and lists (reasons, errors, arg errors, state keys) —
//! whatever `behaviour` says — so the host's deadlines and caps can be shown to hold.
//!
//! It is **not** a built-in: the server never embeds it; tests load the component from
//! `target/wasm32-wasip2/policy/test_misbehaving.wasm`.
//!
//! Owns nothing but misbehaviour. Every loop and allocation goes through [`std::hint::black_box`]
//! so the optimiser cannot prove the work useless and delete it.

use std::hint::black_box;

use rebalancer_policy_sdk::{ArgError, Context, ExtensionPoint, Policy, PolicyInfo};
use serde::{Deserialize, Serialize};

/// Default number of proposals for `flood-proposals` when `count` is not given.
pub const DEFAULT_FLOOD_PROPOSALS: u64 = 5_000_000;
/// Default number of log lines for `flood-logs` when `count` is not given.
pub const DEFAULT_FLOOD_LOGS: u64 = 100_000;
/// Size of one `flood-logs` message.
pub const FLOOD_LOG_MESSAGE_BYTES: usize = 1 << 20;
/// Size of one `memory-bomb` allocation step.
pub const MEMORY_BOMB_STEP_BYTES: usize = 1 << 20;
/// The panic message of behaviour `panic`, so tests can look for it in the recorded error.
pub const PANIC_MESSAGE: &str = "TestMisbehaving: deliberate panic (behaviour \"panic\")";
/// Default number of proposals (`huge-reason`) or batches (`huge-reason-batch`).
pub const DEFAULT_HUGE_REASON_CALLS: u64 = 1_000;
/// Default size of a `huge-reason` reason.
pub const DEFAULT_HUGE_REASON_BYTES: u64 = 10 << 20;
/// Default size of a `huge-reason-batch` reason.
pub const DEFAULT_HUGE_BATCH_REASON_BYTES: u64 = 4 << 20;
/// Default number of `flood-empty-logs` lines.
pub const DEFAULT_FLOOD_EMPTY_LOGS: u64 = 10_000_000;
/// Default number of `flood-map-section` calls.
pub const DEFAULT_FLOOD_MAP_SECTION: u64 = 2_000_000;
/// Default number of `flood-arg-errors` errors.
pub const DEFAULT_FLOOD_ARG_ERRORS: u64 = 400_000;
/// Default size of the oversized string of `huge-arg-error`, `huge-state-key` and
/// `huge-object-kind`.
pub const DEFAULT_HUGE_BYTES: u64 = 1 << 20;
/// Default size of a `huge-error` error.
pub const DEFAULT_HUGE_ERROR_BYTES: u64 = 10 << 20;
/// Default size of a `huge-panic` panic message.
pub const DEFAULT_HUGE_PANIC_BYTES: u64 = 32 << 10;
/// How every oversized string of this policy starts, so tests can recognise a kept prefix.
pub const HUGE_PREFIX: &str = "TestMisbehaving: ";

/// What the policy does when it runs (at either extension point).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Behaviour {
    /// Proposes nothing and returns.
    #[default]
    None,
    /// Proposes the first `count` (default 1) pods that pass the evictor's Filter.
    Propose,
    /// The same as `propose`, through `propose-evictions` batches (carrying on after a refusal).
    ProposeBatch,
    /// Never returns.
    InfiniteLoop,
    /// Allocates and touches memory until the host's memory cap stops it.
    MemoryBomb,
    /// Recurses without bound until the stack cap stops it.
    DeepRecursion,
    /// Panics with [`PANIC_MESSAGE`].
    Panic,
    /// Executes a wasm `unreachable` instruction.
    Trap,
    /// Proposes pods in a tight loop `count` times (default 5,000,000), ignoring every refusal.
    FloodProposals,
    /// Logs a 1 MiB message `count` times (default 100,000).
    FloodLogs,
    /// `flood-proposals` through `propose-evictions`, 64 pods a batch.
    FloodProposalBatches,
    /// Has the core section placed in fresh memory (`cluster.map-section`), overwrites every byte
    /// of it, checks the writes took, then does what `propose` does: the host's archive and later
    /// evaluations must not see the writes.
    ScribbleSnapshot,
    /// Asks `cluster.map-section` for an offset that is not on a wasm page boundary.
    MapSectionUnaligned,
    /// Counts its runs in its policy state (key `runs`, JSON) and logs `run N`; with `count`,
    /// also puts `count` bytes under `pad` (to reach the state cap). Fails if a put is refused.
    CountRuns,
    /// Does what `count-runs` does, then traps: the state change must not be committed.
    CountRunsThenTrap,
    /// Proposes `count` times (default 1,000), cycling over the pods, each time with one reason
    /// of `bytes` bytes (default 10 MiB): the first proposal of each pod is accepted, the rest
    /// refused (already proposed).
    HugeReason,
    /// Proposes every pod in a `propose-evictions` batch `count` times (default 1,000), with one
    /// reason of `bytes` bytes (default 4 MiB): the first batch is admitted, the rest refused.
    HugeReasonBatch,
    /// Logs `count` empty lines (default 10,000,000).
    FloodEmptyLogs,
    /// Calls `cluster.map-section` for the core `count` times (default 2,000,000), always into the
    /// same pages.
    FloodMapSection,
    /// `validate-args` returns `count` errors (default 400,000), each with an empty field and
    /// message.
    FloodArgErrors,
    /// `validate-args` returns one error whose field and message are `bytes` bytes each
    /// (default 1 MiB).
    HugeArgError,
    /// The extension point returns an error of `bytes` bytes (default 10 MiB).
    HugeError,
    /// Panics with a message of `bytes` bytes (default 32 KiB).
    HugePanic,
    /// Puts a value under a key of `bytes` bytes (default 1 MiB); returns the host's refusal as
    /// its error, or an error saying the put was accepted.
    HugeStateKey,
    /// Asks `cluster.object-json` for a kind of `bytes` bytes (default 1 MiB); fails if the host
    /// answers anything but `none`.
    HugeObjectKind,
}

impl Behaviour {
    pub fn as_str(self) -> &'static str {
        match self {
            Behaviour::None => "none",
            Behaviour::Propose => "propose",
            Behaviour::ProposeBatch => "propose-batch",
            Behaviour::InfiniteLoop => "infinite-loop",
            Behaviour::MemoryBomb => "memory-bomb",
            Behaviour::DeepRecursion => "deep-recursion",
            Behaviour::Panic => "panic",
            Behaviour::Trap => "trap",
            Behaviour::FloodProposals => "flood-proposals",
            Behaviour::FloodLogs => "flood-logs",
            Behaviour::FloodProposalBatches => "flood-proposal-batches",
            Behaviour::ScribbleSnapshot => "scribble-snapshot",
            Behaviour::MapSectionUnaligned => "map-section-unaligned",
            Behaviour::CountRuns => "count-runs",
            Behaviour::CountRunsThenTrap => "count-runs-then-trap",
            Behaviour::HugeReason => "huge-reason",
            Behaviour::HugeReasonBatch => "huge-reason-batch",
            Behaviour::FloodEmptyLogs => "flood-empty-logs",
            Behaviour::FloodMapSection => "flood-map-section",
            Behaviour::FloodArgErrors => "flood-arg-errors",
            Behaviour::HugeArgError => "huge-arg-error",
            Behaviour::HugeError => "huge-error",
            Behaviour::HugePanic => "huge-panic",
            Behaviour::HugeStateKey => "huge-state-key",
            Behaviour::HugeObjectKind => "huge-object-kind",
        }
    }

    const ALL: [Behaviour; 25] = [
        Behaviour::None,
        Behaviour::Propose,
        Behaviour::ProposeBatch,
        Behaviour::InfiniteLoop,
        Behaviour::MemoryBomb,
        Behaviour::DeepRecursion,
        Behaviour::Panic,
        Behaviour::Trap,
        Behaviour::FloodProposals,
        Behaviour::FloodLogs,
        Behaviour::FloodProposalBatches,
        Behaviour::ScribbleSnapshot,
        Behaviour::MapSectionUnaligned,
        Behaviour::CountRuns,
        Behaviour::CountRunsThenTrap,
        Behaviour::HugeReason,
        Behaviour::HugeReasonBatch,
        Behaviour::FloodEmptyLogs,
        Behaviour::FloodMapSection,
        Behaviour::FloodArgErrors,
        Behaviour::HugeArgError,
        Behaviour::HugeError,
        Behaviour::HugePanic,
        Behaviour::HugeStateKey,
        Behaviour::HugeObjectKind,
    ];
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestMisbehavingArgs {
    #[serde(default)]
    pub behaviour: Behaviour,
    /// Iterations for `propose` (pods), `flood-proposals` (proposals), `flood-logs` (lines) and
    /// the other floods, as each behaviour says; `null` means the behaviour's default. Ignored
    /// by the other behaviours.
    #[serde(default)]
    pub count: Option<u64>,
    /// Size of the oversized string of the `huge-*` behaviours; `null` means the behaviour's
    /// default.
    #[serde(default)]
    pub bytes: Option<u64>,
}

/// The misbehaving policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestMisbehaving;

impl Policy for TestMisbehaving {
    type Args = TestMisbehavingArgs;

    fn info() -> PolicyInfo {
        PolicyInfo {
            name: "TestMisbehaving".into(),
            version: "0.36.0-rb.1".into(),
            description: "Sandbox test fixture: misbehaves on purpose (endless loops, memory and \
                          stack exhaustion, panics, traps, proposal and log floods). Never use it \
                          on a real cluster."
                .into(),
            extension_points: vec![ExtensionPoint::Deschedule, ExtensionPoint::Balance],
            args_schema: args_schema(),
            default_args: serde_json::to_value(TestMisbehavingArgs::default())
                .expect("default args serialize"),
        }
    }

    fn validate(args: &Self::Args) -> Vec<ArgError> {
        match (args.behaviour, args.count) {
            (Behaviour::FloodArgErrors, count) => {
                let count = count.unwrap_or(DEFAULT_FLOOD_ARG_ERRORS) as usize;
                (0..count)
                    .map(|_| ArgError::new(String::new(), String::new()))
                    .collect()
            }
            (Behaviour::HugeArgError, _) => {
                let bytes = args.bytes.unwrap_or(DEFAULT_HUGE_BYTES);
                vec![ArgError::new(huge(bytes), huge(bytes))]
            }
            (Behaviour::Propose | Behaviour::FloodProposals | Behaviour::FloodLogs, Some(0)) => {
                vec![ArgError::new(
                    "count",
                    format!(
                        "must be at least 1 for behaviour {:?}",
                        args.behaviour.as_str()
                    ),
                )]
            }
            _ => Vec::new(),
        }
    }

    fn deschedule(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        misbehave(ctx, args)
    }

    fn balance(ctx: &mut Context<'_>, args: &Self::Args) -> Result<(), String> {
        misbehave(ctx, args)
    }
}

fn args_schema() -> serde_json::Value {
    let behaviours: Vec<&str> = Behaviour::ALL.iter().map(|b| b.as_str()).collect();
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "TestMisbehavingArgs",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "behaviour": {
                "description": "What to do when run.",
                "enum": behaviours,
                "default": "none"
            },
            "count": {
                "description": "Iterations for propose and propose-batch (pods, default 1), \
                                flood-proposals and flood-proposal-batches (proposals, default \
                                5000000), flood-logs (lines, default 100000) and the other \
                                floods (see the crate's docs).",
                "type": ["integer", "null"],
                "minimum": 1,
                "default": null
            },
            "bytes": {
                "description": "Size of the oversized string of the huge-* behaviours.",
                "type": ["integer", "null"],
                "minimum": 0,
                "default": null
            }
        }
    })
}

fn misbehave(ctx: &mut Context<'_>, args: &TestMisbehavingArgs) -> Result<(), String> {
    match args.behaviour {
        Behaviour::None => Ok(()),
        Behaviour::Propose => propose(ctx, args.count.unwrap_or(1)),
        Behaviour::ProposeBatch => propose_batch(ctx, args.count.unwrap_or(1)),
        Behaviour::InfiniteLoop => infinite_loop(),
        Behaviour::MemoryBomb => memory_bomb(),
        Behaviour::DeepRecursion => {
            let depth = recurse(black_box(0));
            Err(format!("recursion unexpectedly returned at depth {depth}"))
        }
        Behaviour::Panic => panic!("{PANIC_MESSAGE}"),
        Behaviour::Trap => trap(),
        Behaviour::FloodProposals => {
            flood_proposals(ctx, args.count.unwrap_or(DEFAULT_FLOOD_PROPOSALS));
            Ok(())
        }
        Behaviour::FloodLogs => {
            flood_logs(ctx, args.count.unwrap_or(DEFAULT_FLOOD_LOGS));
            Ok(())
        }
        Behaviour::FloodProposalBatches => {
            flood_proposal_batches(ctx, args.count.unwrap_or(DEFAULT_FLOOD_PROPOSALS));
            Ok(())
        }
        Behaviour::ScribbleSnapshot => {
            raw::scribble_core()?;
            propose(ctx, args.count.unwrap_or(1))
        }
        Behaviour::MapSectionUnaligned => raw::map_unaligned(),
        Behaviour::CountRuns => count_runs(ctx, args.count),
        Behaviour::CountRunsThenTrap => {
            count_runs(ctx, args.count)?;
            trap()
        }
        Behaviour::HugeReason => {
            let reason = huge(args.bytes.unwrap_or(DEFAULT_HUGE_REASON_BYTES));
            let pods = (ctx.cluster.pod_count() as u64).max(1);
            for i in 0..args.count.unwrap_or(DEFAULT_HUGE_REASON_CALLS) {
                let _ignored = black_box(ctx.propose_eviction((i % pods) as u32, &reason));
            }
            Ok(())
        }
        Behaviour::HugeReasonBatch => {
            let reason = huge(args.bytes.unwrap_or(DEFAULT_HUGE_BATCH_REASON_BYTES));
            let pods: Vec<u32> = (0..ctx.cluster.pod_count() as u32).collect();
            for _ in 0..args.count.unwrap_or(DEFAULT_HUGE_REASON_CALLS) {
                black_box(ctx.propose_evictions(&pods, &reason));
            }
            Ok(())
        }
        Behaviour::FloodEmptyLogs => {
            for _ in 0..args.count.unwrap_or(DEFAULT_FLOOD_EMPTY_LOGS) {
                ctx.info(black_box(""));
            }
            Ok(())
        }
        Behaviour::FloodMapSection => {
            raw::flood_map_section(args.count.unwrap_or(DEFAULT_FLOOD_MAP_SECTION))
        }
        // Reached only when the host runs the policy without validating its args.
        Behaviour::FloodArgErrors | Behaviour::HugeArgError => Ok(()),
        Behaviour::HugeError => Err(huge(args.bytes.unwrap_or(DEFAULT_HUGE_ERROR_BYTES))),
        Behaviour::HugePanic => panic!("{}", huge(args.bytes.unwrap_or(DEFAULT_HUGE_PANIC_BYTES))),
        Behaviour::HugeStateKey => {
            let key = huge(args.bytes.unwrap_or(DEFAULT_HUGE_BYTES));
            match ctx.state_put(&key, b"v") {
                Ok(()) => Err(format!("a state key of {} bytes was accepted", key.len())),
                Err(refusal) => Err(refusal),
            }
        }
        Behaviour::HugeObjectKind => {
            let kind = huge(args.bytes.unwrap_or(DEFAULT_HUGE_BYTES));
            match ctx.object_json(&kind, 0) {
                None => Ok(()),
                Some(_) => Err("object-json answered an oversized kind".into()),
            }
        }
    }
}

/// A string of `bytes` bytes (at least [`HUGE_PREFIX`]): the prefix, then "€" (three bytes, so
/// a cut at an arbitrary byte would split one) and `x`s to make up the length.
fn huge(bytes: u64) -> String {
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    let mut text = String::with_capacity(bytes.max(HUGE_PREFIX.len()));
    text.push_str(HUGE_PREFIX);
    while text.len() + 3 <= bytes {
        text.push('€');
    }
    while text.len() < bytes {
        text.push('x');
    }
    black_box(text)
}

fn count_runs(ctx: &mut Context<'_>, pad: Option<u64>) -> Result<(), String> {
    let runs: u64 = ctx.state_get_json("runs").unwrap_or(0) + 1;
    ctx.state_put_json("runs", &runs)?;
    if let Some(bytes) = pad {
        ctx.state_put("pad", &vec![b'x'; bytes as usize])?;
    }
    ctx.info(&format!("run {runs}"));
    Ok(())
}

/// The behaviours that go around the SDK to the raw `cluster` imports.
#[cfg(target_arch = "wasm32")]
mod raw {
    use rebalancer_policy_sdk::guest::bindings::rebalancer::policy::cluster;

    const PAGE: usize = 64 << 10;

    /// Fresh pages for `len` bytes; their offset.
    fn grow(len: usize) -> Result<usize, String> {
        let first = core::arch::wasm32::memory_grow(0, len.div_ceil(PAGE).max(1));
        if first == usize::MAX {
            return Err("memory.grow failed".into());
        }
        Ok(first * PAGE)
    }

    pub fn scribble_core() -> Result<(), String> {
        let len = cluster::section_size(0).ok_or("the host has no core section")? as usize;
        let at = grow(len)?;
        if !cluster::map_section(0, at as u32) {
            return Err("the host did not place the core section".into());
        }
        let region: *mut u8 = std::ptr::with_exposed_provenance_mut(at);
        // SAFETY: `len` bytes from `at` were grown above and only this function points there.
        let bytes = unsafe { std::slice::from_raw_parts_mut(region, len) };
        if bytes.iter().all(|&b| b == 0) {
            return Err("the placed core section is all zeros".into());
        }
        bytes.fill(0xA5);
        if bytes.iter().any(|&b| b != 0xA5) {
            return Err("writes to the placed section did not take".into());
        }
        Ok(())
    }

    pub fn map_unaligned() -> Result<(), String> {
        let at = grow(2 * PAGE)?;
        cluster::map_section(0, (at + 4096) as u32);
        Err("map-section accepted an unaligned offset".into())
    }

    pub fn flood_map_section(count: u64) -> Result<(), String> {
        let len = cluster::section_size(0).ok_or("the host has no core section")? as usize;
        let at = grow(len)? as u32;
        for _ in 0..count {
            if !cluster::map_section(0, at) {
                return Err("the host did not place the core section".into());
            }
        }
        Ok(())
    }
}

/// Natively there is no host memory to place sections in.
#[cfg(not(target_arch = "wasm32"))]
mod raw {
    pub fn scribble_core() -> Result<(), String> {
        Err("scribble-snapshot needs the wasm host".into())
    }

    pub fn map_unaligned() -> Result<(), String> {
        Err("map-section-unaligned needs the wasm host".into())
    }

    pub fn flood_map_section(_: u64) -> Result<(), String> {
        Err("flood-map-section needs the wasm host".into())
    }
}

fn propose(ctx: &mut Context<'_>, count: u64) -> Result<(), String> {
    let all: Vec<u32> = (0..ctx.cluster.pod_count() as u32).collect();
    let passing = ctx.filter(&all);
    for &pod in passing
        .iter()
        .take(usize::try_from(count).unwrap_or(usize::MAX))
    {
        if let Err(refusal) = ctx.propose_eviction(pod, "TestMisbehaving: behaviour \"propose\"") {
            ctx.info(&format!("proposal for pod {pod} refused: {refusal}"));
        }
    }
    Ok(())
}

fn propose_batch(ctx: &mut Context<'_>, count: u64) -> Result<(), String> {
    let all: Vec<u32> = (0..ctx.cluster.pod_count() as u32).collect();
    let passing = ctx.filter(&all);
    let mut rest = &passing[..passing
        .len()
        .min(usize::try_from(count).unwrap_or(usize::MAX))];
    while !rest.is_empty() {
        let outcome = ctx.propose_evictions(rest, "TestMisbehaving: behaviour \"propose\"");
        let Some(refusal) = outcome.refusal else {
            break;
        };
        let pod = rest[outcome.admitted];
        ctx.info(&format!("proposal for pod {pod} refused: {refusal}"));
        rest = &rest[outcome.admitted + 1..];
    }
    Ok(())
}

fn infinite_loop() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

fn memory_bomb() -> Result<(), String> {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    let mut step: u8 = 0;
    loop {
        // Touch every page so the memory is really committed, not just reserved.
        let chunk = vec![black_box(step); MEMORY_BOMB_STEP_BYTES];
        hoard.push(black_box(chunk));
        step = step.wrapping_add(1);
        black_box(&hoard);
    }
}

/// Recurses until the stack runs out. The frame holds a buffer the result depends on, so the call
/// is not a tail call and cannot be turned into a loop.
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 512];
    frame[(depth % 512) as usize] = depth as u8;
    let frame = black_box(frame);
    // An exit the optimiser cannot prove unreachable (and that never happens in practice).
    if black_box(depth) == u64::MAX {
        return depth;
    }
    // Passing the result through `black_box` keeps work after the call, so neither tail-call nor
    // accumulator elimination can turn the recursion into a loop.
    let below = black_box(recurse(black_box(depth + 1)));
    below.wrapping_add(u64::from(frame[(depth % 7) as usize]))
}

#[cfg(target_arch = "wasm32")]
fn trap() -> ! {
    core::arch::wasm32::unreachable()
}

#[cfg(not(target_arch = "wasm32"))]
fn trap() -> ! {
    // Natively there is no sandbox to trap into; abort is the closest equivalent.
    std::process::abort()
}

fn flood_proposals(ctx: &mut Context<'_>, count: u64) {
    let pods = ctx.cluster.pod_count() as u64;
    for i in 0..count {
        // Cycle through the real pods (the same ones again and again once every pod was
        // proposed); with no pods at all, propose ids the host does not know.
        let pod = if pods == 0 { i } else { i % pods };
        let _ignored = black_box(ctx.propose_eviction(black_box(pod as u32), "flood"));
    }
}

fn flood_proposal_batches(ctx: &mut Context<'_>, count: u64) {
    let pods = (ctx.cluster.pod_count() as u64).max(1);
    let batch: Vec<u32> = (0..64u64).map(|i| (i % pods) as u32).collect();
    let mut proposed = 0;
    while proposed < count {
        // A batch stops at its first refusal: count what the host really looked at.
        let outcome = black_box(ctx.propose_evictions(black_box(&batch), "flood"));
        proposed += (outcome.admitted + usize::from(outcome.refusal.is_some())) as u64;
    }
}

fn flood_logs(ctx: &mut Context<'_>, count: u64) {
    let message = "x".repeat(FLOOD_LOG_MESSAGE_BYTES);
    for _ in 0..count {
        ctx.info(black_box(&message));
    }
}

rebalancer_policy_sdk::export_policy!(TestMisbehaving);

#[cfg(test)]
mod tests {
    use super::*;
    use rebalancer_policy_sdk::parse_args;

    #[test]
    fn parses_every_behaviour() {
        for b in Behaviour::ALL {
            if matches!(b, Behaviour::FloodArgErrors | Behaviour::HugeArgError) {
                continue; // their args are invalid on purpose: see below
            }
            let json = format!(r#"{{"behaviour":"{}","count":3,"bytes":5}}"#, b.as_str());
            let args = parse_args::<TestMisbehaving>(&json).expect("valid");
            assert_eq!(args.behaviour, b);
            assert_eq!((args.count, args.bytes), (Some(3), Some(5)));
        }
    }

    #[test]
    fn rejects_unknown_fields_and_behaviours() {
        assert!(parse_args::<TestMisbehaving>(r#"{"behavior":"panic"}"#).is_err());
        assert!(parse_args::<TestMisbehaving>(r#"{"behaviour":"explode"}"#).is_err());
        assert!(parse_args::<TestMisbehaving>(r#"{"behaviour":"propose","count":0}"#).is_err());
    }

    #[test]
    fn the_arg_error_behaviours_return_what_they_say() {
        let errors =
            parse_args::<TestMisbehaving>(r#"{"behaviour":"flood-arg-errors","count":1000}"#)
                .unwrap_err();
        assert_eq!(errors.len(), 1000);
        let errors =
            parse_args::<TestMisbehaving>(r#"{"behaviour":"huge-arg-error","bytes":4096}"#)
                .unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(
            (errors[0].field.len(), errors[0].message.len()),
            (4096, 4096)
        );
    }

    #[test]
    fn huge_strings_have_the_asked_size_and_split_characters_if_cut_blindly() {
        for bytes in [0, 17, 18, 100, 4097] {
            let text = huge(bytes);
            assert_eq!(text.len(), (bytes as usize).max(HUGE_PREFIX.len()));
            assert!(text.starts_with(HUGE_PREFIX));
        }
        assert!(!huge(4097).is_char_boundary(HUGE_PREFIX.len() + 1));
    }

    #[test]
    fn defaults_are_harmless() {
        let args = parse_args::<TestMisbehaving>("").expect("empty args");
        assert_eq!(args.behaviour, Behaviour::None);
        let info = TestMisbehaving::info();
        assert_eq!(info.default_args["behaviour"], "none");
    }
}
