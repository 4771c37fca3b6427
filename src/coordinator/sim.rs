//! A seeded simulation of classic consumers against the real core and the
//! real shard shell (`shell`), over the fake log and a manual clock.
//!
//! Each seed drives a fault phase (members join, sync, heartbeat, commit,
//! leave, crash and restart, static members come back under their instance
//! id, answers are delayed or lost, the coordinator crashes and reloads what
//! its log made durable, compactions run), then a calm phase without
//! faults. After every step it checks:
//! - no partition is given to two members in the same generation;
//! - a group's generation never goes back, and after a coordinator restart
//!   it is at least every generation a member synced in (a JoinGroup
//!   answer tells a generation before it is written, as Kafka does);
//! - every acknowledged commit is still there (live, and after a restart);
//! - the live durable state equals the replay of the log.
//!
//! Liveness: once faults stop, every live member is Stable in the group's
//! generation within [`CALM_BOUND_MS`] of simulated time.
//!
//! A failing seed is printed with the end of its trace; the same seed gives
//! the same trace (tested). `SIM_SEEDS=n` runs more seeds, `SIM_SEED=s`
//! one seed (`scripts/simulate`).
#![cfg(test)]

use std::collections::{BTreeMap, HashMap};

use tokio::sync::oneshot;

use super::clock::ManualClock;
use super::core::{CoreConfig, CountingIds, Request, Response, ShardCore};
use super::fake_log::FakeLog;
use super::shell::{Effect, ShardShell, ShellSettings};
use super::sim_client::{Client, Learned, Phase, GROUP, TOPIC};
use super::testkit::{test_config, T0};
use crate::config::FsyncPolicy;

/// Steps of the fault phase.
const FAULT_STEPS: usize = 120;
/// Simulated time within which every live member must be Stable once
/// faults stop: a session timeout for the dead to expire, a rebalance
/// timeout for the living to rejoin, and room for a second round.
const CALM_BOUND_MS: i64 = 60_000;
/// The calm phase's step of simulated time.
const CALM_TICK_MS: i64 = 250;

/// splitmix64: small, fast, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

type Shell = ShardShell<FakeLog, ManualClock>;

/// A request held by the network, delivered later.
struct Delayed {
    req: Request,
    reply: oneshot::Sender<Response>,
}

struct World {
    rng: Rng,
    clock: ManualClock,
    shell: Shell,
    clients: Vec<Client>,
    delayed: Vec<Delayed>,
    /// fsync ends asked for and not yet reported.
    fsyncs: Vec<u64>,
    /// Snapshots asked for and not yet reported written.
    compactions: Vec<(u64, Vec<bytes::Bytes>)>,
    next_offset: i64,
    /// The newest acknowledged offset of each partition.
    acked: BTreeMap<i32, i64>,
    /// Partition → member, per generation, from SyncGroup answers.
    owners: HashMap<i32, BTreeMap<i32, String>>,
    /// The highest generation in which a member was given its partitions
    /// (SyncGroup). A JoinGroup answer tells a generation before anything
    /// is written, as Kafka does: the group's record is written with the
    /// leader's assignment, so only a SyncGroup answer proves it durable.
    synced_generation: i32,
    /// The live group's generation at the last step.
    live_generation: i32,
    restarts: u64,
    trace: Vec<String>,
}

fn settings() -> ShellSettings {
    ShellSettings { id: 0, fsync: FsyncPolicy::Always, compaction_trigger_bytes: 3_000 }
}

fn core_config() -> CoreConfig {
    test_config()
}

/// A shard that loaded `log`, as a restart does. Its member ids start at
/// `ids` so that they never repeat an id of a member it reloads (random
/// UUIDs in the daemon).
fn load(clock: &ManualClock, log: FakeLog, ids: u64) -> Result<Shell, String> {
    let mut core = ShardCore::new(core_config(), Box::new(CountingIds(ids)));
    for (i, p) in log.all().iter().enumerate() {
        core.load_payload(p).map_err(|e| format!("record {i} does not replay: {e}"))?;
    }
    let mut shell = ShardShell::loading(settings(), clock.clone());
    shell.on_loaded(Ok((core, log)));
    Ok(shell)
}

