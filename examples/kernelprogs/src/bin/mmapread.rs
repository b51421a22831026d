//! Page faults with a known answer (`ust report --faults FILE`, system-tests/tests/report.rs):
//! creates FILE (argument 1) of 64 MiB, `fsync`s it and drops it from the page cache
//! (`posix_fadvise(POSIX_FADV_DONTNEED)`), maps it read-only with `MADV_RANDOM` (no
//! readahead: each first touch of a page reads that one page, a major fault), and reads
//! one byte of N pages (argument 2, default 64) in `read_page`, in the order
//! `page(k) = (k * 5003 + 17) mod 16384`. Prints the page indexes in the order read, one a
//! line. The mapping is left in place until exit so the maps sampler of `ust trace` sees it.

use std::io::Write;
use std::os::fd::AsRawFd;

/// Pages in the file (64 MiB of 4 KiB pages).
const PAGES: usize = 16384;
const PAGE: usize = 4096;

/// The k-th page read.
fn page(k: usize) -> usize {
    (k * 5003 + 17) % PAGES
}

/// Reads the first byte of page `i` of `map`: the faulting function the test looks for.
#[inline(never)]
fn read_page(map: *const u8, i: usize) -> u8 {
    // A plain load, so the faulting instruction is in this function in a debug build too
    // (`read_volatile` is a call there); `black_box` keeps it in a release build.
    // SAFETY: `map` is a readable mapping of PAGES * PAGE bytes and `i < PAGES`.
    std::hint::black_box(unsafe { *map.add(i * PAGE) })
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: mmapread FILE [N]");
    let n: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(64);
    let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).expect("create FILE");
    let mut chunk = vec![0u8; 1 << 20];
    for (i, b) in chunk.iter_mut().enumerate() {
        *b = (i / PAGE) as u8 | 1;
    }
    for _ in 0..(PAGES * PAGE) / chunk.len() {
        f.write_all(&chunk).expect("write");
    }
    f.sync_all().expect("fsync");
    // SAFETY: plain system calls on an open descriptor; the mapping is checked for failure
    // and never unmapped while in use (the process exits with it mapped).
    let map = unsafe {
        assert_eq!(libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED), 0, "fadvise");
        let m = libc::mmap(std::ptr::null_mut(), PAGES * PAGE, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(m, libc::MAP_FAILED, "mmap");
        assert_eq!(libc::madvise(m, PAGES * PAGE, libc::MADV_RANDOM), 0, "madvise");
        m as *const u8
    };
    // Let the maps sampler (every 10 ms) see the mapping.
    std::thread::sleep(std::time::Duration::from_millis(40));
    let mut sum = 0u32;
    let mut out = String::new();
    for k in 0..n {
        sum += u32::from(read_page(map, page(k)));
        out.push_str(&format!("{}\n", page(k)));
    }
    std::thread::sleep(std::time::Duration::from_millis(40));
    print!("{out}");
    eprintln!("sum {sum}");
}
