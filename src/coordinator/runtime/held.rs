//! Answers a shard holds until the writes they depend on are covered
//! (durable under `storage.fsync = always`, written otherwise).
//!
//! The queue is shared between the shard's task and whoever learns first
//! that a write is covered. Under `always` that is the node's journal
//! thread. It hands what each round covered to the node's [`Releaser`], one
//! task that releases the answers of every shard in the round, instead of
//! waking each shard's task to do it: one wake-up from outside the runtime
//! a round instead of one per shard (about five under load). The answers
//! then leave from a worker thread, so their connections' tasks are
//! scheduled there; sending them from the journal thread itself woke each
//! connection from outside the runtime and served 100 committers of one
//! shard about 12 % slower.
//!
//! The rule stays the shell's: an answer is held with the log end it
//! depends on, and leaves only once that end is covered. After a failed
//! fsync nothing more is covered, ever ([`HeldAnswers::stop`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

use tokio::sync::oneshot;

use crate::coordinator::state::core::Response;

/// One held answer: the log end it waits for, and where it goes.
type Held = (u64, oneshot::Sender<Response>, Response);

#[derive(Default)]
struct Inner {
    /// Everything up to here is covered.
    covered: u64,
    /// A write failed to become durable: nothing is released any more.
    stopped: bool,
    queue: VecDeque<Held>,
}

/// A shard's held answers, in the order they were held.
#[derive(Default)]
pub struct HeldAnswers {
    inner: Mutex<Inner>,
}

impl HeldAnswers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the queue consistent (every
        // operation is a push, a pop or a store).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `response` until the log is covered up to `end`; sends it now
    /// if it already is (a round may have ended since the shard looked).
    pub fn hold(&self, end: u64, tx: oneshot::Sender<Response>, response: Response) {
        let mut inner = self.lock();
        if !inner.stopped && end <= inner.covered {
            drop(inner);
            let _ = tx.send(response);
            return;
        }
        inner.queue.push_back((end, tx, response));
    }

    /// The log is covered up to `end`: the answers waiting for it leave, in
    /// the order they were held. Sent under the lock: copying them out
    /// first cost more (each answer moved twice more) than the shard's
    /// occasional wait for the lock.
    pub fn release(&self, end: u64) {
        let mut inner = self.lock();
        if inner.stopped {
            return;
        }
        inner.covered = inner.covered.max(end);
        let covered = inner.covered;
        while inner.queue.front().is_some_and(|(e, _, _)| *e <= covered) {
            if let Some((_, tx, response)) = inner.queue.pop_front() {
                let _ = tx.send(response);
            }
        }
    }

    /// Nothing more counts as covered (an fsync failed): held answers never
    /// leave; their connections see the daemon stop.
    pub fn stop(&self) {
        self.lock().stopped = true;
    }

    /// The shard stopped: what is still held is dropped, and its
    /// connections see a close rather than wait for an answer that will not
    /// come. Nothing is released after this.
    pub fn abandon(&self) {
        let dropped = {
            let mut inner = self.lock();
            inner.stopped = true;
            std::mem::take(&mut inner.queue)
        };
        drop(dropped);
    }

    /// How many answers are held.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Releases held answers on the runtime for fsyncs that ran elsewhere.
pub struct Releaser {
    /// Each shard's newest covered end not yet released; one entry per
    /// shard, so it holds at most one entry per shard of the node.
    covered: Mutex<Vec<(Arc<HeldAnswers>, u64)>>,
    wake: Arc<Notify>,
}

impl Releaser {
    /// The node's releaser and its task (which ends when it is dropped).
    pub fn start() -> Arc<Releaser> {
        let wake = Arc::new(Notify::new());
        let releaser = Arc::new(Releaser { covered: Mutex::default(), wake: wake.clone() });
        let weak: Weak<Releaser> = Arc::downgrade(&releaser);
        tokio::spawn(async move {
            let mut batch = Vec::new();
            loop {
                wake.notified().await;
                let Some(releaser) = weak.upgrade() else { return };
                std::mem::swap(&mut *releaser.lock(), &mut batch);
                drop(releaser);
                for (held, end) in batch.drain(..) {
                    held.release(end);
                }
            }
        });
        releaser
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Arc<HeldAnswers>, u64)>> {
        self.covered.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `held`'s log is covered up to `end`: its answers up to there leave
    /// from the releaser's task.
    pub fn covered(&self, held: &Arc<HeldAnswers>, end: u64) {
        let first = {
            let mut covered = self.lock();
            match covered.iter_mut().find(|(h, _)| Arc::ptr_eq(h, held)) {
                Some((_, e)) => *e = (*e).max(end),
                None => covered.push((Arc::clone(held), end)),
            }
            covered.len() == 1
        };
        if first {
            self.wake.notify_one();
        }
    }
}

impl std::fmt::Debug for Releaser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Releaser").field("shards_to_release", &self.lock().len()).finish()
    }
}

impl Drop for Releaser {
    fn drop(&mut self) {
        // Lets the task see that it is no longer needed.
        self.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::state::messages::HeartbeatResponse;

    fn answer() -> Response {
        HeartbeatResponse { error: crate::error_code::ErrorCode::NONE }.into()
    }

    fn held(answers: &HeldAnswers, end: u64) -> oneshot::Receiver<Response> {
        let (tx, rx) = oneshot::channel();
        answers.hold(end, tx, answer());
        rx
    }

    #[test]
    fn an_answer_leaves_once_its_end_is_covered_and_not_before() {
        let answers = HeldAnswers::default();
        let mut first = held(&answers, 5);
        let mut second = held(&answers, 9);
        answers.release(4);
        assert!(first.try_recv().is_err());
        answers.release(5);
        assert!(first.try_recv().is_ok());
        assert!(second.try_recv().is_err());
        answers.release(12);
        assert!(second.try_recv().is_ok());
        assert!(answers.is_empty());
    }

    #[test]
    fn an_answer_held_after_its_round_ended_leaves_at_once() {
        // The journal's round can end between the shard's look at the log
        // and its hold: the answer must not wait for the next round.
        let answers = HeldAnswers::default();
        answers.release(10);
        let mut late = held(&answers, 10);
        assert!(late.try_recv().is_ok());
    }

    #[tokio::test]
    async fn the_releaser_sends_what_an_fsync_elsewhere_covered() {
        let releaser = Releaser::start();
        let answers = Arc::new(HeldAnswers::default());
        let first = held(&answers, 4);
        let mut second = held(&answers, 8);
        // An fsync thread reports twice before the task runs: one entry.
        std::thread::scope(|s| {
            s.spawn(|| {
                releaser.covered(&answers, 2);
                releaser.covered(&answers, 5);
            });
        });
        assert!(first.await.is_ok(), "the covered answer leaves");
        assert!(second.try_recv().is_err(), "the one past the covered end stays");
        assert_eq!(answers.len(), 1);
    }

    #[test]
    fn after_a_failed_fsync_nothing_leaves() {
        let answers = HeldAnswers::default();
        let mut waiting = held(&answers, 3);
        answers.release(2);
        answers.stop();
        answers.release(100);
        assert!(waiting.try_recv().is_err());
        let mut later = held(&answers, 1);
        assert!(later.try_recv().is_err());
        assert_eq!(answers.len(), 2);
    }
}
