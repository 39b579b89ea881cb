//! `rebalancer-bench ingest FILE`: the ingestion anchor, in-process and without the server:
//! parse a scenario file's `objects` List and build its snapshot, with wall and CPU time and the
//! memory above the resident input.
//!
//! ```text
//! cargo run --release -p rebalancer-bench -- generate large bench-data
//! cargo run --release -p rebalancer-bench -- ingest bench-data/large.json
//! ```
//!
//! The file is `{"policy": …, "objects": <List>}` (or a bare List); the List is cut out in place
//! (no copy) before timing. Peak memory is the process high-water mark above the resident size
//! once the input is read (Linux: `/proc/self/status`, reset through `/proc/self/clear_refs`).
//! Must not: assert on time (a benchmark reports; it does not judge the machine).

use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use std::path::Path;

use anyhow::Context as _;
use rebalancer_cluster::{Format, build_snapshot, node_utilization, parse_list};

/// CPU time (user + system) of the process so far, in seconds.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces): utime is the 14th field.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Parse and build `path`'s cluster once and print the figures to stderr.
pub fn run(path: &Path) -> anyhow::Result<()> {
    let mut bytes = std::fs::read(path).with_context(|| {
        format!(
            "reading {} (generate one with `rebalancer-bench generate large DIR`)",
            path.display()
        )
    })?;
    let file_len = bytes.len();
    let (start, end) = {
        #[derive(Deserialize)]
        struct Doc<'a> {
            #[serde(borrow)]
            objects: &'a RawValue,
        }
        let raw = match serde_json::from_slice::<Doc<'_>>(&bytes) {
            Ok(doc) => doc.objects.get(),
            // A bare List: take the whole document.
            Err(_) => std::str::from_utf8(&bytes).context("the file is not UTF-8")?,
        };
        let start = raw.as_ptr() as usize - bytes.as_ptr() as usize;
        (start, start + raw.len())
    };
    bytes.truncate(end);
    bytes.drain(..start);

    // Reset the high-water mark to what is resident now (input included).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss_before = status_kib("VmRSS:").unwrap_or(0);

    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let set = parse_list(bytes, Format::Json)?;
    let parse = t0.elapsed();
    let cpu1 = cpu_seconds();
    let t1 = Instant::now();
    let snapshot = build_snapshot(&set, 1, 1_700_000_000_000)?;
    let build = t1.elapsed();
    let cpu2 = cpu_seconds();
    let t2 = Instant::now();
    let nodes = node_utilization(snapshot.cluster());
    let util = t2.elapsed();
    let peak = status_kib("VmHWM:").unwrap_or(0);
    let rss_after = status_kib("VmRSS:").unwrap_or(0);

    let c = snapshot.cluster();
    eprintln!(
        "{}: {:.1} MB file, {} objects ({} nodes, {} pods), {} warnings\n\
         parse_list {:.3} s, build_snapshot {:.3} s, total {:.3} s (cpu time {:.2} s + {:.2} s), \
         node_utilization {:.1} ms\n\
         archive {:.1} MB, {} interned strings\n\
         memory above the resident input: peak {:.0} MB, after {:.0} MB (input {:.0} MB)",
        path.display(),
        file_len as f64 / 1e6,
        set.len(),
        c.node_count(),
        c.pod_count(),
        snapshot.warnings.len(),
        parse.as_secs_f64(),
        build.as_secs_f64(),
        (parse + build).as_secs_f64(),
        cpu1 - cpu0,
        cpu2 - cpu1,
        util.as_secs_f64() * 1e3,
        snapshot.archive_bytes().len() as f64 / 1e6,
        c.archive().strings.len(),
        peak.saturating_sub(rss_before) as f64 / 1024.0,
        rss_after.saturating_sub(rss_before) as f64 / 1024.0,
        (end - start) as f64 / 1e6,
    );
    anyhow::ensure!(
        nodes.len() == c.node_count(),
        "node_utilization covered {} of {} nodes",
        nodes.len(),
        c.node_count()
    );
    Ok(())
}
