//! What the CLI reports while it runs: the progress bar or `PROGRESS:` lines, and `--timing`'s
//! CPU seconds per stage.

use std::io::Write;
use std::time::Instant;

pub(crate) struct Progress {
    bar: bool,
    log: bool,
    /// Units of the run and those done.
    total: usize,
    done: usize,
    /// Bytes the units read, and those of the units done.
    total_bytes: u64,
    done_bytes: u64,
    start: Instant,
}

impl Progress {
    pub(crate) fn new(bar: bool, log: bool, total: usize, start: Instant) -> Progress {
        Progress {
            bar,
            log,
            total,
            done: 0,
            total_bytes: 0,
            done_bytes: 0,
            start,
        }
    }

    /// The bytes the whole run reads.
    pub(crate) fn set_bytes(&mut self, total: u64) {
        self.total_bytes = total;
    }

    /// One more unit done, which read `bytes`; `what` names it.
    pub(crate) fn finish_unit(&mut self, bytes: u64, what: &str) {
        self.done += 1;
        self.done_bytes += bytes;
        self.update(what);
    }

    pub(crate) fn update(&self, what: &str) {
        let pct = (self.done * 100).checked_div(self.total).unwrap_or(100);
        if self.log {
            println!("PROGRESS: {{\"current_progress\": {pct}, \"process_running\": {}, \"error_msg\": []}}", self.done < self.total);
        }
        if self.bar {
            let width = 30;
            let filled = width * pct / 100;
            eprint!(
                "\r[Graph] Overall Progress: {:>3}%|{}{}| {}/{} units, {:.1}/{:.1} GB, {:.1}s {what:<30}",
                pct,
                "█".repeat(filled),
                " ".repeat(width - filled),
                self.done,
                self.total,
                self.done_bytes as f64 / 1e9,
                self.total_bytes as f64 / 1e9,
                self.start.elapsed().as_secs_f64()
            );
            if self.done >= self.total {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        }
    }
}

/// The CPU time (user + system) this process has used so far, all threads: `--timing` prints it
/// per stage beside the wall time, which shows how well a stage keeps the cores busy.
#[cfg(target_os = "linux")]
pub(crate) fn cpu_time() -> Option<f64> {
    // `struct rusage` on 64-bit Linux: two `timeval`s (seconds, microseconds) then 14 longs.
    #[repr(C)]
    struct Rusage {
        utime: [i64; 2],
        stime: [i64; 2],
        rest: [i64; 14],
    }
    extern "C" {
        fn getrusage(who: std::os::raw::c_int, usage: *mut Rusage) -> std::os::raw::c_int;
    }
    const RUSAGE_SELF: std::os::raw::c_int = 0;
    let mut u = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        rest: [0; 14],
    };
    // SAFETY: getrusage writes one `struct rusage` (laid out as `Rusage` on 64-bit Linux).
    let rc = unsafe { getrusage(RUSAGE_SELF, &mut u) };
    let secs = |t: [i64; 2]| t[0] as f64 + t[1] as f64 * 1e-6;
    (rc == 0 && cfg!(target_pointer_width = "64")).then(|| secs(u.utime) + secs(u.stime))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn cpu_time() -> Option<f64> {
    None
}

/// `--timing`'s CPU line: the CPU seconds between successive marks.
pub(crate) struct CpuMarks(pub(crate) Vec<(&'static str, Option<f64>)>);

impl CpuMarks {
    pub(crate) fn mark(&mut self, stage: &'static str) {
        self.0.push((stage, cpu_time()));
    }
    pub(crate) fn line(&self) -> String {
        let mut out = String::from("probelens: cpu");
        for w in self.0.windows(2) {
            if let [(_, Some(a)), (stage, Some(b))] = w {
                out.push_str(&format!(" {stage} {:.3}s", b - a));
            }
        }
        out
    }
}
