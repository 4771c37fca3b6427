//! A global allocator that keeps hostile array lengths from aborting the process.
//!
//! kafka-protocol 0.18 decodes an array by calling `Vec::with_capacity(n)` with
//! `n` read straight from the wire. A 29-byte JoinGroup frame that declares
//! `i32::MAX` protocols asks for ~189 GB; the system allocator refuses, Rust
//! calls `handle_alloc_error`, and the process aborts — no `catch_unwind` can
//! intervene. Fixing the crate would mean carrying a patched copy of another
//! project's code, so we defend one layer below it instead.
//!
//! Two kinds of allocation are served as *reservations*, by an anonymous
//! `mmap` with `MAP_NORESERVE`: the kernel hands out address space without
//! committing memory, so the doomed `with_capacity` succeeds, the decoder then
//! fails cleanly with "not enough bytes" after touching at most a frame's
//! worth of elements, and the mapping is released with `munmap`:
//!
//! - every allocation of at least [`HUGE_ALLOCATION`] bytes. Real data never
//!   needs allocations this large (requests are capped by
//!   `server.max_request_bytes`, 100 MiB by default);
//! - inside a decode ([`within_decode_budget`]), every allocation over the
//!   decode's budget: more than [`ENTRY_BYTES_BOUND`] bytes per byte of the
//!   body being decoded, and at least [`MIN_DECODE_BUDGET`]. Each array
//!   entry takes at least one byte on the wire and at most
//!   [`ENTRY_BYTES_BOUND`] bytes in memory, so such an allocation can only be
//!   an array declaring more entries than the body holds — a request Kafka
//!   refuses too ("Tried to allocate a collection of size N, but there are
//!   only M bytes remaining"). The decode notes it, and `protocol::codec`
//!   refuses the request with that reason whatever the decoder says. Without
//!   this, a 30-byte CreateTopics frame declaring 813,923 topics had
//!   mimalloc map 91 MB for its decoder (found by the `session` fuzz target).
//!
//! Reservations below [`HUGE_ALLOCATION`] are told apart from mimalloc's
//! blocks of the same size by a small table of their addresses (a full
//! table serves the allocation from mimalloc instead, still noted).
//!
//! This relies on Linux's default overcommit heuristic (`vm.overcommit_memory`
//! 0) or on `1`. Under strict accounting (`2`) `MAP_NORESERVE` is ignored and
//! the mapping fails like any other allocation; the daemon logs a warning at
//! start-up in that case (see `docs/operations.md`).
//!
//! Everything else goes to mimalloc rather than glibc's malloc: every
//! request allocates a few small blocks on one runtime thread that are
//! often freed on another, and glibc's arenas spent about 16 % of the
//! daemon's CPU time on that under a heartbeat load (docs/benchmarks.md,
//! "Hot path against the framing limit"); mimalloc's thread-local free lists made it cheap.
//!
//! The binary installs it with `#[global_allocator]`; so does the test suite
//! that sends hostile frames. Library users embedding kcoord should do the same.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use mimalloc::MiMalloc as Small;

/// Allocations at or above this size go to `mmap(MAP_NORESERVE)`.
pub const HUGE_ALLOCATION: usize = 1 << 30;

/// A decode's budget is never below this, so small requests decode as
/// before and the allocator's hot path only compares a size.
pub const MIN_DECODE_BUDGET: usize = 1 << 20;

/// An upper bound on the bytes one decoded array entry takes in memory. The
/// largest struct among kafka-protocol 0.18's requests and responses takes
/// 344 bytes (`ConsumerGroupDescribeResponse`'s `Member`); a test keeps the
/// largest ones below this bound.
pub const ENTRY_BYTES_BOUND: usize = 1024;

/// See the module documentation.
pub struct GuardedAllocator;

fn page_size() -> usize {
    4096
}

/// Whether an allocation is served as a reservation by its size alone.
pub(crate) fn is_huge(layout: &Layout) -> bool {
    layout.size() >= HUGE_ALLOCATION && layout.align() <= page_size()
}

thread_local! {
    /// The running decode's budget on this thread (`usize::MAX`: none).
    static BUDGET: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The largest allocation over that budget so far (0: none).
    static REFUSED: Cell<usize> = const { Cell::new(0) };
}

/// Runs `decode`, which decodes a body of `body_len` bytes, with this
/// thread's allocations held to the decode's budget (module documentation).
/// Returns what `decode` returned, and the largest allocation that went over
/// the budget, if any: the body declared an array longer than itself.
pub fn within_decode_budget<R>(body_len: usize, decode: impl FnOnce() -> R) -> (R, Option<usize>) {
    struct Restore(usize, usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = BUDGET.try_with(|b| b.set(self.0));
            let _ = REFUSED.try_with(|r| r.set(self.1));
        }
    }
    let budget = body_len.saturating_mul(ENTRY_BYTES_BOUND).max(MIN_DECODE_BUDGET);
    let outer = Restore(
        BUDGET.try_with(|b| b.replace(budget)).unwrap_or(usize::MAX),
        REFUSED.try_with(|r| r.replace(0)).unwrap_or(0),
    );
    let out = decode();
    let refused = REFUSED.try_with(Cell::get).unwrap_or(0);
    drop(outer);
    (out, (refused > 0).then_some(refused))
}

