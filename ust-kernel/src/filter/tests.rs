//! Unit tests of the view filter: who may see a task, what a path could name, which
//! programs raise privileges; other users' tasks reduced to their kind, forks followed,
//! rechecks dated.

use super::*;

use std::os::unix::fs::MetadataExt;

#[test]
fn own_process_is_seen_and_others_are_not() {
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let me = std::process::id() as i32;
    assert!(may_see(me, uid, gid));
    assert!(!may_see(me, uid + 1, gid));
    assert!(!may_see(0, uid, gid));
    assert!(!may_see(i32::MAX, uid, gid));
    assert!(!user_could_swap("/usr/bin/sleep", 4242, 4242), "root's directories only");
    assert!(user_could_swap("/tmp/anything", 4242, 4242), "a world-writable directory");
    let rootdir = tempfile::tempdir().unwrap();
    let inside = rootdir.path().join("prog");
    std::fs::write(&inside, "x").unwrap();
    assert!(!user_could_swap(inside.to_str().unwrap(), 4242, 4242), "root's entry of sticky /tmp, in root's directory");
    assert!(user_could_swap("bin/sleep", 4242, 4242), "relative");
    assert!(user_could_swap("/usr/bin/sleep", 0, 0), "the directories are this user's");
    let d = tempfile::tempdir().unwrap();
    let link = d.path().join("l");
    std::os::unix::fs::symlink("/usr/bin/sleep", &link).unwrap();
    assert!(!user_could_swap(link.to_str().unwrap(), 4242, 4242), "a symbolic link in root's directory is followed");
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(d.path(), Some(4242), Some(4242)).unwrap();
        assert!(user_could_swap(link.to_str().unwrap(), 4242, 4242), "a symbolic link in the user's directory");
    }
    if std::fs::symlink_metadata("/bin").is_ok_and(|m| m.file_type().is_symlink()) {
        assert!(!user_could_swap("/bin/sleep", 4242, 4242), "a link in root's directory is followed");
    }
    assert!(readable_by("/bin/sh", 4242, 4242) && !readable_by("/etc/shadow", 4242, 4242));
    assert!(privileged_program("/no/such/file"), "fails closed");
    assert!(privileged_program("/proc/self/stat"), "neither ELF nor #!");
    assert!(!privileged_program("/bin/sh"));
    let d = tempfile::tempdir().unwrap();
    let script = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    assert!(!privileged_program(&script("plain", "#!/bin/sh\necho\n")));
    assert!(!privileged_program(&script("spaced", "#!  /bin/sh -e\n")));
    if std::fs::metadata("/usr/bin/passwd").is_ok_and(|m| m.mode() & libc::S_ISUID != 0) {
        assert!(privileged_program(&script("suid", "#!/usr/bin/passwd -S\n")), "a set-ID interpreter");
    }
    let chain = script("chain", "#!/bin/sh\n");
    let looped = d.path().join("loop").to_string_lossy().into_owned();
    std::fs::write(&looped, format!("#!{looped}\n")).unwrap();
    assert!(privileged_program(&looped), "beyond four levels: fails closed");
    assert!(!privileged_program(&script("via", &format!("#!{chain}\n"))));
    assert_eq!(parent_of(me), Some(rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())));
}

fn fmt(name: &str, id: u16, fields: &[(&str, &str, usize, usize)]) -> (String, EventFormat) {
    let mut t = format!("name: {name}\nID: {id}\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n");
    for (ty, n, off, size) in fields {
        t += &format!("\tfield:{ty} {n};\toffset:{off};\tsize:{size};\tsigned:1;\n");
    }
    (name.to_string(), EventFormat::parse("sched", &t).unwrap())
}

