//! The open-file limit (RLIMIT_NOFILE), checked once at start-up.
//!
//! Why: every connection, coordinator shard segment and cached partition
//! segment is a descriptor. When the process runs out, accepts, segment
//! rolls and even the next start-up fail with EMFILE. So, as many servers
//! do, the soft limit is first raised to the hard limit; then the limit is
//! divided into:
//!
//! - the fixed needs: the coordinator shards' logs (held open; a shard
//!   holds its active segment and, around a roll or compaction, one more
//!   file) and [`RESERVED`] for everything else the daemon opens (listeners,
//!   the data-dir lock, the runtime, files written atomically);
//! - the partition segment files, a bounded cache
//!   (`topics.max_open_segment_files`; automatic: half of what the fixed
//!   needs leave);
//! - connections, which get the rest.
//!
//! A limit below the fixed needs plus a minimal cache and a few connections
//! refuses the start with a message saying how to raise it; a limit that
//! cannot hold `server.max_connections` connections as well is a warning,
//! and the connections the limit leaves room for become the effective
//! connection limit: connections past it are refused as past
//! `server.max_connections`, so they never take the descriptors the shards
//! need (a shard that cannot open a file stops the daemon).
//! The number of partitions on disk never enters the check: the cache opens
//! their files on demand.

use crate::config::Config;
use crate::storage::handles::MIN_CAPACITY;

/// Descriptors kept aside for what is neither a shard segment, a cached
/// partition segment nor a connection.
pub const RESERVED: u64 = 64;
/// Descriptors each coordinator shard may hold.
pub const PER_SHARD: u64 = 2;
/// Connections the limit must leave room for, at the least, to start.
pub const MIN_CONNECTIONS: u64 = 16;
/// Largest automatic segment-file cache: beyond it, more open files buy
/// nothing but kernel memory.
pub const MAX_AUTO_SEGMENT_FILES: u64 = 65_536;

/// How the open-file limit is shared out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The soft limit after raising it.
    pub limit: u64,
    /// Coordinator shards and [`RESERVED`].
    pub fixed: u64,
    /// Capacity of the partition segment-file cache.
    pub segment_files: usize,
    /// What is left for connections.
    pub connections: u64,
}

/// The soft and hard RLIMIT_NOFILE, after raising the soft limit to the hard
/// one (logged when it changes). Errors reading or raising it are logged and
/// leave the limit as it was.
pub fn raise_open_file_limit() -> (u64, u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!(error = %e, "cannot read the open-file limit (RLIMIT_NOFILE); assuming 1024");
        return (1024, 1024);
    }
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    if soft < hard {
        let raised = libc::rlimit { rlim_cur: hard, rlim_max: hard };
        // SAFETY: setrlimit reads the struct we own; raising the soft limit
        // up to the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            tracing::info!(from = soft, to = hard, "raised the open-file soft limit to the hard limit");
            return (as_u64(hard), as_u64(hard));
        }
        let e = std::io::Error::last_os_error();
        tracing::warn!(soft, hard, error = %e, "cannot raise the open-file soft limit to the hard limit");
    }
    (as_u64(soft), as_u64(hard))
}

/// rlim_t is u64 on Linux (RLIM_INFINITY is u64::MAX); this keeps the
/// conversion in one place should another target differ.
#[allow(clippy::useless_conversion)]
fn as_u64(v: libc::rlim_t) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Shares out `limit` (see the module docs), or says why it is too low.
pub fn plan(config: &Config, limit: u64) -> Result<Budget, String> {
    let shards = u64::from(config.offsets.partitions);
    let fixed = RESERVED + PER_SHARD * shards;
    let min_cache = MIN_CAPACITY as u64;
    let raise = "raise it (ulimit -n, systemd LimitNOFILE=, or the container's nofile ulimit)";
    let needed = fixed + min_cache + MIN_CONNECTIONS;
    if limit < needed {
        return Err(format!(
            "the open-file limit (RLIMIT_NOFILE) is {limit}, but kcoord needs at least {needed}: {shards} coordinator shards \
             (offsets.partitions) x {PER_SHARD} + {RESERVED} reserved + {min_cache} partition segment files + \
             {MIN_CONNECTIONS} connections; {raise}, or lower offsets.partitions for a new data directory"
        ));
    }
    let segment_files = match u64::from(config.topics.max_open_segment_files) {
        0 => ((limit - fixed) / 2).min(limit - fixed - MIN_CONNECTIONS).clamp(min_cache, MAX_AUTO_SEGMENT_FILES),
        configured if fixed + configured + MIN_CONNECTIONS > limit => {
            return Err(format!(
                "topics.max_open_segment_files is {configured}, but the open-file limit (RLIMIT_NOFILE) is {limit} and \
                 {fixed} descriptors are needed for the coordinator shards and the daemon itself and {MIN_CONNECTIONS} \
                 for connections: lower it to at most {} (or 0, automatic), or {raise}",
                limit - fixed - MIN_CONNECTIONS
            ));
        }
        configured => configured,
    };
    let connections = limit - fixed - segment_files;
    Ok(Budget { limit, fixed, segment_files: usize::try_from(segment_files).unwrap_or(usize::MAX), connections })
}

