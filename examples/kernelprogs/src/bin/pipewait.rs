//! Blocks once on a pipe read in `wait_for_peer` until a peer thread writes a byte `MS` ms
//! (argument 1, default 200) after it saw the read block: the kernel tests
//! (system-tests/tests/kernel_user.rs) look for `wait_for_peer` and its source line in the
//! blocked interval's user-space stack of a release build with the default settings (no
//! frame pointers, line tables only), and for a wait of at least `MS` ms whatever the
//! machine's load (the main thread may get a CPU long after the peer started).

use std::io::{Read, Write};
use std::time::Duration;

/// Reads one byte from `rx`: the wait the tests look for.
#[inline(never)]
fn wait_for_peer(rx: &mut std::io::PipeReader) -> u8 {
    let mut b = [0u8];
    rx.read_exact(&mut b).expect("the peer writes one byte");
    b[0]
}

/// `read`'s system call number, as `/proc/<pid>/task/<tid>/syscall` prints it.
#[cfg(target_arch = "x86_64")]
const SYS_READ: &str = "0";
#[cfg(target_arch = "aarch64")]
const SYS_READ: &str = "63";

/// True while thread `tid` of this process is inside `read` (proc(5): the first field of
/// `syscall` is the number of the call it is in, `running` when it runs).
fn in_read(tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).is_ok_and(|s| s.split_whitespace().next() == Some(SYS_READ))
}

fn main() {
    let ms: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let (mut rx, mut tx) = std::io::pipe().expect("pipe");
    let peer = std::thread::Builder::new()
        .name("peer".into())
        .spawn(move || {
            let main = std::process::id();
            while !in_read(main) {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_millis(ms));
            tx.write_all(&[42]).expect("write");
        })
        .expect("spawn");
    let got = wait_for_peer(&mut rx);
    peer.join().expect("peer");
    println!("got {got}");
}
