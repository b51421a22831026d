//! Reads a trace and prints events per second: `ctf_bench [--parallel|--per-stream]
//! [--values] TRACE_DIR`. Without `--values` only the events are decoded (class, stream,
//! timestamp: what a merge by time needs); with it every scope's value tree is built too.
//! Figures from a loaded machine are indicative only.

use std::time::Instant;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let values = args.iter().any(|a| a == "--values");
    args.retain(|a| a != "--values");
    let (mode, dir) = match args.as_slice() {
        [d] => ("", d.clone()),
        [m, d] => (m.as_str(), d.clone()),
        _ => {
            eprintln!("usage: ctf_bench [--parallel|--per-stream] [--values] TRACE_DIR");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let trace = ctf_reader::CtfTrace::open(&dir).unwrap_or_else(|e| {
        eprintln!("ctf_bench: {e}");
        std::process::exit(1)
    });
    let opened = t0.elapsed().as_secs_f64();
    let (mut events, mut errors, mut check) = (0u64, 0u64, 0u64);
    let mut visit = |r: Result<ctf_reader::Message<'_>, ctf_reader::Error>| match r {
        Ok(ctf_reader::Message::Event(e)) => {
            events += 1;
            check = check.wrapping_add(e.cycles);
            if values {
                check = check.wrapping_add(e.payload().is_some() as u64);
                check = check.wrapping_add(e.scope(ctf_reader::Scope::EventCommonContext).is_some() as u64);
            }
        }
        Ok(_) => {}
        Err(_) => errors += 1,
    };
    match mode {
        "--per-stream" => {
            for i in 0..trace.streams().len() {
                let mut it = trace.stream(i);
                while let Some(r) = it.next() {
                    visit(r);
                }
            }
        }
        _ => {
            let mut it = if mode == "--parallel" { trace.messages_parallel() } else { trace.messages() };
            while let Some(r) = it.next() {
                visit(r);
            }
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "{events} events, {errors} errors in {dt:.3} s (metadata {opened:.3} s): {:.0} events/s, {:.0} events/s after the metadata (checksum {check})",
        events as f64 / dt,
        events as f64 / (dt - opened)
    );
}
