//! The `kcoord` command line. `kcoord` alone is `kcoord serve`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kcoord::config::{ConfigBuilder, LogFormat};
use kcoord::{Config, Daemon, StartOptions};

#[global_allocator]
static ALLOC: kcoord::alloc_guard::GuardedAllocator = kcoord::alloc_guard::GuardedAllocator;

#[derive(Parser, Debug)]
#[command(
    name = "kcoord",
    version,
    about = "A Kafka-wire-compatible group coordinator",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the daemon (the default).
    Serve(ServeArgs),
    /// Run next to an existing Kafka-compatible cluster: serve its consumer
    /// groups, forward everything else to its brokers (see docs/sidecar.md).
    Sidecar(SidecarArgs),
    /// Print the effective configuration as TOML and exit (passwords,
    /// secrets and private keys shown as "[hidden]", as Kafka logs them).
    Config(ServeArgs),
    /// Consumer group administration (like kafka-consumer-groups.sh), against
    /// kcoord or any Kafka-compatible cluster.
    Groups {
        /// Kafka-style client settings (security.protocol, sasl.mechanism,
        /// sasl.username, sasl.password, ssl.ca.location, ...) as
        /// `key=value` lines or TOML, like kafka-consumer-groups.sh's.
        #[arg(long, global = true, value_name = "FILE")]
        command_config: Option<std::path::PathBuf>,
        /// Any broker of the cluster, or kcoord itself; before or after the
        /// subcommand, also as kafka-consumer-groups.sh's --bootstrap-server.
        #[arg(
            long,
            global = true,
            visible_alias = "bootstrap-server",
            value_name = "HOST:PORT",
            default_value = "127.0.0.1:9092"
        )]
        bootstrap: String,
        #[command(subcommand)]
        command: GroupsCommand,
    },
    /// SASL users in a credentials file (security.credentials_file): salted
    /// SCRAM credentials, never passwords. A running daemon reloads the
    /// file when it changes.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// ACLs in the ACL file ([authorizer] acl_file), with kafka-acls.sh's
    /// options. A running daemon reloads the file when it changes.
    Acls {
        #[command(subcommand)]
        command: kcoord::admin::acls::AclsCommand,
    },
}

