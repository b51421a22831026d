//! The `ust` command's allocator ([`ust_cli::heap::HugePageHeap`]) as this test binary's
//! allocator: memory it hands out, on the main thread (malloc's main heap, grown by `brk`)
//! and on another (another arena), lies in mappings the kernel may back with transparent
//! huge pages (`THPeligible: 1` in `/proc/self/smaps`), and its contents are what was
//! written. Without harness (`harness = false`): the checks must run on the main thread.

#[global_allocator]
static HEAP: ust_cli::heap::HugePageHeap = ust_cli::heap::HugePageHeap;

/// `THPeligible` of the mapping of `/proc/self/smaps` that holds `addr`.
fn thp_eligible(addr: usize) -> Option<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
        }
        if inside {
            if let Some(v) = line.strip_prefix("THPeligible:") {
                return Some(v.trim() == "1");
            }
        }
    }
    None
}

fn thp_mode() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default()
}

fn main() {
    memory_of_the_main_heap_and_of_another_arena_is_advised_for_huge_pages();
    println!("test memory_of_the_main_heap_and_of_another_arena_is_advised_for_huge_pages ... ok");
}

fn memory_of_the_main_heap_and_of_another_arena_is_advised_for_huge_pages() {
    let mode = thp_mode();
    if mode.is_empty() || mode.contains("[never]") {
        eprintln!("transparent huge pages are off here ({mode:?}): nothing to check");
        return;
    }
    // Small allocations from the main heap, enough to grow it by several MiB.
    let small: Vec<Vec<u64>> = (0..20_000).map(|i| vec![i as u64; 64]).collect();
    let addr = small[19_999].as_ptr() as usize;
    assert_eq!(thp_eligible(addr), Some(true), "a small allocation of the main heap at {addr:#x}");
    // A large one (served by the heap below 32 MiB).
    let big = vec![7u8; 16 << 20];
    assert_eq!(thp_eligible(big.as_ptr() as usize + (8 << 20)), Some(true), "a 16 MiB buffer");
    // Another thread's arena.
    let (addr, sum) = std::thread::spawn(|| {
        let v: Vec<Vec<u32>> = (0..5_000).map(|i| vec![i; 256]).collect();
        let sum: u64 = v.iter().map(|x| u64::from(x[255])).sum();
        (v[4_999].as_ptr() as usize, sum)
    })
    .join()
    .unwrap();
    // The thread's vectors are freed; the arena's mapping stays.
    assert_eq!(thp_eligible(addr), Some(true), "another thread's arena at {addr:#x}");
    assert_eq!(sum, (0..5_000u64).sum::<u64>());
    assert!(small.iter().enumerate().all(|(i, v)| v.len() == 64 && v.iter().all(|&x| x == i as u64)));
    assert!(big.iter().all(|&b| b == 7));
}
