//! Tests of the argument definitions.

use super::*;
use clap::CommandFactory;
use std::ffi::OsString;

#[test]
fn cli_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn every_subcommand_has_examples() {
    let cmd = Cli::command();
    for sub in cmd.get_subcommands().chain(cmd.get_subcommands().flat_map(|s| s.get_subcommands())) {
        let h = sub.get_after_help().map(|h| h.to_string()).unwrap_or_default();
        assert!(h.starts_with("Examples:\n  ust "), "{} has no examples", sub.get_name());
    }
}

#[test]
fn help_examples_parse() {
    for f in [r#"status >= 500 && path == "/api/*""#, "$ctx.vtid == 1234 || latency_us > 1.5e3"] {
        ust_ctl::filter::parse(f).unwrap();
    }
    for args in [
        &["ust", "enable-event", "myapp:*", "--exclude", "myapp:noisy*,myapp:tick"][..],
        &["ust", "add-context", "-c", "big", "-t", "vpid", "-t", "pthread_id", "-t", "cpu_id"],
        &["ust", "add-context", "-t", "ip", "-t", "vpid"],
        &["ust", "enable-channel", "chunked", "--subbuf-size", "64k", "--tracefile-size", "1M", "--tracefile-count", "4"],
        &["ust", "rotate", "-s", "web"],
        &["ust", "enable-event", "myapp:*", "--loglevel", "WARNING"],
        &["ust", "track", "--vpid", "1234,5678", "-s", "web"],
        &["ust", "untrack", "--vpid", "--all"],
    ] {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
}

#[test]
fn track_takes_pids_or_all() {
    let vpids = |args: &[&str]| {
        let c = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let (Cmd::Track(t) | Cmd::Untrack(t)) = c.command else { panic!() };
        (t.vpid, t.all)
    };
    assert_eq!(vpids(&["ust", "track", "--vpid", "12,34", "--vpid", "5"]), (Some(vec![12, 34, 5]), false));
    assert_eq!(vpids(&["ust", "untrack", "-u", "--vpid", "--all"]), (Some(vec![]), true));
    assert_eq!(vpids(&["ust", "track", "--all", "--vpid"]), (Some(vec![]), true));
    assert_eq!(vpids(&["ust", "track", "--vpid=7"]), (Some(vec![7]), false));
    let c = Cli::try_parse_from(["ust", "untrack", "--vuid", "0,root", "--vgid", "--all"]).unwrap();
    let Cmd::Untrack(t) = c.command else { panic!() };
    assert_eq!((t.vuid, t.vgid, t.all), (Some(vec!["0".to_string(), "root".to_string()]), Some(vec![]), true));
    for bad in [
        &["ust", "track", "--vpid", "abc"][..],
        &["ust", "track", "--vpid", "0"],
        &["ust", "track", "--vpid", "-3"],
        &["ust", "track", "--all"],
        &["ust", "track"],
    ] {
        assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_filter_may_start_with_a_minus() {
    for f in ["-intfield", "--intfield", "-1 == ~0"] {
        let c = Cli::try_parse_from(["ust", "enable-event", "tp:*", "--filter", f]).unwrap_or_else(|e| panic!("{f}: {e}"));
        let Cmd::EnableEvent(a) = c.command else { panic!("{f}: not enable-event") };
        assert_eq!(a.filter.as_deref(), Some(f));
        ust_ctl::filter::parse(f).unwrap();
    }
}

#[test]
fn event_names() {
    for lttng in [r"*\**", r"*\*", r"\**", "tp**tpTest", "t*p*:*t*e*s*t"] {
        assert_eq!(check_event_name(lttng), Ok(()), "{lttng}");
    }
    for good in ["*", "app:*", "*:x", "a:b", "lib*", r"a\:b:c", r"a:b\:c"] {
        assert_eq!(check_event_name(good), Ok(()), "{good}");
    }
    for bad in ["", ":", "a:", ":b", "a:b:c", "::", r"a\::", r"a:b:\c"] {
        assert!(check_event_name(bad).unwrap_err().contains("invalid event name"), "{bad}");
    }
}

#[test]
fn trace_refuses_unknown_options_before_the_command() {
    for args in [&["ust", "trace", "--buffers-uidd", "--", "true"][..], &["ust", "trace", "--kernal", "true"], &["ust", "trace", "-z", "--", "x"]] {
        let e = Cli::try_parse_from(args).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{args:?}");
    }
    let c = Cli::try_parse_from(["ust", "trace", "-o", "/t", "prog", "-x", "--kernal", "--", "y"]).unwrap();
    let Cmd::Trace(t) = c.command else { panic!() };
    assert_eq!(t.command, vec![OsString::from("prog"), "-x".into(), "--kernal".into(), "--".into(), "y".into()]);
    assert!(!t.kernel);
}

#[test]
fn trace_takes_the_command_after_dashes() {
    let c = Cli::try_parse_from(["ust", "trace", "--event", "a:*", "--", "prog", "-x", "--y"]).unwrap();
    let Cmd::Trace(t) = c.command else { panic!() };
    assert_eq!(t.events, vec!["a:*"]);
    assert_eq!(t.command, vec![OsString::from("prog"), "-x".into(), "--y".into()]);
    assert!(Cli::try_parse_from(["ust", "trace"]).is_err());
    assert!(Cli::try_parse_from(["ust", "enable-event"]).is_err());
    assert!(Cli::try_parse_from(["ust", "enable-event", "-a", "x"]).is_err(), "-a or names, not both");
}
