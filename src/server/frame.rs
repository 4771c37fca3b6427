//! Kafka framing: a 4-byte big-endian length, then the request.

use bytes::{Buf, Bytes, BytesMut};
use tokio::time::Instant;
use tokio_util::codec::Decoder;

/// Why a connection's byte stream stopped being a sequence of frames.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame length {0} is negative")]
    Negative(i32),
    #[error("frame length {len} exceeds server.max_request_bytes ({max})")]
    TooLarge { len: i32, max: u32 },
    #[error("frame length {0} is too short for a request header")]
    TooShort(i32),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Splits a byte stream into request frames, rejecting lengths that are
/// negative, above the limit, or shorter than a request header's fixed part.
///
/// It also notes when bytes last arrived and since when a frame has been
/// incomplete, for the connection's idle and partial-request timeouts
/// (`FramedRead` calls `decode` after every read that returned data).
#[derive(Debug, Clone)]
pub struct FrameCodec {
    max: u32,
    /// Shortest frame accepted: a request header, except for the bare
    /// SASL tokens after a v0 SaslHandshake, which may be empty.
    min: i32,
    /// Large frames this codec may hand over before they are complete.
    stream: Option<StreamLarge>,
    /// Whether `stream` applies now: not before SASL authentication, when
    /// every frame must be seen whole (and refused) by the connection.
    streaming: bool,
    /// The frame being buffered was refused for streaming: buffer it whole.
    buffering_whole: bool,
    /// Bytes buffered when the previous `decode` returned: more now means
    /// bytes arrived.
    seen: usize,
    activity: Activity,
}

/// What the codec saw of a connection's byte stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Activity {
    /// When bytes last arrived.
    pub last_read: Option<Instant>,
    /// Since when the buffer has held the start of a frame that is not
    /// complete yet; `None` between frames.
    pub partial_since: Option<Instant>,
}

/// A request frame, whole or (when streaming is on) only its first bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Whole(Bytes),
    /// The first bytes of a large frame of `len` bytes; the rest are the
    /// next bytes on the connection, and the codec's caller must consume
    /// them from the socket before reading the next frame.
    Head {
        len: usize,
        head: Bytes,
    },
}

/// Which large frames are handed over early (sidecar mode: forwarded
/// requests, whose bodies are relayed to the upstream without being read
/// into memory).
#[derive(Debug, Clone, Copy)]
pub struct StreamLarge {
    /// Frames shorter than this are always buffered whole.
    pub min_len: usize,
    /// Decides from a frame's first [`HEAD_PROBE_BYTES`] (fewer if the frame
    /// is shorter) whether it may be streamed.
    pub accept: fn(&Bytes) -> bool,
}

/// Bytes of a large frame given to [`StreamLarge::accept`].
pub const HEAD_PROBE_BYTES: usize = 1024;

/// Room kept free in a partial frame's buffer for the next read (when the
/// frame needs that much more); `BytesMut` doubles when it must grow.
const MIN_GROWTH: usize = 64 * 1024;

/// api key (2) + api version (2) + correlation id (4) + client id length (2).
pub const MIN_REQUEST_LEN: i32 = 10;

impl FrameCodec {
    pub fn new(max: u32) -> Self {
        FrameCodec {
            max,
            min: MIN_REQUEST_LEN,
            stream: None,
            streaming: true,
            buffering_whole: false,
            seen: 0,
            activity: Activity::default(),
        }
    }

    /// A codec that hands over the head of large frames that `stream`
    /// accepts instead of buffering them whole.
    pub fn streaming(max: u32, stream: StreamLarge) -> Self {
        FrameCodec { stream: Some(stream), ..Self::new(max) }
    }

    /// Turns the early hand-over of large frames on or off (off until a
    /// SASL connection is authenticated).
    pub fn set_streaming(&mut self, on: bool) {
        self.streaming = on;
    }

    /// Changes the largest frame accepted from now on (smaller before SASL
    /// authentication completes).
    pub fn set_max(&mut self, max: u32) {
        self.max = max;
    }

