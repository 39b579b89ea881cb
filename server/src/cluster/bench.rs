//! The ingestion performance anchor, as an ignored test:
//!
//! ```text
//! python3 /work/shared/bench/gen_large.py /tmp/bench large
//! cargo test --release -p rebalancer-server --lib cluster::bench -- --ignored --nocapture
//! ```
//!
//! `REBALANCER_BENCH_FILE` picks another file (default `/tmp/bench/large.json`). The file is
//! `{"policy": …, "objects": <List>}`; the List is cut out in place (no copy) before timing.
//! Peak memory is the process high-water mark above the resident size once the input is read
//! (Linux: `/proc/self/status`, reset through `/proc/self/clear_refs`).

use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Format, build_snapshot, node_utilization, parse_list};

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

#[test]
#[ignore = "needs the generated benchmark cluster; run with --release --ignored --nocapture"]
fn large_cluster_parse_and_build() {
    let path = std::env::var("REBALANCER_BENCH_FILE")
        .unwrap_or_else(|_| "/tmp/bench/large.json".to_owned());
    let mut bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{path}: {e} (generate it: python3 /work/shared/bench/gen_large.py /tmp/bench large)"
        )
    });
    let file_len = bytes.len();
    let (start, end) = {
        #[derive(Deserialize)]
        struct Doc<'a> {
            #[serde(borrow)]
            objects: &'a RawValue,
        }
        let doc: Doc<'_> = serde_json::from_slice(&bytes).expect("benchmark document");
        let raw = doc.objects.get();
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
    let set = parse_list(bytes, Format::Json).expect("parse");
    let parse = t0.elapsed();
    let cpu1 = cpu_seconds();
    let t1 = Instant::now();
    let snapshot = build_snapshot(&set, 1, 1_700_000_000_000).expect("build");
    let build = t1.elapsed();
    let cpu2 = cpu_seconds();
    let t2 = Instant::now();
    let nodes = node_utilization(snapshot.cluster());
    let util = t2.elapsed();
    let peak = status_kib("VmHWM:").unwrap_or(0);
    let rss_after = status_kib("VmRSS:").unwrap_or(0);

    let c = snapshot.cluster();
    eprintln!(
        "{path}: {:.1} MB file, {} objects ({} nodes, {} pods), {} warnings\n\
         parse_list {:.3} s, build_snapshot {:.3} s, total {:.3} s (cpu time {:.2} s + {:.2} s), \
         node_utilization {:.1} ms\n\
         archive {:.1} MB, {} interned strings\n\
         memory above the resident input: peak {:.0} MB, after {:.0} MB (input {:.0} MB)",
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
    assert_eq!(nodes.len(), c.node_count());
    if !cfg!(debug_assertions) {
        assert!(
            (parse + build).as_secs_f64() < 10.0,
            "parse + build took {:?}",
            parse + build
        );
    }
}