#[derive(Subcommand, Debug)]
enum UsersCommand {
    /// Add a user or change its password (read from stdin unless --password).
    Add {
        #[arg(long)]
        file: PathBuf,
        user: String,
        /// The password (visible to other local users in the process list;
        /// prefer stdin).
        #[arg(long)]
        password: Option<String>,
        /// SCRAM-SHA-256 and/or SCRAM-SHA-512 (repeatable; default both).
        #[arg(long = "mechanism")]
        mechanisms: Vec<String>,
        #[arg(long, default_value_t = kcoord::security::credentials::DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Remove a user.
    Remove {
        #[arg(long)]
        file: PathBuf,
        user: String,
    },
    /// List users and their mechanisms.
    List {
        #[arg(long)]
        file: PathBuf,
    },
}

/// Runs a `kcoord users` command.
fn run_users(command: UsersCommand) -> ExitCode {
    use kcoord::admin::users;
    let result = match command {
        UsersCommand::Add { file, user, password, mechanisms, iterations } => {
            let password = match password {
                Some(p) => Ok(p),
                None => {
                    let mut line = String::new();
                    std::io::stdin()
                        .read_line(&mut line)
                        .map(|_| line.trim_end_matches(['\r', '\n']).to_string())
                        .map_err(|e| e.to_string())
                }
            };
            password.and_then(|p| users::add(&file, &user, &p, &mechanisms, iterations))
        }
        UsersCommand::Remove { file, user } => users::remove(&file, &user),
        UsersCommand::List { file } => users::list(&file),
    };
    print_result(result)
}

/// Prints a command's output, or its error on stderr.
fn print_result(result: Result<String, String>) -> ExitCode {
    match result {
        Ok(out) => {
            print!("{out}");
            if !out.is_empty() && !out.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Subcommand, Debug)]
enum GroupsCommand {
    /// List groups (with --state, their states; --state S filters).
    List {
        #[arg(long, num_args = 0..=1, default_missing_value = "")]
        state: Option<String>,
        /// Show each group's type (classic or consumer); with a value, only that type.
        #[arg(long = "type", num_args = 0..=1, default_missing_value = "")]
        group_type: Option<String>,
    },
    /// Describe groups: offsets and owners (default), --members, or --state.
    Describe {
        /// Repeatable: the groups are described one after another.
        #[arg(long = "group", required_unless_present = "all_groups")]
        groups: Vec<String>,
        /// Every group of the cluster, as kafka-consumer-groups.sh --all-groups.
        #[arg(long, conflicts_with = "groups")]
        all_groups: bool,
        #[arg(long, conflicts_with = "state")]
        members: bool,
        #[arg(long)]
        state: bool,
        /// With --members or --state: a consumer group's epochs, subscriptions
        /// and current and target assignments.
        #[arg(long)]
        verbose: bool,
    },
    /// A group's committed offsets, log end offsets, lag and metadata.
    Offsets {
        #[arg(long)]
        group: String,
    },
    /// Delete groups (only groups without active members).
    Delete {
        #[arg(long = "group", required = true)]
        groups: Vec<String>,
    },
    /// Delete a group's committed offsets of topics or partitions (the
    /// group must not be consuming them), as kafka-consumer-groups.sh --delete-offsets.
    DeleteOffsets {
        #[arg(long)]
        group: String,
        /// TOPIC or TOPIC:P1,P2 (repeatable).
        #[arg(long = "topic", required = true)]
        topics: Vec<String>,
    },
    /// Reset groups' offsets (dry run unless --execute; a group must be inactive).
    ResetOffsets {
        /// Repeatable: each group is reset on its own.
        #[arg(long = "group", required_unless_present = "all_groups")]
        groups: Vec<String>,
        /// Every group of the cluster.
        #[arg(long, conflicts_with = "groups")]
        all_groups: bool,
        /// TOPIC or TOPIC:P1,P2 (repeatable).
        #[arg(long = "topic")]
        topics: Vec<String>,
        /// Every partition the group has committed offsets for.
        #[arg(long)]
        all_topics: bool,
        /// Moves each partition to its log start.
        #[arg(long, group = "spec")]
        to_earliest: bool,
        /// Moves each partition to its log end.
        #[arg(long, group = "spec")]
        to_latest: bool,
        /// Moves each partition to this offset (clamped to the log).
        #[arg(long, group = "spec", value_name = "OFFSET")]
        to_offset: Option<i64>,
        /// Moves each committed offset by N (negative: back); every partition in scope needs one.
        #[arg(long, group = "spec", value_name = "N", allow_hyphen_values = true)]
        shift_by: Option<i64>,
        /// Moves each partition to its first offset at or after this time. Without a zone
        /// (Z, +02:00) the time is UTC, not the local time zone kafka-consumer-groups.sh uses.
        #[arg(long, group = "spec", value_name = "YYYY-MM-DDTHH:mm:SS.sss")]
        to_datetime: Option<String>,
        /// Moves each partition to its first offset at or after this long ago
        /// (ISO-8601, as Java's Duration: PT30M, PT1H, P1DT12H).
        #[arg(long, group = "spec", value_name = "PnDTnHnMnS", allow_hyphen_values = true)]
        by_duration: Option<String>,
        /// Keeps each committed offset (the log end where there is none).
        #[arg(long, group = "spec")]
        to_current: bool,
        /// Takes the partitions and offsets from a CSV plan, as --export writes it
        /// (topic,partition,offset for one --group; group,topic,partition,offset otherwise).
        #[arg(long, group = "spec", value_name = "FILE", conflicts_with_all = ["topics", "all_topics"])]
        from_file: Option<PathBuf>,
        /// Prints the new offsets as a CSV plan instead of a table.
        #[arg(long)]
        export: bool,
        /// Only show the new offsets (the default).
        #[arg(long, conflicts_with = "execute")]
        dry_run: bool,
        /// Commit the new offsets.
        #[arg(long)]
        execute: bool,
    },
}

/// Runs an admin command; prints its output or "Error: ..." like Kafka's tools.
fn run_groups(command: GroupsCommand, bootstrap: &str, command_config: Option<std::path::PathBuf>) -> ExitCode {
    use kcoord::admin::{cluster::Cluster, groups};
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("Error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let security = match &command_config {
            Some(path) => kcoord::security::client::ClientSecurity::from_file(path)
                .map_err(|e| kcoord::admin::cluster::AdminError::Message(format!("--command-config {e}")))?,
            None => kcoord::security::client::ClientSecurity::plaintext(),
        };
        let mut cluster = Cluster::connect_with(bootstrap, security).await?;
        match command {
            GroupsCommand::List { state, group_type } => {
                let states: Vec<String> = state.iter().filter(|s| !s.is_empty()).cloned().collect();
                let types: Vec<String> = group_type.iter().filter(|s| !s.is_empty()).cloned().collect();
                groups::list(&mut cluster, state.is_some(), &states, group_type.is_some(), &types).await
            }
            GroupsCommand::Describe { groups: names, all_groups, members, state, verbose } => {
                let view = if members {
                    "members"
                } else if state {
                    "state"
                } else {
                    "offsets"
                };
                groups::describe(&mut cluster, &names, all_groups, view, verbose).await
            }
            GroupsCommand::Offsets { group } => groups::offsets(&mut cluster, &group).await,
            GroupsCommand::Delete { groups: names } => groups::delete(&mut cluster, &names).await,
            GroupsCommand::DeleteOffsets { group, topics } => {
                groups::delete_offsets(&mut cluster, &group, &topics).await
            }
            GroupsCommand::ResetOffsets {
                groups: names,
                all_groups,
                topics,
                all_topics,
                to_earliest,
                to_latest,
                to_offset,
                shift_by,
                to_datetime,
                by_duration,
                to_current,
                from_file,
                export,
                execute,
                ..
            } => {
                use kcoord::admin::cluster::AdminError;
                use kcoord::admin::time::{parse_datetime_ms, parse_duration_ms};
                let spec = if to_earliest {
                    groups::ResetSpec::Earliest
                } else if to_latest {
                    groups::ResetSpec::Latest
                } else if let Some(o) = to_offset {
                    groups::ResetSpec::Offset(o)
                } else if let Some(n) = shift_by {
                    groups::ResetSpec::ShiftBy(n)
                } else if let Some(d) = to_datetime {
                    let ms = parse_datetime_ms(&d).ok_or_else(|| {
                        AdminError::Message(format!("invalid --to-datetime {d:?}: use YYYY-MM-DDTHH:mm:SS.sss"))
                    })?;
                    groups::ResetSpec::Timestamp(ms)
                } else if let Some(d) = by_duration {
                    let ago = parse_duration_ms(&d).ok_or_else(|| {
                        AdminError::Message(format!("invalid --by-duration {d:?}: use PnDTnHnMnS, e.g. PT1H30M"))
                    })?;
                    // Before 1970 is "from the first record" (a negative
                    // ListOffsets timestamp would ask for something else).
                    groups::ResetSpec::Timestamp(kcoord::wall_clock::wall_clock_ms().saturating_sub(ago).max(0))
                } else if to_current {
                    groups::ResetSpec::Current
                } else if let Some(path) = from_file {
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| AdminError::Message(format!("cannot read {}: {e}", path.display())))?;
                    let only_group = if all_groups { None } else { names.first().filter(|_| names.len() == 1) };
                    groups::ResetSpec::FromFile(
                        kcoord::admin::reset_plan::parse(&text, only_group.map(String::as_str))
                            .map_err(AdminError::Message)?,
                    )
                } else {
                    return Err(AdminError::Message(
                        "one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime, \
                         --by-duration, --from-file is required"
                            .into(),
                    ));
                };
                let opts = groups::ResetOptions {
                    groups: &names,
                    all_groups,
                    topics: &topics,
                    all_topics,
                    spec: &spec,
                    execute,
                    export,
                };
                groups::reset_offsets(&mut cluster, &opts).await
            }
        }
    });
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(kcoord::admin::cluster::AdminError::AfterOutput { output, error }) => {
            print!("{output}");
            eprintln!("Error: {error}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Args, Debug, Default, Clone)]
struct ServeArgs {
    /// TOML configuration file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on (server.listen).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Address advertised to clients (server.advertised_listener); defaults to the listen address.
    #[arg(long, value_name = "HOST:PORT")]
    advertised_listener: Option<String>,
    /// Broker id of this node (server.node_id).
    #[arg(long, value_name = "N")]
    node_id: Option<i32>,
    /// Data directory (storage.data_dir).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Define a topic; repeatable (topics.define).
    #[arg(long = "topic", value_name = "NAME:PARTITIONS")]
    topics: Vec<String>,
    /// Set any configuration value by its dotted path; repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Log level or tracing filter (log.level).
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Log format (log.format).
    #[arg(long, value_enum)]
    log_format: Option<LogFormat>,
    /// Serve Prometheus /metrics and the /v1/groups JSON API here: an IP or a host name
    /// (resolved when binding) and a port (metrics.listen).
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<String>,
    /// Truncate a corrupt log (coordinator or partition) at its first corrupt record instead of refusing to start.
    #[arg(long)]
    repair: bool,
}

#[derive(Args, Debug, Clone)]
struct SidecarArgs {
    /// Bootstrap addresses of the upstream cluster (sidecar.upstream).
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT...]", value_delimiter = ',', required = true)]
    upstream: Vec<String>,
    /// Every sidecar when there is one per broker, as ID=HOST:PORT (sidecar.peers), or
    /// ID=LISTENER://HOST:PORT per listener with several server.listeners; this one fronts
    /// broker --node-id. Without it, one process fronts the whole cluster with a listener per
    /// broker, on consecutive ports from --listen (from each listener's port).
    #[arg(long, value_name = "ID=[LISTENER://]HOST:PORT[,...]", value_delimiter = ',')]
    peers: Vec<String>,
    #[command(flatten)]
    serve: ServeArgs,
}

impl SidecarArgs {
    fn build(&self) -> Result<Config, kcoord::config::ConfigError> {
        let list = |v: &[String]| toml::Value::Array(v.iter().map(|s| toml::Value::String(s.clone())).collect());
        let mut extra = vec![("sidecar.upstream", list(&self.upstream))];
        if !self.peers.is_empty() {
            extra.push(("sidecar.peers", list(&self.peers)));
        }
        self.serve.build_with(&extra)
    }
}

impl ServeArgs {
    fn build(&self) -> Result<Config, kcoord::config::ConfigError> {
        self.build_with(&[])
    }

    /// Builds the configuration; `extra` (dotted key, value) pairs are
    /// applied after the file and --set, like the other flags.
    fn build_with(&self, extra: &[(&str, toml::Value)]) -> Result<Config, kcoord::config::ConfigError> {
        let mut b = ConfigBuilder::new();
        if let Some(path) = &self.config {
            b = b.file(path)?;
        }
        for s in &self.sets {
            b = b.set(s)?;
        }
        let s = |v: &str| toml::Value::String(v.to_string());
        if let Some(v) = &self.listen {
            b = b.set_value("server.listen", s(v))?;
        }
        if let Some(v) = &self.advertised_listener {
            b = b.set_value("server.advertised_listener", s(v))?;
        }
        if let Some(v) = self.node_id {
            b = b.set_value("server.node_id", toml::Value::Integer(v as i64))?;
        }
        if let Some(v) = &self.data_dir {
            b = b.set_value("storage.data_dir", s(&v.display().to_string()))?;
        }
        for t in &self.topics {
            b = b.push("topics.define", s(t))?;
        }
        if let Some(v) = &self.log_level {
            b = b.set_value("log.level", s(v))?;
        }
        if let Some(v) = &self.metrics_listen {
            b = b.set_value("metrics.listen", s(v))?;
        }
        if let Some(v) = self.log_format {
            b = b.set_value("log.format", s(if v == LogFormat::Json { "json" } else { "text" }))?;
        }
        for (key, value) in extra {
            b = b.set_value(key, value.clone())?;
        }
        b.build()
    }
}

/// Changes the log filter of the running process (SIGHUP).
type ReloadLogLevel = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

fn init_logging(config: &Config) -> ReloadLogLevel {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_new(&config.log.level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let parse = |level: &str| EnvFilter::try_new(level).map_err(|e| format!("log.level {level:?}: {e}"));
    match config.log.format {
        LogFormat::Json => {
            let builder = builder.json().with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            Box::new(move |level| handle.reload(parse(level)?).map_err(|e| e.to_string()))
        }
        LogFormat::Text => {
            let builder = builder.with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            Box::new(move |level| handle.reload(parse(level)?).map_err(|e| e.to_string()))
        }
    }
}

/// Builds the configuration again from the same command line (and so the
/// same configuration file, read again): what SIGHUP reloads from.
fn reread_config() -> Result<Config, String> {
    let cli = Cli::try_parse().map_err(|e| e.to_string())?;
    let built = match cli.command {
        Some(Command::Serve(a)) | Some(Command::Config(a)) => a.build(),
        Some(Command::Sidecar(a)) => a.build(),
        Some(Command::Groups { .. }) | Some(Command::Users { .. }) | Some(Command::Acls { .. }) => {
            return Err("not a serving command".into())
        }
        None => cli.serve.build(),
    };
    built.map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    kcoord::alloc_guard::keep_large_buffers();
    let cli = Cli::parse();
    let (built, repair, print_config) = match cli.command {
        Some(Command::Serve(a)) => (a.build(), a.repair, false),
        Some(Command::Config(a)) => (a.build(), a.repair, true),
        Some(Command::Sidecar(a)) => (a.build(), a.serve.repair, false),
        Some(Command::Groups { command, bootstrap, command_config }) => {
            return run_groups(command, &bootstrap, command_config)
        }
        Some(Command::Users { command }) => return run_users(command),
        Some(Command::Acls { command }) => return print_result(kcoord::admin::acls::run(command)),
        None => (cli.serve.build(), cli.serve.repair, false),
    };
    let config = match built {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kcoord: {e}");
            return ExitCode::from(2);
        }
    };
    if print_config {
        print!("{}", config.to_toml());
        return ExitCode::SUCCESS;
    }
    let reload = init_logging(&config);
    let options = StartOptions { repair };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.server.worker_threads > 0 {
        builder.worker_threads(config.server.worker_threads as usize);
    }
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kcoord: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(config, options, reload))
}

