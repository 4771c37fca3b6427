//! Fuzz target: see kcoord::fuzzing::sidecar_session.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: kcoord::alloc_meter::MeteredAllocator = kcoord::alloc_meter::MeteredAllocator;

fuzz_target!(|data: &[u8]| kcoord::fuzzing::sidecar_session(data));
