//! A seeded simulation of consumers against the real core and the real
//! shard shell (`shell`), on a manual clock, in two variants of storage
//! (`sim_storage`): the in-memory fake log, and the real storage `Log` on
//! the simulated disk, whose crashes keep only what completed fsyncs
//! covered and whose faults (EIO/ENOSPC on writes, fsyncs, renames,
//! directory fsyncs) must stop the shard before it acknowledges anything
//! not durable (the simulation then restarts it, as an operator would).
//!
//! Each seed runs classic consumers (`sim_client`) in one group and KIP-848
//! consumers (`sim_consumer`) in another, on one shard, through a fault
//! phase (members join, sync, heartbeat, commit, leave, crash and restart,
//! static members come back under their instance id, answers are delayed or
//! lost, the coordinator crashes and reloads what its log made durable,
//! compactions run, the clock jumps by up to a minute and a half), then a
//! calm phase without faults. After every step it checks:
//! - classic: no partition is given to two members in the same generation;
//!   a group's generation never goes back, and after a coordinator restart
//!   it is at least every generation a member synced in (a JoinGroup
//!   answer tells a generation before it is written, as Kafka does);
//! - KIP-848: the coordinator never has a partition assigned to (or being
//!   revoked from) two members; no two consumers the coordinator counts as
//!   members own a partition at once (a partition moves only once its
//!   previous owner acknowledged the revocation; a fenced or expired owner
//!   is a zombie until it hears so), and what a member owns is assigned to
//!   it or being revoked from it; the group epoch and each member's epoch
//!   never go back, and after a restart are at least what members were told;
//! - every acknowledged commit is still there (live, and after a restart),
//!   or a commit of the same partition that reached the coordinator after
//!   it: Kafka keeps the last commit it accepts, and a member's commit
//!   held by the network after it gave up on the answer is accepted late
//!   if the member rejoined into the same generation;
//! - (fake log, every 8 steps) the live durable state equals the replay of
//!   the log; at the end of every seed, a crash then a reload rebuilds the
//!   live durable state exactly.
//!
//! Liveness: once faults stop, every live classic member is Stable in its
//! group's generation within [`CALM_BOUND_MS`] of simulated time, and every
//! live KIP-848 member is Stable at the group's epoch, owning exactly its
//! assignment, within [`CONSUMER_CALM_BOUND_MS`].
//!
//! A failing seed is printed with the end of its trace; the same seed gives
//! the same trace (tested). `SIM_SEEDS=n` runs n seeds per variant (from
//! `SIM_SEEDS_FROM`, default 0), `SIM_SEED=s` one seed (`scripts/simulate`).
#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::clock::ManualClock;
use super::shard_log::ShardLog;
use super::shell::{Effect, ShardShell, ShellSettings};
use super::sim_client::{Client, Learned, Phase, GROUP, TOPIC};
use super::sim_consumer::{CLearned, CPhase, Consumer, CGROUP, CTOPIC, CTOPIC_ID};
use super::sim_storage::{DiskStorage, FakeStorage, Shell, SimStorage, StorageStats};
use crate::config::FsyncPolicy;
use crate::coordinator::state::core::{CoreConfig, Request, Response};
use crate::coordinator::state::testkit::{test_config, T0};
use crate::storage::simdisk::Faults;

/// Steps of the fault phase.
const FAULT_STEPS: usize = 120;
/// Simulated time within which every live classic member must be Stable
/// once faults stop: a session timeout for the dead to expire, a rebalance
/// timeout for the living to rejoin, and room for a second round.
const CALM_BOUND_MS: i64 = 60_000;
/// The same for KIP-848 members: their session timeout (45 s, the
/// coordinator's), a rebalance timeout (20 s) and heartbeat intervals (5 s)
/// for the reconciliation rounds.
const CONSUMER_CALM_BOUND_MS: i64 = 120_000;
/// The calm phase's step of simulated time.
const CALM_TICK_MS: i64 = 250;
/// The largest clock step: beyond every session timeout.
const CLOCK_STEP_MAX_MS: u64 = 90_000;

/// Disk faults of the seeds that have them: rare enough that work gets
/// done between the shard's fail-stops.
const DISK_FAULTS: Faults = Faults { write: 0.005, sync: 0.02, rename: 0.05, sync_dir: 0.05 };

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

/// A request held by the network, delivered later.
struct Delayed {
    req: Request,
    reply: oneshot::Sender<Response>,
    /// A KIP-848 heartbeat or commit: dropped if its sender gave up on it
    /// before it arrives (see [`World::deliver_delayed`]).
    modern: bool,
}

