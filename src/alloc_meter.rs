//! The guarded allocator with a meter, for fuzzing: how many bytes are live,
//! their peak since the last [`start`], and the largest single allocation,
//! so that a fuzz target can treat "this input made the daemon allocate too
//! much" as a finding, like a panic.
//!
//! It counts what [`GuardedAllocator`] serves from mimalloc (memory the
//! process may commit). The huge reservations the guard maps with
//! `MAP_NORESERVE` (hostile array lengths in `kafka-protocol`: huge ones, and
//! those over a decode's budget; see [`crate::alloc_guard`]) are address
//! space that is never touched beyond a frame's worth; they are counted
//! apart, in [`Reading::reserved`].
//!
//! Every allocation pays a few atomic operations here, so the binary keeps
//! the plain [`GuardedAllocator`]; the fuzz targets and
//! `tests/fuzz_regressions.rs` install this one.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::alloc_guard::GuardedAllocator;

/// See the module documentation.
pub struct MeteredAllocator;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);
static RESERVED: AtomicUsize = AtomicUsize::new(0);

/// What the meter saw since [`start`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Peak live bytes above the live bytes at [`start`] (every thread's
    /// allocations count: the daemon's tasks run on its runtime's threads).
    pub peak_growth: usize,
    /// The largest single allocation (or reallocation's new size).
    pub largest: usize,
    /// Allocations served as `MAP_NORESERVE` reservations.
    pub reserved: usize,
}

/// Starts a measurement: the peak restarts from the bytes live now.
pub fn start() -> usize {
    let live = LIVE.load(Relaxed);
    PEAK.store(live, Relaxed);
    LARGEST.store(0, Relaxed);
    RESERVED.store(0, Relaxed);
    live
}

/// The bytes live now (every thread's).
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

/// The measurement since [`start`] returned `baseline`.
pub fn read(baseline: usize) -> Reading {
    Reading {
        peak_growth: PEAK.load(Relaxed).saturating_sub(baseline),
        largest: LARGEST.load(Relaxed),
        reserved: RESERVED.load(Relaxed),
    }
}

fn grew(size: usize, reserved: bool) {
    if reserved {
        RESERVED.fetch_add(1, Relaxed);
        return;
    }
    let live = LIVE.fetch_add(size, Relaxed).wrapping_add(size);
    PEAK.fetch_max(live, Relaxed);
    LARGEST.fetch_max(size, Relaxed);
    let trace_over = TRACE_OVER.load(Relaxed);
    if trace_over != 0 && size > trace_over {
        // Capturing allocates only small blocks, which never come back here.
        eprintln!("alloc_meter: an allocation of {size} bytes from\n{}", std::backtrace::Backtrace::force_capture());
    }
}

static TRACE_OVER: AtomicUsize = AtomicUsize::new(0);

/// Prints the stack of every allocation larger than `bytes` (0: none), to
/// find where a fuzz input's over-the-cap allocation came from.
pub fn trace_allocations_over(bytes: usize) {
    TRACE_OVER.store(bytes, Relaxed);
}

fn shrank(size: usize, reserved: bool) {
    if !reserved {
        LIVE.fetch_sub(size, Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `GuardedAllocator`; the
// counters only observe sizes.
unsafe impl GlobalAlloc for MeteredAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (p, reserved) = unsafe { GuardedAllocator.allocate(layout, false) };
        if !p.is_null() {
            grew(layout.size(), reserved);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let (p, reserved) = unsafe { GuardedAllocator.allocate(layout, true) };
        if !p.is_null() {
            grew(layout.size(), reserved);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let reserved = unsafe { GuardedAllocator.free(ptr, layout) };
        shrank(layout.size(), reserved);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (p, old_reserved, new_reserved) = unsafe { GuardedAllocator.reallocate(ptr, layout, new_size) };
        if !p.is_null() {
            shrank(layout.size(), old_reserved);
            grew(new_size, new_reserved);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc_guard::HUGE_ALLOCATION;

    #[test]
    fn the_meter_sees_peaks_and_the_largest_allocation_but_not_reservations() {
        let a = MeteredAllocator;
        let base = start();
        let small = Layout::from_size_align(3 << 20, 8).unwrap();
        let huge = Layout::from_size_align(HUGE_ALLOCATION * 4, 8).unwrap();
        unsafe {
            let p = a.alloc(small);
            let q = a.alloc(huge);
            assert!(!p.is_null() && !q.is_null());
            a.dealloc(p, small);
            a.dealloc(q, huge);
        }
        // Other test threads allocate too: only lower bounds are exact.
        let r = read(base);
        assert!(r.peak_growth >= 3 << 20, "{r:?}");
        assert!(r.largest >= 3 << 20 && r.largest < HUGE_ALLOCATION, "{r:?}");
        assert!(r.reserved >= 1, "{r:?}");
    }
}
