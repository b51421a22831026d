//! Logs only through the `log` crate, recorded by `ust::log::init()`: a library-like module
//! `netlib` logging at every level (one record with a target of its own), and the program
//! itself warning between its calls. Prints `max_level <LEVEL>` (what `log::max_level()`
//! is once the sessions are followed) before it logs.
//!
//! With the argument `wait`, it reads commands from its standard input instead, one a
//! line: `level` prints `max_level <LEVEL>` again, `log` logs as above; it ends at EOF.

/// Stands for a dependency: it knows nothing of ust, only `log`.
mod netlib {
    pub fn connect(host: &str, port: u16) {
        log::info!("connecting to {host}:{port}");
        log::debug!(target: "netlib::wire", "handshake of {} bytes", 517);
        log::trace!("socket options set");
    }

    pub fn fail(code: i32) {
        log::error!("connection refused (code {code})");
    }
}

fn main() {
    ust::log::init().expect("no other logger is installed");
    println!("max_level {}", log::max_level());
    if std::env::args().nth(1).as_deref() != Some("wait") {
        log_all();
        return;
    }
    for line in std::io::stdin().lines() {
        match line.expect("stdin").as_str() {
            "level" => println!("max_level {}", log::max_level()),
            "log" => {
                log_all();
                println!("logged");
            }
            other => panic!("unknown command {other:?}"),
        }
    }
}

fn log_all() {
    netlib::connect("db.local", 5432);
    log::warn!("retrying in {} ms", 250);
    netlib::fail(111);
}
