//! The CPUs of this machine as the kernel lists them in `/sys/devices/system/cpu/possible`
//! (a list such as `0-3,8-11`): the runtime registers with their count, the daemon
//! allocates one buffer per possible CPU per channel, and kernel recording opens one
//! stream per possible CPU. All three must agree, so they all ask here.

/// Most CPUs one range of the list may add (a hostile or broken sysfs cannot make a
/// caller allocate without bound).
const MAX_RANGE: u32 = 4096;

/// Parses a kernel CPU list (`0-3,8`, whitespace around it ignored) into CPU numbers in
/// the order listed; a part that does not parse is skipped, and each range adds at most
/// 4096 CPUs.
pub fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        match part.trim().split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b.min(a.saturating_add(MAX_RANGE - 1)));
                }
            }
            None => cpus.extend(part.trim().parse::<u32>().ok()),
        }
    }
    cpus
}

/// The possible CPUs (`/sys/devices/system/cpu/possible`); `[0]` when it cannot be read
/// or lists nothing.
pub fn possible_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let cpus = parse_cpu_list(&text);
    if cpus.is_empty() {
        vec![0]
    } else {
        cpus
    }
}

/// Environment variable of debug builds only (`cfg(debug_assertions)`): a number of
/// possible CPUs (1 to 4096) that [`possible_cpu_count`] answers instead of the kernel's,
/// so that tests make the runtime and the daemon of one 2-CPU machine allocate, register
/// and grant buffers as on a machine of that many CPUs (BENCHMARKS.md's 384-CPU memory
/// figures; `system-tests/tests/buffer_memory.rs`). Release builds (`cargo install`,
/// scripts/install.sh) never read it. It changes only how many buffers exist: writers
/// still run on the real CPUs, so buffers past them stay unused, as on a machine whose
/// other CPUs are idle.
pub const ENV_FAKE_POSSIBLE_CPUS: &str = "UST_DEBUG_BUILD_FAKE_POSSIBLE_CPUS";

/// [`ENV_FAKE_POSSIBLE_CPUS`]'s value when this is a debug build and it is set to a
/// number in 1..=4096 (read at the first call, then kept).
pub fn fake_possible_cpus() -> Option<u32> {
    if !cfg!(debug_assertions) {
        return None;
    }
    // Read once (the runtime's constructor asks first): a fork child never touches the
    // environment lock for it.
    static FAKE: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *FAKE.get_or_init(|| std::env::var(ENV_FAKE_POSSIBLE_CPUS).ok()?.trim().parse::<u32>().ok().filter(|n| (1..=MAX_RANGE).contains(n)))
}

/// Number of per-CPU buffers a channel needs: the largest possible CPU number plus one
/// (`0-1` → 2), else `sysconf(_SC_NPROCESSORS_CONF)`, at least 1. (In a debug build,
/// [`ENV_FAKE_POSSIBLE_CPUS`] when set.)
pub fn possible_cpu_count() -> u32 {
    if let Some(n) = fake_possible_cpus() {
        return n;
    }
    if let Ok(text) = std::fs::read_to_string("/sys/devices/system/cpu/possible") {
        if let Some(max) = parse_cpu_list(&text).into_iter().max() {
            return max.saturating_add(1);
        }
    }
    // SAFETY: sysconf has no preconditions and reads no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    u32::try_from(n).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n"), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
        assert_eq!(parse_cpu_list(""), Vec::<u32>::new());
        assert_eq!(parse_cpu_list("x,2"), vec![2]);
        assert_eq!(parse_cpu_list("0-4294967295").len(), MAX_RANGE as usize);
        assert!(possible_cpu_count() >= 1);
        assert!(!possible_cpus().is_empty());
    }
}
