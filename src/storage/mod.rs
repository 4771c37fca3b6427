//! Durable storage: a small segmented append-only log (length + CRC-32C
//! framed records, group commit, torn-tail recovery, compaction by snapshot)
//! shared by the coordinator's offsets logs and standalone partition logs.

pub mod fsutil;