impl World {
    fn new(seed: u64) -> Result<World, String> {
        let mut rng = Rng(seed);
        let clock = ManualClock::at(T0);
        let shell = load(&clock, FakeLog::default(), 0)?;
        let n = 2 + rng.below(4) as usize;
        let clients = (0..n)
            .map(|i| {
                let instance = (rng.below(2) == 0).then(|| format!("i{i}"));
                Client::new(format!("c{i}"), instance)
            })
            .collect();
        Ok(World {
            rng,
            clock,
            shell,
            clients,
            delayed: Vec::new(),
            fsyncs: Vec::new(),
            compactions: Vec::new(),
            next_offset: 0,
            acked: BTreeMap::new(),
            owners: HashMap::new(),
            synced_generation: -1,
            live_generation: -1,
            restarts: 0,
            trace: Vec::new(),
        })
    }

    fn now(&self) -> i64 {
        use super::clock::Clock;
        self.clock.now_ms()
    }

    fn note(&mut self, what: String) {
        let line = format!("{} {what}", self.now() - T0);
        self.trace.push(line);
    }

    /// Collects what the shell asked for.
    fn take_effects(&mut self) {
        for e in self.shell.effects() {
            match e {
                Effect::Fsync(end) => self.fsyncs.push(end),
                Effect::WithdrawFsync => self.fsyncs.clear(),
                Effect::Compact { plan, payloads } => self.compactions.push((plan, payloads)),
                Effect::Fatal(m) => self.trace.push(format!("fatal: {m}")),
            }
        }
    }

    fn deliver(&mut self, req: Request, reply: oneshot::Sender<Response>) {
        self.shell.on_request(req, reply);
        self.shell.on_batch_end();
        self.take_effects();
    }

    /// Client `i` sends what it wants to send, maybe through a slow network.
    fn act(&mut self, i: usize, faults: bool) {
        let now = self.now();
        let commit = (self.rng.below(2) == 0).then_some(self.next_offset);
        let Some((kind, req)) = self.clients.get_mut(i).and_then(|c| c.next_request(now, commit)) else { return };
        if matches!(kind, super::sim_client::Kind::Commit { .. }) {
            self.next_offset += 1;
        }
        let (tx, rx) = oneshot::channel();
        let Some(client) = self.clients.get_mut(i) else { return };
        client.waiting = Some((kind, rx));
        let name = client.name.clone();
        self.note(format!("{name} sends {kind:?}"));
        if faults && self.rng.below(10) == 0 {
            self.delayed.push(Delayed { req, reply: tx });
        } else {
            self.deliver(req, tx);
        }
    }

    /// Every client looks at its answer, if one has come.
    fn poll_all(&mut self) -> Result<(), String> {
        let now = self.now();
        for i in 0..self.clients.len() {
            let Some(client) = self.clients.get_mut(i) else { continue };
            let name = client.name.clone();
            let learned = client.poll(now);
            match learned {
                Learned::Nothing => {}
                Learned::Joined { generation } => {
                    self.note(format!("{name} joined generation {generation}"));
                }
                Learned::Assigned { generation, member, partitions } => {
                    self.synced_generation = self.synced_generation.max(generation);
                    let owners = self.owners.entry(generation).or_default();
                    for p in &partitions {
                        if let Some(other) = owners.insert(*p, member.clone()) {
                            if other != member {
                                return Err(format!(
                                    "partition {p} owned by {other} and {member} in generation {generation}"
                                ));
                            }
                        }
                    }
                    self.note(format!("{name} got {partitions:?} in generation {generation}"));
                }
                Learned::Refused(kind, error) => self.note(format!("{name}: {kind:?} refused with {error:?}")),
                Learned::Committed { partition, offset } => {
                    let acked = self.acked.entry(partition).or_insert(offset);
                    *acked = (*acked).max(offset);
                    self.note(format!("{name} committed {partition}@{offset}"));
                }
            }
        }
        Ok(())
    }