    /// Accepts frames shorter than a request header (down to empty) while
    /// `raw_tokens` (bare SASL tokens after a v0 SaslHandshake).
    pub fn set_raw_tokens(&mut self, raw_tokens: bool) {
        self.min = if raw_tokens { 0 } else { MIN_REQUEST_LEN };
    }

    pub fn activity(&self) -> Activity {
        self.activity
    }

    /// Restarts the clock of an incomplete frame: time spent not reading the
    /// connection (too many requests in flight) must not count against the
    /// client.
    pub fn restart_partial_clock(&mut self, now: Instant) {
        if self.activity.partial_since.is_some() {
            self.activity.partial_since = Some(now);
        }
    }

    fn split(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(len) = crate::be_int::i32_at(src, 0) else {
            return Ok(None);
        };
        if len < 0 {
            return Err(FrameError::Negative(len));
        }
        if len as u32 > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        if len < self.min {
            return Err(FrameError::TooShort(len));
        }
        let total = 4 + len as usize;
        if src.len() < total {
            let early = self.streaming && !self.buffering_whole;
            if let Some(s) = self.stream.filter(|s| early && len as usize >= s.min_len) {
                let probe = 4 + HEAD_PROBE_BYTES.min(len as usize);
                if src.len() < probe {
                    src.reserve(probe - src.len());
                    return Ok(None);
                }
                if (s.accept)(&Bytes::copy_from_slice(src.get(4..probe).unwrap_or_default())) {
                    src.advance(4);
                    return Ok(Some(Frame::Head { len: len as usize, head: src.split().freeze() }));
                }
                self.buffering_whole = true;
            }
            // Room for a read's worth more of this frame; `BytesMut` grows
            // by doubling, so the buffer follows what the client actually
            // sends, not what its length prefix claims. (A 4-byte prefix
            // once reserved up to `max`, 100 MiB, at once.)
            src.reserve((total - src.len()).min(MIN_GROWTH));
            return Ok(None);
        }
        self.buffering_whole = false;
        src.advance(4);
        Ok(Some(Frame::Whole(src.split_to(len as usize).freeze())))
    }
}

