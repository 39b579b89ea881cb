//! The process's own metrics under the names every Prometheus client library uses
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …), read from `/proc` at
//! scrape time.
//!
//! Owns: reading `/proc/self/{stat,auxv,limits,fd}` and `/proc/stat`, and rendering the six
//! families. The clock tick and page size come from the auxiliary vector the kernel handed the
//! process (`AT_CLKTCK`, `AT_PAGESZ`), so no `unsafe` call to `sysconf` is needed.
//! Must not: fail a scrape — where `/proc` cannot be read (not Linux) the families are left out.

use std::fmt::Write as _;

/// What one scrape reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessSample {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub open_fds: u64,
    /// The soft limit on open files; `None` when unlimited.
    pub max_fds: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

/// `/proc/self/auxv` keys (`<elf.h>`).
const AT_PAGESZ: u64 = 6;
const AT_CLKTCK: u64 = 17;

/// Why `/proc` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProcessMetricsError {
    #[error("reading {path}: {source}")]
    Read {
        path: &'static str,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: &'static str, message: String },
}

fn read(path: &'static str) -> Result<String, ProcessMetricsError> {
    std::fs::read_to_string(path).map_err(|source| ProcessMetricsError::Read { path, source })
}

/// Read the process's metrics now.
pub fn sample() -> Result<ProcessSample, ProcessMetricsError> {
    const AUXV: &str = "/proc/self/auxv";
    let auxv =
        std::fs::read(AUXV).map_err(|source| ProcessMetricsError::Read { path: AUXV, source })?;
    let aux = |key: u64, what: &str| {
        auxv_value(&auxv, key)
            .filter(|v| *v > 0)
            .ok_or_else(|| ProcessMetricsError::Parse {
                path: AUXV,
                message: format!("no {what}"),
            })
    };
    let (ticks, page_size) = (aux(AT_CLKTCK, "AT_CLKTCK")?, aux(AT_PAGESZ, "AT_PAGESZ")?);
    let stat =
        parse_stat(&read("/proc/self/stat")?).map_err(|message| ProcessMetricsError::Parse {
            path: "/proc/self/stat",
            message,
        })?;
    let boot_time = parse_boot_time(&read("/proc/stat")?).ok_or(ProcessMetricsError::Parse {
        path: "/proc/stat",
        message: "no btime line".into(),
    })?;
    let max_fds = parse_max_open_files(&read("/proc/self/limits")?).map_err(|message| {
        ProcessMetricsError::Parse {
            path: "/proc/self/limits",
            message,
        }
    })?;
    const FD: &str = "/proc/self/fd";
    let open_fds = std::fs::read_dir(FD)
        .map_err(|source| ProcessMetricsError::Read { path: FD, source })?
        .count() as u64;
    let ticks = ticks as f64;
    Ok(ProcessSample {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_memory_bytes: stat.rss_pages.saturating_mul(page_size),
        virtual_memory_bytes: stat.vsize_bytes,
        open_fds,
        max_fds,
        start_time_seconds: boot_time as f64 + stat.start_ticks as f64 / ticks,
    })
}

/// Append the process families to a `/metrics` text; nothing where `/proc` cannot be read.
pub fn render(out: &mut String) {
    let sample = match sample() {
        Ok(sample) => sample,
        Err(e) => {
            tracing::debug!(error = %e, "no process metrics");
            return;
        }
    };
    let mut family = |name: &str, kind: &str, help: &str, value: String| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    family(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        sample.cpu_seconds.to_string(),
    );
    family(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        sample.resident_memory_bytes.to_string(),
    );
    family(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        sample.virtual_memory_bytes.to_string(),
    );
    family(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        sample.open_fds.to_string(),
    );
    if let Some(max) = sample.max_fds {
        family(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors (the soft limit).",
            max.to_string(),
        );
    }
    family(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        sample.start_time_seconds.to_string(),
    );
}

/// The value of `key` in an auxiliary vector: native-endian word pairs, ended by key 0.
fn auxv_value(auxv: &[u8], key: u64) -> Option<u64> {
    const WORD: usize = std::mem::size_of::<usize>();
    let word = |chunk: &[u8]| -> u64 {
        let mut bytes = [0u8; WORD];
        bytes.copy_from_slice(chunk);
        usize::from_ne_bytes(bytes) as u64
    };
    auxv.chunks_exact(2 * WORD)
        .map(|pair| (word(&pair[..WORD]), word(&pair[WORD..])))
        .take_while(|(k, _)| *k != 0)
        .find_map(|(k, v)| (k == key).then_some(v))
}

