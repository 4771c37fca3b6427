//! KIP-848 consumer groups (the `consumer` rebalance protocol).

pub mod assignor;
