//! Fork without exec (LTTng's `tests/regression/ust/fork`, ported): a child's event
//! emitted right after `fork()` returns, before any exec, is recorded in the child's own
//! trace, and the parent's trace holds only the parent's events.

use system_tests as common;

use std::process::{Command, Stdio};

use common::*;

#[test]
fn a_fork_childs_first_event_is_recorded() {
    let d = TestDaemon::start();
    let out = d.output("fork");
    d.ust_ok(&["create", "f", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "forknow:*"]);
    d.ust_ok(&["start"]);
    let k = 4u32;
    let o = Command::new(program_here("forknow")).arg(k.to_string()).env("UST_RUNDIR", &d.rundir).stdin(Stdio::null()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let pids: Vec<i32> = stdout.trim().strip_prefix("forknow: ").unwrap().split(' ').map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), k as usize);
    d.ust_ok(&["stop"]);
    d.ust_ok(&["destroy"]);
    let evs = bt_events(&babeltrace(&out));
    for (i, pid) in pids.iter().enumerate() {
        let mine: Vec<_> = evs.iter().filter(|e| e.pid == *pid).collect();
        assert_eq!(mine.len(), 1, "child {i} (pid {pid}): {mine:?}");
        assert_eq!((mine[0].name.as_str(), fields_map(&mine[0].fields)["k"]), ("forknow:child", i.to_string().as_str()));
    }
    let parent: Vec<_> = evs.iter().filter(|e| !pids.contains(&e.pid)).collect();
    assert_eq!(parent.len(), k as usize, "{parent:?}");
    assert!(parent.iter().all(|e| e.name == "forknow:parent"), "{parent:?}");
}
