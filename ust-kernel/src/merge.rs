//! The recording thread of [`crate::view_recorder::ViewRecorder`]: it reads every tracefs
//! buffer (each CPU of each instance), decodes the pages, merges the records by time (a
//! heap), applies the [`ViewFilter`] in that order and writes what it keeps into the CTF
//! stream of the buffer's channel and CPU, accounting every loss in that stream's
//! `events_discarded`.
//!
//! **Order.** Records are applied in global time order, so that a fork or exec changes the
//! view at its own timestamp on every CPU. The watermark up to which records are applied
//! comes from each buffer's own evidence, not from a guess of how late pages may be: per
//! buffer, "complete up to" is the newest record read from it, or, when a read came back
//! empty (`EAGAIN`, or 0 bytes) and the buffer's `per_cpu/cpuN/stats` counts no unread
//! `entries`, the time just before that read less [`COMMIT_MARGIN`]; the watermark is the
//! least of these. An empty read does not prove a buffer empty: the kernel may hold back a
//! partly filled page (seen on a CPU gone idle: `EAGAIN` with `entries` > 0, the page
//! handed out only when that CPU writes again), so `stats` is asked each round, and such a
//! buffer holds the watermark back until its events come (at most [`MAX_HOLD`]). A record
//! that still arrives after a newer one was applied (a writer held longer than
//! [`COMMIT_MARGIN`], a buffer held or failing for [`MAX_HOLD`]) is late: a user's view
//! ([`ViewFilter::new`]) drops it, since the filter's state (forks, execs, exits) may have
//! moved past it, and counts it as discarded; root's view ([`ViewFilter::everything`]),
//! whose filter has no state, writes it (its own stream is still in order).
//!
//! **Loss.** The instances run in overwrite mode (tracefs' default): when a CPU's buffer
//! is full the oldest unread page is overwritten, and the next page the reader gets has
//! `RB_MISSED_EVENTS` in its commit field, with the count stored after its data when
//! there was room (`RB_MISSED_STORED`; `kernel/trace/ring_buffer.c`,
//! `ring_buffer_read_page`). The lost events lie between the last record read from that
//! buffer and the page's timestamp: a loss marker at the page's time goes through the
//! heap with the records, and its stream closes its packet there and writes an empty one
//! with the new `events_discarded` ([`CpuStream::note_discarded`]). A page flagged without
//! a stored count (no room left after its data) gets the buffer's `overrun` (`stats`, read
//! right after the page) less what was counted so far, at least 1: the events overwritten
//! in the microseconds between the page's hand-out and that read are counted there and
//! again with the next flagged page (an overcount, never an undercount). At the end, what
//! `stats` says was overwritten beyond what the pages told, lost by the writer (`commit
//! overrun`, `dropped events`), or never handed out, is counted at the stream's end.
//!
//! **Speed.** The thread asks for the highest CFS priority (nice -20: root's daemon and
//! root's `ust trace` have `CAP_SYS_NICE`): a reader starved by busy tasks is what loses
//! events. [`COMMIT_MARGIN`], [`MAX_HOLD`], [`FLUSH_EVERY`] and [`STOP_ROUNDS`] bound the
//! waits.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::arg_capture::ArgCapture;
use crate::ctf::{CpuStream, EventTable};
use crate::filter::{Verdict, ViewFilter};
use crate::format;

/// How long after its timestamp a record may still be committed to its ring buffer: the
/// writer takes the time when it reserves the record and commits it once its fields are
/// filled, with preemption off (nested interrupts' records commit in between). A read of a
/// CPU's buffer that comes back empty proves that CPU complete up to the moment before the
/// read, less this.
pub const COMMIT_MARGIN: Duration = Duration::from_millis(10);
/// Records are held at most this long for a buffer whose reads fail (an error other than
/// `EAGAIN`) or whose kernel holds unread events back: past it, that buffer no longer
/// holds the others back. A buffer that is merely slow to read holds the watermark back as
/// long as it takes.
pub const MAX_HOLD: Duration = Duration::from_secs(1);
/// Longest time a record waits in memory before its packet is written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Rounds (of [`crate::POLL`]) the last reading waits for events the kernel still holds.
pub const STOP_ROUNDS: usize = 50;
/// Deepest interrupt nesting kept per CPU (entries whose exit was lost are forgotten).
const MAX_NESTING: usize = 8;
/// Pages read from one buffer per round before the others get their turn.
const PAGES_PER_ROUND: usize = 256;

