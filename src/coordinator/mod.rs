//! The group coordinator: routes each group to its shard.

pub mod routing;