/// What a campaign exercised, summed over its seeds.
#[derive(Debug, Default, Clone, Copy)]
pub struct Exercised {
    pub restarts: u64,
    /// Restarts because the shard stopped itself (a failed fsync, a
    /// poisoned log).
    pub fail_stops: u64,
    pub clock_steps: u64,
    /// KIP-848 members fenced (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, …).
    pub fenced: u64,
    /// KIP-848 partitions revoked and acknowledged.
    pub revoked: u64,
    pub acked_commits: u64,
    /// Fail-stops found in the calm phase: a log poisoned by a fault of the
    /// fault phase refuses the next request.
    pub late_fail_stops: u64,
    pub storage: StorageStats,
}

impl Exercised {
    fn add(&mut self, o: Exercised) {
        self.restarts += o.restarts;
        self.fail_stops += o.fail_stops;
        self.clock_steps += o.clock_steps;
        self.fenced += o.fenced;
        self.revoked += o.revoked;
        self.acked_commits += o.acked_commits;
        self.late_fail_stops += o.late_fail_stops;
        self.storage.add(o.storage);
    }
}

/// A committed partition: (group, topic, partition).
type Key = (&'static str, &'static str, i32);

type SyncJobOf<S> = <<S as SimStorage>::Log as ShardLog>::SyncJob;
type PlanOf<S> = <<S as SimStorage>::Log as ShardLog>::SnapshotPlan;

struct World<S: SimStorage> {
    rng: Rng,
    clock: ManualClock,
    storage: S,
    shell: Shell<S::Log>,
    clients: Vec<Client>,
    consumers: Vec<Consumer>,
    delayed: Vec<Delayed>,
    /// fsyncs asked for and not yet run.
    fsyncs: Vec<SyncJobOf<S>>,
    /// Snapshots asked for and not yet written.
    compactions: Vec<(PlanOf<S>, Vec<Bytes>)>,
    /// The shard reported that it stopped for good (fail-stop).
    fatal: bool,
    next_offset: i64,
    /// Of each (group, topic, partition): the acknowledged offset whose
    /// commit reached the coordinator last.
    acked: BTreeMap<Key, i64>,
    /// Of each (group, topic, partition): the offsets of every commit that
    /// reached the coordinator, in the order they reached it. Kafka keeps
    /// the last commit it accepts, and a member's stale commit that arrives
    /// late (its sender gave up on the answer, rejoined into the same
    /// generation and committed again) is accepted: what is stored may be
    /// an offset that arrived after the acknowledged one, never one before.
    arrivals: BTreeMap<Key, Vec<i64>>,
    /// Partition → member, per generation, from SyncGroup answers.
    owners: HashMap<i32, BTreeMap<i32, String>>,
    /// The highest generation in which a member was given its partitions
    /// (SyncGroup). A JoinGroup answer tells a generation before anything
    /// is written, as Kafka does: the group's record is written with the
    /// leader's assignment, so only a SyncGroup answer proves it durable.
    synced_generation: i32,
    /// The live classic group's generation at the last step.
    live_generation: i32,
    /// The live consumer group's epoch and member epochs at the last step.
    live_group_epoch: i32,
    live_member_epochs: BTreeMap<String, i32>,
    exercised: Exercised,
    trace: Vec<String>,
}

fn settings() -> ShellSettings {
    ShellSettings { id: 0, fsync: FsyncPolicy::Always, compaction_trigger_bytes: 3_000 }
}

fn core_config() -> CoreConfig {
    test_config()
}

