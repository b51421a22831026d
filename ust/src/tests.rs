//! In-process tests of the macros and the emit path: channels made here on anonymous
//! memory, events fired through the macros, records read back with the ring buffer's
//! reader and decoded with `ust_core::event_header::decode`.

use std::cell::Cell;
use std::sync::Mutex;

use ringbuffer::{Buffer, BufferConfig, Mode, StreamIdentity, Writer};
use ust_core::clock::Monotonic;
use ust_core::packet::{CtfPacketLayout, HEADER_SIZE};
use ust_core::{event_header, FieldType, IntegerType, Level};

use crate::channel::{self, Channel};
use crate::site::{self, Site};

/// Tests that install channels or set masks run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The only site named `provider:name` (panics if there are none or several).
fn site_named(provider: &str, name: &str) -> &'static Site {
    let mut it = site::all().filter(|s| s.desc().provider == provider && s.desc().name == name);
    let s = it.next().unwrap_or_else(|| panic!("no site {provider}:{name}"));
    assert!(it.next().is_none(), "several sites named {provider}:{name}");
    s
}

/// A channel of one buffer (every CPU maps to it) installed in `slot`; removed on drop.
struct TestChannel {
    slot: u32,
    ch: &'static Channel,
}

impl TestChannel {
    fn new(slot: u32, subbuf_size: u64) -> TestChannel {
        Self::with_contexts(slot, subbuf_size, Vec::new())
    }

    fn with_contexts(slot: u32, subbuf_size: u64, contexts: Vec<ust_core::context::ContextType>) -> TestChannel {
        assert!(channel::install(
            slot,
            Channel::new(vec![test_buffer(subbuf_size)].into_boxed_slice(), "s".into(), "c".into(), contexts, ust_core::clock::TraceClock::Monotonic)
        )
        .is_none());
        TestChannel { slot, ch: channel::get(slot).unwrap() }
    }

    /// Flushes and returns every record as `(id, payload)`, where the payload runs to the
    /// next record (its length is given per id by `len_of`).
    fn records(&self, len_of: impl Fn(u32, &[u8]) -> usize) -> Vec<(u32, Vec<u8>)> {
        buffer_records(&self.ch.buffers[0], len_of)
    }
}

/// A discard-mode buffer of 4 sub-buffers of `subbuf_size` bytes on anonymous memory.
fn test_buffer(subbuf_size: u64) -> Writer {
    let cfg = BufferConfig {
        subbuf_size,
        num_subbuf: 4,
        mode: Mode::Discard,
        header_size: HEADER_SIZE as u32,
        stream: StreamIdentity { uuid: [1; 16], stream_id: 0, cpu: 0, stream_instance_id: 0 },
    };
    let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
    Buffer::create(map.into(), &cfg).unwrap().into_writer()
}

/// Makes a reader on the memory of `w` (as the daemon holds one), flushes it and returns every record of its
/// packets, in order, as `(event id, payload)`: each packet is read past its header
/// (`HEADER_SIZE` bytes, the timestamp it starts at in bytes 32..40) up to its content
/// size; a record is an event header, then a payload of `len_of(id, rest of the packet)`
/// bytes. Asserts that every header decodes and that timestamps never go back within a
/// packet.
fn buffer_records(w: &Writer, len_of: impl Fn(u32, &[u8]) -> usize) -> Vec<(u32, Vec<u8>)> {
    let b = w.share().into_reader();
    b.flush(&CtfPacketLayout, &Monotonic);
    let mut out = Vec::new();
    while let Some(sb) = b.get_subbuf().unwrap() {
        let mut pkt = Vec::new();
        b.copy_subbuf(&sb, &mut pkt).unwrap();
        let content = sb.content_size as usize;
        b.put_subbuf(sb).unwrap();
        let mut off = HEADER_SIZE;
        let mut prev = u64::from_le_bytes(pkt[32..40].try_into().unwrap());
        while off < content {
            let h = event_header::decode(&pkt[off..content], prev).expect("committed header");
            assert!(h.timestamp >= prev, "timestamps in order in a packet");
            prev = h.timestamp;
            off += h.len;
            let n = len_of(h.id, &pkt[off..content]);
            out.push((h.id, pkt[off..off + n].to_vec()));
            off += n;
        }
    }
    out
}

impl Drop for TestChannel {
    fn drop(&mut self) {
        for s in site::all() {
            s.clear_bits(1 << self.slot);
        }
        channel::take(self.slot);
    }
}

fn enable(s: &Site, slots: &[u32]) {
    s.set_mask(slots.iter().fold(0, |m, s| m | 1 << s));
}

#[derive(crate::Enum, Clone, Copy, Debug, PartialEq)]
#[repr(u16)]
enum Color {
    Red = 1,
    Green = 2,
    Blue = 300,
}

