//! Blocks once on a pipe read in `wait_for_peer` until a peer thread writes a byte after
//! `MS` ms (argument 1, default 200): the kernel tests (system-tests/tests/kernel_user.rs) look
//! for `wait_for_peer` and its source line in the blocked interval's user-space stack of a
//! release build with the default settings (no frame pointers, line tables only).

use std::io::{Read, Write};
use std::time::Duration;

/// Reads one byte from `rx`: the wait the tests look for.
#[inline(never)]
fn wait_for_peer(rx: &mut std::io::PipeReader) -> u8 {
    let mut b = [0u8];
    rx.read_exact(&mut b).expect("the peer writes one byte");
    b[0]
}

fn main() {
    let ms: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let (mut rx, mut tx) = std::io::pipe().expect("pipe");
    let peer = std::thread::Builder::new()
        .name("peer".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            tx.write_all(&[42]).expect("write");
        })
        .expect("spawn");
    let got = wait_for_peer(&mut rx);
    peer.join().expect("peer");
    println!("got {got}");
}
