//! What operators see: Prometheus metrics and the JSON view of groups, served
//! on the optional HTTP listener (`metrics.listen`).

pub mod console;
pub mod http;
pub mod lag_history;
pub mod metrics;
pub mod rate_log;
pub mod state_gauges;
pub mod striped;

/// Log end offsets of partitions, for consumer lag (standalone mode).
pub trait LogEndOffsets: Send + Sync {
    fn log_end_offset(&self, topic: &str, partition: i32) -> Option<i64>;
}

/// No data plane: lag is unknown.
pub struct NoLogEnds;

impl LogEndOffsets for NoLogEnds {
    fn log_end_offset(&self, _: &str, _: i32) -> Option<i64> {
        None
    }
}

impl LogEndOffsets for crate::topics::DataPlane {
    fn log_end_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        Some(self.topic(topic)?.partition(partition)?.offsets().high_watermark)
    }
}
