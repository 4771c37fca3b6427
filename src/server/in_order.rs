//! Futures that run concurrently and give their outputs in the order they
//! were pushed: a connection's requests, whose answers must leave in the
//! order the requests arrived.
//!
//! `futures_util`'s `FuturesOrdered` does this by keeping the outputs that
//! finish early in a binary heap, which every answer that overtakes an
//! earlier one (commits to different shards finish in any order) paid with
//! a sift on the way in and on the way out (docs/benchmarks.md, "Answers in
//! order without a heap"). An output here goes straight to its place in a
//! queue of the positions after the next one due: at most one slot per
//! request in flight, which the connection already bounds.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::{FuturesUnordered, Stream, StreamExt};

pin_project_lite::pin_project! {
    /// A future and its position in push order.
    struct Numbered<F> {
        #[pin]
        future: F,
        position: u64,
    }
}

impl<F: Future> Future for Numbered<F> {
    type Output = (u64, F::Output);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let position = *this.position;
        this.future.poll(cx).map(|out| (position, out))
    }
}

/// Futures polled concurrently, yielding their outputs in push order.
pub struct InOrder<F: Future> {
    running: FuturesUnordered<Numbered<F>>,
    /// Outputs of the positions from `next_out` on that finished already
    /// (`None`: still running).
    finished: VecDeque<Option<F::Output>>,
    next_in: u64,
    next_out: u64,
}

impl<F: Future> InOrder<F> {
    pub fn new() -> Self {
        InOrder { running: FuturesUnordered::new(), finished: VecDeque::new(), next_in: 0, next_out: 0 }
    }

    pub fn push_back(&mut self, future: F) {
        self.running.push(Numbered { future, position: self.next_in });
        self.next_in += 1;
    }

    /// Futures pushed whose outputs have not been taken yet.
    pub fn len(&self) -> usize {
        (self.next_in - self.next_out) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.next_in == self.next_out
    }

    /// Takes the next output in order if it has finished.
    fn take_next(&mut self) -> Option<F::Output> {
        match self.finished.front() {
            Some(Some(_)) => {
                self.next_out += 1;
                self.finished.pop_front().flatten()
            }
            _ => None,
        }
    }
}

impl<F: Future> Default for InOrder<F> {
    fn default() -> Self {
        Self::new()
    }
}

impl<F: Future> Unpin for InOrder<F> {}

impl<F: Future> Stream for InOrder<F> {
    type Item = F::Output;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let this = self.get_mut();
        loop {
            if let Some(out) = this.take_next() {
                return Poll::Ready(Some(out));
            }
            let Some((position, out)) = std::task::ready!(this.running.poll_next_unpin(cx)) else {
                return Poll::Ready(None);
            };
            if position == this.next_out {
                // Its slot, if the queue has one, is the placeholder in front.
                this.finished.pop_front();
                this.next_out += 1;
                return Poll::Ready(Some(out));
            }
            // Positions below `next_out` were all taken, so this one is later.
            let slot = (position - this.next_out) as usize;
            if this.finished.len() <= slot {
                this.finished.resize_with(slot + 1, || None);
            }
            if let Some(place) = this.finished.get_mut(slot) {
                *place = Some(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;
    use proptest::prelude::*;
    use tokio::sync::oneshot;

    /// Outputs come in push order whatever order the futures finish in.
    fn finish_in(order: &[usize]) -> Vec<usize> {
        let mut queue = InOrder::new();
        let mut senders = Vec::new();
        for i in 0..order.len() {
            let (tx, rx) = oneshot::channel::<usize>();
            senders.push(Some(tx));
            queue.push_back(rx.map(move |r| (i, r.ok())));
        }
        assert_eq!(queue.len(), order.len());
        let mut out = Vec::new();
        for &i in order {
            if let Some(tx) = senders.get_mut(i).and_then(Option::take) {
                let _ = tx.send(i);
            }
            while let Some(Some((pos, value))) = queue.next().now_or_never() {
                assert_eq!(Some(pos), value);
                out.push(pos);
            }
        }
        assert!(queue.is_empty());
        out
    }

    #[test]
    fn answers_leave_in_push_order_when_later_ones_finish_first() {
        assert_eq!(finish_in(&[2, 0, 1, 4, 3]), vec![0, 1, 2, 3, 4]);
        assert_eq!(finish_in(&[0, 1, 2]), vec![0, 1, 2]);
        assert_eq!(finish_in(&[]), Vec::<usize>::new());
    }

    #[test]
    fn an_empty_queue_ends_its_stream() {
        let mut queue: InOrder<std::future::Ready<u8>> = InOrder::new();
        assert_eq!(queue.next().now_or_never(), Some(None));
        queue.push_back(std::future::ready(7));
        assert_eq!(queue.next().now_or_never(), Some(Some(7)));
        assert!(queue.is_empty());
    }

    proptest! {
        #[test]
        fn any_finishing_order_gives_push_order(order in Just((0..40usize).collect::<Vec<_>>()).prop_shuffle()) {
            prop_assert_eq!(finish_in(&order), (0..40).collect::<Vec<_>>());
        }
    }
}