#[derive(crate::Enum)]
enum Signed {
    Minus = -5,
    Zero = 0,
}

fn fire_all_types(s: &str, bytes: &[u8], words: &[i32]) {
    crate::tracepoint!(
        unit, all_types, level = Info,
        a: u8 = 0xab, b: u16 = 0x1234, c: u32 = 7, d: u64 = u64::MAX,
        e: i8 = -1, f: i16 = -2, g: i32 = -3, h: i64 = -4,
        i: usize = 5, j: isize = -6, k: f32 = 1.5, l: f64 = f64::NAN,
        m: bool = true, n: char = 'é', o: &str = s, p: &[u8] = bytes, q: &[i32] = words,
        r: [u16; 3] = [1, 2, 3], t: Color = Color::Blue, u: Signed = Signed::Minus,
    );
}

#[test]
fn descriptions_carry_every_field_type() {
    fire_all_types("", &[], &[]);
    let d = site_named("unit", "all_types").desc();
    assert_eq!(d.level, Level::Info);
    assert!(d.location.contains("tests.rs:"), "{}", d.location);
    let names: Vec<&str> = d.fields.iter().map(|f| &*f.name).collect();
    assert_eq!(names, ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "t", "u"]);
    let ty = |n: &str| d.fields.iter().find(|f| f.name == n).unwrap().ty.clone();
    assert_eq!(ty("i"), FieldType::Integer(IntegerType::U64));
    assert_eq!(ty("m"), FieldType::Integer(IntegerType::U8));
    assert_eq!(ty("n"), FieldType::Integer(IntegerType::new(32, false, 16)));
    assert_eq!(ty("o"), FieldType::String);
    assert_eq!(ty("p"), FieldType::Sequence { length: IntegerType::U64, elem: IntegerType::new(8, false, 16), text: false });
    assert_eq!(ty("r"), FieldType::Array { elem: IntegerType::U16, len: 3 });
    match ty("t") {
        FieldType::Enum { container, name, mappings } => {
            assert_eq!(container, IntegerType::U16);
            assert_eq!(name, "Color");
            let m: Vec<(&str, i64)> = mappings.iter().map(|m| (&*m.label, m.value)).collect();
            assert_eq!(m, [("Red", 1), ("Green", 2), ("Blue", 300)]);
        }
        other => panic!("{other:?}"),
    }
    match ty("u") {
        FieldType::Enum { container, .. } => assert_eq!(container, IntegerType::I32),
        other => panic!("{other:?}"),
    }
    d.validate().expect("the daemon accepts it");
    // Every TSDL declaration the daemon will write for it is well-formed enough to name
    // the sequence length fields.
    assert!(ty("q").tsdl("q").contains("__q_length"));
    let _ = (Color::Red, Color::Green, Signed::Zero);
}

/// The bytes of fields `a` to `n` of `unit:all_types` and `unit:fixed_types` (the same
/// values but `d` and `l`).
fn fixed_fields_bytes(d: u64, l: f64) -> Vec<u8> {
    let mut e = vec![0xab];
    e.extend(0x1234u16.to_le_bytes());
    e.extend(7u32.to_le_bytes());
    e.extend(d.to_le_bytes());
    e.extend((-1i8).to_le_bytes());
    e.extend((-2i16).to_le_bytes());
    e.extend((-3i32).to_le_bytes());
    e.extend((-4i64).to_le_bytes());
    e.extend(5u64.to_le_bytes());
    e.extend((-6i64).to_le_bytes());
    e.extend(1.5f32.to_le_bytes());
    e.extend(l.to_le_bytes());
    e.push(1);
    e.extend(0xe9u32.to_le_bytes());
    e
}

#[test]
fn enabled_tracepoint_writes_exact_bytes() {
    let _g = serial();
    let ch = TestChannel::new(3, 4096);
    let s = site_named("unit", "all_types");
    enable(s, &[3]);
    fire_all_types("hé\0llo", &[9, 8], &[-1, 2]);
    fire_all_types("", &[], &[]);
    let mut expect = fixed_fields_bytes(u64::MAX, f64::NAN);
    let fixed_head = expect.clone();
    expect.extend(*b"h\xc3\xa9\0");
    expect.extend(2u64.to_le_bytes());
    expect.extend([9, 8]);
    expect.extend(2u64.to_le_bytes());
    expect.extend((-1i32).to_le_bytes());
    expect.extend(2i32.to_le_bytes());
    let tail = |e: &mut Vec<u8>| {
        e.extend([1, 0, 2, 0, 3, 0]);
        e.extend(300u16.to_le_bytes());
        e.extend((-5i32).to_le_bytes());
    };
    tail(&mut expect);
    let mut expect2 = fixed_head;
    expect2.push(0);
    expect2.extend(0u64.to_le_bytes());
    expect2.extend(0u64.to_le_bytes());
    tail(&mut expect2);
    let lens = [expect.len(), expect2.len()];
    let n = Cell::new(0);
    let recs = ch.records(|_, _| {
        let l = lens[n.get()];
        n.set(n.get() + 1);
        l
    });
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].0, s.id());
    assert_eq!(recs[0].1, expect);
    assert_eq!(recs[1].1, expect2);
}

