//! The API versions kcoord advertises.
//!
//! Built from the API modules we implement (each declares its own
//! [`ApiSupport`]), never from kafka-protocol's `valid_versions()`, which
//! reports what the codec can parse rather than what we serve.
//! `docs/protocol-support.md` mirrors this table; a test keeps them in sync.

/// One API key with the versions we serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSupport {
    pub key: i16,
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
    /// First version using flexible encoding (request header v2, response
    /// header v1, compact types); `None` if no supported version is flexible.
    pub flexible_from: Option<i16>,
}

impl ApiSupport {
    pub const fn new(key: i16, name: &'static str, min: i16, max: i16, flexible_from: Option<i16>) -> Self {
        ApiSupport { key, name, min, max, flexible_from }
    }

    pub fn supports(&self, version: i16) -> bool {
        version >= self.min && version <= self.max
    }

    pub fn is_flexible(&self, version: i16) -> bool {
        matches!(self.flexible_from, Some(f) if version >= f)
    }

    /// Response header v1 for flexible versions, except ApiVersions, whose
    /// response header is always v0 (so clients can parse it before they
    /// know our versions).
    pub fn flexible_response_header(&self, version: i16) -> bool {
        self.key != super::api::api_versions::SUPPORT.key && self.is_flexible(version)
    }
}

/// Every API kcoord serves, in key order.
pub fn supported() -> &'static [ApiSupport] {
    super::api::SUPPORTED
}

/// The entry for `key`, if we serve it.
pub fn lookup(key: i16) -> Option<&'static ApiSupport> {
    supported().iter().find(|s| s.key == key)
}

/// Human-readable name of an API key, for logs.
pub fn api_name(key: i16) -> String {
    match lookup(key) {
        Some(s) => s.name.to_string(),
        None => match kafka_protocol::messages::ApiKey::try_from(key) {
            Ok(k) => format!("{k:?}"),
            Err(_) => format!("ApiKey({key})"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        let keys: Vec<i16> = supported().iter().map(|s| s.key).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn metadata_max_is_never_10_or_11() {
        // librdkafka asserts when Metadata tops out at 10 or 11 (topic ids
        // without the v12 fields it needs).
        let m = lookup(3).unwrap();
        assert!(m.max != 10 && m.max != 11);
    }

    #[test]
    fn advertised_ranges_fit_the_codec() {
        use kafka_protocol::messages::ApiKey;
        for s in supported() {
            let k = ApiKey::try_from(s.key).unwrap();
            let codec = k.valid_versions();
            assert!(
                s.min >= codec.min && s.max <= codec.max,
                "{} {}..{} outside codec {}",
                s.name,
                s.min,
                s.max,
                codec
            );
            // Our flexible boundary must agree with the codec's header choice.
            for v in s.min..=s.max {
                let flex_header = k.request_header_version(v) >= 2;
                assert_eq!(flex_header, s.is_flexible(v), "{} v{}", s.name, v);
            }
        }
    }
}
