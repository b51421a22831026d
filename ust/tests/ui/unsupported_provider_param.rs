// The same for a parameter of a #[ust::provider] function.
#[ust::provider]
mod myapp {
    #[tracepoint]
    pub fn opened(path: std::path::PathBuf) {}
}

fn main() {}