/// Every fixed-size field type in one event: the macros lay it out at compile time
/// (`ust_core::fixed_layout`) and store each field at its constant offset.
fn fire_fixed_types(d: u64, l: f64, r: [u16; 3]) {
    crate::tracepoint!(
        unit, fixed_types,
        a: u8 = 0xab, b: u16 = 0x1234, c: u32 = 7, d: u64 = d,
        e: i8 = -1, f: i16 = -2, g: i32 = -3, h: i64 = -4,
        i: usize = 5, j: isize = -6, k: f32 = 1.5, l: f64 = l,
        m: bool = true, n: char = 'é', r: [u16; 3] = r, t: Color = Color::Blue, u: Signed = Signed::Minus,
    );
}

#[test]
fn fixed_size_events_write_exact_bytes_at_constant_offsets() {
    let _g = serial();
    let ch = TestChannel::new(3, 4096);
    let s = site_named("unit", "fixed_types");
    assert_eq!(s.desc().fixed_payload_size(), Some(1 + 2 + 4 + 8 + 1 + 2 + 4 + 8 + 8 + 8 + 4 + 8 + 1 + 4 + 6 + 2 + 4));
    enable(s, &[3]);
    fire_fixed_types(u64::MAX, f64::NAN, [1, 2, 3]);
    fire_fixed_types(0, -0.25, [0xffff, 0, 7]);
    let expect = |d: u64, l: f64, r: [u16; 3]| {
        let mut e = fixed_fields_bytes(d, l);
        for x in r {
            e.extend(x.to_le_bytes());
        }
        e.extend(300u16.to_le_bytes());
        e.extend((-5i32).to_le_bytes());
        e
    };
    let len = s.desc().fixed_payload_size().unwrap();
    // The record sizes were computed with the id, so the emit path does not.
    let (compact, extended) = ust_core::event_header::sizes(s.id());
    assert_eq!(s.fixed_sizes(), Some(((compact + len) as u32, (extended + len) as u32)));
    assert_eq!(site_named("unit", "all_types").fixed_sizes(), None, "a string or sequence field: computed per event");
    let recs = ch.records(|_, _| len);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].0, s.id());
    assert_eq!(recs[0].1, expect(u64::MAX, f64::NAN, [1, 2, 3]));
    assert_eq!(recs[1].1, expect(0, -0.25, [0xffff, 0, 7]));
}

#[test]
fn disabled_tracepoints_do_not_evaluate_arguments() {
    let _g = serial();
    let calls = Cell::new(0);
    let side = || {
        calls.set(calls.get() + 1);
        42u64
    };
    // One call site for both halves: two `tracepoint!`s with the same name would be two
    // sites (two event ids), and enabling one would not enable the other.
    let fire = || crate::tracepoint!(unit, disabled, x: u64 = side());
    for _ in 0..3 {
        fire();
        crate::tracef!("{}", side());
        crate::tracelog!(Err, "{}", side());
    }
    assert_eq!(calls.get(), 0);
    // Enabled, with a channel: evaluated exactly once per firing.
    let ch = TestChannel::new(4, 4096);
    enable(site_named("unit", "disabled"), &[4]);
    for _ in 0..3 {
        fire();
    }
    assert_eq!(calls.get(), 3);
    let recs = ch.records(|_, _| 8);
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.1 == 42u64.to_le_bytes()));
}

#[crate::provider]
mod unitprov {
    #[tracepoint(level = Warning)]
    pub fn request_done(id: u64, status: u16, body: &[u8]) {}

    #[tracepoint]
    pub fn bare() {}
}

#[test]
fn provider_functions_are_tracepoints() {
    let _g = serial();
    unitprov::bare();
    let s = site_named("unitprov", "request_done");
    assert_eq!(s.desc().level, Level::Warning);
    assert_eq!(site_named("unitprov", "bare").desc().level, Level::DebugLine);
    assert_eq!(s.desc().fields.len(), 3);
    let ch = TestChannel::new(5, 4096);
    enable(s, &[5]);
    let body = vec![1u8, 2, 3];
    unitprov::request_done(9, 200, &body);
    let recs = ch.records(|_, _| 8 + 2 + 8 + 3);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].1, [9, 0, 0, 0, 0, 0, 0, 0, 200, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3]);
}

fn text_len(b: &[u8]) -> usize {
    4 + u32::from_le_bytes(b[..4].try_into().unwrap()) as usize
}