/// Whether this allocation, made now on this thread, is over a running
/// decode's budget; if so it is noted for [`within_decode_budget`].
fn over_decode_budget(layout: &Layout) -> bool {
    let size = layout.size();
    if size < MIN_DECODE_BUDGET || layout.align() > page_size() {
        return false;
    }
    let over = BUDGET.try_with(|b| size > b.get()).unwrap_or(false);
    if over {
        let _ = REFUSED.try_with(|r| r.set(r.get().max(size)));
    }
    over
}

/// The addresses of the reservations below [`HUGE_ALLOCATION`]: few are
/// ever live at once (a decode fails as soon as its array runs out of bytes).
static RESERVATIONS: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];

fn remember(ptr: *mut u8) -> bool {
    let addr = ptr as usize;
    RESERVATIONS.iter().any(|slot| slot.compare_exchange(0, addr, Ordering::AcqRel, Ordering::Relaxed).is_ok())
}

/// Whether `ptr` is a remembered reservation.
fn is_remembered(ptr: *mut u8, layout: &Layout) -> bool {
    layout.size() >= MIN_DECODE_BUDGET && RESERVATIONS.iter().any(|slot| slot.load(Ordering::Acquire) == ptr as usize)
}

/// Forgets `ptr` if it is a remembered reservation; whether it was.
fn forget(ptr: *mut u8, layout: &Layout) -> bool {
    if layout.size() < MIN_DECODE_BUDGET {
        return false;
    }
    let addr = ptr as usize;
    RESERVATIONS.iter().any(|slot| slot.compare_exchange(addr, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok())
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

unsafe fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: the caller passes a mapping of `size` bytes from `map`.
    unsafe {
        libc::munmap(ptr as *mut libc::c_void, size);
    }
}

impl GuardedAllocator {
    /// Allocates, and says whether the block is a reservation.
    pub(crate) unsafe fn allocate(&self, layout: Layout, zeroed: bool) -> (*mut u8, bool) {
        let over_budget = over_decode_budget(&layout);
        if is_huge(&layout) {
            // Fresh anonymous mappings are zero-filled.
            return (unsafe { map(layout.size()) }, true);
        }
        if over_budget {
            let p = unsafe { map(layout.size()) };
            if !p.is_null() {
                if remember(p) {
                    return (p, true);
                }
                unsafe { unmap(p, layout.size()) };
            }
        }
        let p = if zeroed { unsafe { Small.alloc_zeroed(layout) } } else { unsafe { Small.alloc(layout) } };
        (p, false)
    }

    /// Frees a block, and says whether it was a reservation.
    pub(crate) unsafe fn free(&self, ptr: *mut u8, layout: Layout) -> bool {
        if is_huge(&layout) || forget(ptr, &layout) {
            unsafe { unmap(ptr, layout.size()) };
            true
        } else {
            unsafe { Small.dealloc(ptr, layout) };
            false
        }
    }

    /// Reallocates, and says whether the old and the new block are
    /// reservations (meaningless if the result is null).
    pub(crate) unsafe fn reallocate(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> (*mut u8, bool, bool) {
        let new_layout = match Layout::from_size_align(new_size, layout.align()) {
            Ok(l) => l,
            Err(_) => return (std::ptr::null_mut(), false, false),
        };
        let small_before = !is_huge(&layout) && !is_remembered(ptr, &layout);
        if small_before && !is_huge(&new_layout) && !over_decode_budget(&new_layout) {
            return (unsafe { Small.realloc(ptr, layout, new_size) }, false, false);
        }
        if is_huge(&layout) && is_huge(&new_layout) {
            // Move the mapping instead of copying (possibly untouched) pages.
            // SAFETY: `ptr` is a mapping of `layout.size()` bytes from `map`.
            let p = unsafe { libc::mremap(ptr as *mut libc::c_void, layout.size(), new_size, libc::MREMAP_MAYMOVE) };
            let p = if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p as *mut u8 };
            return (p, true, true);
        }
        let (new_ptr, new_reserved) = unsafe { self.allocate(new_layout, false) };
        let mut old_reserved = false;
        if !new_ptr.is_null() {
            let n = layout.size().min(new_size);
            // SAFETY: both regions are valid for `n` bytes and distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new_ptr, n);
                old_reserved = self.free(ptr, layout);
            }
        }
        (new_ptr, old_reserved, new_reserved)
    }
}

unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { self.allocate(layout, false).0 }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { self.allocate(layout, true).0 }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe {
            self.free(ptr, layout);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { self.reallocate(ptr, layout, new_size).0 }
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

    const HOSTILE: usize = 91 << 20;

    /// The reservation table is the process's: tests that fill it or count
    /// on a free slot take turns.
    static TABLE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn table_turn() -> std::sync::MutexGuard<'static, ()> {
        TABLE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    fn an_allocation_over_a_decodes_budget_is_a_noted_reservation() {
        let _turn = table_turn();
        let a = GuardedAllocator;
        let layout = Layout::from_size_align(HOSTILE, 8).unwrap();
        let ((p, reserved), refused) = within_decode_budget(30, || unsafe { a.allocate(layout, false) });
        assert!(!p.is_null() && reserved);
        assert_eq!(refused, Some(HOSTILE));
        unsafe {
            *p = 7;
            assert!(a.free(p, layout), "the reservation is unmapped, not handed to mimalloc");
        }
    }

    #[test]
    fn allocations_within_the_budget_or_outside_a_decode_are_ordinary() {
        let a = GuardedAllocator;
        let within = Layout::from_size_align(MIN_DECODE_BUDGET, 8).unwrap();
        let ((p, reserved), refused) = within_decode_budget(30, || unsafe { a.allocate(within, false) });
        assert!(!reserved && refused.is_none());
        unsafe { assert!(!a.free(p, within)) };

        let layout = Layout::from_size_align(HOSTILE, 8).unwrap();
        let ((p, reserved), refused) = within_decode_budget(1 << 20, || unsafe { a.allocate(layout, false) });
        assert!(!reserved && refused.is_none(), "a 1 MiB body may hold 91 MiB of entries");
        unsafe { assert!(!a.free(p, layout)) };

        let (p, reserved) = unsafe { a.allocate(layout, false) };
        assert!(!reserved, "outside a decode only huge allocations are reservations");
        unsafe { assert!(!a.free(p, layout)) };
    }

    #[test]
    fn a_nested_decode_keeps_its_own_budget_and_restores_the_outer_one() {
        let _turn = table_turn();
        let a = GuardedAllocator;
        let layout = Layout::from_size_align(HOSTILE, 8).unwrap();
        let ((inner, after), outer_refused) = within_decode_budget(1 << 20, || {
            let inner = within_decode_budget(30, || unsafe { a.allocate(layout, false) });
            let after = unsafe { a.allocate(layout, false) };
            (inner, after)
        });
        let ((p, reserved), inner_refused) = inner;
        assert!(reserved && inner_refused == Some(HOSTILE));
        assert!(!after.1 && outer_refused.is_none());
        unsafe {
            assert!(a.free(p, layout));
            assert!(!a.free(after.0, layout));
        }
    }

    #[test]
    fn reservations_beyond_the_table_come_from_mimalloc_and_are_still_noted() {
        let _turn = table_turn();
        let a = GuardedAllocator;
        let layout = Layout::from_size_align(2 * MIN_DECODE_BUDGET, 8).unwrap();
        let (blocks, refused) = within_decode_budget(0, || {
            (0..RESERVATIONS.len() + 3).map(|_| unsafe { a.allocate(layout, false) }).collect::<Vec<_>>()
        });
        assert_eq!(refused, Some(2 * MIN_DECODE_BUDGET));
        assert!(blocks.iter().any(|b| !b.1), "a full table falls back to mimalloc");
        for (p, reserved) in blocks {
            assert!(!p.is_null());
            unsafe { assert_eq!(a.free(p, layout), reserved) };
        }
    }

    #[test]
    fn a_reservation_grown_or_shrunk_keeps_its_contents() {
        let _turn = table_turn();
        let a = GuardedAllocator;
        let layout = Layout::from_size_align(HOSTILE, 8).unwrap();
        let ((p, _), _) = within_decode_budget(30, || unsafe { a.allocate(layout, false) });
        unsafe {
            *p = 9;
            let (q, old_reserved, new_reserved) = a.reallocate(p, layout, 64);
            assert!(old_reserved && !new_reserved);
            assert_eq!(*q, 9);
            a.free(q, Layout::from_size_align(64, 8).unwrap());
        }
    }

    #[test]
    fn the_entry_bound_covers_the_largest_decoded_structs() {
        use kafka_protocol::messages::*;
        let largest = [
            std::mem::size_of::<consumer_group_describe_response::Member>(),
            std::mem::size_of::<consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest>(),
            std::mem::size_of::<fetch_response::PartitionData>(),
            std::mem::size_of::<describe_groups_response::DescribedGroupMember>(),
            std::mem::size_of::<metadata_response::MetadataResponseTopic>(),
            std::mem::size_of::<create_topics_request::CreatableTopic>(),
            std::mem::size_of::<offset_commit_request::OffsetCommitRequestPartition>(),
        ];
        assert!(largest.iter().all(|&s| s <= ENTRY_BYTES_BOUND / 2), "{largest:?}");
    }
}
