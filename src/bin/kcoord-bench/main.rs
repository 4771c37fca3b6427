//! kcoord-bench: a load generator for kcoord or any Kafka-compatible group
//! coordinator. It speaks the wire protocol itself (kafka-protocol's client
//! side), carries many simulated members per connection with pipelined
//! requests, and is bounded in time and count. It only targets loopback
//! addresses. See docs/benchmarks.md.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "A load generator, not the daemon: it serves no client, and a broken assumption should stop the run loudly rather than skew its numbers."
)]

mod by_topic_id;
mod consumer;
mod cpu;
mod daemon;
mod echo;
mod load;
mod net;
mod scenarios;
mod stats;
mod swarm;

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "kcoord-bench", version, about = "Load generator for Kafka group coordinators (loopback only)")]
struct Cli {
    /// Broker to load (must be a loopback address).
    #[arg(long, default_value = "127.0.0.1:9092", global = true)]
    bootstrap: String,
    /// Print one JSON object per result instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Kafka-style client settings (security.protocol, sasl.mechanism,
    /// sasl.username, sasl.password, ssl.ca.location, ...) as `key=value`
    /// lines or TOML: measure over TLS and SASL.
    #[arg(long, global = true, value_name = "FILE")]
    command_config: Option<PathBuf>,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 16, global = true)]
    pipeline: usize,
    /// How long the measured phase runs (at most 600 s).
    #[arg(long, default_value_t = 10.0, global = true)]
    duration_secs: f64,
    /// Stop each connection after this many requests.
    #[arg(long, default_value_t = 100_000_000, global = true)]
    max_requests: u64,
    /// Simulated members sharing one connection (use 1 against Apache
    /// Kafka, which serves one request per connection at a time). Keep it
    /// below kcoord's server.max_inflight_per_connection (128): parked
    /// JoinGroups of one connection's members must all be read. Shared
    /// connections need the group's members to join within the initial
    /// rebalance delay; with a delay of 0 use 1.
    #[arg(long, default_value_t = 50, global = true)]
    members_per_connection: usize,
    /// How long group formation may take.
    #[arg(long, default_value_t = 300.0, global = true)]
    settle_timeout_secs: f64,
    /// Also report this process's CPU time per request answered in the
    /// measured phase (the daemon's, from /proc/PID/stat).
    #[arg(long, global = true, value_name = "PID")]
    cpu_of: Option<u32>,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand, Debug)]