#[test]
fn tracef_records_its_message() {
    let _g = serial();
    let ch = TestChannel::new(6, 16384);
    enable(&site::TRACEF, &[6]);
    crate::tracef!("n={} s={:?}", 5, "x");
    let long = "y".repeat(10_000);
    crate::tracef!("{long}");
    crate::tracef!("plain");
    site::TRACEF.set_mask(0);
    let recs = ch.records(|_, b| text_len(b));
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.0 == site::TRACEF.id()));
    assert_eq!(recs[0].1, [&9u32.to_le_bytes()[..], b"n=5 s=\"x\""].concat());
    assert_eq!(recs[1].1.len(), 4 + crate::MSG_CAPACITY);
    assert!(recs[1].1.ends_with(crate::TRUNCATION_MARKER.as_bytes()));
    assert_eq!(recs[2].1, [&5u32.to_le_bytes()[..], b"plain"].concat());
}

#[test]
fn tracelog_records_line_file_func_msg() {
    let _g = serial();
    let ch = TestChannel::new(7, 4096);
    let s = &site::TRACELOG[Level::Warning as usize];
    assert_eq!(s.desc().name, "TRACE_WARNING");
    assert_eq!(s.desc().provider, "lttng_ust_tracelog");
    enable(s, &[7]);
    let line = line!() + 1;
    crate::tracelog!(Warning, "disk at {}%", 93);
    crate::tracelog!(Err, "not enabled");
    s.set_mask(0);
    let recs = ch.records(|_, b| {
        let f = 4 + b[4..].iter().position(|&c| c == 0).unwrap() + 1;
        let g = f + b[f..].iter().position(|&c| c == 0).unwrap() + 1;
        g + text_len(&b[g..])
    });
    assert_eq!(recs.len(), 1);
    let mut expect = (line as i32).to_le_bytes().to_vec();
    expect.extend(file!().as_bytes());
    expect.push(0);
    expect.extend(module_path!().as_bytes());
    expect.push(0);
    expect.extend(11u32.to_le_bytes());
    expect.extend(b"disk at 93%");
    assert_eq!(recs[0].1, expect);
}

#[test]
fn one_event_goes_to_every_enabled_channel() {
    let _g = serial();
    let a = TestChannel::new(10, 4096);
    let b = TestChannel::new(40, 4096);
    let fire = || crate::tracepoint!(unit, multi, v: u32 = 0xdead);
    fire();
    enable(site_named("unit", "multi"), &[10, 40, 63]); // 63 has no channel: skipped
    fire();
    for ch in [&a, &b] {
        let recs = ch.records(|_, _| 4);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].1, 0xdeadu32.to_le_bytes());
    }
}

#[test]
fn nesting_limit_drops_and_counts() {
    let _g = serial();
    let ch = TestChannel::new(11, 4096);
    let fire = || crate::tracepoint!(unit, nested, v: u8 = 1);
    fire();
    enable(site_named("unit", "nested"), &[11]);
    let guards: Vec<_> = (0..ringbuffer::nesting::MAX_NESTING).map(|_| ringbuffer::nesting::enter().unwrap()).collect();
    fire();
    drop(guards);
    fire();
    assert_eq!(ch.ch.buffers[0].counters().lost_nesting, 1);
    assert_eq!(ch.records(|_, _| 1).len(), 1);
}

#[test]
fn enabled_emit_does_not_allocate() {
    let _g = serial();
    let ch = TestChannel::new(12, 1 << 16);
    let fire = |s: &str| {
        crate::tracepoint!(unit, noalloc, a: u64 = 1, b: &str = s, c: &[u8] = s.as_bytes());
        crate::tracef!("x={} y={}", 1, s);
    };
    fire("warm");
    enable(site_named("unit", "noalloc"), &[12]);
    enable(&site::TRACEF, &[12]);
    fire("warm up the thread-locals");
    let before = crate::test_alloc::allocations();
    for _ in 0..100 {
        fire("hello");
    }
    let after = crate::test_alloc::allocations();
    site::TRACEF.set_mask(0);
    assert_eq!(after, before, "the emit path allocated");
    // And it recorded: not allocating because nothing was written would prove nothing.
    // `noalloc`: a u64, a NUL-terminated string, a u64-length byte sequence.
    let noalloc = site_named("unit", "noalloc").id();
    let recs = ch.records(|id, b| {
        if id == site::TRACEF.id() {
            text_len(b)
        } else {
            let s = b[8..].iter().position(|&c| c == 0).unwrap() + 1;
            8 + s + 8 + u64::from_le_bytes(b[8 + s..16 + s].try_into().unwrap()) as usize
        }
    });
    assert_eq!(recs.len(), 2 * 101, "the warm-up firing and the 100 measured ones, both events each");
    assert_eq!(recs.iter().filter(|r| r.0 == noalloc).count(), 101);
    let hello = [&1u64.to_le_bytes()[..], b"hello\0", &5u64.to_le_bytes(), b"hello"].concat();
    assert_eq!(recs.iter().filter(|r| r.1 == hello).count(), 100);
    let msg = [&11u32.to_le_bytes()[..], b"x=1 y=hello"].concat();
    assert_eq!(recs.iter().filter(|r| r.0 == site::TRACEF.id() && r.1 == msg).count(), 100);
}