async fn serve(config: Config, options: StartOptions, reload: ReloadLogLevel) -> ExitCode {
    // Install the signal handlers before announcing the address, so a
    // SIGTERM sent right after "serving on" is a clean shutdown.
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kcoord: cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let data_dir = config.storage.data_dir.clone();
    let mut daemon = match Daemon::start_with(config, options).await {
        Ok(d) => d,
        Err(e) => {
            eprintln!("kcoord: {e}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = daemon.metrics_addr().map(|a| format!(", metrics http://{a}/metrics")).unwrap_or_default();
    // The addresses, comma-separated, are a ready bootstrap.servers list.
    let addrs: Vec<String> = daemon.local_addrs().iter().map(|a| a.to_string()).collect();
    let nodes = match daemon.services().sidecar.as_ref() {
        Some(s) if addrs.len() > 1 => {
            format!("nodes {}", s.node_ids().iter().map(|id| id.to_string()).collect::<Vec<_>>().join(","))
        }
        _ => format!("node {}", daemon.node().node_id),
    };
    let upstream = match daemon.services().sidecar.as_ref() {
        Some(_) => format!(", upstream {}", daemon.services().config.sidecar.upstream.join(",")),
        None => String::new(),
    };
    println!(
        "kcoord {} serving on {} ({nodes}, cluster {}{upstream}, data {}{metrics})",
        env!("CARGO_PKG_VERSION"),
        addrs.join(","),
        daemon.node().cluster_id,
        data_dir.display()
    );
    let services = daemon.services().clone();
    tokio::spawn(async move {
        let started = std::time::Instant::now();
        services.coordinator.wait_until_loaded().await;
        tracing::info!(
            shards = services.coordinator.shard_count(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "group coordinator ready: every shard loaded"
        );
    });
    let security = daemon.security().clone();
    let failure = tokio::select! {
        _ = signals.wait(&reload, &security) => None,
        message = daemon.fatal_error() => Some(message),
    };
    tracing::info!("shutting down");
    daemon.shutdown().await;
    match failure {
        None => ExitCode::SUCCESS,
        Some(message) => {
            eprintln!("kcoord: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The signals kcoord handles, registered up front. SIGINT (Ctrl-C) and
/// SIGTERM shut down cleanly. SIGHUP reloads what can change while running
/// (the log level, from the configuration file and flags read again; the
/// TLS certificate and key files; the credentials file); every
/// other setting needs a restart. SIGUSR1 and SIGUSR2, whose default action
/// would kill the process without a clean shutdown, are logged and ignored.
/// SIGQUIT keeps its default (a core dump, meant for debugging); SIGPIPE is
/// already ignored by the Rust runtime.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
    user1: tokio::signal::unix::Signal,
    user2: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
            user1: signal(SignalKind::user_defined1())?,
            user2: signal(SignalKind::user_defined2())?,
        })
    }

    /// Serves SIGHUP, SIGUSR1 and SIGUSR2 until SIGINT or SIGTERM arrives.
    async fn wait(mut self, reload: &ReloadLogLevel, security: &kcoord::security::SecurityRuntime) {
        loop {
            tokio::select! {
                _ = self.interrupt.recv() => return,
                _ = self.terminate.recv() => return,
                _ = self.hangup.recv() => match { security.reload(); reread_config() }.and_then(|c| reload(&c.log.level).map(|()| c.log.level)) {
                    Ok(level) => tracing::info!(
                        level = %level,
                        "SIGHUP: log level reloaded (other settings take effect at the next start)"
                    ),
                    Err(e) => tracing::warn!(error = %e, "SIGHUP: configuration not reloaded; keeping the current one"),
                },
                _ = self.user1.recv() => tracing::info!("SIGUSR1 ignored"),
                _ = self.user2.recv() => tracing::info!("SIGUSR2 ignored"),
            }
        }
    }
}
