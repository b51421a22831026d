//! `ust`: the command line (see [`ust_cli::cli`]).
fn main() -> std::process::ExitCode {
    ust_cli::cli::main()
}
