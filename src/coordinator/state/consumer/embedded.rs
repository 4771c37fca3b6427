//! The classic members' consumer-protocol partitions (named by topic, see
//! `protocol::consumer_protocol`) against a consumer group's assignments
//! (by topic id).

use super::records::Assignment;
use super::target::TopicImage;

/// Topic names to ids (Kafka's `toTopicPartitionMap`): topics the image
/// does not know are dropped.
pub fn to_assignment(partitions: &[(String, Vec<i32>)], image: &TopicImage) -> Assignment {
    let mut out = Assignment::new();
    for (topic, parts) in partitions {
        if let Some((id, _)) = image.get(topic) {
            out.entry(id).or_default().extend(parts.iter().copied());
        }
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

/// Topic ids to names (Kafka's `toConsumerProtocolAssignment`): topics the
/// image does not know are dropped.
pub fn to_named(assignment: &Assignment, image: &TopicImage) -> Vec<(String, Vec<i32>)> {
    let mut out: Vec<(String, Vec<i32>)> = assignment
        .iter()
        .filter_map(|(id, ps)| image.name_of(id).map(|n| (n.to_string(), ps.iter().copied().collect())))
        .collect();
    out.sort();
    out
}
