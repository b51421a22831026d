//! `ust-consumerd`: the per-user tracing daemon (see [`consumer::daemon`]).
use clap::Parser;

fn main() -> std::process::ExitCode {
    let opts = consumer::daemon::Options::parse();
    match consumer::daemon::run(opts) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ust-consumerd: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
