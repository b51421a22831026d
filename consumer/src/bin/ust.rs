//! `ust`: the command line (see [`consumer::cli`]).
fn main() -> std::process::ExitCode {
    consumer::cli::main()
}
