//! Fuzz target: see kcoord::fuzzing::sidecar.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: kcoord::alloc_guard::GuardedAllocator = kcoord::alloc_guard::GuardedAllocator;

fuzz_target!(|data: &[u8]| kcoord::fuzzing::sidecar(data));
