//! `pinned N [HOLD_FILE]`: one thread per CPU this process may run on, each pinned to its
//! CPU (`sched_setaffinity`), emits N events `alloc:ev { cpu, thread, seq }` (`cpu` is
//! `sched_getcpu` at the call, `seq` counts from 0 in each thread). Then it prints
//!
//! ```text
//! pinned: E events from T threads
//! pinned buffers: M mappings, A bytes mapped, B bytes backed, R bytes resident
//! ```
//!
//! where the second line sums the process's mappings of ust's ring buffers (`memfd:ust-`
//! in `/proc/self/maps`): their length; the memory their files hold (`st_blocks` of
//! `/proc/self/map_files/RANGE`, readable by root: pages allocated by `fallocate` or
//! by a first write, whoever did it; 0 when it cannot be read); and their resident pages
//! (`mincore`: for shared memory, the pages of the file that were written; pages that
//! `fallocate` allocated but nobody wrote yet are not counted, though they hold memory). With HOLD_FILE it then waits until
//! that file exists before exiting, so a test can measure or snapshot while it lives.

fn cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer and size describe `set`.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(r, 0, "sched_getaffinity");
    // SAFETY: CPU_ISSET reads the set only.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

fn pin(cpu: usize) {
    // SAFETY: as in `cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE (it came from `cpus`).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the pointer and size describe `set`; 0 is this thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(r, 0, "sched_setaffinity({cpu})");
}

/// (mappings, bytes mapped, bytes backed, bytes resident) of ust's buffer memfds in this
/// process.
fn buffer_memory() -> (usize, u64, u64, u64) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let page = 4096u64;
    let (mut n, mut mapped, mut backed, mut resident) = (0, 0, 0, 0);
    for line in maps.lines().filter(|l| l.contains("/memfd:ust-")) {
        let Some(range) = line.split_whitespace().next() else { continue };
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else { continue };
        let len = (b - a) as usize;
        let mut vec = vec![0u8; len.div_ceil(page as usize)];
        // SAFETY: [a, b) is a mapping of this process (listed in its maps, and ust never
        // unmaps a buffer); mincore only reports residency into `vec`, one byte per page.
        let r = unsafe { libc::mincore(a as *mut libc::c_void, len, vec.as_mut_ptr()) };
        if r != 0 {
            continue;
        }
        n += 1;
        mapped += len as u64;
        backed += std::fs::metadata(format!("/proc/self/map_files/{range}")).map_or(0, |m| std::os::unix::fs::MetadataExt::blocks(&m) * 512);
        resident += vec.iter().filter(|v| **v & 1 != 0).count() as u64 * page;
    }
    (n, mapped, backed, resident)
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let hold = std::env::args().nth(2);
    let cpus = cpus();
    let handles: Vec<_> = cpus
        .iter()
        .enumerate()
        .map(|(t, &cpu)| {
            std::thread::spawn(move || {
                pin(cpu);
                for i in 0..n {
                    // SAFETY: sched_getcpu has no preconditions.
                    let at = unsafe { libc::sched_getcpu() } as u32;
                    ust::tracepoint!(alloc, ev, cpu: u32 = at, thread: u32 = t as u32, seq: u64 = i);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    println!("pinned: {} events from {} threads", n * cpus.len() as u64, cpus.len());
    let (m, a, b, r) = buffer_memory();
    println!("pinned buffers: {m} mappings, {a} bytes mapped, {b} bytes backed, {r} bytes resident");
    if let Some(f) = hold {
        while !std::path::Path::new(&f).exists() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