    fn sync_one(&mut self) {
        if self.fsyncs.is_empty() {
            return;
        }
        let i = self.rng.below(self.fsyncs.len() as u64) as usize;
        let end = self.fsyncs.swap_remove(i);
        self.note(format!("fsync to {end}"));
        self.shell.on_synced(Ok(end));
        self.take_effects();
    }

    fn compact_one(&mut self) {
        if let Some((base, payloads)) = self.compactions.pop() {
            self.note(format!("snapshot at {base} written"));
            self.shell.on_compacted(Ok(FakeLog::write_snapshot(base, payloads)));
            self.take_effects();
        }
    }

    fn advance(&mut self, ms: i64) {
        self.clock.advance(ms);
        if self.shell.next_timer_in().is_some_and(|d| d.is_zero()) {
            self.shell.on_timer();
            self.take_effects();
        }
    }

    /// The coordinator crashes and reloads what its log made durable.
    fn restart_coordinator(&mut self) -> Result<(), String> {
        self.note("coordinator restarts".into());
        let durable = self.shell.log().map(FakeLog::durable).unwrap_or_default();
        self.restarts += 1;
        self.shell = load(&self.clock, FakeLog::from_records(durable), self.restarts * 1_000_000)?;
        self.fsyncs.clear();
        self.compactions.clear();
        self.delayed.clear();
        for c in &mut self.clients {
            c.lost_answer();
        }
        let core = self.shell.core().ok_or("the restarted shard has no core")?;
        let generation = core.group(GROUP).map_or(-1, |g| g.generation_id);
        if generation < self.synced_generation {
            return Err(format!(
                "after a restart the generation is {generation}, but members synced in {}",
                self.synced_generation
            ));
        }
        self.live_generation = generation;
        self.check_acked()
    }

    fn check_acked(&self) -> Result<(), String> {
        let core = self.shell.core().ok_or("no core")?;
        for (p, acked) in &self.acked {
            let stored = core.store().offset(GROUP, TOPIC, *p).map(|v| v.offset);
            if stored.is_none_or(|s| s < *acked) {
                return Err(format!("partition {p}: acknowledged offset {acked}, stored {stored:?}"));
            }
        }
        Ok(())
    }

    fn check(&mut self, replay: bool) -> Result<(), String> {
        let core = self.shell.core().ok_or("no core")?;
        let generation = core.group(GROUP).map_or(-1, |g| g.generation_id);
        if generation < self.live_generation {
            return Err(format!("generation went back from {} to {generation}", self.live_generation));
        }
        self.live_generation = generation;
        self.check_acked()?;
        if replay {
            let log = self.shell.log().ok_or("no log")?;
            let mut replayed = ShardCore::new(core_config(), Box::new(CountingIds::default()));
            for p in log.all() {
                replayed.load_payload(&p).map_err(|e| format!("a record does not replay: {e}"))?;
            }
            if replayed.store() != core.store() {
                return Err("the live durable state differs from the replay of the log".into());
            }
        }
        Ok(())
    }

    fn fault_step(&mut self, step: usize) -> Result<(), String> {
        let roll = self.rng.below(100);
        let n = self.clients.len() as u64;
        match roll {
            0..=34 => {
                let i = self.rng.below(n) as usize;
                self.act(i, true);
            }
            35..=59 => self.sync_one(),
            60..=74 => {
                let ms = 1 + self.rng.below(3_000) as i64;
                self.advance(ms);
            }
            75..=79 if !self.delayed.is_empty() => {
                let i = self.rng.below(self.delayed.len() as u64) as usize;
                let d = self.delayed.swap_remove(i);
                self.note("a delayed request arrives".into());
                self.deliver(d.req, d.reply);
            }
            80..=83 => self.compact_one(),
            84..=86 => {
                let i = self.rng.below(n) as usize;
                if let Some(c) = self.clients.get_mut(i) {
                    let name = c.name.clone();
                    match c.phase {
                        Phase::Gone => {
                            c.restart();
                            self.note(format!("{name} restarts"));
                        }
                        _ => {
                            c.crash();
                            self.note(format!("{name} crashes"));
                        }
                    }
                }
            }
            87..=88 => {
                let i = self.rng.below(n) as usize;
                if let Some(c) = self.clients.get_mut(i) {
                    if c.phase == Phase::Stable {
                        if let Some(req) = c.leave() {
                            let name = c.name.clone();
                            self.note(format!("{name} leaves"));
                            let (tx, _rx) = oneshot::channel();
                            self.deliver(req, tx);
                        }
                    }
                }
            }
            89..=91 => {
                let i = self.rng.below(n) as usize;
                if let Some(c) = self.clients.get_mut(i) {
                    if c.waiting.is_some() {
                        let name = c.name.clone();
                        c.lost_answer();
                        self.note(format!("{name}'s answer is lost"));
                    }
                }
            }
            92..=93 => self.restart_coordinator()?,
            _ => {}
        }
        self.poll_all()?;
        self.check(step % 8 == 0)
    }

