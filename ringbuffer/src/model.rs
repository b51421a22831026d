//! Heap memory made of `loom` atomics, so the model checker runs the shipping algorithm
//! (only compiled with `--cfg loom`; see `tests/loom.rs`).
//!
//! loom atomics cannot live in a mapping, so [`HeapMemory`] keeps one
//! `loom::sync::atomic::AtomicU64` per *used* 8-byte word of the file (header, control
//! words, ids, data) and maps byte offsets to them. Byte operations on the data region
//! are word operations restricted to the bytes concerned (`fetch_and` + `fetch_or`, so
//! writers of different slots sharing a word never undo each other). Payload bytes are
//! therefore atomics with `Relaxed` ordering in the model: a missing Release/Acquire on
//! the algorithm's synchronizing words shows up as a stale payload that the test checks.

use core::sync::atomic::Ordering;
use loom::sync::atomic::{AtomicU32, AtomicU64};
use loom::sync::Arc;
use std::cell::RefCell;

use crate::layout::*;
use crate::{BufferConfig, Geometry, LayoutError, Memory};

/// A buffer file on the heap, for `loom`. Cloning shares the words (as
/// [`MapMemory`](crate::MapMemory) shares its mapping), so that
/// [`Buffer::split`](crate::Buffer::split) hands a writer and a reader the same file.
#[derive(Clone)]
pub struct HeapMemory {
    len: usize,
    /// For each 8-byte word of the file: index into `words`, or `u32::MAX` if unused.
    slot_of: std::sync::Arc<Vec<u32>>,
    words: std::sync::Arc<Vec<AtomicU64>>,
}

impl HeapMemory {
    /// Memory for a buffer of `cfg` (exactly `cfg.file_size()` bytes). Must be called
    /// inside a `loom::model` closure.
    pub fn for_config(cfg: &BufferConfig) -> Result<HeapMemory, LayoutError> {
        let g = Geometry::for_config(cfg)?;
        let mut used: Vec<usize> = (0..HEADER_LEN).step_by(8).collect();
        for w in CTRL_WORDS {
            used.push(g.ctrl_word(w));
        }
        for i in 0..g.pos.num_subbuf() as usize {
            for w in SB_WORDS {
                used.push(g.sb_word(i, w));
            }
            used.push(g.id_word(i));
        }
        used.extend((g.data..g.file_size).step_by(8));
        let mut slot_of = vec![u32::MAX; g.file_size / 8];
        let mut words = Vec::with_capacity(used.len());
        for off in used {
            slot_of[off / 8] = words.len() as u32;
            words.push(AtomicU64::new(0));
        }
        Ok(HeapMemory { len: g.file_size, slot_of: std::sync::Arc::new(slot_of), words: std::sync::Arc::new(words) })
    }

    #[track_caller]
    fn word(&self, off: usize) -> &AtomicU64 {
        let s = self.slot_of[off / 8];
        assert!(s != u32::MAX, "model memory: offset {off} is not a used word");
        &self.words[s as usize]
    }

    /// Visits the words covering `off..off+len`: (word offset, first byte in word, byte count).
    fn chunks(off: usize, len: usize, mut f: impl FnMut(usize, usize, usize, usize)) {
        let mut done = 0;
        while done < len {
            let p = off + done;
            let start = p % 8;
            let n = (8 - start).min(len - done);
            f(p - start, start, n, done);
            done += n;
        }
    }

    fn mask(start: usize, n: usize) -> u64 {
        if n == 8 {
            u64::MAX
        } else {
            ((1u64 << (8 * n)) - 1) << (8 * start)
        }
    }
}

loom::thread_local! {
    /// The modelled CPU of the calling thread ([`set_thread_cpu`]).
    static THREAD_CPU: RefCell<Option<Arc<AtomicU32>>> = RefCell::new(None);
}

/// Per-CPU writers in the model ([`crate::percpu`]): the calling thread's CPU is the value
/// of `cpu`, which another model thread may change at any point (a migration). A thread
/// that never called this is where it needs to be (the reader's flush, which pins itself
/// to the buffer's CPU). [`Memory::cpu_cas_u64`] answers `Moved` when the thread's CPU is
/// not the one asked for, and is otherwise a CAS: a critical section that runs without
/// interleaving on its CPU, or restarts, is indivisible for the other parties there, and
/// no party on another CPU touches the word.
pub fn set_thread_cpu(cpu: Arc<AtomicU32>) {
    THREAD_CPU.with(|c| *c.borrow_mut() = Some(cpu));
}

impl Memory for HeapMemory {
    fn cpu_cas_u64(&self, off: usize, cpu: u32, current: u64, new: u64) -> crate::percpu::CpuCas {
        let here = THREAD_CPU.with(|c| c.borrow().as_ref().map(|a| a.load(Ordering::Relaxed)));
        if here.is_some_and(|h| h != cpu) {
            return crate::percpu::CpuCas::Moved;
        }
        match self.cas_u64(off, current, new, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => crate::percpu::CpuCas::Done,
            Err(_) => crate::percpu::CpuCas::Changed,
        }
    }
    fn len(&self) -> usize {
        self.len
    }
    fn id(&self) -> usize {
        self.words.as_ptr() as usize
    }
    fn load_u64(&self, off: usize, order: Ordering) -> u64 {
        assert!(off & 7 == 0);
        self.word(off).load(order)
    }
    fn store_u64(&self, off: usize, val: u64, order: Ordering) {
        assert!(off & 7 == 0);
        self.word(off).store(val, order)
    }
    fn cas_u64(&self, off: usize, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        assert!(off & 7 == 0);
        self.word(off).compare_exchange(current, new, success, failure)
    }
    fn fetch_add_u64(&self, off: usize, val: u64, order: Ordering) -> u64 {
        assert!(off & 7 == 0);
        self.word(off).fetch_add(val, order)
    }
    fn store_u8(&self, off: usize, val: u8, order: Ordering) {
        let w = self.word(off & !7);
        let shift = 8 * (off % 8);
        w.fetch_and(!(0xffu64 << shift), Ordering::Relaxed);
        w.fetch_or(u64::from(val) << shift, order);
    }
    fn load_u8(&self, off: usize, order: Ordering) -> u8 {
        (self.word(off & !7).load(order) >> (8 * (off % 8))) as u8
    }
    fn write_bytes(&self, off: usize, src: &[u8]) {
        HeapMemory::chunks(off, src.len(), |w, start, n, done| {
            let mut v = 0u64;
            for k in 0..n {
                v |= u64::from(src[done + k]) << (8 * (start + k));
            }
            let word = self.word(w);
            if n == 8 {
                word.store(v, Ordering::Relaxed);
            } else {
                word.fetch_and(!HeapMemory::mask(start, n), Ordering::Relaxed);
                word.fetch_or(v, Ordering::Relaxed);
            }
        });
    }
    fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        HeapMemory::chunks(off, dst.len(), |w, start, n, done| {
            let v = self.word(w).load(Ordering::Relaxed);
            for k in 0..n {
                dst[done + k] = (v >> (8 * (start + k))) as u8;
            }
        });
    }
    fn zero(&self, off: usize, len: usize) {
        HeapMemory::chunks(off, len, |w, start, n, _| {
            if n == 8 {
                self.word(w).store(0, Ordering::Relaxed);
            } else {
                self.word(w).fetch_and(!HeapMemory::mask(start, n), Ordering::Relaxed);
            }
        });
    }
}