#[test]
fn ids_follow_registration_order() {
    let all: Vec<&Site> = site::all().collect();
    // Other tests may add run-time sites meanwhile (at the end): the count only grows.
    assert!(all.len() <= site::count());
    for (i, s) in all.iter().enumerate() {
        assert_eq!(s.id(), i as u32 + 1, "{}", s.desc().full_name());
    }
    // The crate's own events end the link-time part: tracef, then the 15 tracelog levels.
    let n = site::static_count();
    assert_eq!(all[n - 16].desc().full_name(), "lttng_ust_tracef:event");
    assert_eq!(all[n - 1].desc().full_name(), "lttng_ust_tracelog:TRACE_DEBUG");
    assert!(all.iter().all(|s| s.desc().validate().is_ok()));
}

#[test]
fn concurrent_writers_lose_nothing_uncounted() {
    let _g = serial();
    let ch = TestChannel::new(13, 4096);
    let fire = |t: u32, i: u32| crate::tracepoint!(unit, concurrent, t: u32 = t, i: u32 = i);
    fire(0, 0);
    let s = site_named("unit", "concurrent");
    enable(s, &[13]);
    const THREADS: u32 = 4;
    const EACH: u32 = 3000;
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            sc.spawn(move || {
                for i in 0..EACH {
                    fire(t, i);
                }
            });
        }
    });
    s.set_mask(0);
    let discarded = ch.ch.buffers[0].counters().discarded();
    let recs = ch.records(|_, _| 8);
    assert_eq!(recs.len() as u64 + discarded, u64::from(THREADS * EACH));
    // Each thread's events appear in its own order.
    let mut last = [None::<u32>; THREADS as usize];
    for (id, p) in &recs {
        assert_eq!(*id, s.id());
        let t = u32::from_le_bytes(p[..4].try_into().unwrap()) as usize;
        let i = u32::from_le_bytes(p[4..].try_into().unwrap());
        if let Some(l) = last[t] {
            assert!(i > l, "thread {t}: {i} after {l}");
        }
        last[t] = Some(i);
    }
}

/// Length of a record's payload from the description of event `id`.
fn payload_len(id: u32, b: &[u8]) -> usize {
    let desc = site::all().nth(id as usize - 1).unwrap().desc();
    let mut off = 0;
    for f in desc.fields.iter() {
        off += match &f.ty {
            FieldType::String => b[off..].iter().position(|&c| c == 0).unwrap() + 1,
            FieldType::Sequence { length, elem, .. } => {
                let n = length.size_bytes();
                let mut raw = [0u8; 8];
                raw[..n].copy_from_slice(&b[off..off + n]);
                n + u64::from_le_bytes(raw) as usize * elem.size_bytes()
            }
            other => other.fixed_size().unwrap(),
        };
    }
    off
}

#[test]
fn state_dump_goes_to_the_new_channels_only_and_masks_are_restored() {
    use crate::runtime::statedump::{dump, STATEDUMP_PROVIDER};
    let _g = serial();
    let old = TestChannel::new(14, 1 << 16);
    let new = TestChannel::new(15, 1 << 16);
    let sites: Vec<&Site> = site::all().filter(|s| s.desc().provider == STATEDUMP_PROVIDER).collect();
    let names: Vec<&str> = sites.iter().map(|s| &*s.desc().name).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    for s in &sites {
        enable(s, &[14, 15]);
    }
    let objects = dump(1 << 15);
    for s in &sites {
        assert_eq!(s.mask(), (1 << 14) | (1 << 15), "{} restored", s.desc().name);
        s.set_mask(0);
    }
    assert!(old.records(payload_len).is_empty(), "the old channel got a second dump");
    let recs = new.records(payload_len);
    let name_of = |id: u32| site::all().nth(id as usize - 1).unwrap().desc().full_name();
    let got: Vec<String> = recs.iter().map(|(id, _)| name_of(*id)).collect();
    assert_eq!(got.first().map(String::as_str), Some("lttng_ust_statedump:start"));
    assert_eq!(got[1], "lttng_ust_statedump:procname");
    assert_eq!(got.last().map(String::as_str), Some("lttng_ust_statedump:end"));
    assert_eq!(got.iter().filter(|n| *n == "lttng_ust_statedump:bin_info").count(), objects);
    // The first object is the program: base address, then memsz, then its path.
    let (_, first) = recs.iter().find(|(id, _)| name_of(*id) == "lttng_ust_statedump:bin_info").unwrap();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let path_end = 16 + first[16..].iter().position(|&c| c == 0).unwrap();
    assert_eq!(&first[16..path_end], exe.as_os_str().as_encoded_bytes());
    assert!(u64::from_le_bytes(first[8..16].try_into().unwrap()) > 0);
    // Nothing enabled on the slots asked for: no dump at all.
    assert_eq!(dump(1 << 15), 0);
    assert!(new.records(payload_len).is_empty());
}

