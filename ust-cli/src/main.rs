//! `ust`: the command line (see [`ust_cli::cli`]).

#[global_allocator]
static HEAP: ust_cli::heap::HugePageHeap = ust_cli::heap::HugePageHeap;

fn main() -> std::process::ExitCode {
    ust_cli::cli::main()
}
