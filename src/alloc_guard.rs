//! A global allocator that keeps hostile array lengths from aborting the process.
//!
//! kafka-protocol 0.18 decodes an array by calling `Vec::with_capacity(n)` with
//! `n` read straight from the wire. A 29-byte JoinGroup frame that declares
//! `i32::MAX` protocols asks for ~189 GB; the system allocator refuses, Rust
//! calls `handle_alloc_error`, and the process aborts — no `catch_unwind` can
//! intervene. Fixing the crate would mean carrying a patched copy of another
//! project's code, so we defend one layer below it instead.
//!
//! Every allocation of at least [`HUGE_ALLOCATION`] bytes is served by an
//! anonymous `mmap` with `MAP_NORESERVE`: the kernel hands out address space
//! without committing memory, so the doomed `with_capacity` succeeds, the
//! decoder then fails cleanly with "not enough bytes" after touching at most a
//! frame's worth of elements, and the mapping is released with `munmap`. Real
//! data never needs allocations this large (requests are capped by
//! `server.max_request_bytes`, 100 MiB by default).
//!
//! This relies on Linux's default overcommit heuristic (`vm.overcommit_memory`
//! 0) or on `1`. Under strict accounting (`2`) `MAP_NORESERVE` is ignored and
//! the mapping fails like any other allocation; the daemon logs a warning at
//! start-up in that case (see `docs/operations.md`).
//!
//! Everything smaller goes to mimalloc rather than glibc's malloc: every
//! request allocates a few small blocks on one runtime thread that are
//! often freed on another, and glibc's arenas spent about 16 % of the
//! daemon's CPU time on that under a heartbeat load (docs/benchmarks.md,
//! "Hot path against the framing limit"); mimalloc's thread-local free lists made it cheap.
//!
//! The binary installs it with `#[global_allocator]`; so does the test suite
//! that sends hostile frames. Library users embedding kcoord should do the same.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc as Small;

/// Allocations at or above this size go to `mmap(MAP_NORESERVE)`.
pub const HUGE_ALLOCATION: usize = 1 << 30;

/// See the module documentation.
pub struct GuardedAllocator;

fn page_size() -> usize {
    4096
}

/// Whether an allocation is served as a reservation (see the module documentation).
pub(crate) fn is_huge(layout: &Layout) -> bool {
    layout.size() >= HUGE_ALLOCATION && layout.align() <= page_size()
}

unsafe fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping has no preconditions; failure is
    // reported as MAP_FAILED and turned into a null pointer.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr as *mut u8
    }
}

unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            unsafe { map(layout.size()) }
        } else {
            unsafe { Small.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            // Fresh anonymous mappings are zero-filled.
            unsafe { map(layout.size()) }
        } else {
            unsafe { Small.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(&layout) {
            // SAFETY: `ptr` came from `map` with this exact size.
            unsafe {
                libc::munmap(ptr as *mut libc::c_void, layout.size());
            }
        } else {
            unsafe { Small.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = match Layout::from_size_align(new_size, layout.align()) {
            Ok(l) => l,
            Err(_) => return std::ptr::null_mut(),
        };
        match (is_huge(&layout), is_huge(&new_layout)) {
            (false, false) => unsafe { Small.realloc(ptr, layout, new_size) },
            (true, true) => {
                // Move the mapping instead of copying (possibly untouched) pages.
                // SAFETY: `ptr` is a mapping of `layout.size()` bytes from `map`.
                let p =
                    unsafe { libc::mremap(ptr as *mut libc::c_void, layout.size(), new_size, libc::MREMAP_MAYMOVE) };
                if p == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    p as *mut u8
                }
            }
            _ => {
                let new_ptr = unsafe { self.alloc(new_layout) };
                if !new_ptr.is_null() {
                    let n = layout.size().min(new_size);
                    // SAFETY: both regions are valid for `n` bytes and distinct.
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new_ptr, n);
                        self.dealloc(ptr, layout);
                    }
                }
                new_ptr
            }
        }
    }
}

/// Linux's overcommit mode, if readable. Mode 2 defeats the guard.
pub fn overcommit_mode() -> Option<u8> {
    std::fs::read_to_string("/proc/sys/vm/overcommit_memory").ok().and_then(|s| s.trim().parse().ok())
}

/// The process's address-space limit (`ulimit -v`, systemd `LimitAS=`) in
/// bytes, if one is set. Below a few hundred GB it defeats the guard too:
/// the reservation itself fails.
pub fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct we pass.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// Since Rust allocations go to mimalloc, which caches its own
/// segments; this now tunes only what C code (zstd, ...) allocates with
/// glibc. Its original reason:
/// keeps buffers of up to 32 MiB on glibc's heap instead of mapping each
/// one afresh. Fetch responses and produce requests of several MiB pass
/// through kcoord on every request; above glibc's default mmap threshold
/// each was a new mapping, so every one paid page faults and the kernel's
/// zeroing on first touch, then an munmap. Profiling a sidecar under a
/// librdkafka fetch load put those at about 30 % of its CPU time, and
/// fetch throughput through the sidecar went from ~0.8 to ~0.9–1.0 of
/// direct with them gone. Freed heap memory is returned to the system
/// once 128 MiB of it sits at the top of the heap. Called once by the
/// binary at start-up; a no-op other than with glibc.
pub fn keep_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning parameters; it is
    // called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 * 1024 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024 * 1024);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_allocation_reserves_address_space_only() {
        let a = GuardedAllocator;
        let layout = Layout::from_size_align(100 << 30, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            // Touch a couple of pages; the rest is never committed.
            *p = 1;
            *p.add(4096 * 10) = 2;
            let p = a.realloc(p, layout, 101 << 30);
            assert!(!p.is_null());
            assert_eq!(*p, 1);
            a.dealloc(p, Layout::from_size_align(101 << 30, 8).unwrap());
        }
    }

    #[test]
    fn small_allocations_grow_into_huge_ones_and_back() {
        let a = GuardedAllocator;
        let layout = Layout::from_size_align(64, 8).unwrap();
        unsafe {
            let p = a.alloc_zeroed(layout);
            assert!(!p.is_null());
            assert_eq!(*p, 0);
            let p = a.realloc(p, layout, HUGE_ALLOCATION);
            assert!(!p.is_null());
            a.dealloc(p, Layout::from_size_align(HUGE_ALLOCATION, 8).unwrap());
        }
    }
}
