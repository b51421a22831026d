//! LTTng's filter language on a real instrumented program: filters from LTTng's
//! test_valid_filter (bitwise operators, shifts, comparisons as values, unary minus, array
//! and sequence elements, globs between literals, dotted names) enabled through the `ust`
//! CLI, each in a session of its own, all recording one run of `tptest` (LTTng's
//! `tp:tptest` event, 100 times with `intfield = i`); babeltrace2 then shows, event by
//! event, which were recorded. Also LTTng's refusals of test_unsupported_op and
//! test_exclusion, end to end.

use system_tests as common;

use std::process::Command;

use common::{babeltrace, bt_events, program, TestDaemon};

/// (filter, event, the values of the first field of the events recorded, in order).
fn cases() -> Vec<(&'static str, &'static str, Vec<String>)> {
    let ints = |v: &mut dyn Iterator<Item = i32>| v.map(|i| i.to_string()).collect::<Vec<_>>();
    let words = |w: &[&str]| w.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>();
    vec![
        ("intfield > 1 && longfield > 42", "tp:tptest", ints(&mut (43..100))),
        ("-intfield", "tp:tptest", ints(&mut (1..100))),
        ("--intfield", "tp:tptest", ints(&mut (1..100))),
        ("(arrfield1[2] & 1) == 1 && intfield < 3", "tp:tptest", ints(&mut (0..3))),
        ("(seqfield4[2] | 0x111000) == 0x111003 && intfield == 7", "tp:tptest", ints(&mut (7..8))),
        ("(intfield >= 50) == (1 >= (1 >= 1))", "tp:tptest", ints(&mut (50..100))),
        ("(1 << intfield) == 8", "tp:tptest", ints(&mut (3..4))),
        ("(1 << intfield) < 0", "tp:tptest", ints(&mut (63..64))),
        ("~intfield & 1 && intfield < 6", "tp:tptest", ints(&mut [0, 2, 4].into_iter())),
        (r#""abcccd" == "*ccd" && intfield < 02"#, "tp:tptest", ints(&mut (0..2))),
        (r#"stringfield == "t*" && stringfield2 == "\\*" && -1 == ~0 && intfield == 9"#, "tp:tptest", ints(&mut (9..10))),
        // A name nothing has makes the whole filter match nothing (LTTng's bytecode fails to
        // link), even beside a term that would hold.
        ("$ctx.vtid.blah == 0 || intfield == 11", "tp:tptest", vec![]),
        ("!a.f.d || intfield == 11", "tp:tptest", vec![]),
        ("floatfield == 2222 && doublefield < 2.5 && intfield == 12", "tp:tptest", ints(&mut (12..13))),
        (r#""*cary" == str"#, "tp:the_string", words(&["hypothecary", "apothecary", "peccary", "scary"])),
        (r#"str == "de*al""#, "tp:the_string", words(&["decimal", "dermal"])),
    ]
}

#[test]
fn lttng_filters_record_the_events_lttng_records() {
    let d = TestDaemon::start();
    let cases = cases();
    let mut outs = Vec::new();
    for (k, (filter, event, _)) in cases.iter().enumerate() {
        let name = format!("s{k}");
        let out = d.output(&name);
        d.ust_ok(&["create", &name, "--output", out.to_str().unwrap()]);
        let said = d.ust_ok(&["enable-event", "-s", &name, event, "--filter", filter]);
        assert!(said.contains("with filter"), "{filter}: {said}");
        d.ust_ok(&["start", "-s", &name]);
        outs.push((name, out));
    }
    let run = Command::new(program("debug", "tptest")).env("UST_RUNDIR", d.rundir.as_path()).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let mut failures = Vec::new();
    for ((filter, event, want), (name, out)) in cases.iter().zip(&outs) {
        d.ust_ok(&["destroy", "-s", name]);
        let text = babeltrace(out);
        let events = bt_events(&text);
        assert!(events.iter().all(|e| e.name == *event), "{filter}: only {event} is enabled:\n{text}");
        let got: Vec<String> =
            events.iter().map(|e| e.fields.split(", ").next().unwrap_or_default().split(" = ").nth(1).unwrap_or_default().to_string()).collect();
        if got != *want {
            failures.push(format!("{filter}: recorded {got:?}, LTTng records {want:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn unsupported_operators_and_covering_exclusions_are_refused() {
    let d = TestDaemon::start();
    let out = d.output("refused");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    for op in ["*", "/", "%", "+", "-"] {
        let o = d.ust(&["enable-event", "tp:tptest", "--filter", &format!("intfield {op} 1")]);
        assert_eq!(o.status.code(), Some(2), "{op}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("not supported"), "{op}: {}", String::from_utf8_lossy(&o.stderr));
    }
    for (pattern, excl) in [("allo*", "all*"), ("allo*", "ze,all*,yes")] {
        let o = d.ust(&["enable-event", pattern, "--exclude", excl]);
        assert_eq!(o.status.code(), Some(2), "{pattern} --exclude {excl}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("excludes every event"), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The daemon refuses them too, from a client that skips the CLI's checks.
    let mut c = d.client();
    let r = c.call(ust_ctl::protocol::Command::EnableEvent {
        session: None,
        channel: None,
        patterns: vec!["allo*".into()],
        level: ust_consumerd::model::session::LevelFilter::Any,
        exclusions: vec!["all*".into()],
        filter: None,
    });
    assert!(matches!(&r, Err(ust_ctl::ClientError::Daemon(m)) if m.contains("excludes every event")), "{r:?}");
    let r = c.call(ust_ctl::protocol::Command::EnableEvent {
        session: None,
        channel: None,
        patterns: vec!["tp:*".into()],
        level: ust_consumerd::model::session::LevelFilter::Any,
        exclusions: vec![],
        filter: Some("intfield * 2".into()),
    });
    assert!(matches!(&r, Err(ust_ctl::ClientError::Daemon(m)) if m.contains("not supported")), "{r:?}");
    // LTTng's escaped stars are names, not errors.
    for pattern in [r"*\**", r"\**", r"*\*"] {
        d.ust_ok(&["enable-event", pattern]);
    }
}
