//! `ust-consumerd`: the per-user tracing daemon (see [`ust_consumerd::daemon`]).
use clap::Parser;

fn main() -> std::process::ExitCode {
    let opts = ust_consumerd::daemon::Options::parse();
    match ust_consumerd::daemon::run(opts) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ust-consumerd: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
