//! Records the compiler version and target for the runtime's compatibility key
//! (`runtime/process.rs`): two copies of ust in one process share state only when they were
//! built alike.

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version =
        std::process::Command::new(rustc).arg("--version").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    println!("cargo:rustc-env=UST_RUSTC_VERSION={version}");
    println!("cargo:rustc-env=UST_BUILD_TARGET={}", std::env::var("TARGET").unwrap_or_default());
    println!("cargo:rerun-if-env-changed=RUSTC");
}
