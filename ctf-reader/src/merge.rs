//! Merging streams by time: a min-heap over per-stream cursors keyed by the next message's
//! nanoseconds from origin (discarded-events/packets notices by their beginning, as
//! babeltrace2's muxer orders them), ties broken by stream file order. Each stream is
//! decoded either on the calling thread or on a thread of its own that hands batches over
//! bounded channels and gets the emptied ones back, so memory stays a few batches per
//! stream whatever the trace size.
//!
//! A caller that turns every message into a value of its own can have that done on the
//! decoding threads too ([`CtfTrace::messages_prepared`], [`Prepare`]): the merging thread
//! then gets each message with its value, and the work is spread over the CPUs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use crate::compiled::Compiled;
use crate::error::Error;
use crate::reader::{message, message_in, Message, BATCH};
use crate::stream::{Batch, RawMsg, StreamDecoder};
use crate::trace::{CtfTrace, StreamFile};

/// What a decoding thread does with each message of its stream before the merge
/// ([`CtfTrace::messages_prepared`]): called once per stream, on the stream's thread, it
/// returns the function that turns each of the stream's messages, in file order, into a
/// value handed to the merging thread with the message. The function may keep state
/// across the messages of its stream (a cache per event class).
///
/// - The values of a batch are held with it: up to three batches a stream (two in flight,
///   one being merged; the decoder bounds a batch's messages and their values' bytes, not
///   what the function makes of them).
/// - A decoding thread may run the function over one more batch after the [`Merged`] is
///   dropped; the function must not wait for anything the iterating thread holds.
/// - A panic in it (or in the decoder) is raised again on the iterating thread.
pub type Prepare<T> = Arc<dyn Fn() -> Box<dyn FnMut(&Message<'_>) -> T + Send> + Send + Sync>;

/// A stream's preparing function on its thread.
type PrepareFn<T> = Box<dyn FnMut(&Message<'_>) -> T + Send>;

/// Batches in flight per stream in parallel mode.
const CHANNEL_DEPTH: usize = 2;
/// Messages per batch of all the streams of a trace together, in parallel mode: a
/// stream's batches hold at most this divided by the number of streams (but never fewer
/// than [`BATCH`], so a trace of more than 64 streams holds 1 Ki-message batches, as
/// before this budget), at most [`MAX_BATCH`], and at most a few MiB of values whatever
/// the count (the decoder's own bound).
const BATCH_BUDGET: usize = 64 << 10;
/// The largest batch (larger ones gained nothing in the measurement below).
const MAX_BATCH: usize = 16 << 10;
/// Bytes of stream file per message of batch: a stream's batches hold its file size
/// divided by this, between [`BATCH`] and the smaller of its share of [`BATCH_BUDGET`]
/// and [`MAX_BATCH`].
///
/// A batch handed from a decoding thread to the merging one costs a wake-up or two (tens
/// of microseconds on a busy two-CPU guest): a 50 M-event trace of two 380 MB streams took
/// 7.6 s of CPU with batches of 16 Ki messages against 9.0 s with 1 Ki, and 4.2 s elapsed
/// against 5.9 s. Small streams keep small batches: the field traces of a few MB each
/// (a few hundred kB a stream) were 10–20 % slower with large ones (each fresh batch's
/// pages are faulted in, and the merge waits longer for every stream's first batch).
const BYTES_PER_BATCH_MESSAGE: u64 = 4096;

/// Messages per batch of a stream of `bytes` among `streams` streams.
fn batch_size(bytes: u64, streams: usize) -> usize {
    let cap = (BATCH_BUDGET / streams.max(1)).clamp(BATCH, MAX_BATCH);
    usize::try_from(bytes / BYTES_PER_BATCH_MESSAGE).unwrap_or(usize::MAX).clamp(BATCH, cap)
}

enum Feed<T> {
    Local(Box<StreamDecoder>),
    /// A decoding thread's batches (with their prepared values), and the thread: a panic
    /// there is raised again on the merging thread when its channel closes, rather than
    /// passing for the end of the stream.
    Remote {
        rx: Receiver<Result<(Batch, Vec<T>), Error>>,
        back: SyncSender<Batch>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

struct Source<T> {
    batch: Batch,
    /// The prepared values of the batch's messages from the cursor on (none unprepared).
    prepared: std::vec::IntoIter<T>,
    cursor: usize,
    feed: Feed<T>,
    pending: Option<Error>,
    ended: bool,
}

/// The prepared values of a batch's messages, in order.
fn prepare_all<T>(f: &mut PrepareFn<T>, cx: &Compiled, stream: &StreamFile, b: &Batch) -> Vec<T> {
    (0..b.msgs.len()).map(|i| f(&message_in(cx, stream, b, i))).collect()
}

impl<T: Send + 'static> Source<T> {
    /// Makes the cursor point at a message; `false` when the stream has no more (check
    /// `pending` for the error that ended it).
    fn ready(&mut self) -> bool {
        while self.cursor >= self.batch.msgs.len() {
            if self.ended || self.pending.is_some() {
                return false;
            }
            self.cursor = 0;
            match &mut self.feed {
                Feed::Local(dec) => {
                    self.batch.clear();
                    match dec.fill(&mut self.batch, BATCH) {
                        Ok(more) => self.ended = !more,
                        Err(e) => self.pending = Some(e),
                    }
                }
                Feed::Remote { rx, back, thread } => {
                    let old = std::mem::take(&mut self.batch);
                    let _ = back.try_send(old);
                    match rx.recv() {
                        Ok(Ok((b, p))) => {
                            self.batch = b;
                            self.prepared = p.into_iter();
                        }
                        Ok(Err(e)) => self.pending = Some(e),
                        Err(_) => {
                            if let Some(Err(panic)) = thread.take().map(std::thread::JoinHandle::join) {
                                std::panic::resume_unwind(panic);
                            }
                            self.ended = true;
                        }
                    }
                }
            }
        }
        true
    }
}

fn spawn<T: Send + 'static>(mut dec: StreamDecoder, batch: usize, prep: Option<(Prepare<T>, Arc<Compiled>, StreamFile)>) -> Feed<T> {
    let (tx, rx) = sync_channel::<Result<(Batch, Vec<T>), Error>>(CHANNEL_DEPTH);
    let (back, back_rx) = sync_channel::<Batch>(CHANNEL_DEPTH + 1);
    let (path, failed) = (dec.path(), tx.clone());
    let thread = std::thread::Builder::new().spawn(move || {
        let mut prep = prep.map(|(make, cx, stream)| (make(), cx, stream));
        let mut prepared = |b: &Batch| match &mut prep {
            Some((f, cx, stream)) => prepare_all(f, cx, stream, b),
            None => Vec::new(),
        };
        loop {
            let mut b = back_rx.try_recv().unwrap_or_default();
            b.clear();
            match dec.fill(&mut b, batch) {
                Ok(more) => {
                    if !b.msgs.is_empty() {
                        let p = prepared(&b);
                        if tx.send(Ok((b, p))).is_err() {
                            return;
                        }
                    }
                    if !more {
                        return;
                    }
                }
                Err(e) => {
                    if !b.msgs.is_empty() {
                        let p = prepared(&b);
                        let _ = tx.send(Ok((b, p)));
                    }
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    // No thread (a limit on the user's processes, or on memory, reached: one thread a
    // stream): the stream is an error, the others are read.
    let thread = thread
        .map_err(|e| {
            let source = std::io::Error::new(e.kind(), format!("cannot start a thread to decode it: {e}"));
            let _ = failed.send(Err(Error::Io { path: path.to_path_buf(), source }));
        })
        .ok();
    Feed::Remote { rx, back, thread }
}

/// The messages of all streams of a trace, merged by time; with `T`, each with the value
/// its decoding thread prepared ([`CtfTrace::messages_prepared`]).
pub struct Merged<'a, T = ()> {
    trace: &'a CtfTrace,
    sources: Vec<Source<T>>,
    heap: BinaryHeap<Reverse<(i64, usize)>>,
    last: Option<usize>,
    started: bool,
    errors: VecDeque<Error>,
}

impl<'a, T: Send + 'static> Merged<'a, T> {
    /// The merge of `trace`'s streams, decoded on the calling thread (`how` `None`) or each
    /// on a thread of its own (`Some`), with `prep`'s values when given.
    pub(crate) fn new(trace: &'a CtfTrace, how: Option<Option<Prepare<T>>>) -> Self {
        let n = trace.streams().len();
        let sources = (0..n)
            .map(|i| {
                let dec = trace.decoder(i);
                let feed = match &how {
                    Some(prep) => {
                        let prep = prep.clone().map(|p| (p, trace.cx.clone(), trace.streams()[i].clone()));
                        spawn(dec, batch_size(trace.streams()[i].size, n), prep)
                    }
                    None => Feed::Local(Box::new(dec)),
                };
                Source { batch: Batch::default(), prepared: Vec::new().into_iter(), cursor: 0, feed, pending: None, ended: false }
            })
            .collect();
        Merged { trace, sources, heap: BinaryHeap::new(), last: None, started: false, errors: VecDeque::new() }
    }

    fn key(&self, i: usize) -> i64 {
        let s = &self.sources[i];
        let b = &s.batch;
        let packet = match b.msgs[s.cursor] {
            RawMsg::Event(e) => return e.ns.unwrap_or(i64::MIN),
            RawMsg::DiscardedEvents { packet, .. } | RawMsg::DiscardedPackets { packet, .. } => packet,
        };
        let sc = b.packets[packet as usize].stream_class;
        b.key(s.cursor, self.trace.cx.streams[sc].clock.as_ref())
    }

    fn enqueue(&mut self, i: usize) {
        if self.sources[i].ready() {
            let k = self.key(i);
            self.heap.push(Reverse((k, i)));
        } else if let Some(e) = self.sources[i].pending.take() {
            self.errors.push_back(e);
        }
    }

    /// The next message by time; an error that stopped one stream is returned once, and
    /// the other streams go on. (Its prepared value, if any, is dropped: see
    /// [`Merged::next_prepared`].)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Message<'_>, Error>> {
        match self.advance()? {
            Ok(i) => {
                let s = &mut self.sources[i];
                let _ = s.prepared.next();
                Some(Ok(message(self.trace, &self.trace.streams()[i], &s.batch, s.cursor)))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// [`Merged::next`] with the value the message's decoding thread prepared; `None` in
    /// place of the value only where no function prepares them
    /// ([`CtfTrace::messages`], [`CtfTrace::messages_parallel`]).
    pub fn next_prepared(&mut self) -> Option<Result<(Message<'_>, Option<T>), Error>> {
        match self.advance()? {
            Ok(i) => {
                let s = &mut self.sources[i];
                let v = s.prepared.next();
                Some(Ok((message(self.trace, &self.trace.streams()[i], &s.batch, s.cursor), v)))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Moves to the next message by time: its stream's index, or an error that stopped a
    /// stream.
    fn advance(&mut self) -> Option<Result<usize, Error>> {
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                self.enqueue(i);
            }
        }
        // The source of the last message stays on top of the heap while its message is
        // out: its next key replaces its entry in one sift (a pop and a push cost two),
        // and a stream whose next message still comes first is not moved at all.
        if let Some(i) = self.last.take() {
            self.sources[i].cursor += 1;
            if self.sources[i].ready() {
                let k = self.key(i);
                let mut top = self.heap.peek_mut().expect("the last message's source is on the heap");
                debug_assert_eq!(top.0 .1, i);
                top.0 = (k, i);
            } else {
                self.heap.pop();
                if let Some(e) = self.sources[i].pending.take() {
                    self.errors.push_back(e);
                }
            }
        }
        if let Some(e) = self.errors.pop_front() {
            return Some(Err(e));
        }
        let &Reverse((_, i)) = self.heap.peek()?;
        self.last = Some(i);
        Some(Ok(i))
    }
}

impl CtfTrace {
    /// Iterates the messages of every stream merged by time (ties: stream file order),
    /// decoding on the calling thread.
    pub fn messages(&self) -> Merged<'_> {
        Merged::new(self, None)
    }

    /// Like [`CtfTrace::messages`], with each stream decoded on a thread of its own and
    /// handed over in batches through bounded channels (memory: a few batches per stream).
    pub fn messages_parallel(&self) -> Merged<'_> {
        Merged::new(self, Some(None))
    }

    /// Like [`CtfTrace::messages_parallel`], each message with the value `prepare` made of
    /// it on its stream's decoding thread ([`Merged::next_prepared`]): work that needs no
    /// other stream is spread over the CPUs instead of done by the merging thread.
    pub fn messages_prepared<T: Send + 'static>(&self, prepare: Prepare<T>) -> Merged<'_, T> {
        Merged::new(self, Some(Some(prepare)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_grow_with_the_stream_file_within_the_budget() {
        // A small stream keeps the smallest batch.
        assert_eq!(batch_size(300 << 10, 9), BATCH);
        // 8 MiB of file: 2 Ki messages.
        assert_eq!(batch_size(8 << 20, 2), 2 << 10);
        // Two 400 MB streams: the largest batch.
        assert_eq!(batch_size(400 << 20, 2), MAX_BATCH);
        // Eight: the budget's share.
        assert_eq!(batch_size(400 << 20, 8), BATCH_BUDGET / 8);
        // Many streams, or none: never under the smallest batch.
        assert_eq!(batch_size(400 << 20, 1000), BATCH);
        assert_eq!(batch_size(u64::MAX, 0), MAX_BATCH);
    }
}
