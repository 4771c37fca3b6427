//! Topics: the catalog of names, ids and partition counts.

pub mod catalog;

pub use catalog::{Catalog, TopicInfo};
