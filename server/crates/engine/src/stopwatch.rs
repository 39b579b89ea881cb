//! Wall time and this thread's CPU time of a piece of work, for run reports and the benchmark.
//!
//! Owns: [`Stopwatch`]. Must not: be read on another thread than the one that started it (the
//! CPU reading is per thread).

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

    // No figure of time is asserted here (no machine promises how much CPU a thread gets, or
    // when): only relations that hold on every machine, however loaded. A thread's CPU time
    // cannot exceed the wall time it spanned, and a sleeping thread accrues none, so after a
    // sleep the CPU reading is below the wall reading; and neither reading goes backwards.
    #[test]
    fn a_stopwatch_reads_a_thread_clock_that_sleep_does_not_advance() {
        let watch = Stopwatch::start();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (cpu, wall) = (watch.cpu().expect("a thread clock on unix"), watch.wall());
        assert!(cpu < wall, "{cpu:?} vs {wall:?}");
        let mut sum = 0u64;
        for i in 0..100_000u64 {
            sum = std::hint::black_box(sum.wrapping_add(i));
        }
        let (later_cpu, later_wall) = (watch.cpu().unwrap(), watch.wall());
        assert!(later_cpu >= cpu && later_wall >= wall, "{sum}");
    }
}
