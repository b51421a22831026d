//! The `--help` texts and the user guide make the same claims: each claim below is looked
//! up, in words, in a command's help and in a page of docs/ (whitespace folded, so that line
//! breaks do not matter), and help texts once wrong stay fixed.

use clap::CommandFactory;
use ust_cli::cli::Cli;

/// The long help of `ust PATH...`, whitespace folded.
fn help(path: &[&str]) -> String {
    let mut cmd = Cli::command();
    cmd.build();
    let mut c = &mut cmd;
    for p in path {
        c = c.find_subcommand_mut(p).unwrap_or_else(|| panic!("no subcommand {p}"));
    }
    fold(&c.render_long_help().to_string())
}

/// docs/NAME, whitespace folded.
fn doc(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(name);
    fold(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

fn fold(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn help_and_docs_agree() {
    // (command, what its help says, page, what the page says)
    let claims: &[(&[&str], &str, &str, &str)] = &[
        (&["trace"], "CMD's own user-space events are recorded too", "kernel-view.md", "CMD's own user-space events are recorded as well"),
        (
            &["enable-event"],
            "A tracepoint declared without `level =` is TRACE_DEBUG_LINE (13), as in LTTng",
            "sessions.md",
            "A tracepoint without `level =` is `TRACE_DEBUG_LINE` (13), as in LTTng-UST",
        ),
        (
            &["enable-event"],
            "A tracepoint declared without `level =` is TRACE_DEBUG_LINE (13)",
            "getting-started.md",
            "A tracepoint without `level =` is `TRACE_DEBUG_LINE` (13)",
        ),
        (&["trace"], "whenever `ust trace` receives SIGUSR1", "flight-recorder.md", "A snapshot is also taken when `ust trace` receives SIGUSR1"),
        (&["trace"], "--overwrite", "flight-recorder.md", "`ust trace --overwrite --subbuf-size 4k --num-subbuf 4 -- CMD`"),
        (
            &["report"],
            "the report is then printed only when --format is given",
            "kernel-view.md",
            "it then prints only where the SVG went, and the report too when `--format` is given",
        ),
        (&["report"], "without blocked intervals nothing is written and the command fails", "kernel-view.md", "it fails with the reason and writes no file"),
        (
            &["daemon", "stop"],
            "refused while it holds sessions, unless --force",
            "getting-started.md",
            "refused while it holds sessions; --force destroys them",
        ),
        (&["daemon", "status"], "exit status 3 when none runs", "getting-started.md", "(exit 3: none runs)"),
    ];
    for (cmd, says, page, page_says) in claims {
        let h = help(cmd);
        assert!(h.contains(says), "ust {} --help does not say {says:?}:\n{h}", cmd.join(" "));
        assert!(doc(page).contains(page_says), "docs/{page} does not say {page_says:?}");
    }
    // Claims that were wrong once.
    assert!(!help(&["trace"]).contains("are not recorded"), "--as-user records CMD's events");
}
