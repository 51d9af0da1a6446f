//! Units of work side by side: `-j/--jobs` and `--max-memory`.
//!
//! A unit is a (step, rank) pair or a merged step (`graph_visualize::Unit`). [`run_ordered`]
//! starts units in plan order on `jobs` threads, each while the estimated memory of the units
//! running stays within the budget (a unit over the budget runs by itself, with a warning), and
//! hands their results, small summaries (a unit's work writes its own rows into the shared db
//! writer), to the caller's thread in plan order. The db's content does not depend on the order
//! of its inserts (rows carry their `node_order`; the indexes are sorted at the end), and what
//! does depend on order, such as msprobe's `tb_config` row (the first export's) or the ranks'
//! order in the distributed analysis, is taken from the summaries in plan order.
//!
//! The defaults are what the process may use: `available_parallelism` (which honours cgroup CPU
//! quotas and affinity) over the threads a unit uses, and half of the memory limit: the cgroup's
//! `memory.max` (v2) or `memory.limit_in_bytes` (v1), Slurm's `SLURM_MEM_PER_NODE` or
//! `SLURM_MEM_PER_CPU`, else the machine's `MemTotal`, whichever is lowest.

use probelens::base::error::{Error, Result};
use probelens::base::Files;
use std::collections::BTreeMap;
use std::sync::{mpsc, Condvar, Mutex};

/// Threads a unit keeps busy: its two sides are parsed, built and exported on two threads.
pub(crate) const THREADS_PER_UNIT: usize = 2;

/// How many units run at once and how much memory they may take together.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) jobs: usize,
    /// For the units running.
    pub(crate) bytes: u64,
    /// For the `.vis.db`'s index keys, which the writer keeps until the end (past it, SQLite
    /// builds the indexes in bounded memory: `Writer::set_key_budget`).
    pub(crate) keys: u64,
}

impl Budget {
    /// `-j` and `--max-memory` as given, else the defaults. The memory (`--max-memory`, default
    /// half of [`memory_limit`]) is shared: a quarter for the index keys (at most
    /// `db::key_budget`, 1 GiB), the rest for the units.
    pub(crate) fn new(jobs: Option<usize>, max_memory: Option<u64>) -> Budget {
        let total = max_memory.unwrap_or_else(|| memory_limit().0 / 2);
        let keys = (total / 4).min(crate::db::key_budget() as u64);
        Budget {
            jobs: jobs.unwrap_or_else(default_jobs).max(1),
            bytes: total - keys,
            keys,
        }
    }
}

/// `available_parallelism` over [`THREADS_PER_UNIT`], at least 1.
pub(crate) fn default_jobs() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / THREADS_PER_UNIT).max(1)
}

/// The memory the process may use and where that figure comes from.
pub(crate) fn memory_limit() -> (u64, &'static str) {
    let mut best: (u64, &'static str) = (machine_memory().unwrap_or(8 << 30), "MemTotal");
    let mut take = |v: Option<u64>, from: &'static str| {
        if let Some(v) = v.filter(|&v| v > 0 && v < best.0) {
            best = (v, from);
        }
    };
    take(cgroup_memory_max(), "cgroup memory.max");
    take(slurm_memory(), "Slurm's memory limit");
    best
}

fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The lowest memory limit of this process's cgroup and its parents (v2), or v1's.
fn cgroup_memory_max() -> Option<u64> {
    let mut limit: Option<u64> = None;
    let mut take = |text: Option<String>| {
        if let Some(v) = text.and_then(|t| t.trim().parse::<u64>().ok()) {
            // v1 writes "no limit" as a number near 2^63.
            if v < (1 << 60) {
                limit = Some(limit.map_or(v, |l| l.min(v)));
            }
        }
    };
    if let Ok(cg) = std::fs::read_to_string("/proc/self/cgroup") {
        if let Some(path) = cg.lines().find_map(|l| l.strip_prefix("0::")) {
            let mut p =
                std::path::PathBuf::from("/sys/fs/cgroup").join(path.trim_start_matches('/'));
            loop {
                take(std::fs::read_to_string(p.join("memory.max")).ok());
                if !p.pop() || !p.starts_with("/sys/fs/cgroup") {
                    break;
                }
            }
        }
    }
    take(std::fs::read_to_string("/sys/fs/cgroup/memory/memory.limit_in_bytes").ok());
    limit
}