    /// No more faults: everything in flight arrives, fsyncs and snapshots
    /// complete, and time moves on until every live member is Stable.
    fn calm(&mut self) -> Result<(), String> {
        for d in std::mem::take(&mut self.delayed) {
            self.deliver(d.req, d.reply);
        }
        let start = self.now();
        loop {
            for i in 0..self.clients.len() {
                self.act(i, false);
            }
            while !self.fsyncs.is_empty() {
                self.sync_one();
            }
            self.compact_one();
            self.poll_all()?;
            self.check(false)?;
            if self.settled() {
                return self.check(true);
            }
            if self.now() - start > CALM_BOUND_MS {
                let states: Vec<String> =
                    self.clients.iter().map(|c| format!("{}:{:?}@{}", c.name, c.phase, c.generation)).collect();
                let group = self.shell.core().and_then(|c| c.group(GROUP)).map(|g| {
                    format!(
                        "{} gen {} members {:?} protocols {:?}",
                        g.state.as_str(),
                        g.generation_id,
                        g.members.keys().collect::<Vec<_>>(),
                        g.supported_protocols
                    )
                });
                return Err(format!(
                    "not Stable {CALM_BOUND_MS} ms after the faults stopped: {states:?}; group {group:?}"
                ));
            }
            self.advance(CALM_TICK_MS);
        }
    }

    /// Every live member is Stable in the group's generation, and the group
    /// is Stable with exactly those members.
    fn settled(&self) -> bool {
        let Some(core) = self.shell.core() else { return false };
        let live: Vec<&Client> = self.clients.iter().filter(|c| c.phase != Phase::Gone).collect();
        let Some(group) = core.group(GROUP) else { return live.is_empty() };
        if live.is_empty() {
            return group.members.is_empty();
        }
        group.state.as_str() == "Stable"
            && group.members.len() == live.len()
            && live.iter().all(|c| c.phase == Phase::Stable && c.generation == group.generation_id)
    }
}

/// Runs one seed; the trace, or what failed with the end of the trace.
pub fn run(seed: u64) -> Result<Vec<String>, String> {
    let mut w = World::new(seed)?;
    let outcome = (|| {
        for step in 0..FAULT_STEPS {
            w.fault_step(step)?;
        }
        w.calm()
    })();
    match outcome {
        Ok(()) => Ok(w.trace),
        Err(e) => {
            let tail = w.trace.iter().rev().take(30).rev().cloned().collect::<Vec<_>>().join("\n  ");
            Err(format!("seed {seed}: {e}\n  last steps:\n  {tail}"))
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn seeded_client_swarms_keep_every_invariant_and_settle_once_faults_stop() {
    let seeds: Vec<u64> = match env_u64("SIM_SEED") {
        Some(s) => vec![s],
        None => (0..env_u64("SIM_SEEDS").unwrap_or(2_000)).collect(),
    };
    for seed in &seeds {
        if let Err(e) = run(*seed) {
            panic!("{e}\nreproduce with: SIM_SEED={seed} scripts/simulate");
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for seed in [1, 42, 7_777] {
        let a = run(seed).unwrap();
        let b = run(seed).unwrap();
        assert!(a.len() > 10, "seed {seed} did something: {a:?}");
        assert_eq!(a, b, "seed {seed}");
    }
}