fn record(id: u16, cur: i32, len: usize, ints: &[(usize, i32)], texts: &[(usize, &str)]) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0..2].copy_from_slice(&id.to_le_bytes());
    p[4..8].copy_from_slice(&cur.to_le_bytes());
    for (off, v) in ints {
        p[*off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    for (off, t) in texts {
        p[*off..off + t.len()].copy_from_slice(t.as_bytes());
    }
    p
}

#[test]
fn others_are_reduced_to_their_kind_and_forks_are_followed() {
    let table = crate::ctf::EventTable::new(vec![
        fmt(
            "sched_switch",
            1,
            &[
                ("char", "prev_comm[16]", 8, 16),
                ("pid_t", "prev_pid", 24, 4),
                ("int", "prev_prio", 28, 4),
                ("long", "prev_state", 32, 8),
                ("char", "next_comm[16]", 40, 16),
                ("pid_t", "next_pid", 56, 4),
                ("int", "next_prio", 60, 4),
            ],
        ),
        fmt("sched_waking", 2, &[("char", "comm[16]", 8, 16), ("pid_t", "pid", 24, 4), ("int", "prio", 28, 4), ("int", "target_cpu", 32, 4)]),
        fmt(
            "sched_process_fork",
            3,
            &[("char", "parent_comm[16]", 8, 16), ("pid_t", "parent_pid", 24, 4), ("char", "child_comm[16]", 28, 16), ("pid_t", "child_pid", 44, 4)],
        ),
    ]);
    let (switch, waking, fork) = (&table.events[0], &table.events[1], &table.events[2]);
    let me = std::process::id() as i32;
    // pid 1 is no one's child here and not a kernel thread; pid 2 is kthreadd.
    let mut v = ViewFilter::new(1000, 1000, me);
    let mut p = record(1, me, 64, &[(24, me), (28, 120), (56, 1), (60, 100)], &[(8, "mine"), (40, "init-secret")]);
    assert_eq!(v.apply(switch, &mut p), Verdict::Keep);
    assert_eq!(read_uint(&p, 56, 4), Some(OTHER_USER_TID as u32 as u64));
    assert_eq!(&p[40..55], &OTHER_USER.as_bytes()[..15]);
    assert_eq!(read_uint(&p, 60, 4), Some(0), "the other task's priority is not shown");
    assert_eq!(read_uint(&p, 24, 4), Some(me as u64), "the visible side is kept");
    let mut p = record(1, 1, 64, &[(24, 1), (56, 2)], &[]);
    assert_eq!(v.apply(switch, &mut p), Verdict::Drop, "a switch between two others");
    let mut p = record(2, 2, 36, &[(24, me)], &[(8, "mine")]);
    assert_eq!(v.apply(waking, &mut p), Verdict::Keep);
    assert_eq!(read_uint(&p, 4, 4), Some(KERNEL_THREAD_TID as u32 as u64), "a kernel thread woke it");
    let mut p = record(2, me, 36, &[(24, 1)], &[]);
    assert_eq!(v.apply(waking, &mut p), Verdict::Drop, "waking another task");
    let child = i32::MAX - 7;
    let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
    assert_eq!(v.apply(switch, &mut p), Verdict::Drop, "not yet forked");
    let mut p = record(3, me, 48, &[(24, me), (44, child)], &[]);
    assert_eq!(v.apply(fork, &mut p), Verdict::Keep);
    let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
    assert_eq!(v.apply(switch, &mut p), Verdict::Keep, "the child is followed from its fork");
    assert_eq!(read_uint(&p, 56, 4), Some(0), "the idle task stays 0");
    // A recheck at time 1000 finds the child gone (no such pid) and this process not
    // uid 1000's (and so does the next): both leave the view at 1000, not for the older
    // records still to come.
    // The child is found gone by a look that ends at 1005 (the clock called after it):
    // it leaves then, not at 1000 — it may have run until just before the look.
    v.recheck(1000, || 1005);
    v.recheck(1010, || 1012);
    v.advance_to(999);
    let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
    assert_eq!(v.apply(switch, &mut p), Verdict::Keep, "a record from before the recheck");
    assert!(v.sees(me) && v.sees(child));
    v.advance_to(1000);
    assert!(!v.sees(me), "refused twice: from the first recheck's time on");
    let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
    assert_eq!(v.apply(switch, &mut p), Verdict::Keep, "a record of the gone task from before the look that found it gone");
    v.advance_to(1005);
    let mut p = record(1, child, 64, &[(24, child), (56, 0)], &[]);
    assert_eq!(v.apply(switch, &mut p), Verdict::Drop, "from the look on");
    assert!(!v.sees(me) && !v.sees(child));
}

/// A session's probes for a user ([`ViewFilter::owner`]): no tree; a task is in the view
/// when the user could ptrace it (this process: its own ids), another user's is not; a
/// record read while its task lived keeps that verdict when applied after it is gone.
#[test]
fn owner_view_is_every_task_the_user_could_ptrace() {
    let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
    let me = std::process::id() as i32;
    let mine = ViewFilter::owner(uid, gid);
    assert!(mine.sees(me) && !mine.sees_all() && mine.visible().next().is_none());
    assert!(!ViewFilter::owner(uid + 4242, gid + 4242).sees(me), "another user's task");
    // A task that never was: judged gone when read, left out (and said).
    let mut f = ViewFilter::owner(uid, gid);
    let ev = KernelEvent { name: "compute".into(), id: 1, format: None, fields: Vec::new() };
    let mut payload = vec![0u8; 8];
    payload[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
    f.observe(&ev, &payload, 10);
    assert_eq!(f.take_exec_exits().len(), 1, "said once");
    f.advance_to(10);
    assert_eq!(f.apply(&ev, &mut payload), Verdict::Drop);
    // This process's record, read now, applied later: kept.
    payload[4..8].copy_from_slice(&me.to_le_bytes());
    f.observe(&ev, &payload, 20);
    f.advance_to(20);
    assert_eq!(f.apply(&ev, &mut payload), Verdict::Keep);
}