/// Slurm's limit of this job step: `SLURM_MEM_PER_NODE`, or `SLURM_MEM_PER_CPU` times the CPUs
/// (both in MB).
fn slurm_memory() -> Option<u64> {
    let mb = |name: &str| std::env::var(name).ok()?.trim().parse::<u64>().ok();
    if let Some(n) = mb("SLURM_MEM_PER_NODE") {
        return Some(n << 20);
    }
    let per_cpu = mb("SLURM_MEM_PER_CPU")?;
    let cpus = mb("SLURM_CPUS_PER_TASK")
        .or_else(|| mb("SLURM_CPUS_ON_NODE"))
        .unwrap_or(1);
    Some((per_cpu * cpus) << 20)
}

/// `--max-memory`'s SIZE: bytes, or a number with K, M, G or T (powers of 1024; a trailing `B`
/// or `iB` is allowed), e.g. `512M`, `1.5G`, `64GiB`.
pub(crate) fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (num, shift) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 10),
        Some('m') => (&body[..body.len() - 1], 20),
        Some('g') => (&body[..body.len() - 1], 30),
        Some('t') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{t}' is not a size (e.g. 512M, 16G)"))?;
    let bytes = v * (1u64 << shift) as f64;
    if !(1.0..1.0e19).contains(&bytes) {
        return Err(format!("'{t}' is not a size (e.g. 512M, 16G)"));
    }
    Ok(bytes as u64)
}

/// Prints a size for people: `1.2 GB`, `350 MB` (10^6 bytes, as BENCHMARKS.md counts).
pub(crate) fn show_size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else {
        format!("{:.0} MB", b / 1e6)
    }
}

/// The bytes of the files a rank folder's parse reads (dump.json, construct.json, stack.json;
/// absent ones count 0).
pub(crate) fn folder_bytes(files: &dyn Files, dir: &str) -> u64 {
    ["dump.json", "construct.json", "stack.json"]
        .iter()
        .map(|f| files.size(&probelens::base::join_path(dir, f)).unwrap_or(0))
        .sum()
}

/// The peak memory a unit that reads `input` bytes is expected to add: its parsed dumps, graphs
/// and compare (0.7–0.85× the input on the scale pair, BENCHMARKS.md), plus its row buffers.
pub(crate) fn unit_need(input: u64) -> u64 {
    input + (24 << 20)
}

/// What the scheduler shares with its threads.
struct Sched {
    /// The next unit to start.
    next: usize,
    /// Estimated bytes of the units running.
    in_use: u64,
    /// Units started and not yet consumed.
    in_flight: usize,
    stop: bool,
}

