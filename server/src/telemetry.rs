//! Telemetry: the process-wide `tracing` subscriber.
//!
//! Owns: log format (text or JSON) and filtering (`RUST_LOG`, default `info` with chatty
//! dependencies quietened). Must not: be called more than once per process by anything but
//! tests (a second call is ignored).

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Filter used when `RUST_LOG` is not set.
const DEFAULT_FILTER: &str = "info,sqlx=warn,wasmtime=warn,cranelift_codegen=warn,tower_http=info";

/// Install the global subscriber, writing to stderr. Returns false when one was already set.
pub fn init(format: LogFormat) -> bool {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.try_init().is_ok(),
        LogFormat::Json => builder.json().try_init().is_ok(),
    }
}

/// Wall time and the current thread's CPU time since [`Stopwatch::start`]. CPU time leaves out
/// what wall time adds on a busy or shared machine (waiting, preemption, a VM's steal), which is
/// what makes it the steadier figure for comparing two ways of doing the same work.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: std::time::Instant,
    cpu: Option<std::time::Duration>,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch {
            wall: std::time::Instant::now(),
            cpu: thread_cpu_time(),
        }
    }

    pub fn wall(&self) -> std::time::Duration {
        self.wall.elapsed()
    }

    /// CPU time of this thread since the start (`None` where the platform has no thread clock;
    /// meaningless if read on another thread than the one that started it).
    pub fn cpu(&self) -> Option<std::time::Duration> {
        Some(thread_cpu_time()?.saturating_sub(self.cpu?))
    }
}

/// `CLOCK_THREAD_CPUTIME_ID`.
fn thread_cpu_time() -> Option<std::time::Duration> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out-pointer for the duration of the call.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
            return None;
        }
        Some(std::time::Duration::new(
            u64::try_from(ts.tv_sec).ok()?,
            u32::try_from(ts.tv_nsec).ok()?,
        ))
    }
    #[cfg(not(unix))]
    None
}

#[cfg(test)]
mod tests {
    use super::Stopwatch;

    #[test]
    fn a_stopwatch_counts_this_threads_work_not_its_sleep() {
        let watch = Stopwatch::start();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut x = 0u64;
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let (wall, cpu) = (watch.wall(), watch.cpu().expect("a thread clock on unix"));
        assert!(wall >= std::time::Duration::from_millis(60), "{wall:?}");
        assert!(cpu >= std::time::Duration::from_millis(20), "{cpu:?}");
        assert!(
            cpu < wall - std::time::Duration::from_millis(20),
            "{cpu:?} vs {wall:?}"
        );
    }
}
