//! Two threads hand a token to each other through two pipes, `ROUNDS` times (argument 1,
//! default 5), each holding it `HOLD_MS` ms (argument 2, default 5) before passing it on, so
//! each thread's wait in `read` is ended by the other thread's `write`. Emits
//! `pingpong:pass` per hand-over.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn busy(ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

fn player(mut rx: std::fs::File, mut tx: std::fs::File, rounds: u32, hold: u64, side: u8, serve: bool) {
    let mut b = [side];
    if serve {
        tx.write_all(&b).unwrap();
    }
    for i in 0..rounds {
        rx.read_exact(&mut b).unwrap();
        busy(hold);
        ust::tracepoint!(pingpong, pass, side: u8 = side, round: u32 = i);
        if !(serve && i + 1 == rounds) {
            tx.write_all(&[side]).unwrap();
        }
    }
}

fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    assert_eq!(unsafe { libc_pipe(fds.as_mut_ptr()) }, 0);
    use std::os::fd::FromRawFd;
    // SAFETY: both fds were just created and are owned here.
    unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) }
}

extern "C" {
    #[link_name = "pipe"]
    fn libc_pipe(fds: *mut i32) -> i32;
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let hold: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let (a_rx, b_tx) = pipe();
    let (b_rx, a_tx) = pipe();
    let t = std::thread::Builder::new().name("pong".into()).spawn(move || player(b_rx, b_tx, rounds, hold, 2, false)).unwrap();
    player(a_rx, a_tx, rounds, hold, 1, true);
    t.join().unwrap();
    println!("pingpong: {rounds} rounds");
}