/// Runs `work` over `units` on `budget.jobs` threads and hands each result to `consume` on this
/// thread, in the units' order. `needs` are the units' estimated memory. The first error in unit
/// order stops the run (units after it that are running finish and are dropped).
pub(crate) fn run_ordered<U: Sync, T: Send>(
    units: &[U],
    budget: Budget,
    needs: &[u64],
    work: &(dyn Fn(usize, &U) -> Result<T> + Sync),
    consume: &mut dyn FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    let warn_big = |i: usize, n: u64| {
        if n > budget.bytes {
            eprintln!(
                "probelens: warning: unit {} of {} needs about {} (its files), over the memory budget of {} for units (3/4 of --max-memory): it runs alone",
                i + 1,
                units.len(),
                show_size(n),
                show_size(budget.bytes)
            );
        }
    };
    if budget.jobs <= 1 || units.len() <= 1 {
        for (i, u) in units.iter().enumerate() {
            warn_big(i, needs.get(i).copied().unwrap_or(0));
            let t = work(i, u)?;
            consume(i, t)?;
        }
        return Ok(());
    }
    let needs: Vec<u64> = (0..units.len())
        .map(|i| needs.get(i).copied().unwrap_or(0))
        .collect();
    let sched = Mutex::new(Sched {
        next: 0,
        in_use: 0,
        in_flight: 0,
        stop: false,
    });
    let cv = Condvar::new();
    let lock = || sched.lock().unwrap_or_else(|p| p.into_inner());
    // At most this many units are started and not yet consumed (beside the memory budget).
    let max_in_flight = budget.jobs * 16;
    let (tx, rx) = mpsc::channel::<(usize, Result<T>)>();
    std::thread::scope(|s| {
        for _ in 0..budget.jobs.min(units.len()) {
            let tx = tx.clone();
            let (sched, cv, needs) = (&sched, &cv, &needs);
            s.spawn(move || loop {
                let i = {
                    let mut g = sched.lock().unwrap_or_else(|p| p.into_inner());
                    loop {
                        if g.stop || g.next >= needs.len() {
                            return;
                        }
                        let n = needs[g.next];
                        let fits = g.in_flight < max_in_flight
                            && (g.in_use == 0 || g.in_use + n <= budget.bytes);
                        if fits {
                            break;
                        }
                        g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
                    }
                    let i = g.next;
                    g.next += 1;
                    g.in_use += needs[i];
                    g.in_flight += 1;
                    i
                };
                warn_big(i, needs[i]);
                let r = work(i, &units[i]);
                {
                    let mut g = sched.lock().unwrap_or_else(|p| p.into_inner());
                    g.in_use -= needs[i];
                }
                cv.notify_all();
                if tx.send((i, r)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        let mut waiting: BTreeMap<usize, Result<T>> = BTreeMap::new();
        let mut next = 0;
        let mut outcome: Result<()> = Ok(());
        for (i, r) in rx.iter() {
            waiting.insert(i, r);
            while let Some(r) = waiting.remove(&next) {
                let done = r.and_then(|t| consume(next, t));
                {
                    let mut g = lock();
                    g.in_flight -= 1;
                    if done.is_err() {
                        g.stop = true;
                    }
                }
                cv.notify_all();
                next += 1;
                if let Err(e) = done {
                    outcome = Err(e);
                    break;
                }
            }
            if outcome.is_err() {
                break;
            }
        }
        // Units still running finish; their results are dropped with the channel.
        drop(rx);
        if outcome.is_ok() && next < units.len() {
            outcome = Err(Error::input("-j", "a worker thread stopped early"));
        }
        outcome
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("64GiB"), Ok(64 << 30));
        assert_eq!(parse_size("2gb"), Ok(2 << 30));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("0").is_err());
    }

    fn budget(jobs: usize, bytes: u64) -> Budget {
        Budget {
            jobs,
            bytes,
            keys: 0,
        }
    }

    #[test]
    fn results_come_in_order_whatever_the_jobs() {
        let units: Vec<u64> = (0..40).collect();
        for jobs in [1, 2, 3, 8] {
            let mut got = Vec::new();
            run_ordered(
                &units,
                budget(jobs, 1 << 40),
                &vec![1; units.len()],
                &|i, u| {
                    // Later units finish first.
                    std::thread::sleep(std::time::Duration::from_micros(40 - *u));
                    Ok(i * 10)
                },
                &mut |i, t| {
                    got.push((i, t));
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(
                got,
                (0..40).map(|i| (i, i * 10)).collect::<Vec<_>>(),
                "-j {jobs}"
            );
        }
    }

    #[test]
    fn the_memory_budget_holds_and_a_big_unit_runs_alone() {
        let units: Vec<u64> = vec![30, 30, 30, 100, 30, 30];
        let live = std::sync::atomic::AtomicU64::new(0);
        let peak = std::sync::atomic::AtomicU64::new(0);
        let alone = std::sync::atomic::AtomicBool::new(true);
        let mut held = 0u64;
        run_ordered(
            &units,
            budget(4, 64),
            &units,
            &|_, u| {
                use std::sync::atomic::Ordering::SeqCst;
                let now = live.fetch_add(*u, SeqCst) + u;
                peak.fetch_max(now, SeqCst);
                if *u == 100 && now != 100 {
                    alone.store(false, SeqCst);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
                live.fetch_sub(*u, SeqCst);
                Ok(*u)
            },
            &mut |_, u| {
                held += u;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(held, 250);
        assert!(peak.load(std::sync::atomic::Ordering::SeqCst) <= 100);
        assert!(alone.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn the_first_error_in_plan_order_wins() {
        let units: Vec<u64> = (0..20).collect();
        for jobs in [1, 4] {
            let mut consumed = Vec::new();
            let e = run_ordered(
                &units,
                budget(jobs, 1 << 40),
                &vec![1; units.len()],
                &|i, _| {
                    if i == 7 || i == 12 {
                        Err(Error::input(format!("unit{i}"), "broken"))
                    } else {
                        Ok(i)
                    }
                },
                &mut |i, _| {
                    consumed.push(i);
                    Ok(())
                },
            )
            .unwrap_err();
            assert!(e.to_string().contains("unit7"), "{e}");
            assert_eq!(consumed, (0..7).collect::<Vec<_>>());
        }
    }
}