impl Decoder for FrameCodec {
    type Item = Frame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let arrived = (src.len() > self.seen).then(Instant::now);
        if arrived.is_some() {
            self.activity.last_read = arrived;
        }
        let out = self.split(src);
        match out {
            Ok(None) if !src.is_empty() => {
                if self.activity.partial_since.is_none() {
                    self.activity.partial_since = Some(arrived.unwrap_or_else(Instant::now));
                }
            }
            _ => self.activity.partial_since = None,
        }
        self.seen = src.len();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frames_and_rejects_bad_lengths() {
        let mut c = FrameCodec::new(100);
        let mut b = BytesMut::from(&[0, 0, 0, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 0][..]);
        assert!(matches!(c.decode(&mut b).unwrap(), Some(Frame::Whole(f)) if f.len() == 10));
        assert!(c.decode(&mut b).unwrap().is_none());
        assert!(matches!(c.decode(&mut BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..])), Err(FrameError::Negative(-1))));
        assert!(matches!(c.decode(&mut BytesMut::from(&[0, 0, 1, 0][..])), Err(FrameError::TooLarge { .. })));
        assert!(matches!(c.decode(&mut BytesMut::from(&[0, 0, 0, 3][..])), Err(FrameError::TooShort(3))));
        assert!(matches!(c.decode(&mut BytesMut::from(&[0, 0, 0, 0][..])), Err(FrameError::TooShort(0))));
    }

    #[test]
    fn an_incomplete_frame_is_noted_until_it_completes() {
        let mut c = FrameCodec::new(100);
        assert_eq!(c.activity(), Activity::default());
        let mut b = BytesMut::from(&[0u8][..]);
        assert!(c.decode(&mut b).unwrap().is_none());
        let first = c.activity();
        assert!(first.partial_since.is_some() && first.last_read.is_some());
        // More bytes of the same frame: still the same incomplete frame.
        b.extend_from_slice(&[0, 0, 10, 1, 2]);
        assert!(c.decode(&mut b).unwrap().is_none());
        assert_eq!(c.activity().partial_since, first.partial_since);
        // The rest, and the first byte of the next frame.
        b.extend_from_slice(&[3, 4, 5, 6, 7, 8, 9, 10, 0]);
        assert!(c.decode(&mut b).unwrap().is_some());
        assert_eq!(c.activity().partial_since, None, "between frames right after a frame is returned");
        assert!(c.decode(&mut b).unwrap().is_none());
        assert!(c.activity().partial_since.is_some(), "the next frame has started");
        b.clear();
        assert!(c.decode(&mut b).unwrap().is_none());
        assert_eq!(c.activity().partial_since, None);
    }

    #[test]
    fn a_length_prefix_alone_does_not_reserve_the_frame_it_announces() {
        let mut c = FrameCodec::new(100 << 20);
        let mut b = BytesMut::from(&(100i32 << 20).to_be_bytes()[..]);
        assert!(c.decode(&mut b).unwrap().is_none());
        assert!(b.capacity() <= 2 * MIN_GROWTH, "reserved {} bytes for 4 received", b.capacity());
    }

    #[test]
    fn a_large_frame_arriving_in_pieces_is_buffered_in_at_most_twice_its_received_size() {
        let whole = frame_of(3 << 20, 7);
        let mut c = FrameCodec::new(100 << 20);
        let mut b = BytesMut::new();
        let mut sent = &whole[..];
        loop {
            // As `FramedRead` reads: into the spare capacity, after
            // reserving one byte if there is none.
            b.reserve(1);
            let n = (b.capacity() - b.len()).min(sent.len()).min(10_000);
            b.extend_from_slice(&sent[..n]);
            sent = &sent[n..];
            if let Some(f) = c.decode(&mut b).unwrap() {
                assert!(matches!(f, Frame::Whole(f) if f.len() == 3 << 20 && f.iter().all(|&x| x == 7)));
                return;
            }
            assert!(b.capacity() <= 2 * b.len() + 2 * MIN_GROWTH, "{} for {}", b.capacity(), b.len());
            assert!(!sent.is_empty(), "the frame never completed");
        }
    }

    fn frame_of(len: usize, fill: u8) -> BytesMut {
        let mut b = BytesMut::new();
        b.extend_from_slice(&(len as i32).to_be_bytes());
        b.extend_from_slice(&vec![fill; len]);
        b
    }

    #[test]
    fn a_large_accepted_frame_is_handed_over_by_its_head_and_the_rest_left_on_the_socket() {
        let stream = StreamLarge { min_len: 2000, accept: |head| head[0] == 1 };
        let mut c = FrameCodec::streaming(1 << 20, stream);
        let mut b = frame_of(5000, 1);
        b.truncate(4 + 1500);
        match c.decode(&mut b).unwrap() {
            Some(Frame::Head { len, head }) => assert_eq!((len, head.len()), (5000, 1500)),
            other => panic!("{other:?}"),
        }
        assert!(b.is_empty());
    }

    #[test]
    fn a_large_refused_or_small_frame_is_buffered_whole() {
        let stream = StreamLarge { min_len: 2000, accept: |head| head[0] == 1 };
        let mut c = FrameCodec::streaming(1 << 20, stream);
        let whole = frame_of(5000, 2);
        let mut b = BytesMut::from(&whole[..1500]);
        assert_eq!(c.decode(&mut b).unwrap(), None, "refused: waits for the whole frame");
        b.extend_from_slice(&whole[1500..]);
        assert!(matches!(c.decode(&mut b).unwrap(), Some(Frame::Whole(f)) if f.len() == 5000));
        let mut small = frame_of(100, 1);
        assert!(matches!(c.decode(&mut small).unwrap(), Some(Frame::Whole(f)) if f.len() == 100));
        // Fewer bytes than the probe: wait, even for an accepted frame.
        let mut b = frame_of(5000, 1);
        b.truncate(500);
        assert_eq!(c.decode(&mut b).unwrap(), None);
    }
}
