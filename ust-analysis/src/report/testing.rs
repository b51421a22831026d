//! Checks of a [`Report`] of the two traces kept in `ust-analysis/tests/data/` (`sleep`,
//! `pingpong`), shared by this crate's tests on the kept traces and the system tests that
//! record the same commands live (cargo feature `testing`; never in a build of `ust`).

use crate::report::fast_hash::HashSet;

use super::analysis::{Wait, Waker};
use super::Report;

/// The sleep of `sh -c 'sleep 0.2; cat /etc/hostname'`: ~200 ms in clock_nanosleep, woken
/// from the timer interrupt (or a timer softirq); the shell's wait4 for it woken by the
/// child's exit.
pub fn check_sleep(r: &Report) {
    let w = r.wakeups.as_ref().unwrap();
    let sleep = w.iter().find(|x| x.name == "sleep" && x.blocked_in == "syscall clock_nanosleep").expect("sleep's wait");
    // Never shorter than the 200 ms asked for (less the timer slack); longer only by
    // scheduling delay, which a loaded 2-core CI machine can stretch well past 60 ms.
    assert!((195_000_000..1_200_000_000).contains(&sleep.duration_ns), "{}", sleep.duration_ns);
    assert!(matches!(&sleep.woken_by, Waker::TimerInterrupt { .. } | Waker::Softirq { .. }), "{:?}", sleep.woken_by);
    let sh = w.iter().find(|x| x.name == "sh" && x.blocked_in == "syscall wait4" && x.duration_ns > 190_000_000).expect("shell's wait4");
    let Waker::Task { name, doing, chain, .. } = &sh.woken_by else { panic!("{:?}", sh.woken_by) };
    assert_eq!(name, "sleep");
    assert_eq!(doing, "in exit_group");
    assert_eq!(chain.as_ref().map(|c| c.blocked_in.as_str()), Some("syscall clock_nanosleep"), "the chain goes up to the sleep");
    let ns = r.syscalls.iter().find(|s| s.name == "clock_nanosleep").unwrap();
    assert_eq!(ns.count, 1);
    assert!(ns.p50_ns >= 199_000_000 && ns.total_ns == ns.max_ns);
    let names: HashSet<&str> = r.tasks.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains("sh") && names.contains("sleep") && names.contains("cat"), "{names:?}");
    assert!(r.tasks.iter().find(|t| t.name == "sleep").unwrap().blocked_ns >= 200_000_000);
}

/// Each wait of the two ping-pong threads in `read` is ended by the other thread's `write`,
/// and the chain alternates.
pub fn check_pingpong(r: &Report) {
    let w = r.wakeups.as_ref().unwrap();
    let reads: Vec<&Wait> = w.iter().filter(|x| x.blocked_in == "syscall read" && (x.name == "pingpong" || x.name == "pong")).collect();
    assert!(reads.len() >= 3, "{w:#?}");
    for x in &reads {
        let Waker::Task { tid, name, doing, chain, .. } = &x.woken_by else { panic!("{:?}", x.woken_by) };
        assert_ne!(*tid, x.tid);
        assert_eq!(name, if x.name == "pingpong" { "pong" } else { "pingpong" });
        assert_eq!(doing, "in write");
        if let Some(c) = chain {
            assert_eq!(c.tid, *tid, "the chain explains the waker");
        }
    }
    assert!(reads.iter().any(|x| matches!(&x.woken_by, Waker::Task { chain: Some(_), .. })));
    assert!(r.user.events.iter().any(|e| e.name == "pingpong:pass" && e.count >= 4), "{:?}", r.user);
}
