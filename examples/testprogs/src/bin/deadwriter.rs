//! `deadwriter`: emits `deadprov:slow { seq, v }` without end, where writing `v` into the
//! reserved slot takes about a millisecond (its [`ust::Field::encode`] sleeps), so the
//! process spends nearly all its time between reserve and commit. Prints `writing` once
//! its first event is committed. The dying-writer test (system-tests/tests/uid_buffers.rs)
//! SIGKILLs it at random moments: each kill leaves a reserved, uncommitted slot in a buffer
//! other processes share.

use std::io::Write;

/// A `u64` whose encoding is slow.
struct Slow(u64);

// SAFETY: always 8 bytes, written by one `copy_from_slice` of 8 bytes into the 8-byte slice
// `encode` receives; the sleep cannot panic.
unsafe impl ust::Field for Slow {
    const TYPE: ust::__private::FieldType = <u64 as ust::Field>::TYPE;
    fn encoded_len(&self) -> usize {
        8
    }
    fn encode(&self, out: &mut [u8]) {
        std::thread::sleep(std::time::Duration::from_millis(1));
        out.copy_from_slice(&self.0.to_le_bytes());
    }
}

fn main() {
    let mut seq = 0u64;
    loop {
        ust::tracepoint!(deadprov, slow, seq: u64 = seq, v: Slow = Slow(seq));
        if seq == 0 {
            println!("writing");
            let _ = std::io::stdout().flush();
        }
        seq += 1;
    }
}