/// The counters of a CPU buffer's `per_cpu/cpuN/stats` (0 where a line is missing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferStats {
    /// `entries:` events in the buffer not read yet.
    pub entries: u64,
    /// `overrun:` events overwritten before they were read (overwrite mode).
    pub overrun: u64,
    /// `commit overrun:` events the writer could not store (it wrapped onto uncommitted data).
    pub commit_overrun: u64,
    /// `bytes:` unread bytes.
    pub bytes: u64,
    /// `dropped events:` events refused because the buffer was full (overwrite off).
    pub dropped: u64,
}

impl BufferStats {
    /// Parses the text of a `stats` file.
    pub fn parse(text: &str) -> BufferStats {
        let mut s = BufferStats::default();
        for l in text.lines() {
            let Some((k, v)) = l.split_once(':') else { continue };
            let Ok(v) = v.trim().parse::<u64>() else { continue };
            match k.trim() {
                "entries" => s.entries = v,
                "overrun" => s.overrun = v,
                "commit overrun" => s.commit_overrun = v,
                "bytes" => s.bytes = v,
                "dropped events" => s.dropped = v,
                _ => {}
            }
        }
        s
    }

    fn read(f: &mut std::fs::File) -> Option<BufferStats> {
        use std::io::Seek;
        let mut text = String::new();
        f.seek(std::io::SeekFrom::Start(0)).ok()?;
        f.read_to_string(&mut text).ok()?;
        Some(BufferStats::parse(&text))
    }
}

/// One CPU buffer of one instance, as the thread reads it.
#[derive(Debug)]
pub(crate) struct Buffer {
    /// Index of the stream its records go to.
    pub stream: usize,
    /// Its CPU.
    pub cpu: u32,
    /// `main` or `tree` (for the logs).
    pub instance: &'static str,
    /// `per_cpu/cpuN/trace_pipe_raw`, non-blocking.
    pub pipe: std::fs::File,
    /// `per_cpu/cpuN/stats`.
    pub stats_file: std::fs::File,
    /// Every record up to this time has been read (see the module docs).
    complete: u64,
    held_since: Option<u64>,
    /// Lost events counted in its stream so far.
    accounted: u64,
    /// `stats` at the end of the previous round.
    last: BufferStats,
}

impl Buffer {
    /// A buffer read into stream `stream`.
    pub fn new(stream: usize, cpu: u32, instance: &'static str, pipe: std::fs::File, stats_file: std::fs::File) -> Buffer {
        Buffer { stream, cpu, instance, pipe, stats_file, complete: 0, held_since: None, accounted: 0, last: BufferStats::default() }
    }
}

/// What went through the heap: a record (from `common_type` on), or a count of events
/// lost before its time.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Record(Vec<u8>),
    Lost(u64),
}

/// An item read but not applied yet, ordered by (time, arrival).
#[derive(Debug, PartialEq, Eq)]
struct Pending {
    ts: u64,
    seq: u64,
    stream: usize,
    item: Item,
}

impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.ts, self.seq).cmp(&(o.ts, o.seq))
    }
}

impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// What the thread did, for [`crate::KernelSummary`].
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Records decoded from the pages.
    pub decoded: u64,
    /// Records applied after newer ones.
    pub late: u64,
    /// The thread's CPU time, ns.
    pub cpu_ns: u64,
}

/// The merge of one recording (see the module docs).
pub(crate) struct Merge {
    pub table: Arc<EventTable>,
    pub filter: ViewFilter,
    pub streams: Vec<CpuStream>,
    pub buffers: Vec<Buffer>,
    pub layout: crate::ftrace::PageLayout,
    pub page_size: usize,
    heap: BinaryHeap<Reverse<Pending>>,
    batch: Vec<Pending>,
    seq: u64,
    last_applied: u64,
    out: Outcome,
    /// Interrupt contexts held per stream: (ts, record, written).
    ctx: Vec<Vec<(u64, Vec<u8>, bool)>>,
    err: Option<String>,
    debug: bool,
    root_pid: i32,
    switch_id: Option<u64>,
    /// The system-call arguments copied by BPF, joined to the `sys_enter` records written.
    args: ArgCapture,
}

/// Gives the calling thread nice -20 (the best CFS priority), if it may.
fn raise_priority() {
    // SAFETY: gettid and setpriority have no memory arguments; setpriority on a tid changes
    // that thread only.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, -20);
    }
}

fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Merge {
    /// A merge of `buffers` into `streams` through `filter`.
    pub fn new(
        table: Arc<EventTable>,
        filter: ViewFilter,
        streams: Vec<CpuStream>,
        buffers: Vec<Buffer>,
        layout: crate::ftrace::PageLayout,
        page_size: usize,
        args: ArgCapture,
    ) -> Merge {
        let root_pid = filter.visible().next().unwrap_or(0);
        let switch_id = table.events.iter().find(|e| e.name == "sched_switch").and_then(|e| e.format.as_ref()).map(|f| u64::from(f.id));
        let n = streams.len();
        Merge {
            table,
            filter,
            streams,
            buffers,
            layout,
            page_size,
            heap: BinaryHeap::new(),
            batch: Vec::new(),
            seq: 0,
            last_applied: 0,
            out: Outcome::default(),
            ctx: vec![Vec::new(); n],
            err: None,
            debug: crate::kview_debug::debug_enabled(),
            root_pid,
            switch_id,
            args,
        }
    }

    /// Reads and writes until `stop` is set and everything is in; returns the streams (for
    /// their counters), what it did, the argument capture (to finish) and the first write
    /// error.
    pub fn run(mut self, stop: &AtomicBool) -> (Vec<CpuStream>, Outcome, ArgCapture, Option<String>) {
        raise_priority();
        let mut page = vec![0u8; self.page_size.max(64 * 1024)];
        let mut last_flush = Instant::now();
        // Rounds since recording was turned off: events still held then are waited for
        // this many rounds, then counted as lost.
        let mut stop_rounds = 0usize;
        let mut stopped_at = 0;
        loop {
            let stopping = stop.load(Ordering::SeqCst);
            if stopping {
                if stop_rounds == 0 {
                    stopped_at = ust_core::clock::monotonic_ns();
                }
                stop_rounds += 1;
            }
            let mut all_read = true;
            for bi in 0..self.buffers.len() {
                all_read &= self.read_buffer(bi, &mut page, stop_rounds);
            }
            // The copies of every sys_enter record read so far are in the BPF ring now.
            self.args.drain();
            self.observe_batch();
            let now = ust_core::clock::monotonic_ns();
            self.filter.recheck(now, ust_core::clock::monotonic_ns);
            let evidence = self.buffers.iter().map(|b| b.complete).min().unwrap_or(0);
            if self.debug {
                let complete: Vec<u64> = self.buffers.iter().map(|b| b.complete).collect();
                eprintln!(
                    "ust-kview debug [{}]: round at {now}: complete up to {complete:?}, watermark {evidence}, {} records waiting",
                    self.root_pid,
                    self.heap.len()
                );
            }
            // Stopping (recording is off): once every buffer is read to its end, all is in.
            let last = stopping && all_read;
            self.apply_up_to(if last { u64::MAX } else { evidence });
            self.args.expire(evidence);
            if last || last_flush.elapsed() >= FLUSH_EVERY {
                for s in self.streams.iter_mut().filter(|s| s.pending()) {
                    if let Err(e) = s.flush() {
                        self.err.get_or_insert(e.to_string());
                    }
                }
                last_flush = Instant::now();
            }
            if last || self.err.is_some() {
                break;
            }
            if !stopping || !all_read {
                std::thread::sleep(crate::POLL);
            }
        }
        self.account_the_rest();
        // Every stream ends when recording stopped, as LTTng's streams do (its last,
        // possibly empty, packet at the stop): the streams' intersection, which tools such
        // as lttng-analyses read, is then the whole recording.
        let end = self.streams.iter().map(CpuStream::last_ts).max().unwrap_or(0).max(stopped_at);
        for s in &mut self.streams {
            if let Err(e) = s.write_empty(end) {
                self.err.get_or_insert(e.to_string());
            }
        }
        self.out.cpu_ns = thread_cpu_ns();
        (self.streams, self.out, self.args, self.err)
    }

    /// Reads up to [`PAGES_PER_ROUND`] pages of buffer `bi` into the batch; returns whether
    /// it was read to its end (empty or failing, and nothing held back unless the last
    /// reading has waited [`STOP_ROUNDS`]).
    fn read_buffer(&mut self, bi: usize, page: &mut [u8], stop_rounds: usize) -> bool {
        let (mut drained, mut ended, mut failed) = (false, false, false);
        let mut before = ust_core::clock::monotonic_ns();
        for _ in 0..PAGES_PER_ROUND {
            let b = &mut self.buffers[bi];
            match b.pipe.read(page) {
                Ok(0) => {
                    // Not necessarily empty (the kernel may hold a page back): `stats` says.
                    (drained, ended) = (true, true);
                    break;
                }
                Ok(n) => {
                    self.decode(bi, &page[..n]);
                    before = ust_core::clock::monotonic_ns();
                }
                Err(e) => {
                    (drained, ended) = (e.kind() == std::io::ErrorKind::WouldBlock, true);
                    failed = e.kind() != std::io::ErrorKind::WouldBlock;
                    break;
                }
            }
        }
        let b = &mut self.buffers[bi];
        let stats = BufferStats::read(&mut b.stats_file).unwrap_or(b.last);
        // Events the kernel still holds (a partly filled page it would not hand out): no
        // evidence beyond the newest record read, until they come.
        let held = drained && stats.entries > 0;
        let max_hold = MAX_HOLD.as_nanos() as u64;
        if held {
            drained = false;
            let since = *b.held_since.get_or_insert(before);
            if before.saturating_sub(since) > max_hold {
                b.complete = b.complete.max(before.saturating_sub(max_hold));
            }
        } else {
            b.held_since = None;
        }
        if drained {
            b.complete = b.complete.max(before.saturating_sub(COMMIT_MARGIN.as_nanos() as u64));
        } else if failed {
            // No evidence from a buffer whose reads fail: its records wait at most MAX_HOLD.
            b.complete = b.complete.max(ust_core::clock::monotonic_ns().saturating_sub(max_hold));
        }
        self.buffers[bi].last = stats;
        ended && (!held || stop_rounds >= STOP_ROUNDS)
    }

    /// Decodes one page of buffer `bi` into the batch, with a loss marker first when the
    /// kernel flagged missed events before it.
    fn decode(&mut self, bi: usize, page: &[u8]) {
        let stream = self.buffers[bi].stream;
        let loss_seq = self.seq;
        self.seq += 1;
        let (debug, switch_id) = (self.debug, self.switch_id);
        let (mut first, mut last, mut switches) = (None, 0u64, String::new());
        let (batch, seq, newest) = (&mut self.batch, &mut self.seq, &mut self.buffers[bi].complete);
        let mut decoded = 0u64;
        let res = crate::ftrace::decode_page(page, &self.layout, |e| {
            if debug {
                first.get_or_insert(e.timestamp);
                last = e.timestamp;
                if switch_id.is_some() && format::read_uint(e.payload, 0, 2) == switch_id {
                    let pid = |o| format::read_uint(e.payload, o, 4).map_or(-1, |v| v as u32 as i32);
                    switches += &format!(" {}:{}->{}", e.timestamp, pid(24), pid(56));
                }
            }
            *newest = (*newest).max(e.timestamp);
            batch.push(Pending { ts: e.timestamp, seq: *seq, stream, item: Item::Record(e.payload.to_vec()) });
            *seq += 1;
            decoded += 1;
        });
        self.out.decoded += decoded;
        let b = &mut self.buffers[bi];
        if self.debug {
            eprintln!("ust-kview debug [{}]: read {} cpu {}: {res:?}, records {first:?}..{last}, switches{switches}", self.root_pid, b.instance, b.cpu);
        }
        match res {
            Ok(info) => {
                if let Some(stored) = info.missed {
                    // Unknown count: what `stats` says was overwritten by now, not counted
                    // yet (see the module docs).
                    let n = if stored > 0 {
                        stored
                    } else {
                        let now = BufferStats::read(&mut b.stats_file).unwrap_or(b.last);
                        now.overrun.saturating_sub(b.accounted).max(1)
                    };
                    b.accounted += n;
                    self.batch.push(Pending { ts: info.timestamp, seq: loss_seq, stream, item: Item::Lost(n) });
                }
            }
            Err(_) => self.streams[stream].stats.bad += 1,
        }
    }

    /// The batch read this round, in time order (a fork before its child's exec, whatever
    /// the CPUs), seen by the filter as soon as read, then held.
    fn observe_batch(&mut self) {
        self.batch.sort_unstable();
        for p in self.batch.drain(..) {
            if let Item::Record(r) = &p.item {
                if let Some(ev) = format::read_uint(r, 0, 2).and_then(|k| self.table.by_ftrace_id(k as u16)) {
                    self.filter.observe(ev, r, p.ts);
                }
            }
            self.heap.push(Reverse(p));
        }
        for (tid, file, why) in self.filter.take_exec_exits() {
            if file.is_empty() {
                eprintln!("ust-kview: task {tid} leaves the view of uid {}: {why}", self.filter.uid());
            } else {
                eprintln!("ust-kview: task {tid} leaves the view of uid {} at its exec of {file}: {why}", self.filter.uid());
            }
        }
    }

    /// Applies every held item up to `watermark`, in time order.
    fn apply_up_to(&mut self, watermark: u64) {
        while self.heap.peek().is_some_and(|Reverse(p)| p.ts <= watermark) {
            let Reverse(p) = self.heap.pop().expect("peeked");
            match p.item {
                Item::Lost(n) => self.discard(p.stream, p.ts, n),
                Item::Record(payload) => self.apply(p.stream, p.ts, payload),
            }
        }
    }

    fn discard(&mut self, stream: usize, ts: u64, n: u64) {
        if let Err(e) = self.streams[stream].note_discarded(ts, n) {
            self.err.get_or_insert(e.to_string());
        }
    }

    fn apply(&mut self, i: usize, ts: u64, mut payload: Vec<u8>) {
        if ts < self.last_applied {
            self.out.late += 1;
            if !self.filter.sees_all() {
                // The filter's state may be past this record's time: not shown, counted.
                self.discard(i, ts, 1);
                return;
            }
        }
        self.last_applied = self.last_applied.max(ts);
        self.filter.advance_to(ts);
        let Some(kind) = format::read_uint(&payload, 0, 2) else { return };
        let table = self.table.clone();
        let Some(ev) = table.by_ftrace_id(kind as u16) else { return };
        let stack = &mut self.ctx[i];
        let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
        match self.filter.apply(ev, &mut payload) {
            Verdict::Drop => {}
            Verdict::Keep => {
                for c in stack.iter_mut().filter(|c| !c.2) {
                    c.2 = true;
                    out.push((c.0, std::mem::take(&mut c.1)));
                }
                out.push((ts, payload));
            }
            Verdict::Enter { interrupts_visible } => {
                if stack.len() >= MAX_NESTING {
                    stack.remove(0);
                }
                if interrupts_visible {
                    out.push((ts, payload));
                    stack.push((ts, Vec::new(), true));
                } else {
                    stack.push((ts, payload, false));
                }
            }
            Verdict::Exit => {
                if stack.pop().is_some_and(|c| c.2) {
                    out.push((ts, payload));
                }
            }
        }
        for (ts, p) in out {
            self.write(i, ts, &p);
        }
    }

    /// Writes one kept record into stream `i`: the one place every record of the trace
    /// passes (a `raw_syscalls:sys_enter` record becomes its `syscall_entry_<name>` event
    /// here, with the arguments the BPF capture copied).
    fn write(&mut self, i: usize, ts: u64, payload: &[u8]) {
        let args = &mut self.args;
        if let Err(e) = self.streams[i].push_record_joined(ts, payload, &mut |ts, tid, nr, a| args.take(ts, tid, nr, a)) {
            self.err.get_or_insert(e.to_string());
        }
    }

    /// At the end: the losses the pages did not tell (overwritten beyond their counts,
    /// refused by the writer, never handed out), counted at each stream's end.
    fn account_the_rest(&mut self) {
        for bi in 0..self.buffers.len() {
            let b = &mut self.buffers[bi];
            let s = BufferStats::read(&mut b.stats_file).unwrap_or(b.last);
            let rest = s.overrun.saturating_sub(b.accounted) + s.commit_overrun + s.dropped + s.entries;
            if rest == 0 {
                continue;
            }
            eprintln!(
                "ust-kview: {rest} events of CPU {} ({}) lost beyond those the pages told ({} overwritten in all, {} counted; {} refused by the writer; {} never handed out)",
                b.cpu,
                b.instance,
                s.overrun,
                b.accounted,
                s.commit_overrun + s.dropped,
                s.entries
            );
            b.accounted += rest;
            let stream = b.stream;
            let end = self.streams[stream].last_ts();
            self.discard(stream, end, rest);
            if let Err(e) = self.streams[stream].flush() {
                self.err.get_or_insert(e.to_string());
            }
        }
        if self.out.late > 0 {
            eprintln!("ust-kview: {} records arrived after newer ones were applied", self.out.late);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_parse() {
        let t = "entries: 12\noverrun: 3\ncommit overrun: 1\nbytes: 4096\noldest event ts:  1.000000\nnow ts:  2.000000\ndropped events: 2\nread events: 9\n";
        assert_eq!(BufferStats::parse(t), BufferStats { entries: 12, overrun: 3, commit_overrun: 1, bytes: 4096, dropped: 2 });
        assert_eq!(BufferStats::parse("garbage\n:\nentries: x\n"), BufferStats::default());
    }

    #[test]
    fn items_order_by_time_then_arrival() {
        let mut h = BinaryHeap::new();
        for (ts, seq) in [(5, 1), (3, 2), (5, 0), (1, 9)] {
            h.push(Reverse(Pending { ts, seq, stream: 0, item: Item::Lost(1) }));
        }
        let order: Vec<(u64, u64)> = std::iter::from_fn(|| h.pop().map(|Reverse(p)| (p.ts, p.seq))).collect();
        assert_eq!(order, [(1, 9), (3, 2), (5, 0), (5, 1)]);
    }
}
