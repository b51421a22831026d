//! The `ust` command's allocator ([`ust_cli::heap::HugePageHeap`]) as this test binary's
//! allocator: memory it hands out, on the main thread (malloc's main heap, grown by `brk`)
//! and on another (another arena), lies in mappings the kernel may back with transparent
//! huge pages (`THPeligible: 1` in `/proc/self/smaps`), and its contents are what was
//! written; before [`ust_cli::heap::enable`], where huge pages are `madvise`, it is not.
//! Without harness (`harness = false`): the checks must run on the main thread. Skipped
//! (and said so) where the machine cannot show it: huge pages off, not 2 MiB, disabled for
//! the process, or no `THPeligible` in smaps.

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

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Why this machine cannot show the advice, if it cannot.
fn cannot_check() -> Option<String> {
    let mode = read("/sys/kernel/mm/transparent_hugepage/enabled");
    if mode.is_empty() || mode.contains("[never]") {
        return Some(format!("transparent huge pages are off ({mode:?})"));
    }
    if read("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").trim() != "2097152" {
        return Some("huge pages are not 2 MiB here".into());
    }
    if read("/proc/self/status").lines().any(|l| l.starts_with("THP_enabled:") && l.trim_end().ends_with('0')) {
        return Some("transparent huge pages are disabled for this process (PR_SET_THP_DISABLE)".into());
    }
    if !read("/proc/self/smaps").contains("THPeligible:") {
        return Some("this kernel's smaps has no THPeligible".into());
    }
    None
}

fn main() {
    if let Some(why) = cannot_check() {
        println!("test memory_is_advised_for_huge_pages_once_enabled ... skipped: {why}");
        return;
    }
    memory_is_advised_for_huge_pages_once_enabled();
    println!("test memory_is_advised_for_huge_pages_once_enabled ... ok");
}

fn memory_is_advised_for_huge_pages_once_enabled() {
    let madvise_mode = read("/sys/kernel/mm/transparent_hugepage/enabled").contains("[madvise]");
    // Before `enable` (every command but report and export): the system allocator's ways.
    let before: Vec<Vec<u64>> = (0..20_000).map(|i| vec![i as u64; 64]).collect();
    if madvise_mode {
        let addr = before[19_999].as_ptr() as usize;
        assert_eq!(thp_eligible(addr), Some(false), "the main heap at {addr:#x}, not enabled");
    }
    ust_cli::heap::enable();
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
    assert!(before.iter().enumerate().all(|(i, v)| v.iter().all(|&x| x == i as u64)));
}
