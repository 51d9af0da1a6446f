//! The wasm heap: dlmalloc (as std uses) over a memory source that grows the wasm memory in
//! 1 MiB steps instead of the page-by-page growth of std's allocator, whose many small
//! `memory.grow` calls cost a large run much of its time. Larger steps leave the memory up to a
//! step above the heap's top.
//!
//! When the memory cannot grow (the wasm32 limit of 4 GiB, what the tab may allocate, or the
//! test cap of [`set_limit`]) the size asked for is recorded: an allocation that cannot fail
//! gracefully then aborts the instance (a trap), and the worker reads [`failure`] to tell
//! the user it was the browser's memory limit rather than a crash.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::{Cell, UnsafeCell};

const PAGE: usize = 65536;
const STEP: usize = 1 << 20;

/// Single-threaded cells (see `Heap`'s `Sync`).
struct Stat(Cell<usize>);
// SAFETY: no threads in this build.
unsafe impl Sync for Stat {}

/// Memory size the heap may not grow beyond (bytes; 0 = no cap but the engine's).
static LIMIT: Stat = Stat(Cell::new(0));
/// Size of the last growth that failed (bytes; 0 = none since the last `clear_failure`).
static FAILED: Stat = Stat(Cell::new(0));
/// Bytes allocated and not freed, and the most there were (since `reset_peak`): with the
/// memory's size they tell live data from the heap's holes (the memory never shrinks).
static LIVE: Stat = Stat(Cell::new(0));
static PEAK: Stat = Stat(Cell::new(0));

pub fn live() -> usize {
    LIVE.0.get()
}
pub fn peak() -> usize {
    PEAK.0.get()
}
pub fn reset_peak() {
    PEAK.0.set(LIVE.0.get());
}
fn grew(by: usize) {
    let n = LIVE.0.get() + by;
    LIVE.0.set(n);
    if n > PEAK.0.get() {
        PEAK.0.set(n);
    }
}
fn shrank(by: usize) {
    LIVE.0.set(LIVE.0.get().saturating_sub(by));
}

pub fn set_limit(bytes: usize) {
    LIMIT.0.set(bytes);
}
pub fn failure() -> usize {
    FAILED.0.get()
}
pub fn clear_failure() {
    FAILED.0.set(0);
}

pub struct BigSteps;

// SAFETY: regions come from `memory.grow`, are never handed out twice and never released.
unsafe impl dlmalloc::Allocator for BigSteps {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        let limit = LIMIT.0.get();
        let have = core::arch::wasm32::memory_size(0) * PAGE;
        for want in [size.max(STEP), size] {
            let pages = want.div_ceil(PAGE);
            if limit > 0 && have.saturating_add(pages * PAGE) > limit {
                continue;
            }
            let prev = core::arch::wasm32::memory_grow(0, pages);
            if prev != usize::MAX {
                return ((prev * PAGE) as *mut u8, pages * PAGE, 0);
            }
        }
        FAILED.0.set(size.max(1));
        (std::ptr::null_mut(), 0, 0)
    }
    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        std::ptr::null_mut()
    }
    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }
    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }
    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }
    fn allocates_zeros(&self) -> bool {
        true
    }
    fn page_size(&self) -> usize {
        PAGE
    }
}

pub struct Heap(UnsafeCell<dlmalloc::Dlmalloc<BigSteps>>);

// SAFETY: this build has no threads (wasm32-unknown-unknown without atomics); the worker runs
// one instance on one thread.
unsafe impl Sync for Heap {}

impl Heap {
    pub const fn new() -> Heap {
        Heap(UnsafeCell::new(dlmalloc::Dlmalloc::new_with_allocator(
            BigSteps,
        )))
    }
}

// SAFETY: delegates to dlmalloc with the caller's layout; single-threaded (see above).
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { (*self.0.get()).malloc(l.size(), l.align()) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { (*self.0.get()).calloc(l.size(), l.align()) };
        if !p.is_null() {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        shrank(l.size());
        unsafe { (*self.0.get()).free(p, l.size(), l.align()) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { (*self.0.get()).realloc(p, l.size(), l.align(), new_size) };
        if !q.is_null() {
            // Counted as moved: the old block and the new one both live for the copy.
            grew(new_size);
            shrank(l.size());
        }
        q
    }
}

#[global_allocator]
static HEAP: Heap = Heap::new();
