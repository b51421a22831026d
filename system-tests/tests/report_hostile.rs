//! `ust report` on a hostile trace: a FIFO or a link to a device where the trace should
//! have a regular file never blocks it or exhausts its memory; it ends, and says what is
//! wrong where that file was needed.

use system_tests as common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{copy_dir, output_within, ust_bin};

fn kept_sleep_trace(tmp: &Path) -> PathBuf {
    let dir = tmp.join("sleep");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../ust-analysis/tests/data/sleep"), &dir);
    dir
}

fn mkfifo(p: &Path) {
    let _ = std::fs::remove_file(p);
    rustix::fs::mkfifoat(rustix::fs::CWD, p, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
}

#[test]
fn fifos_and_devices_in_a_trace_never_block_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    // Every saved memory map a FIFO: the report still ends, with its other views.
    let dir = kept_sleep_trace(tmp.path());
    for e in std::fs::read_dir(dir.join("proc")).unwrap().flatten() {
        mkfifo(&e.path().join("maps"));
    }
    let mut cmd = Command::new(ust_bin());
    cmd.arg("report").arg(&dir).arg("--faults");
    let o = output_within(cmd, Duration::from_secs(30));
    assert!(o.status.code().is_some(), "the report must end by itself: {o:?}");
    // The kernel metadata a FIFO, then a link to /dev/zero (not followed: trace files
    // are not read through links): a clear error, exit 1.
    let link_to_zero = |p: &Path| {
        let _ = std::fs::remove_file(p);
        std::os::unix::fs::symlink("/dev/zero", p).unwrap();
    };
    for (make, said) in [(mkfifo as fn(&Path), "not a regular file"), (link_to_zero as fn(&Path), "symbolic link")] {
        let dir = kept_sleep_trace(&tmp.path().join(format!("m{}", rand_suffix())));
        make(&dir.join("kernel/metadata"));
        let mut cmd = Command::new(ust_bin());
        cmd.arg("report").arg(&dir);
        let o = output_within(cmd, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("metadata") && err.contains(said), "{err}");
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}
