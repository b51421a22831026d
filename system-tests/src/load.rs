//! The busy machine of issue 34, for the kernel-view tests: two `yes >/dev/null`, a
//! one-byte `dd` in a loop and an exec loop (`/bin/true`), all at `nice -n -10`, in a
//! process group of their own, killed (the group, by its id) when the [`Load`] drops.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The load's shell script.
pub const SCRIPT: &str = "nice -n -10 yes >/dev/null & nice -n -10 yes >/dev/null & \
     nice -n -10 sh -c 'while :; do dd if=/dev/zero of=/dev/null bs=1 count=1 status=none; done' & \
     nice -n -10 sh -c 'while :; do /bin/true; done' & wait";

/// The running load.
pub struct Load {
    child: Child,
}

/// The processes of process group `pgid` whose command name is `comm`.
fn members(pgid: i32, comm: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<i32>().is_ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|s| {
            let Some((head, rest)) = s.rsplit_once(')') else { return false };
            let name = head.split_once('(').map(|x| x.1).unwrap_or("");
            name == comm && rest.split_whitespace().nth(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
        })
        .count()
}

impl Load {
    /// Starts the load (root: `nice -n -10` needs `CAP_SYS_NICE`) and waits until both
    /// `yes` run.
    ///
    /// # Panics
    /// When it cannot start, or its `yes` are not running after a minute.
    pub fn start() -> Load {
        use std::os::unix::process::CommandExt;
        let child = Command::new("sh").args(["-c", SCRIPT]).process_group(0).stdin(Stdio::null()).spawn().expect("the load starts");
        let load = Load { child };
        let pgid = load.child.id() as i32;
        let start = Instant::now();
        while members(pgid, "yes") < 2 {
            assert!(start.elapsed() < Duration::from_secs(60), "the load's two yes are not running");
            std::thread::sleep(Duration::from_millis(10));
        }
        load
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group this Load created (its leader's pid).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}