impl Budget {
    /// The connections this budget can hold, at most `configured`: each takes
    /// `per_connection` descriptors, after `shared` for the connections'
    /// common use (the sidecar's splice pipes). At least one.
    pub fn max_connections(&self, configured: u32, per_connection: u64, shared: u64) -> u32 {
        let room = self.connections.saturating_sub(shared) / per_connection.max(1);
        u32::try_from(room).unwrap_or(u32::MAX).clamp(1, configured.max(1))
    }
}

/// Raises the limit, plans the budget and logs it; warns when connections
/// cannot all fit. The error is the start-up refusal's message.
pub fn check_at_startup(config: &Config) -> Result<Budget, String> {
    let (limit, hard) = raise_open_file_limit();
    let budget = plan(config, limit)?;
    tracing::info!(
        open_file_limit = budget.limit,
        hard_limit = hard,
        fixed = budget.fixed,
        segment_files = budget.segment_files,
        connections = budget.connections,
        "open-file budget"
    );
    if budget.connections < u64::from(config.server.max_connections) {
        tracing::warn!(
            open_file_limit = budget.limit,
            connections = budget.connections,
            max_connections = config.server.max_connections,
            "the open-file limit leaves room for about {} connections, fewer than server.max_connections: \
             connections past it are refused as past server.max_connections (counted in \
             kcoord_connections_refused_total); raise the limit or lower server.max_connections",
            budget.connections
        );
    }
    Ok(budget)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(shards: u32, segment_files: u32) -> Config {
        let mut c = Config::default();
        c.offsets.partitions = shards;
        c.topics.max_open_segment_files = segment_files;
        c
    }

    #[test]
    fn the_automatic_cache_takes_half_of_what_the_fixed_needs_leave() {
        let b = plan(&config(50, 0), 512).unwrap();
        assert_eq!(b.fixed, 64 + 100);
        assert_eq!(b.segment_files, 174);
        assert_eq!(b.connections, 512 - 164 - 174);
        let big = plan(&config(50, 0), 1 << 30).unwrap();
        assert_eq!(big.segment_files as u64, MAX_AUTO_SEGMENT_FILES);
    }

    #[test]
    fn a_limit_below_the_fixed_needs_refuses_the_start_with_what_is_needed() {
        let err = plan(&config(50, 0), 100).unwrap_err();
        assert!(err.contains("is 100, but kcoord needs at least 188"), "{err}");
        assert!(err.contains("ulimit -n"), "{err}");
        assert!(plan(&config(50, 0), 188).is_ok());
    }

    #[test]
    fn a_configured_cache_that_does_not_fit_the_limit_is_refused() {
        let err = plan(&config(50, 400), 512).unwrap_err();
        assert!(err.contains("lower it to at most 332"), "{err}");
        assert_eq!(plan(&config(50, 332), 512).unwrap().segment_files, 332);
    }

    #[test]
    fn the_partitions_on_disk_never_enter_the_check() {
        // Only shards, the reserve and the cache: a data directory with
        // any number of partitions starts under the same limit.
        assert!(plan(&config(1, 0), RESERVED + PER_SHARD + MIN_CAPACITY as u64 + MIN_CONNECTIONS).is_ok());
    }
}
