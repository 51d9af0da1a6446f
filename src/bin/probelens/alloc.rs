//! The allocator: mimalloc, tuned for a run's bursts of frees and growth, and the moment
//! to hand freed memory back.

/// The CLI allocates many small strings; mimalloc is markedly faster than glibc's malloc here.
#[global_allocator]
pub(crate) static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's `mi_option_set` and `mi_collect` (in the linked mimalloc; the crate exposes them
// only with its `extended` feature).
extern "C" {
    fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
    fn mi_collect(force: bool);
}

/// Hands the memory freed so far back to the system now, not after the purge delay: after a
/// result is freed, before the next one or the index phase allocates. Else the freed result stays
/// resident beside the index keys read back, at the peak.
pub(crate) fn give_back_freed() {
    // SAFETY: a plain call into the allocator this binary links; no pointers involved.
    unsafe { mi_collect(true) }
}

/// `mi_option_purge_delay` and `mi_option_allow_thp` in mimalloc's `mi_option_e` (v3 header,
/// the crate's default).
pub(crate) const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;
pub(crate) const MI_OPTION_ALLOW_THP: std::os::raw::c_int = 43;

/// By default mimalloc hands freed pages back to the OS after 10 ms; a compare frees and grows
/// hundreds of MB in bursts, so the same pages are decommitted and faulted in (zeroed) again and
/// again, and the kernel spends much of the run clearing pages. 100 ms keeps the speed of a long
/// delay without holding freed parse and compare buffers past the compare (BENCHMARKS.md has the
/// figures).
/// Transparent huge pages (mimalloc asks for them with `madvise`) make the kernel zero 2 MiB at a
/// time on first touch: they are turned off, which more than halves the system time.
pub(crate) fn tune_allocator() {
    // SAFETY: plain option setters of the allocator this binary links; no pointers involved.
    unsafe {
        mi_option_set(MI_OPTION_PURGE_DELAY, 100);
        mi_option_set(MI_OPTION_ALLOW_THP, 0);
    }
    // mimalloc reads `allow_thp` once at start-up (before `main`), where it would disable THP
    // for the process; do the same here.
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn prctl(option: std::os::raw::c_int, ...) -> std::os::raw::c_int;
        }
        const PR_SET_THP_DISABLE: std::os::raw::c_int = 41;
        // SAFETY: prctl with integer arguments only; failure just leaves THP as it was.
        unsafe {
            prctl(
                PR_SET_THP_DISABLE,
                1 as std::os::raw::c_ulong,
                0 as std::os::raw::c_ulong,
                0 as std::os::raw::c_ulong,
                0 as std::os::raw::c_ulong,
            );
        }
    }
}