impl<S: SimStorage> World<S> {
    fn new(seed: u64, mut storage: S) -> Result<World<S>, String> {
        let mut rng = Rng(seed);
        let clock = ManualClock::at(T0);
        // Member ids of a restarted shard start at `ids` so that they never
        // repeat an id of a member it reloads (random UUIDs in the daemon).
        let shell = load(&mut storage, &clock, 0)?;
        let classic = rng.below(5) as usize;
        let modern = (if classic < 2 { 2 + rng.below(3) } else { rng.below(4) }) as usize;
        let clients = (0..classic)
            .map(|i| {
                let instance = (rng.below(2) == 0).then(|| format!("i{i}"));
                Client::new(format!("c{i}"), instance)
            })
            .collect();
        let consumers = (0..modern)
            .map(|i| {
                let instance = (rng.below(3) == 0).then(|| format!("s{i}"));
                Consumer::new(format!("k{i}"), instance)
            })
            .collect();
        Ok(World {
            rng,
            clock,
            storage,
            shell,
            clients,
            consumers,
            delayed: Vec::new(),
            fsyncs: Vec::new(),
            compactions: Vec::new(),
            fatal: false,
            next_offset: 0,
            acked: BTreeMap::new(),
            arrivals: BTreeMap::new(),
            owners: HashMap::new(),
            synced_generation: -1,
            live_generation: -1,
            live_group_epoch: 0,
            live_member_epochs: BTreeMap::new(),
            exercised: Exercised::default(),
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
        let effects: Vec<_> = self.shell.effects().collect();
        for e in effects {
            match e {
                Effect::Fsync(job) => self.fsyncs.push(job),
                Effect::WithdrawFsync => self.fsyncs.clear(),
                Effect::Compact { plan, payloads } => self.compactions.push((plan, payloads)),
                Effect::Fatal(m) => {
                    self.fatal = true;
                    self.note(format!("fatal: {m}"));
                }
            }
        }
    }

    fn deliver(&mut self, req: Request, reply: oneshot::Sender<Response>) {
        self.note_arrival(&req);
        self.shell.on_request(req, reply);
        self.shell.on_batch_end();
        self.take_effects();
    }

    fn members(&self) -> usize {
        self.clients.len() + self.consumers.len()
    }

    /// Member `i` (classic ones first) sends what it wants to send, maybe
    /// through a slow network.
    fn act(&mut self, i: usize, faults: bool) {
        let now = self.now();
        let commit = (self.rng.below(2) == 0).then_some(self.next_offset);
        let modern = i >= self.clients.len();
        let (name, what, req, rx_slot) = if let Some(c) = self.clients.get_mut(i) {
            let Some((kind, req)) = c.next_request(now, commit) else { return };
            let (tx, rx) = oneshot::channel();
            c.waiting = Some((kind, rx));
            (c.name.clone(), format!("{kind:?}"), req, tx)
        } else if let Some(c) = self.consumers.get_mut(i - self.clients.len()) {
            let Some((kind, req)) = c.next_request(now, commit) else { return };
            let (tx, rx) = oneshot::channel();
            c.waiting = Some((kind, rx));
            (c.name.clone(), format!("{kind:?}"), req, tx)
        } else {
            return;
        };
        if matches!(req, Request::Commit(_)) {
            self.next_offset += 1;
        }
        self.note(format!("{name} sends {what}"));
        if faults && self.rng.below(10) == 0 {
            self.delayed.push(Delayed { req, reply: rx_slot, modern });
        } else {
            self.deliver(req, rx_slot);
        }
    }

    /// A delayed request arrives. One from a KIP-848 member that has given
    /// up on it (and sent newer ones) is dropped: processed after them, it
    /// could change the member's assignment with its answer lost, and the
    /// member's later heartbeats, not full ones, would never carry the
    /// change (Kafka's rule for when an answer includes the assignment),
    /// leaving partitions unconsumed. A finding left open, see
    /// docs/testing.md.
    fn deliver_delayed(&mut self, d: Delayed) {
        if d.modern && d.reply.is_closed() {
            self.note("an abandoned request is dropped".into());
            return;
        }
        self.note("a delayed request arrives".into());
        self.deliver(d.req, d.reply);
    }

    /// Remembers the order in which commits reach the coordinator (see
    /// [`World::arrivals`]).
    fn note_arrival(&mut self, req: &Request) {
        let Request::Commit(commit) = req else { return };
        let (group, topic) = match commit.group_id.as_str() {
            GROUP => (GROUP, TOPIC),
            CGROUP => (CGROUP, CTOPIC),
            _ => return,
        };
        for t in commit.topics.iter().filter(|t| t.name == topic) {
            for p in &t.partitions {
                self.arrivals.entry((group, topic, p.partition)).or_default().push(p.offset);
            }
        }
    }

    /// Where `offset`'s commit of `key` stands in the arrival order.
    fn arrived(&self, key: &Key, offset: i64) -> Option<usize> {
        self.arrivals.get(key)?.iter().rposition(|o| *o == offset)
    }

    fn record_ack(&mut self, key: Key, offset: i64) {
        let later = self.acked.get(&key).is_none_or(|&before| self.arrived(&key, offset) > self.arrived(&key, before));
        if later {
            self.acked.insert(key, offset);
        }
        self.exercised.acked_commits += 1;
    }

    /// Every member looks at its answer, if one has come.
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
                    self.record_ack((GROUP, TOPIC, partition), offset);
                    self.note(format!("{name} committed {partition}@{offset}"));
                }
            }
        }
        for i in 0..self.consumers.len() {
            let Some(c) = self.consumers.get_mut(i) else { continue };
            let name = c.name.clone();
            match c.poll(now) {
                CLearned::Nothing => {}
                CLearned::Heartbeat { epoch, gained, revoked } => {
                    self.exercised.revoked += revoked.len() as u64;
                    if !gained.is_empty() || !revoked.is_empty() {
                        self.note(format!("{name} at epoch {epoch} took {gained:?}, gave up {revoked:?}"));
                    }
                }
                CLearned::Fenced(e) => {
                    self.exercised.fenced += 1;
                    self.note(format!("{name} fenced: {e:?}"));
                }
                CLearned::Refused(kind, e) => self.note(format!("{name}: {kind:?} refused with {e:?}")),
                CLearned::Committed { partition, offset } => {
                    self.record_ack((CGROUP, CTOPIC, partition), offset);
                    self.note(format!("{name} committed {partition}@{offset}"));
                }
                CLearned::Wrong(what) => return Err(format!("{name}: {what}")),
            }
        }
        Ok(())
    }

    fn sync_one(&mut self) {
        if self.fsyncs.is_empty() {
            return;
        }
        let job = if self.storage.ordered_syncs() {
            self.fsyncs.remove(0)
        } else {
            let i = self.rng.below(self.fsyncs.len() as u64) as usize;
            self.fsyncs.swap_remove(i)
        };
        let durable = self.storage.run_sync(job);
        self.note(format!("fsync: {durable:?}"));
        self.shell.on_synced(durable);
        self.take_effects();
    }

    fn compact_one(&mut self) {
        if let Some((plan, payloads)) = self.compactions.pop() {
            let written = self.storage.write_snapshot(plan, payloads);
            self.note(format!("snapshot written: {}", written.is_ok()));
            self.shell.on_compacted(written);
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

    /// The coordinator crashes (or stopped itself) and reloads what its log
    /// made durable.
    fn restart_coordinator(&mut self) -> Result<(), String> {
        self.note("coordinator restarts".into());
        let old = std::mem::replace(&mut self.shell, ShardShell::loading(settings(), self.clock.clone()));
        self.storage.crash(old);
        self.exercised.restarts += 1;
        self.fatal = false;
        self.fsyncs.clear();
        self.compactions.clear();
        self.delayed.clear();
        self.shell = load(&mut self.storage, &self.clock, self.exercised.restarts * 1_000_000)?;
        self.take_effects();
        for c in &mut self.clients {
            c.lost_answer();
        }
        for c in &mut self.consumers {
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
        // What members were told is durable: epochs are at least that.
        let group = core.store().consumer_group(CGROUP);
        let group_epoch = group.map_or(0, |g| g.group_epoch);
        for c in self.consumers.iter().filter(|c| c.phase != CPhase::Gone) {
            if group_epoch < c.highest_epoch {
                return Err(format!(
                    "after a restart the group epoch is {group_epoch}, but {} was told epoch {}",
                    c.member, c.highest_epoch
                ));
            }
            // A member below what it was told would also be what a write
            // surviving a crash only in part leaves (a removal's first
            // record, epoch -1; a rejoin's subscription, epoch 0): the log
            // keeps the records of one write together (`storage::frame`).
            let member = group.and_then(|g| g.members.get(&c.member));
            if let Some(m) = member.filter(|m| m.member_epoch < c.highest_epoch) {
                return Err(format!(
                    "after a restart {} is at epoch {}, but was told {}",
                    c.member, m.member_epoch, c.highest_epoch
                ));
            }
        }
        self.live_group_epoch = group_epoch;
        self.live_member_epochs = group.map(live_epochs).unwrap_or_default();
        self.check_acked()
    }

    fn check_acked(&self) -> Result<(), String> {
        let core = self.shell.core().ok_or("no core")?;
        for (key, acked) in &self.acked {
            let (group, topic, p) = key;
            let stored = core.store().offset(group, topic, *p).map(|v| v.offset);
            if !may_be_stored(self.arrivals.get(key).map_or(&[], Vec::as_slice), *acked, stored) {
                return Err(format!(
                    "{group} {topic}-{p}: acknowledged offset {acked}, stored {stored:?}, \
                     and no commit of that offset arrived after the acknowledged one"
                ));
            }
        }
        Ok(())
    }

    /// KIP-848's ownership and epoch rules, live.
    fn check_consumer_group(&mut self) -> Result<(), String> {
        let core = self.shell.core().ok_or("no core")?;
        let Some(group) = core.store().consumer_group(CGROUP) else {
            self.live_member_epochs.clear();
            return Ok(());
        };
        if group.group_epoch < self.live_group_epoch {
            return Err(format!("the group epoch went back from {} to {}", self.live_group_epoch, group.group_epoch));
        }
        // The coordinator's view: each partition with at most one member.
        let mut holder: BTreeMap<i32, &str> = BTreeMap::new();
        for (id, m) in &group.members {
            // A static member that left temporarily is at epoch -2 until
            // its instance comes back under a new member id.
            if let Some(before) = self.live_member_epochs.get(id).filter(|_| m.member_epoch >= 0) {
                if m.member_epoch < *before {
                    return Err(format!("{id}'s epoch went back from {before} to {}", m.member_epoch));
                }
            }
            let held = [&m.assigned, &m.pending_revocation];
            for p in held.iter().filter_map(|a| a.get(&CTOPIC_ID)).flatten() {
                if let Some(other) = holder.insert(*p, id) {
                    return Err(format!("partition {p} is assigned to (or revoked from) both {other} and {id}"));
                }
            }
        }
        // The consumers' view: a consumer the coordinator counts as a member
        // owns only what is assigned to it or being revoked from it, so no
        // two members own a partition at once. One it does not count is a
        // zombie until its next heartbeat fences it.
        for c in self.consumers.iter().filter(|c| c.phase != CPhase::Gone) {
            let Some(m) = group.members.get(&c.member) else { continue };
            for p in &c.owned {
                if holder.get(p) != Some(&c.member.as_str()) {
                    return Err(format!(
                        "{} owns partition {p}, which the coordinator gives to {:?} (its state {:?} at epoch {})",
                        c.member,
                        holder.get(p),
                        m.state,
                        m.member_epoch
                    ));
                }
            }
        }
        self.live_group_epoch = group.group_epoch;
        self.live_member_epochs = live_epochs(group);
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
        self.check_consumer_group()?;
        if replay {
            let core = self.shell.core().ok_or("no core")?;
            if let Some(records) = self.shell.log().and_then(S::records) {
                let mut replayed = FakeStorage::with_records(records);
                let (replayed, _) = replayed.replay(&core_config(), 0)?;
                if replayed.store() != core.store() {
                    return Err("the live durable state differs from the replay of the log".into());
                }
            }
        }
        Ok(())
    }

    fn crash_or_restart_member(&mut self, i: usize) {
        let note = if let Some(c) = self.clients.get_mut(i) {
            if c.phase == Phase::Gone {
                c.restart();
                format!("{} restarts", c.name)
            } else {
                c.crash();
                format!("{} crashes", c.name)
            }
        } else if let Some(c) = self.consumers.get_mut(i - self.clients.len()) {
            if c.phase == CPhase::Gone {
                c.restart();
                format!("{} restarts as {}", c.name, c.member)
            } else {
                c.crash();
                format!("{} crashes", c.name)
            }
        } else {
            return;
        };
        self.note(note);
    }

    fn leave(&mut self, i: usize) {
        let left = if let Some(c) = self.clients.get_mut(i) {
            if c.phase != Phase::Stable {
                return;
            }
            c.leave().map(|r| (c.name.clone(), r))
        } else if let Some(c) = self.consumers.get_mut(i - self.clients.len()) {
            c.leave().map(|r| (c.name.clone(), r))
        } else {
            None
        };
        if let Some((name, req)) = left {
            self.note(format!("{name} leaves"));
            let (tx, _rx) = oneshot::channel();
            self.deliver(req, tx);
        }
    }

    fn lose_answer(&mut self, i: usize) {
        let lost = if let Some(c) = self.clients.get_mut(i) {
            c.waiting.is_some().then(|| {
                c.lost_answer();
                c.name.clone()
            })
        } else if let Some(c) = self.consumers.get_mut(i - self.clients.len()) {
            c.waiting.is_some().then(|| {
                c.lost_answer();
                c.name.clone()
            })
        } else {
            None
        };
        if let Some(name) = lost {
            self.note(format!("{name}'s answer is lost"));
        }
    }

    fn fault_step(&mut self, step: usize) -> Result<(), String> {
        let roll = self.rng.below(100);
        let n = self.members() as u64;
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
                self.deliver_delayed(d);
            }
            80..=83 => self.compact_one(),
            84..=86 => {
                let i = self.rng.below(n) as usize;
                self.crash_or_restart_member(i);
            }
            87..=88 => {
                let i = self.rng.below(n) as usize;
                self.leave(i);
            }
            89..=91 => {
                let i = self.rng.below(n) as usize;
                self.lose_answer(i);
            }
            92..=93 => self.restart_coordinator()?,
            94 => {
                // The clock steps forward, maybe past every session.
                let ms = 1 + self.rng.below(CLOCK_STEP_MAX_MS) as i64;
                self.note(format!("the clock jumps {ms} ms"));
                self.exercised.clock_steps += 1;
                self.advance(ms);
            }
            95 => {
                let on = self.rng.below(2) == 0;
                self.storage.set_faults(on);
            }
            _ => {}
        }
        if self.fatal {
            // The daemon stops; it is started again.
            self.exercised.fail_stops += 1;
            self.restart_coordinator()?;
        }
        self.poll_all()?;
        self.check(step % 8 == 0)
    }

    /// No more faults: everything in flight arrives, fsyncs and snapshots
    /// complete, and time moves on until every live member is Stable.
    fn calm(&mut self) -> Result<(), String> {
        self.storage.set_faults(false);
        for d in std::mem::take(&mut self.delayed) {
            self.deliver_delayed(d);
        }
        let mut start = self.now();
        loop {
            for i in 0..self.members() {
                self.act(i, false);
            }
            while !self.fsyncs.is_empty() {
                self.sync_one();
            }
            self.compact_one();
            if self.fatal {
                // A log poisoned in the fault phase stops the shard at its
                // next request; the time bound starts again after that.
                self.exercised.late_fail_stops += 1;
                if self.exercised.late_fail_stops > 2 {
                    return Err("the shard keeps stopping itself without disk faults".into());
                }
                self.restart_coordinator()?;
                start = self.now();
            }
            self.poll_all()?;
            self.check(false)?;
            let classic = self.classic_settled();
            let modern = self.consumers_settled();
            if classic && modern {
                return self.check_reload();
            }
            let elapsed = self.now() - start;
            if (!classic && elapsed > CALM_BOUND_MS) || elapsed > CONSUMER_CALM_BOUND_MS {
                return Err(format!("not Stable {elapsed} ms after the faults stopped: {}", self.describe()));
            }
            self.advance(CALM_TICK_MS);
        }
    }

    fn describe(&self) -> String {
        let states: Vec<String> =
            self.clients.iter().map(|c| format!("{}:{:?}@{}", c.name, c.phase, c.generation)).collect();
        let core = self.shell.core();
        let group = core.and_then(|c| c.group(GROUP)).map(|g| {
            format!(
                "{} gen {} members {:?} protocols {:?}",
                g.state.as_str(),
                g.generation_id,
                g.members.keys().collect::<Vec<_>>(),
                g.supported_protocols
            )
        });
        let consumers: Vec<String> = self
            .consumers
            .iter()
            .map(|c| format!("{}:{:?}@{} owns {:?}", c.member, c.phase, c.epoch, c.owned))
            .collect();
        let cgroup = core.and_then(|c| c.store().consumer_group(CGROUP)).map(|g| {
            let members: Vec<String> = g
                .members
                .iter()
                .map(|(id, m)| {
                    format!("{id}:{:?}@{} {:?} -{:?}", m.state, m.member_epoch, m.assigned, m.pending_revocation)
                })
                .collect();
            format!(
                "{} epoch {} assignment epoch {} members {members:?}",
                g.state().name(),
                g.group_epoch,
                g.assignment_epoch
            )
        });
        format!("classic {states:?}; group {group:?}; consumers {consumers:?}; group {cgroup:?}")
    }

    /// Every live classic member is Stable in the group's generation, and
    /// the group is Stable with exactly those members.
    fn classic_settled(&self) -> bool {
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

    /// Every live KIP-848 member is Stable at the group's epoch and owns
    /// exactly its assignment; the group has no other members.
    fn consumers_settled(&self) -> bool {
        let Some(core) = self.shell.core() else { return false };
        let live: Vec<&Consumer> = self.consumers.iter().filter(|c| c.phase != CPhase::Gone).collect();
        let Some(group) = core.store().consumer_group(CGROUP) else { return live.is_empty() };
        if live.is_empty() {
            return group.members.is_empty();
        }
        group.state().name() == "Stable"
            && group.members.len() == live.len()
            && live.iter().all(|c| {
                group.members.get(&c.member).is_some_and(|m| {
                    let assigned: BTreeSet<i32> = m.assigned.get(&CTOPIC_ID).cloned().unwrap_or_default();
                    c.phase == CPhase::Member
                        && m.member_epoch == group.group_epoch
                        && c.epoch == m.member_epoch
                        && assigned == c.owned
                        && m.pending_revocation.is_empty()
                })
            })
    }

    /// At the end: everything is durable, so a crash then a reload must
    /// rebuild exactly the live durable state.
    fn check_reload(&mut self) -> Result<(), String> {
        while !self.compactions.is_empty() || !self.fsyncs.is_empty() {
            self.compact_one();
            while !self.fsyncs.is_empty() {
                self.sync_one();
            }
        }
        let log = self.shell.log().ok_or("no log")?;
        if log.synced() < log.end() {
            return Err(format!("records {}..{} were never made durable", log.synced(), log.end()));
        }
        let live = self.shell.core().ok_or("no core")?.store().clone();
        let old = std::mem::replace(&mut self.shell, ShardShell::loading(settings(), self.clock.clone()));
        self.storage.crash(old);
        let (reloaded, _) = self.storage.replay(&core_config(), 0)?;
        if reloaded.store() != &live {
            return Err("after a crash with everything durable, the reloaded state differs from the live one".into());
        }
        Ok(())
    }
}

/// The epochs of a consumer group's members, but for static members that
/// left temporarily.
fn live_epochs(group: &crate::coordinator::state::consumer::group::ConsumerGroup) -> BTreeMap<String, i32> {
    group.members.iter().filter(|(_, m)| m.member_epoch >= 0).map(|(id, m)| (id.clone(), m.member_epoch)).collect()
}

/// A shard that loaded what `storage` holds, as a restart does; its member
/// ids start at `ids`.
fn load<S: SimStorage>(storage: &mut S, clock: &ManualClock, ids: u64) -> Result<Shell<S::Log>, String> {
    let (core, log) = storage.replay(&core_config(), ids)?;
    let mut shell = ShardShell::loading(settings(), clock.clone());
    shell.on_loaded(Ok((core, log)));
    Ok(shell)
}

/// Runs one seed on `storage`; the trace, or what failed with the end of
/// the trace.
fn run_on<S: SimStorage>(seed: u64, storage: S) -> Result<(Vec<String>, Exercised), String> {
    let mut w = World::new(seed, storage)?;
    w.storage.set_faults(true);
    let outcome = (|| {
        for step in 0..FAULT_STEPS {
            w.fault_step(step)?;
        }
        w.calm()
    })();
    match outcome {
        Ok(()) => {
            w.exercised.storage = w.storage.stats();
            Ok((w.trace, w.exercised))
        }
        Err(e) => {
            let tail = w.trace.iter().rev().take(40).rev().cloned().collect::<Vec<_>>().join("\n  ");
            Err(format!("seed {seed}: {e}\n  last steps:\n  {tail}"))
        }
    }
}

/// The simulation's variants, by where the coordinator's log lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    FakeLog,
    SimDisk,
    /// The simulated disk with the node's journal in front of the log.
    Journaled,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::FakeLog => "fake-log",
            Variant::SimDisk => "sim-disk",
            Variant::Journaled => "journaled",
        }
    }
}

