//! Records the system calls of a command with the ptrace recorder alone (tier 1 of `ust
//! trace --kernel` records them so, beside its perf_event_open recording):
//! `ptrace_record OUTPUT CMD [ARGS...]` writes `OUTPUT/kernel/` (read it with `babeltrace2
//! OUTPUT/kernel`) and exits with the command's status. For measuring the recorder alone
//! against strace, e.g.
//! `taskset -c 1 perf stat -e task-clock ptrace_record /tmp/out ./getppid-loop`.

use std::os::unix::process::ExitStatusExt;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: ptrace_record OUTPUT CMD [ARGS...]");
        std::process::exit(2);
    };
    let out = std::path::Path::new(out);
    let dir = ust_ctf::outdir::TraceDir::create(out, None).unwrap_or_else(|e| {
        eprintln!("ptrace_record: {}: {e}", out.display());
        std::process::exit(1)
    });
    let trace = ust_kernel::ptrace::SyscallTrace::create(&dir).unwrap_or_else(|e| {
        eprintln!("ptrace_record: {}: {e}", out.display());
        std::process::exit(1)
    });
    let rec = match ust_kernel::ptrace::SyscallRecorder::spawn(ust_kernel::ptrace::Launch::new(program, rest), trace.sink().clone()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ptrace_record: cannot run {program}: {e}");
            std::process::exit(127);
        }
    };
    if let Some(why) = rec.untraced() {
        eprintln!("ptrace_record: no system calls recorded: {why}");
    }
    let pid = rec.pid();
    let status = rec.wait();
    let s = rec.finish();
    if let Err(e) = trace.finish(&dir, pid) {
        eprintln!("ptrace_record: writing the metadata: {e}");
    }
    let events: u64 = s.counts.iter().map(|c| c.1).sum();
    eprintln!("ptrace_record: {events} events of {} tasks ({} stops) in {}", s.tasks, s.stops, out.join("kernel").display());
    if let Some(e) = s.error {
        eprintln!("ptrace_record: {e}");
    }
    std::process::exit(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
}