enum Scenario {
    /// G groups × M members join, then heartbeat as fast as allowed. Exits
    /// non-zero if any heartbeat is answered with an error: a stable group's
    /// members should only ever hear NONE, so errors mean the numbers do not
    /// measure steady-state heartbeats.
    Heartbeat {
        #[arg(long, default_value_t = 10)]
        groups: usize,
        #[arg(long, default_value_t = 100)]
        members: usize,
    },
    /// Members commit K partitions per request.
    Commit {
        #[arg(long, default_value_t = 10)]
        groups: usize,
        #[arg(long, default_value_t = 10)]
        members: usize,
        #[arg(long, default_value_t = 10)]
        partitions: i32,
        #[arg(long, default_value_t = 0)]
        metadata_bytes: usize,
        #[arg(long, default_value = "kcoord-bench")]
        topic: String,
        /// The OffsetCommit version to commit with (default: the highest of
        /// v2–v7 both sides support). v10 (Kafka 4.1) names the topic by
        /// its id; the broker must support the version asked for.
        #[arg(long, value_parser = clap::value_parser!(i16).range(2..=10))]
        commit_version: Option<i16>,
    },
    /// A stable group of M members; one leaves (or joins); time until every
    /// member has its SyncGroup answer for the new generation.
    Rebalance {
        #[arg(long, default_value_t = 100)]
        members: usize,
        #[arg(long, default_value = "leave", value_parser = ["leave", "join"])]
        change: String,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Many groups forming at once.
    JoinStorm {
        #[arg(long, default_value_t = 100)]
        groups: usize,
        #[arg(long, default_value_t = 10)]
        members: usize,
    },
    /// OffsetFetch throughput for groups with many committed partitions.
    FetchOffsets {
        #[arg(long, default_value_t = 100)]
        groups: usize,
        #[arg(long, default_value_t = 100)]
        partitions: i32,
        #[arg(long, default_value_t = 4)]
        connections: usize,
        #[arg(long, default_value = "kcoord-bench")]
        topic: String,
    },
    /// The framing limit's server: answers heartbeat frames without
    /// decoding them (see `raw-heartbeat`) on LISTEN until stopped.
    Echo {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
    },
    /// Heartbeats without group formation over N connections (`--pipeline`
    /// in flight on each): the load whose rate against `echo` is the
    /// framing limit. A coordinator answers them with errors.
    RawHeartbeat {
        #[arg(long, default_value_t = 20)]
        connections: usize,
    },
    /// (kcoord only) Write N offset records, start kcoord on them, time until ready.
    Recovery {
        #[arg(long)]
        kcoord_bin: PathBuf,
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        #[arg(long, default_value_t = 50)]
        shards: u32,
    },
    /// KIP-848: heartbeats/s of consumer-protocol members (ConsumerGroupHeartbeat)
    /// next to classic members, G groups × M members each, in one run.
    ConsumerHeartbeat {
        #[arg(long, default_value_t = 10)]
        groups: usize,
        #[arg(long, default_value_t = 100)]
        members: usize,
    },
    /// KIP-848: N consumer-protocol members while their topic grows from
    /// FROM to TO partitions (CreatePartitions); time until every member
    /// owns its share.
    ConsumerConvergence {
        #[arg(long, default_value_t = 10)]
        members: usize,
        #[arg(long, default_value_t = 100)]
        from: i32,
        #[arg(long, default_value_t = 1000)]
        to: i32,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// (kcoord only) KIP-848: resident memory per consumer-protocol member,
    /// next to classic members.
    ConsumerMemory {
        #[arg(long)]
        kcoord_bin: PathBuf,
        #[arg(long, default_value_t = 100)]
        groups: usize,
        #[arg(long, default_value_t = 10)]
        members: usize,
    },
    /// (kcoord only) KIP-848: members of one group join and leave, BATCH at
    /// a time, until MEMBERS have come and gone; resident memory growth per
    /// churned member over the second half.
    ConsumerChurn {
        #[arg(long)]
        kcoord_bin: PathBuf,
        #[arg(long, default_value_t = 200_000)]
        members: usize,
        #[arg(long, default_value_t = 100)]
        batch: usize,
    },
    /// (kcoord only) Resident memory per group, member and committed offset
    /// (partitions must be at least 1: the first offset creates each group).
    Memory {
        #[arg(long)]
        kcoord_bin: PathBuf,
        #[arg(long, default_value_t = 100)]
        groups: usize,
        #[arg(long, default_value_t = 10)]
        members: usize,
        #[arg(long, default_value_t = 100)]
        partitions: i32,
    },
}

/// Refuses anything but loopback addresses.
fn check_loopback(bootstrap: &str) -> Result<(), String> {
    let addrs: Vec<_> = bootstrap.to_socket_addrs().map_err(|e| format!("{bootstrap}: {e}"))?.collect();
    if addrs.is_empty() || addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(format!("{bootstrap} is not a loopback address; kcoord-bench only loads brokers on this machine"));
    }
    Ok(())
}

/// Many simulated members need many sockets: raise the soft file limit.
fn raise_nofile_limit() {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    raise_nofile_limit();
    if let Some(pid) = cli.cpu_of {
        cpu::configure(pid);
    }
    if let Some(path) = &cli.command_config {
        match kcoord::security::client::ClientSecurity::from_file(path) {
            Ok(s) => net::configure(s),
            Err(e) => {
                eprintln!("kcoord-bench: --command-config {e}");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kcoord-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let common = scenarios::Common {
            bootstrap: cli.bootstrap.clone(),
            depth: cli.pipeline.clamp(1, 4096),
            duration: Duration::from_secs_f64(cli.duration_secs.clamp(0.1, 600.0)),
            max_requests: cli.max_requests,
            members_per_connection: cli.members_per_connection.max(1),
            settle_timeout: Duration::from_secs_f64(cli.settle_timeout_secs.clamp(1.0, 3600.0)),
        };
        let needs_broker = !matches!(
            cli.scenario,
            Scenario::Recovery { .. }
                | Scenario::Memory { .. }
                | Scenario::ConsumerMemory { .. }
                | Scenario::ConsumerChurn { .. }
                | Scenario::Echo { .. }
        );
        if needs_broker {
            if let Err(e) = check_loopback(&cli.bootstrap) {
                eprintln!("kcoord-bench: {e}");
                return ExitCode::from(2);
            }
        }
        if let Scenario::Echo { listen } = &cli.scenario {
            if let Err(e) = check_loopback(listen) {
                eprintln!("kcoord-bench: {e}");
                return ExitCode::from(2);
            }
            return match echo::serve(listen).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("kcoord-bench: echo: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        let result = match &cli.scenario {
            Scenario::Heartbeat { groups, members } => scenarios::heartbeat(&common, *groups, *members).await,
            Scenario::Commit { groups, members, partitions, metadata_bytes, topic, commit_version } => {
                let load = scenarios::CommitLoad {
                    partitions: *partitions,
                    metadata_bytes: *metadata_bytes,
                    topic,
                    version: *commit_version,
                };
                scenarios::commit(&common, *groups, *members, &load).await
            }
            Scenario::Rebalance { members, change, rounds } => {
                scenarios::rebalance(&common, *members, change, *rounds).await
            }
            Scenario::JoinStorm { groups, members } => scenarios::join_storm(&common, *groups, *members).await,
            Scenario::FetchOffsets { groups, partitions, connections, topic } => {
                scenarios::fetch_offsets(&common, *groups, *partitions, *connections, topic).await
            }
            Scenario::ConsumerHeartbeat { groups, members } => {
                consumer::heartbeat_compare(&common, *groups, *members).await
            }
            Scenario::ConsumerConvergence { members, from, to, rounds } => {
                let (members, rounds) = ((*members).clamp(1, 10_000), (*rounds).clamp(1, 100));
                consumer::convergence(&common, members, (*from).max(1), (*to).clamp(1, 100_000), rounds).await
            }
            Scenario::ConsumerMemory { kcoord_bin, groups, members } => {
                daemon::consumer_memory(kcoord_bin, *groups, *members, common.members_per_connection).await
            }
            Scenario::ConsumerChurn { kcoord_bin, members, batch } => {
                daemon::consumer_churn(kcoord_bin, (*members).clamp(1, 10_000_000), (*batch).clamp(1, 10_000)).await
            }
            Scenario::RawHeartbeat { connections } => {
                echo::raw_heartbeat(&common, (*connections).clamp(1, 10_000)).await
            }
            // Served above; never a result.
            Scenario::Echo { .. } => return ExitCode::SUCCESS,
            Scenario::Recovery { kcoord_bin, records, shards } => {
                daemon::recovery(kcoord_bin, (*records).min(100_000_000), *shards).await
            }
            Scenario::Memory { kcoord_bin, groups, members, partitions } => {
                daemon::memory(kcoord_bin, *groups, *members, *partitions, common.members_per_connection).await
            }
        };
        match result {
            Ok(report) => {
                report.print(cli.json);
                match &report.failure {
                    Some(why) => {
                        eprintln!("kcoord-bench: {} failed: {why}", report.scenario);
                        ExitCode::FAILURE
                    }
                    None => ExitCode::SUCCESS,
                }
            }
            Err(e) => {
                eprintln!("kcoord-bench: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
