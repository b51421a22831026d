//! strace as the oracle of the system-call counts: its `-c` table read back, and the
//! same counts made from a kernel trace's `syscall_entry_<call>`/`syscall_exit_<call>`
//! events as babeltrace2 prints them (a call counts at its exit, as strace counts it).

use std::collections::{BTreeMap, HashMap};

/// The fixed workload of the system-call count tests (every tier), in an empty
/// environment: the same for strace and for `ust trace`, whose own environment (its session
/// token) would otherwise differ in size. A shell, a file read, a failed lookup.
pub const WORKLOAD: [&str; 6] = ["env", "-i", "PATH=/usr/bin:/bin", "sh", "-c", "cat /etc/hostname; ls /nonexistent || true"];

/// `strace -c` rows (its default columns: `% time seconds usecs/call calls [errors]
/// syscall`): system call name to (calls, errors).
pub fn strace_counts(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() >= 5 && t[0].starts_with(|c: char| c.is_ascii_digit()) && t[t.len() - 1] != "total" {
            let errors = if t.len() == 6 { t[4].parse().unwrap() } else { 0 };
            m.insert(t[t.len() - 1].to_string(), (t[3].parse().unwrap(), errors));
        }
    }
    m
}

/// The `tid` context of a babeltrace2 line of a kernel trace (`}, { tid = N }`).
pub fn tid_of(line: &str) -> Option<i32> {
    line.split("}, { tid = ").nth(1)?.split(' ').next()?.parse().ok()
}

/// (calls, errors) per system call of babeltrace2's text of a kernel trace, for the
/// threads `keep` accepts: an entry opens the thread's call, its exit counts it, an error
/// being a `ret` in -4095..=-1.
pub fn trace_counts(text: &str, keep: &dyn Fn(i32) -> bool) -> BTreeMap<String, (u64, u64)> {
    let mut open: HashMap<i32, String> = HashMap::new();
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for l in text.lines() {
        let Some(tid) = tid_of(l).filter(|&t| keep(t)) else { continue };
        let Some(e) = super::bt_events(l).pop() else { continue };
        if let Some(call) = e.name.strip_prefix("syscall_entry_") {
            open.insert(tid, call.to_string());
        } else if e.name.starts_with("syscall_exit_") {
            let Some(call) = open.remove(&tid) else { continue };
            let ret: i64 = super::fields_map(&e.fields).get("ret").and_then(|r| r.parse().ok()).unwrap_or_else(|| panic!("an exit has its ret: {l}"));
            let c = out.entry(call).or_default();
            c.0 += 1;
            c.1 += u64::from((-4095..=-1).contains(&ret));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_strace_table_is_read() {
        let t = "% time     seconds  usecs/call     calls    errors syscall\n------ ----------- ----------- --------- --------- ----------------\n 30.00    0.000030           3        10         2 openat\n 10.00    0.000010          10         1           execve\n------ ----------- ----------- --------- --------- ----------------\n100.00    0.000040           3        11         2 total\n";
        let m = super::strace_counts(t);
        assert_eq!(m.len(), 2);
        assert_eq!(m["openat"], (10, 2));
        assert_eq!(m["execve"], (1, 0));
    }
}
