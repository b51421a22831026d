//! The `ust` binary's argument handling, on its own (no daemon): usage errors exit 2 with
//! clap's message, and `--help` names every verb.

use std::process::Command;

fn ust(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ust")).args(args).env("UST_RUNDIR", "/nonexistent/ust-test").output().expect("run ust")
}

#[test]
fn help_lists_the_verbs() {
    let out = ust(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for verb in [
        "create",
        "enable-channel",
        "enable-event",
        "add-context",
        "start",
        "stop",
        "destroy",
        "list",
        "status",
        "view",
        "trace",
        "report",
        "snapshot",
        "crash-dump",
        "track",
        "untrack",
        "export",
    ] {
        assert!(text.contains(verb), "`ust --help` does not name {verb}:\n{text}");
    }
}

#[test]
fn unknown_verb_is_a_usage_error() {
    let out = ust(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("frobnicate"));
}

#[test]
fn export_refuses_an_unknown_format_and_a_malformed_counter() {
    let out = ust(&["export", "/tmp", "--format", "svg"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("perfetto"), "the accepted formats are named");
    let out = ust(&["export", "/tmp", "--counter", "depth"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("provider:event:field"));
    let out = ust(&["trace", "-t", "nosuch", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a context type"));
}

#[test]
fn as_user_needs_kernel_and_is_in_the_help() {
    let out = ust(&["trace", "--as-user", "nobody", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kernel"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ust(&["trace", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--as-user [<USER>]") && help.contains("SUDO_UID"), "{help}");
}