/// The fields of `/proc/self/stat` this module reads (proc(5)).
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    start_ticks: u64,
    vsize_bytes: u64,
    rss_pages: u64,
}

fn parse_stat(text: &str) -> Result<Stat, String> {
    // The command name (field 2) is in parentheses and may itself hold spaces and ')': the
    // fields that follow start after the last ')'.
    let rest = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or("no ')' after the command name")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state): field n is `fields[n - 3]`.
    let field = |n: usize, name: &str| -> Result<u64, String> {
        fields
            .get(n - 3)
            .ok_or_else(|| format!("field {n} ({name}) is missing"))?
            .parse()
            .map_err(|e| format!("field {n} ({name}): {e}"))
    };
    Ok(Stat {
        utime: field(14, "utime")?,
        stime: field(15, "stime")?,
        start_ticks: field(22, "starttime")?,
        vsize_bytes: field(23, "vsize")?,
        rss_pages: field(24, "rss")?,
    })
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the Unix epoch.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of the `Max open files` line of `/proc/self/limits` (`None`: unlimited).
fn parse_max_open_files(text: &str) -> Result<Option<u64>, String> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .ok_or("no `Max open files` line")?;
    match line.split_whitespace().next() {
        Some("unlimited") => Ok(None),
        Some(soft) => soft
            .parse()
            .map(Some)
            .map_err(|e| format!("Max open files {soft:?}: {e}")),
        None => Err("`Max open files` has no value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_command_name_with_spaces_and_parentheses() {
        // proc(5) fields 1–24 of a process named "rebal (x) y".
        let text = "4242 (rebal (x) y) S 1 4242 4242 0 -1 4194560 2000 0 0 0 \
                    150 50 0 0 20 0 9 0 123456 1048576000 25600 18446744073709551615";
        assert_eq!(
            parse_stat(text).unwrap(),
            Stat {
                utime: 150,
                stime: 50,
                start_ticks: 123456,
                vsize_bytes: 1048576000,
                rss_pages: 25600,
            }
        );
        let err = parse_stat("4242 (short) S 1 2").unwrap_err();
        assert!(err.contains("field 14 (utime) is missing"), "{err}");
        assert!(parse_stat("no parenthesis").is_err());
    }

    #[test]
    fn limits_boot_time_and_auxv() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max cpu time              unlimited            unlimited            seconds\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_open_files(limits).unwrap(), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_open_files(unlimited).unwrap(), None);
        assert!(parse_max_open_files("Max processes 10 10 processes\n").is_err());

        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1767225600\nprocesses 9\n"),
            Some(1767225600)
        );
        assert_eq!(parse_boot_time("cpu 1 2 3\n"), None);

        let words: Vec<usize> = vec![
            AT_PAGESZ as usize,
            4096,
            AT_CLKTCK as usize,
            100,
            0,
            0,
            99,
            1,
        ];
        let auxv: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(auxv_value(&auxv, AT_PAGESZ), Some(4096));
        assert_eq!(auxv_value(&auxv, AT_CLKTCK), Some(100));
        assert_eq!(
            auxv_value(&auxv, 99),
            None,
            "nothing is read past the end marker"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_as_the_kernel_sees_it() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Burn a little CPU so that the counter cannot be zero.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let s = sample().unwrap();
        assert!(s.cpu_seconds > 0.0, "{s:?}");
        assert!(s.resident_memory_bytes > 1 << 20, "{s:?}");
        assert!(s.virtual_memory_bytes >= s.resident_memory_bytes, "{s:?}");
        // stdin, stdout, stderr and the directory being listed, at least.
        assert!(s.open_fds >= 3, "{s:?}");
        assert!(s.max_fds.is_none_or(|max| max >= s.open_fds), "{s:?}");
        // Started before this test began, and within the last day.
        assert!(s.start_time_seconds <= before + 1.0, "{s:?}");
        assert!(s.start_time_seconds > before - 24.0 * 3600.0, "{s:?}");
        let mut text = String::new();
        render(&mut text);
        assert!(
            text.contains("# TYPE process_cpu_seconds_total counter\n"),
            "{text}"
        );
        assert!(text.contains("\nprocess_open_fds "), "{text}");
    }
}
