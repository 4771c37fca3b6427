//! Which shard owns a group: Kafka's `partitionFor`.
//!
//! `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, with Java's
//! `String.hashCode` over UTF-16 code units and `Utils.abs(MIN_VALUE) == 0`.
//! Matching Kafka exactly means a group keeps its shard number if a user moves
//! between kcoord and Kafka with the same partition count.

/// Java's `String.hashCode`.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
}

/// Kafka's `Utils.abs`: `Integer.MIN_VALUE` maps to 0 instead of overflowing.
pub fn kafka_abs(n: i32) -> i32 {
    if n == i32::MIN {
        0
    } else {
        n.abs()
    }
}

/// The shard (coordinator partition) of `group_id` among `partitions`.
pub fn partition_for(group_id: &str, partitions: u32) -> u32 {
    (kafka_abs(java_string_hash(group_id)) as u32) % partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test vectors computed with Java's `String.hashCode`.
    #[test]
    fn routing_matches_kafkas_partition_for() {
        let cases: &[(&str, i32, u32)] = &[
            ("", 0, 0),
            ("a", 97, 47),
            ("group-id", 506313513, 13),
            ("my-group", -1906497762, 12),
            ("test-group", 627841412, 12),
            ("console-consumer-12345", 158455506, 6),
            ("polygenelubricants", i32::MIN, 0),
            ("é", 233, 33),
            ("😀", 1772899, 49),
        ];
        for &(group, hash, partition) in cases {
            assert_eq!(java_string_hash(group), hash, "hash of {group:?}");
            assert_eq!(partition_for(group, 50), partition, "partition of {group:?}");
        }
    }
}
