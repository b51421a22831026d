//! A program that owns every descriptor from 3 up, as daemons that "close all files" at
//! start do, for system-tests/tests/runtime_harm.rs: at the top of `main` (the runtime's
//! constructor has run) it closes descriptors 3..1023, opens the file named by argument 1
//! (it gets descriptor 3), then for about 1.5 s writes a numbered line to it every 10 ms
//! while firing `closefds:tick`. Any failed write is reported on stderr and exits 1; the
//! last line of stdout is `wrote <n> lines to fd <fd>`.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

fn main() {
    let path = std::env::args().nth(1).expect("usage: closefds <file>");
    for fd in 3..1024 {
        // SAFETY: this program owns every descriptor of its process (that is the point);
        // closing one that is not open is harmless (EBADF).
        unsafe { libc::close(fd) };
    }
    let mut file = std::fs::File::create(&path).expect("create the output file");
    let fd = file.as_raw_fd();
    let deadline = Instant::now() + Duration::from_millis(1500);
    let mut n = 0u32;
    while Instant::now() < deadline {
        ust::tracepoint!(closefds, tick, n: u32 = n);
        if let Err(e) = writeln!(file, "line {n}") {
            eprintln!("closefds: write {n} to fd {fd} failed: {e}");
            std::process::exit(1);
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: fstat into a zeroed struct on the program's own descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        eprintln!("closefds: fd {fd} is no longer the regular file this program opened");
        std::process::exit(1);
    }
    ust::tracepoint!(closefds, done, n: u32 = n);
    println!("wrote {n} lines to fd {fd}");
}
