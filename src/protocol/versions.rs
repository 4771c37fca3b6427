//! The versions of one API that kcoord serves.
//!
//! Each API module declares its own [`ApiSupport`], never taken from
//! kafka-protocol's `valid_versions()`, which reports what the codec can
//! parse rather than what we serve. The advertised table is the registry's
//! (`server::apis`); `docs/protocol-support.md` mirrors it, and a test keeps
//! them in sync.

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
