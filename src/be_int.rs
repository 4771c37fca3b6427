//! Big-endian integers in byte slices, read and patched without a panic on
//! a slice that is too short: length prefixes and CRCs of frames that come
//! from the network or from disk.

/// The four bytes at `at`, if the slice holds them.
fn four(b: &[u8], at: usize) -> Option<[u8; 4]> {
    b.get(at..at.checked_add(4)?)?.try_into().ok()
}

pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    four(b, at).map(u32::from_be_bytes)
}

pub fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    four(b, at).map(i32::from_be_bytes)
}

/// Writes `v` over the four bytes at `at` (a length prefix reserved before
/// the body it counts was encoded). Returns false, writing nothing, if the
/// slice is too short.
pub fn set_i32_at(b: &mut [u8], at: usize, v: i32) -> bool {
    match at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        Some(place) => {
            place.copy_from_slice(&v.to_be_bytes());
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_slices_read_as_none_and_are_not_written() {
        let mut b = [0u8, 0, 1, 2, 0xff];
        assert_eq!(u32_at(&b, 0), Some(258));
        assert_eq!(i32_at(&b, 1), Some(0x0001_02ff));
        assert_eq!(u32_at(&b, 2), None);
        assert_eq!(u32_at(&b, usize::MAX), None);
        assert!(!set_i32_at(&mut b, 2, 7));
        assert!(set_i32_at(&mut b, 1, -1));
        assert_eq!(b, [0, 0xff, 0xff, 0xff, 0xff]);
    }
}