/// Runs one seed of a variant. A third of the disk seeds inject disk
/// faults, and half of them let the disk write back out of order.
pub fn run(variant: Variant, seed: u64) -> Result<(Vec<String>, Exercised), String> {
    match variant {
        Variant::FakeLog => run_on(seed, FakeStorage::default()),
        Variant::SimDisk => {
            let faults = if seed % 3 == 0 { DISK_FAULTS } else { Faults::NONE };
            run_on(seed, DiskStorage::new(seed, faults, seed % 2 == 1))
        }
        Variant::Journaled => {
            let faults = if seed % 3 == 0 { DISK_FAULTS } else { Faults::NONE };
            run_on(seed, DiskStorage::journaled(seed, faults, seed % 2 == 1))
        }
    }
}

/// Whether a partition may store `stored` once the commit of `acked` was
/// acknowledged, given the offsets its commits arrived with, in order: the
/// acknowledged offset itself or one that arrived after it (and may have
/// been accepted), never an older one, and never nothing.
fn may_be_stored(arrivals: &[i64], acked: i64, stored: Option<i64>) -> bool {
    let Some(at) = arrivals.iter().rposition(|o| *o == acked) else { return false };
    stored.is_some_and(|s| arrivals[at..].contains(&s))
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs the variant's seeds (`default` of them unless `SIM_SEEDS` or
/// `SIM_SEED` says otherwise, from `SIM_SEEDS_FROM` or 0, so that a new
/// campaign can go on where the last one stopped); a failing seed panics
/// with its number and how to replay it. Returns what the seeds exercised.
fn campaign(variant: Variant, default: u64) -> (u64, Exercised) {
    let seeds: Vec<u64> = match env_u64("SIM_SEED") {
        Some(s) => vec![s],
        None => {
            let from = env_u64("SIM_SEEDS_FROM").unwrap_or(0);
            (from..from.saturating_add(env_u64("SIM_SEEDS").unwrap_or(default))).collect()
        }
    };
    let started = std::time::Instant::now();
    let mut total = Exercised::default();
    let mut failed: Vec<(u64, String)> = Vec::new();
    for seed in &seeds {
        match run(variant, *seed) {
            Ok((_, exercised)) => total.add(exercised),
            Err(e) => failed.push((*seed, e)),
        }
    }
    if let Some((seed, e)) = failed.first() {
        let others: Vec<String> =
            failed.iter().skip(1).take(30).map(|(s, e)| format!("{s}: {}", e.lines().next().unwrap_or(""))).collect();
        panic!(
            "{} {e}\nreproduce with: SIM_SEED={seed} scripts/simulate\n{} of {} seeds failed; others:\n{}",
            variant.name(),
            failed.len(),
            seeds.len(),
            others.join("\n")
        );
    }
    eprintln!(
        "simulation {}: {} seeds in {:.1} s: {total:?}",
        variant.name(),
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    (seeds.len() as u64, total)
}

#[test]
fn seeded_client_swarms_keep_every_invariant_and_settle_once_faults_stop() {
    let (seeds, e) = campaign(Variant::FakeLog, 2_000);
    if seeds >= 2_000 {
        assert!(e.restarts > 0 && e.clock_steps > 0 && e.fenced > 0 && e.revoked > 0 && e.acked_commits > 0, "{e:?}");
    }
}

#[test]
fn seeded_client_swarms_on_the_simulated_disk_lose_no_acknowledged_commit_through_crashes_and_disk_faults() {
    let (seeds, e) = campaign(Variant::SimDisk, 2_000);
    if seeds >= 2_000 {
        assert!(e.restarts > 0 && e.fail_stops > 0 && e.clock_steps > 0 && e.fenced > 0, "{e:?}");
        let s = e.storage;
        assert!(s.dropped_writes > 0 && s.torn_writes > 0 && s.failed_fsyncs > 0 && s.injected_faults > 0, "{s:?}");
    }
}

#[test]
fn seeded_client_swarms_with_the_journal_lose_no_acknowledged_commit_through_crashes_and_disk_faults() {
    let (seeds, e) = campaign(Variant::Journaled, 2_000);
    if seeds >= 2_000 {
        assert!(e.restarts > 0 && e.fail_stops > 0 && e.acked_commits > 0, "{e:?}");
        let s = e.storage;
        assert!(s.dropped_writes > 0 && s.torn_writes > 0 && s.failed_fsyncs > 0 && s.injected_faults > 0, "{s:?}");
    }
}

#[test]
fn a_partition_keeps_its_acknowledged_offset_or_one_that_arrived_after_it() {
    // 0 arrived first, then 4 was acknowledged: 0 would be a lost commit.
    assert!(may_be_stored(&[0, 4], 4, Some(4)));
    assert!(!may_be_stored(&[0, 4], 4, Some(0)));
    assert!(!may_be_stored(&[0, 4], 4, None));
    // A stale commit of 0 arrived after 4 was: Kafka keeps the last one.
    assert!(may_be_stored(&[4, 0], 4, Some(0)));
    assert!(may_be_stored(&[4, 0], 4, Some(4)));
    assert!(!may_be_stored(&[4, 0], 4, Some(7)), "an offset no commit carried");
}

#[test]
fn a_stale_commit_arriving_after_a_newer_acknowledged_one_is_kafkas_last_write_not_a_lost_commit() {
    // Seed 25273 behind the journal: c1's commit of 0 is held by the
    // network, c1 gives up on it, rejoins into the same generation, commits
    // 4 (acknowledged), and then the commit of 0 arrives and is accepted,
    // as Kafka accepts it. Found by a campaign of 200,000 seeds, when the
    // check still wanted the highest acknowledged offset stored.
    let (trace, _) = run(Variant::Journaled, 25_273).unwrap();
    let at = |what: &str| trace.iter().position(|l| l.ends_with(what));
    let stale = at("c1 sends Commit { partition: 0, offset: 0 }").expect("the stale commit is sent");
    let newer = at("c1 sends Commit { partition: 0, offset: 4 }").expect("the newer commit is sent");
    let late = trace.iter().skip(newer).position(|l| l.ends_with("a delayed request arrives"));
    assert!(stale < newer && late.is_some() && at("c1 committed 0@4").is_some(), "{trace:#?}");
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for variant in [Variant::FakeLog, Variant::SimDisk, Variant::Journaled] {
        for seed in [1, 42, 7_777] {
            let a = run(variant, seed).unwrap().0;
            let b = run(variant, seed).unwrap().0;
            assert!(a.len() > 10, "seed {seed} did something: {a:?}");
            assert_eq!(a, b, "{variant:?} seed {seed}");
        }
    }
}
