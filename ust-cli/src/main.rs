//! `ust`: the command line (see [`ust_cli::cli`]).

/// mimalloc, not glibc's malloc: `ust report` keeps every event of a trace with its fields
/// (a few allocations each, freed together at the end), where mimalloc's malloc and free
/// cost a third less of the report's time (BENCHMARKS.md, "Reading traces").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ust_cli::cli::main()
}
