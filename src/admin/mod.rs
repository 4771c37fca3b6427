//! The admin CLI (`kcoord groups ...`), speaking the Kafka wire protocol to
//! kcoord or any Kafka-compatible cluster.

pub mod acls;
pub mod cluster;
pub mod groups;
pub mod reset_plan;
pub mod time;
pub mod users;

#[cfg(test)]
mod retry_tests;
