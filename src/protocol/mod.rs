//! Everything that touches the Kafka wire format.
//!
//! This is the only module that uses the `kafka-protocol` crate: it parses
//! headers, keeps the table of API versions we advertise, converts each API's
//! wire structs to and from kcoord's own request/response types (handling
//! per-version differences in one place), and shields the daemon from hostile
//! input. Swapping the codec crate touches only this module. Headers and
//! the hot path's Heartbeat and OffsetCommit are read and written by hand
//! (`header`, `wire`), without the crate's structs.

pub mod api;
pub mod client;
pub mod codec;
pub mod consumer_protocol;
pub mod error_answer;
pub mod header;
pub mod throttle;
pub mod uuid_string;
pub mod versions;
pub mod wire;

pub use codec::{DecodeError, EncodeError};
pub use versions::ApiSupport;