#[test]
fn context_block_follows_the_header_with_this_threads_values() {
    use ust_core::context::ContextType as C;
    let _g = serial();
    crate::context::init(&std::fs::read_to_string("/proc/self/comm").unwrap());
    let ch = TestChannel::with_contexts(20, 4096, vec![C::Vtid, C::Vpid, C::Procname, C::PthreadId, C::CpuId]);
    let fire = |v: u32| crate::tracepoint!(unit, ctx_ev, v: u32 = v);
    fire(0);
    enable(site_named("unit", "ctx_ev"), &[20]);
    let tid = std::thread::spawn(move || {
        fire(7);
        rustix::thread::gettid().as_raw_nonzero().get()
    })
    .join()
    .unwrap();
    let recs = ch.records(|_, _| 4 + 4 + 17 + 8 + 4 + 4);
    assert_eq!(recs.len(), 1);
    let r = &recs[0].1;
    assert_eq!(i32::from_le_bytes(r[0..4].try_into().unwrap()), tid, "vtid is the emitting thread's");
    assert_eq!(i32::from_le_bytes(r[4..8].try_into().unwrap()), std::process::id() as i32);
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    let comm = comm.trim_end();
    assert_eq!(&r[8..8 + comm.len().min(16)], &comm.as_bytes()[..comm.len().min(16)]);
    assert!(u64::from_le_bytes(r[25..33].try_into().unwrap()) != 0, "pthread_id");
    assert!(i32::from_le_bytes(r[33..37].try_into().unwrap()) >= 0, "cpu_id");
    assert_eq!(u32::from_le_bytes(r[37..41].try_into().unwrap()), 7, "payload after the context");
}

#[test]
fn ip_context_is_the_call_sites_address() {
    use ust_core::context::ContextType as C;
    let _g = serial();
    let ch = TestChannel::with_contexts(23, 4096, vec![C::Ip, C::Vpid]);
    let before = crate::call_site_ip!();
    // Not inlined: one copy of each call site (an inlined or unrolled copy is another
    // address of the same source line).
    #[inline(never)]
    fn fire(v: u32) {
        if v < 10 {
            crate::tracepoint!(unit, ip_a, v: u32 = v);
        } else {
            crate::tracepoint!(unit, ip_b, v: u32 = v);
        }
    }
    fire(0);
    fire(10);
    enable(site_named("unit", "ip_a"), &[23]);
    enable(site_named("unit", "ip_b"), &[23]);
    for v in [1, 2, 11] {
        fire(v);
    }
    let after = crate::call_site_ip!();
    let recs = ch.records(|_, _| 8 + 4 + 4);
    assert_eq!(recs.len(), 3);
    let ip = |i: usize| u64::from_le_bytes(recs[i].1[0..8].try_into().unwrap());
    let v = |i: usize| u32::from_le_bytes(recs[i].1[12..16].try_into().unwrap());
    assert_eq!((v(0), v(1), v(2)), (1, 2, 11), "payload after ip and vpid");
    assert_eq!(i32::from_le_bytes(recs[0].1[8..12].try_into().unwrap()), std::process::id() as i32);
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        assert_eq!(ip(0), ip(1), "one call site, one address");
        assert_ne!(ip(0), ip(2), "two call sites, two addresses");
        // Both sites are code of this test binary: in the executable mapping that holds
        // this function's own call-site addresses.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let text = maps
            .lines()
            .filter_map(|l| {
                let (range, rest) = l.split_once(' ')?;
                let (a, b) = range.split_once('-')?;
                Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?, rest.starts_with("r-x")))
            })
            .find(|(a, b, _)| (*a..*b).contains(&before))
            .expect("this function's mapping");
        assert!(text.2 && (text.0..text.1).contains(&after), "{text:x?}");
        for i in 0..3 {
            assert!((text.0..text.1).contains(&ip(i)), "ip {:#x} outside this binary's code {:#x}..{:#x}", ip(i), text.0, text.1);
        }
    } else {
        assert_eq!(ip(0), 0);
    }
}

