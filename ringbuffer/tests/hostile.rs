//! Hostile memory: `open` on truncated or garbage files fails cleanly, and the reader
//! (and a flush, which the daemon also runs) on a buffer whose control words were
//! overwritten with random values returns errors or garbage, never panics, never hangs.
//!
//! Run: `cargo test -p ringbuffer --test hostile` (about 1 s).

use proptest::prelude::*;
use ringbuffer::layout::HEADER_LEN;
use ringbuffer::*;

struct Layout;
impl PacketLayout for Layout {
    fn header_size(&self) -> usize {
        32
    }
    fn write_begin(&self, _: &StreamIdentity, h: &mut [u8], b: &PacketBegin) {
        h[0..8].copy_from_slice(&b.timestamp_begin.to_le_bytes());
    }
    fn write_end(&self, _: &StreamIdentity, h: &mut [u8], e: &PacketEnd) {
        h[8..16].copy_from_slice(&e.content_size.to_le_bytes());
    }
}

fn cfg() -> BufferConfig {
    BufferConfig { subbuf_size: 4096, num_subbuf: 4, mode: Mode::Discard, header_size: 32, stream: StreamIdentity::default() }
}

fn anon(bytes: &[u8], len: usize) -> memmap2::MmapRaw {
    let mut m = memmap2::MmapOptions::new().len(len.max(1)).map_anon().unwrap();
    let n = bytes.len().min(len);
    m[..n].copy_from_slice(&bytes[..n]);
    m.into()
}

/// A formatted buffer with a few packets written, some delivered, one open.
fn populated() -> (Writer, Reader) {
    let len = cfg().file_size().unwrap();
    let (b, r) = Buffer::create(anon(&[], len), &cfg()).unwrap().split();
    let clock = || 1000u64;
    for i in 0..30u32 {
        let mut r = b.reserve(&Layout, &clock, SlotSize { compact: 300 + i, extended: 300 + i }).unwrap();
        b.slot(&mut r)[1..].fill(i as u8);
        b.commit(&Layout, r, 1);
    }
    (b, r)
}

fn file_bytes(b: &Buffer) -> Vec<u8> {
    let m = b.map();
    // SAFETY: the mapping is alive and m.len() bytes long; no one writes it meanwhile.
    unsafe { std::slice::from_raw_parts(m.as_ptr(), m.len()) }.to_vec()
}

/// Exercises everything the daemon does with a buffer; must not panic or hang.
fn read_everything(b: &Reader) -> (usize, usize) {
    let mut out = Vec::new();
    let (mut ok, mut err) = (0, 0);
    for _ in 0..12 {
        match b.get_subbuf() {
            Ok(Some(sb)) => {
                let _ = b.copy_subbuf(&sb, &mut out);
                match b.put_subbuf(sb) {
                    Ok(()) => ok += 1,
                    Err(_) => err += 1,
                }
            }
            Ok(None) => {}
            Err(_) => err += 1,
        }
        b.flush(&Layout, &|| 7u64);
    }
    for i in 0..8 {
        let _ = b.subbuf_state(i);
        let _ = b.evidence_byte(i, 100);
    }
    let _ = b.counters();
    (ok, err)
}

#[test]
fn truncated_file_is_refused() {
    let good = file_bytes(&populated().1);
    for len in [0, 1, 8, HEADER_LEN - 1, HEADER_LEN, 4096, good.len() - 4096, good.len() - 1] {
        let r = Buffer::open(anon(&good, len));
        assert!(r.is_err(), "len {len}");
    }
    let b = Buffer::open(anon(&good, good.len())).unwrap();
    assert_eq!(b.config(), &cfg());
    assert!(matches!(Buffer::open(anon(b"garbage", 8192)), Err(LayoutError::BadMagic)));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn open_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512), len in 0usize..40_000) {
        let _ = Buffer::open(anon(&bytes, len));
    }

    #[test]
    fn header_field_corruption(pos in 0usize..HEADER_LEN, val in any::<u8>()) {
        // Flip one header byte: open either refuses or yields a buffer that behaves.
        let mut bytes = file_bytes(&populated().1);
        bytes[pos] = val;
        let len = bytes.len();
        if let Ok(b) = Buffer::open(anon(&bytes, len)) {
            read_everything(&b.into_reader());
        }
    }

    #[test]
    fn control_word_corruption(words in proptest::collection::vec((any::<u16>(), any::<u64>()), 1..16)) {
        let (bw, b) = populated();
        let g = *b.geometry();
        let base = b.map().as_mut_ptr();
        for (w, v) in words {
            // Any 8-byte word between the control block and the data region.
            let nwords = (g.data - g.ctrl) / 8;
            let off = g.ctrl + (w as usize % nwords) * 8;
            // SAFETY: off is 8-aligned and inside the mapping; the buffer is only used
            // from this thread.
            unsafe { (base.add(off) as *mut u64).write_volatile(v) };
        }
        read_everything(&b);
        // The writer side on scribbled memory must not loop forever or panic either.
        let clock = || 2000u64;
        for _ in 0..8 {
            if let Ok(r) = bw.reserve(&Layout, &clock, SlotSize { compact: 64, extended: 64 }) {
                bw.commit(&Layout, r, 1);
            }
        }
        read_everything(&b);
    }

    #[test]
    fn small_values_in_hot_words(vals in proptest::collection::vec(0u64..20_000, 7)) {
        // Plausible-looking (small) values are harder than random ones: they pass more checks.
        let (_, b) = populated();
        let g = *b.geometry();
        let base = b.map().as_mut_ptr();
        let offs = [
            g.ctrl + layout::CTRL_WRITE,
            g.ctrl + layout::CTRL_CONSUMED,
            g.sb_word(0, layout::SB_DELIVERED),
            g.sb_word(0, layout::SB_CLOSED_END),
            g.sb_word(0, layout::SB_COMMIT),
            g.sb_word(1, layout::SB_DELIVERED),
            g.id_word(0),
        ];
        for (off, v) in offs.iter().zip(vals) {
            // SAFETY: in-bounds aligned words of the live mapping, single-threaded use.
            unsafe { (base.add(*off) as *mut u64).write_volatile(v) };
        }
        read_everything(&b);
    }
}