#[test]
fn a_filtered_out_event_costs_no_reservation() {
    use ust_core::filter::{CmpOp, Expr, Operand};
    let _g = serial();
    let ch = TestChannel::new(21, 4096);
    let other = TestChannel::new(22, 4096);
    let fire = |v: u32, s: &str| crate::tracepoint!(unit, filt_ev, v: u32 = v, s: &str = s);
    fire(0, "");
    let site = site_named("unit", "filt_ev");
    // Slot 21: v > 10 || s == "ke*"; slot 22: unfiltered.
    let f = Expr::Or(
        Box::new(Expr::Cmp(CmpOp::Gt, Operand::Field(0), Operand::Int(10))),
        Box::new(Expr::Cmp(CmpOp::Eq, Operand::Field(1), Operand::Str("ke*".into()))),
    );
    crate::__testing::set_filters(site, vec![(21, vec![f])]).unwrap();
    enable(site, &[21]);
    let before = ch.ch.buffers[0].counters().write;
    for i in 0..100 {
        fire(i % 10, "drop");
    }
    assert_eq!(ch.ch.buffers[0].counters().write, before, "no byte reserved for non-matching events");
    fire(11, "x");
    fire(1, "keep");
    assert!(ch.ch.buffers[0].counters().write > before);
    enable(site, &[21, 22]);
    fire(2, "no");
    fire(3, "kept");
    let len = |_: u32, p: &[u8]| 4 + p[4..].iter().position(|&b| b == 0).unwrap() + 1;
    let got: Vec<u32> = ch.records(len).iter().map(|(_, p)| u32::from_le_bytes(p[..4].try_into().unwrap())).collect();
    assert_eq!(got, vec![11, 1, 3]);
    let got: Vec<u32> = other.records(len).iter().map(|(_, p)| u32::from_le_bytes(p[..4].try_into().unwrap())).collect();
    assert_eq!(got, vec![2, 3], "the unfiltered channel takes every event");
    // A filter that does not validate against the event is refused, never installed.
    let bad = Expr::Truthy(Operand::Field(1));
    assert!(crate::__testing::set_filters(site, vec![(21, vec![bad])]).is_err());
    crate::__testing::set_filters(site, vec![]).unwrap();
}

fn fire_forked(v: u64) {
    crate::tracepoint!(unit, forked, v: u64 = v);
}

/// Issue 5, case 1, deterministically: a thread is stopped inside an emit (its slot
/// reserved, not committed) when another thread forks. The child must not deadlock, must
/// find tracing off (no mask, no channel: it registers anew), and nothing it emits may
/// reach the parent's buffer, which is shared memory as the daemon's are. The parent's
/// emit then completes as if nothing happened.
#[test]
fn fork_while_another_thread_is_inside_an_emit() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let _g = serial();
    let cfg = BufferConfig {
        subbuf_size: 4096,
        num_subbuf: 4,
        mode: Mode::Discard,
        header_size: HEADER_SIZE as u32,
        stream: StreamIdentity { uuid: [2; 16], stream_id: 0, cpu: 0, stream_instance_id: 0 },
    };
    let size = cfg.file_size().unwrap();
    let fd = rustix::fs::memfd_create("ust-forktest", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, size as u64).unwrap();
    let file = std::fs::File::from(fd);
    let map = memmap2::MmapOptions::new().len(size).map_raw(&file).unwrap();
    let buf = Buffer::create(map, &cfg).unwrap().into_writer();
    assert!(
        channel::install(13, Channel::new(vec![buf].into_boxed_slice(), "s".into(), "c".into(), Vec::new(), ust_core::clock::TraceClock::Monotonic)).is_none()
    );
    let ch = TestChannel { slot: 13, ch: channel::get(13).unwrap() };
    fire_forked(0);
    let s = site_named("unit", "forked");
    enable(s, &[13]);
    let inside = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let (i2, r2) = (inside.clone(), release.clone());
    let t = std::thread::spawn(move || {
        crate::emit::emit(s, 0, 8, |b| {
            i2.store(true, Ordering::SeqCst);
            while !r2.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            b.copy_from_slice(&1u64.to_le_bytes());
        });
    });
    while !inside.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // SAFETY: the child runs only atomics loads, the emit path and _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = if s.mask() != 0 {
            2
        } else if channel::get(13).is_some() {
            3
        } else {
            for v in 100..200 {
                fire_forked(v);
            }
            0
        };
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            break;
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: kill and reap our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            panic!("the fork child deadlocked");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(libc::WIFEXITED(status), "child died: {status}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "2: the child kept the parent's masks, 3: its channels");
    release.store(true, Ordering::SeqCst);
    t.join().unwrap();
    fire_forked(2);
    let got: Vec<u64> = ch.records(|_, _| 8).iter().map(|(_, p)| u64::from_le_bytes(p[..8].try_into().unwrap())).collect();
    assert_eq!(got, vec![1, 2], "the parent's buffer holds the parent's events only");
}

fn fire_in_handler(v: u64) {
    crate::tracepoint!(unit, in_handler, v: u64 = v);
}

static HANDLER_ALLOCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

extern "C" fn emitting_handler(_: libc::c_int) {
    let before = crate::test_alloc::allocations();
    fire_in_handler(7);
    HANDLER_ALLOCS.store(crate::test_alloc::allocations() - before, std::sync::atomic::Ordering::SeqCst);
}

/// Issue 5, case 2, deterministically: a signal handler emits (the first event of a fresh
/// thread) while that thread is inside another emit, between reserve and commit. Both
/// events are recorded in reservation order (the interrupted one first: its slot was
/// taken before the handler ran), and the handler's emit allocates nothing.
#[test]
fn a_signal_handler_emits_while_its_thread_is_inside_an_emit() {
    let _g = serial();
    let ch = TestChannel::new(14, 4096);
    fire_in_handler(0);
    fire_forked(0);
    enable(site_named("unit", "in_handler"), &[14]);
    let s = site_named("unit", "forked");
    enable(s, &[14]);
    // SAFETY: installs a handler that only calls the emit path and reads a thread-local
    // counter.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = emitting_handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
    }
    std::thread::spawn(move || {
        crate::emit::emit(s, 0, 8, |b| {
            // Delivered to this thread before raise returns: the handler runs inside this
            // emit, with this slot reserved and not committed.
            // SAFETY: raise has no preconditions.
            unsafe { libc::raise(libc::SIGUSR2) };
            b.copy_from_slice(&1u64.to_le_bytes());
        });
    })
    .join()
    .unwrap();
    // SAFETY: restores the default action.
    unsafe { libc::signal(libc::SIGUSR2, libc::SIG_DFL) };
    assert_eq!(HANDLER_ALLOCS.load(std::sync::atomic::Ordering::SeqCst), 0, "the handler's emit allocated");
    let got: Vec<u64> = ch.records(|_, _| 8).iter().map(|(_, p)| u64::from_le_bytes(p[..8].try_into().unwrap())).collect();
    assert_eq!(got, vec![1, 7], "the interrupted event first (reserved first), then the handler's");
    assert_eq!(ch.ch.buffers[0].counters().discarded(), 0);
}

#[cfg(feature = "log")]
#[path = "tests_log.rs"]
mod log_bridge;

/// Blocking mode (`--blocking-timeout`): a writer with a signal blocked (as in a signal
/// handler) never waits, even with an unlimited timeout: each event that finds the buffer
/// full is discarded at once and counted; one with room is recorded.
#[test]
fn blocking_channel_never_waits_with_signals_blocked() {
    let _g = serial();
    let cfg = BufferConfig {
        subbuf_size: 4096,
        num_subbuf: 2,
        mode: Mode::Discard,
        header_size: HEADER_SIZE as u32,
        stream: StreamIdentity { uuid: [2; 16], stream_id: 0, cpu: 0, stream_instance_id: 0 },
    };
    let map = memmap2::MmapOptions::new().len(cfg.file_size().unwrap()).map_anon().unwrap();
    let buf = Buffer::create(map.into(), &cfg).unwrap().into_writer();
    let blocking =
        Channel::new(vec![buf].into_boxed_slice(), "s".into(), "c".into(), Vec::new(), ust_core::clock::TraceClock::Monotonic).with_blocking(u64::MAX);
    assert!(channel::install(14, blocking).is_none());
    let ch = TestChannel { slot: 14, ch: channel::get(14).unwrap() };
    let fire = |i: u64| crate::tracepoint!(unit, blocking, i: u64 = i);
    fire(0);
    let s = site_named("unit", "blocking");
    enable(s, &[14]);
    crate::blocking::ALLOWED.store(true, std::sync::atomic::Ordering::Relaxed);
    // 2 x 4 KiB hold a few hundred of these 12-byte records; nobody reads the buffer.
    const N: u64 = 2000;
    std::thread::spawn(move || {
        // SAFETY: blocks SIGUSR2 in this thread only; the set is initialized by sigemptyset.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            assert_eq!(libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()), 0);
        }
        for i in 0..N {
            fire(i);
        }
    })
    .join()
    .unwrap();
    crate::blocking::ALLOWED.store(false, std::sync::atomic::Ordering::Relaxed);
    s.set_mask(0);
    let discarded = ch.ch.buffers[0].counters().discarded();
    let recs = ch.records(|_, _| 8);
    assert!(discarded > 0, "the buffer filled up");
    assert_eq!(recs.len() as u64 + discarded, N, "every event recorded or counted, none waited for");
    let got: Vec<u64> = recs.iter().map(|(_, p)| u64::from_le_bytes(p[..8].try_into().unwrap())).collect();
    assert_eq!(got, (0..recs.len() as u64).collect::<Vec<_>>(), "the ones that found room, in order");
}

mod percpu;
mod plan;
