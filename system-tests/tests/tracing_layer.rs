//! `ust::tracing::layer()` beyond tracingprog's events (tests/e2e.rs): span fields on
//! `_new`, `Span::record` (`_record`), `follows_from` (`_follows_from`), events inside
//! spans, an `#[instrument]`ed async function across `.await` (enter and exit per poll),
//! and the `ip` context of `tracing` callsites (the address of the callsite's static), with
//! examples/testprogs/src/bin/tracingspans.rs traced through the daemon and the CLI and read
//! back by babeltrace2 field by field.

use system_tests as common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{babeltrace, bt_events, program, KillOnDrop, TestDaemon};

/// A dynamic field as babeltrace2 prints it: its tag, then its value.
fn tag(name: &str, kind: &str, n: u8, v: &str) -> String {
    format!("_{name}_tag = ( \"{kind}\" : container = {n} ), {name} = {{ {v} }}")
}

fn none(name: &str) -> String {
    format!("_{name}_tag = ( \"none\" : container = 0 ), {name} = {{ {{ }} }}")
}

fn msg(m: &str) -> String {
    tag("message", "str", 5, &format!("\"{m}\""))
}

/// The `tracingspans:*` events of the trace in `out` (no context but `cpu_id`): `(name,
/// payload)`, the payload whole (`bt_events` trims every closing brace at its end).
fn span_events(out: &Path) -> Vec<(String, String)> {
    let text = babeltrace(out);
    let names = bt_events(&text).into_iter().map(|e| e.name);
    let payloads = text.lines().filter(|l| !common::is_statedump(l)).map(|l| {
        let p = l.split_once(" }, { ").map_or("", |x| x.1);
        p.strip_suffix(" }").unwrap_or(p).to_string()
    });
    names.zip(payloads).filter(|e| e.0.starts_with("tracingspans:")).collect()
}

#[test]
fn span_fields_records_follows_from_and_async_polls_read_back() {
    let d = TestDaemon::start();
    let out = d.output("spans");
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "tracingspans")).output().unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "max_level trace\npolls 2\n", "`ust trace` enables every level; the async function waited once");
    let got = span_events(&out);
    // The registry's ids: 1 and 2 for the first two spans; `fetch` gets a slot freed by a
    // close, with a new generation in its upper bits. Read it from its `_new`.
    let fetch = got.iter().find(|e| e.0 == "tracingspans:fetch_new").map(|e| e.1.clone()).unwrap_or_else(|| panic!("{got:#?}"));
    let fid = fetch.strip_prefix("_span_id = ").and_then(|r| r.split(',').next()).unwrap().to_string();
    assert!(fid.parse::<u64>().unwrap() > 2, "{fetch}");
    let id = |n: &str| format!("_span_id = {n}");
    let want: Vec<(String, String)> = [
        // Span fields on `_new`: `bytes` declared `Empty`, so not recorded yet.
        ("conn_new", format!("_span_id = 1, _parent_id = 0, {}, {}", tag("peer", "str", 5, "\"10.0.0.1\""), none("bytes"))),
        ("conn_enter", id("1")),
        // An event inside the span, between its enter and exit.
        ("event", format!("{}, {}", msg("opened"), tag("step", "u64", 2, "1"))),
        ("conn_exit", id("1")),
        // `Span::record`: the recorded value, the other fields not recorded.
        ("conn_record", format!("_span_id = 1, {}, {}", none("peer"), tag("bytes", "u64", 2, "512"))),
        ("batch_new", format!("_span_id = 2, _parent_id = 0, {}", tag("n", "u64", 2, "2"))),
        // `follows_from`: both ids.
        ("batch_follows_from", "_span_id = 2, _follows_id = 1".to_string()),
        ("batch_close", id("2")),
        ("conn_close", id("1")),
        // `#[instrument] async fn fetch(key)`: its argument on `_new`, one enter/exit per
        // poll (the first ends at the `.await`, the second runs to the end), then the
        // enter/exit `tracing::Instrumented` wraps around dropping the finished future.
        ("fetch_new", format!("_span_id = {fid}, _parent_id = 0, {}", tag("key", "u64", 2, "21"))),
        ("fetch_enter", id(&fid)),
        ("event", msg("start")),
        ("fetch_exit", id(&fid)),
        ("fetch_enter", id(&fid)),
        ("event", msg("resumed")),
        ("fetch_exit", id(&fid)),
        ("fetch_enter", id(&fid)),
        ("fetch_exit", id(&fid)),
        ("fetch_close", id(&fid)),
        ("event", format!("{}, {}", msg("slow"), tag("polls", "u64", 2, "2"))),
    ]
    .into_iter()
    .map(|(n, f)| (format!("tracingspans:{n}"), f))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn spans_of_two_registries_with_the_same_id_on_one_thread_keep_their_own_events() {
    // The layer finds a span's sites in per-thread entries by id; two registries' first
    // spans on a thread have the same id, so the entries tell them apart by layer.
    let d = TestDaemon::start();
    let out = d.output("two-registries");
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "tracingspans")).arg("two-registries").output().unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let got = span_events(&out);
    let want: Vec<(String, String)> = [
        ("keep_new", "_span_id = 1, _parent_id = 0"),
        ("other_new", "_span_id = 1, _parent_id = 0"),
        ("keep_enter", "_span_id = 1"),
        ("keep_exit", "_span_id = 1"),
        ("other_enter", "_span_id = 1"),
        ("other_exit", "_span_id = 1"),
        ("other_close", "_span_id = 1"),
        ("keep_close", "_span_id = 1"),
    ]
    .into_iter()
    .map(|(n, f)| (format!("tracingspans:{n}"), f.to_string()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn spans_of_three_dispatchers_with_the_same_id_entered_interleaved_keep_their_own_events_and_parents() {
    // The per-thread stack of entered spans serves the layer and the subscriber alike; an
    // exit out of order must take its own dispatcher's entry, and a new span's contextual
    // parent is its own dispatcher's current span, not another's that shares its id.
    let d = TestDaemon::start();
    let out = d.output("interleaved");
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "tracingspans")).arg("interleaved").output().unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let got = span_events(&out);
    let want: Vec<(String, String)> = [
        ("keep_new", "_span_id = 1, _parent_id = 0"),
        ("other_new", "_span_id = 1, _parent_id = 0"),
        ("own_new", "_span_id = 1, _parent_id = 0"),
        ("keep_enter", "_span_id = 1"),
        ("other_enter", "_span_id = 1"),
        ("own_enter", "_span_id = 1"),
        ("keep_exit", "_span_id = 1"),
        ("other_exit", "_span_id = 1"),
        ("own_exit", "_span_id = 1"),
        ("keep_enter", "_span_id = 1"),
        ("other_child_new", "_span_id = 2, _parent_id = 0"),
        ("own_child_new", "_span_id = 2, _parent_id = 0"),
        ("keep_exit", "_span_id = 1"),
        ("other_child_close", "_span_id = 2"),
        ("own_child_close", "_span_id = 2"),
        ("other_close", "_span_id = 1"),
        ("own_close", "_span_id = 1"),
        ("keep_close", "_span_id = 1"),
    ]
    .into_iter()
    .map(|(n, f)| (format!("tracingspans:{n}"), f.to_string()))
    .collect();
    assert_eq!(got, want);
}

/// `_span_id = N` and `_parent_id = N` of `payload` with each id named by the span it
/// belongs to (`live`: id to name, of the spans made and not closed yet); 0 stays 0.
fn named_ids(payload: &str, live: &std::collections::HashMap<String, String>) -> String {
    payload
        .split(", ")
        .map(|f| match f.split_once(" = ") {
            Some((k @ ("_span_id" | "_parent_id"), v)) if v != "0" => {
                format!("{k} = {}", live.get(v).unwrap_or_else(|| panic!("{f}: no live span {v} in {live:?}")))
            }
            _ => f.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn spans_across_threads_thread_churn_a_layer_twice_and_scoped_dispatch_keep_their_names() {
    // Each span's events must carry its own callsite's name: the layer finds a span's
    // callsite from per-thread entries of the spans the thread made (module `known`), so
    // spans made on one thread and entered or closed on another, a slot reused after a
    // close elsewhere, threads that come and go, a layer on a registry twice and a scoped
    // dispatcher are the cases where an entry could be stale or another's.
    let d = TestDaemon::start();
    let out = d.output("threads");
    let o = d.ust_cmd().arg("trace").arg("--output").arg(&out).arg("--").arg(program("debug", "tracingspans")).arg("threads").output().unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let got = span_events(&out);
    // Every event's ids named by the `_new` of the live span they belong to (the layer
    // that is on its registry twice records each event twice: checked apart).
    let mut live = std::collections::HashMap::new();
    let mut named = Vec::new();
    let mut twice = Vec::new();
    for (name, payload) in &got {
        let name = name.strip_prefix("tracingspans:").unwrap();
        if name.starts_with("twice_") {
            twice.push(format!("{name} {payload}"));
            continue;
        }
        let (span, kind) = name.rsplit_once('_').unwrap();
        let id = value(payload, "_span_id").to_string();
        if kind == "new" {
            assert!(live.insert(id.clone(), span.to_string()).is_none(), "{name} {payload}: id live already");
        }
        named.push(format!("{name} {}", named_ids(payload, &live)));
        assert_eq!(live.get(&id).map(String::as_str), Some(span), "{name} {payload}: another span's id");
        if kind == "close" {
            live.remove(&id);
        }
    }
    assert!(live.is_empty(), "never closed: {live:?}");
    let cycle = |s: &str| [format!("{s}_enter _span_id = {s}"), format!("{s}_exit _span_id = {s}")];
    let mut want = Vec::new();
    for s in ["a", "b", "c", "d"] {
        want.push(format!("{s}_new _span_id = {s}, _parent_id = 0"));
        want.extend(cycle(s));
        if s == "a" || s == "b" {
            want.extend(cycle(s));
        }
        want.push(format!("{s}_close _span_id = {s}"));
    }
    for i in 0..64 {
        let i = format!("_i_tag = ( \"u64\" : container = 2 ), i = {{ {i} }}");
        want.push(format!("u_new _span_id = u, _parent_id = 0, {i}"));
        want.push("u_enter _span_id = u".into());
        want.push(format!("t_new _span_id = t, _parent_id = u, {i}"));
        want.push("u_exit _span_id = u".into());
        want.extend(cycle("t"));
        want.extend(cycle("t"));
        // The registry keeps a span's parent open until the span closes.
        want.push("t_close _span_id = t".into());
        want.push("u_close _span_id = u".into());
    }
    want.push("scoped_new _span_id = scoped, _parent_id = 0".into());
    want.extend(cycle("scoped"));
    want.push("scoped_close _span_id = scoped".into());
    assert_eq!(named, want);
    let want_twice: Vec<String> = ["new", "enter", "exit", "close"]
        .into_iter()
        .flat_map(|k| {
            let e = if k == "new" { format!("twice_{k} _span_id = 1, _parent_id = 0") } else { format!("twice_{k} _span_id = 1") };
            [e.clone(), e]
        })
        .collect();
    assert_eq!(twice, want_twice, "each of the two layers records each event");
}

/// The babeltrace2 event context of a line (`ip = 0x..., vpid = N`) and its name.
fn contexts(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|l| {
            let name = l.split_whitespace().nth(3)?.trim_end_matches(':').to_string();
            let after = l.split_once("}, { ")?.1;
            let (context, payload) = after.rsplit_once("}, { ")?;
            Some((name, context.to_string(), payload.trim_end_matches(" }").to_string()))
        })
        .collect()
}

fn value<'a>(s: &'a str, key: &str) -> &'a str {
    let i = s.find(&format!("{key} = ")).unwrap_or_else(|| panic!("no {key} in {s}")) + key.len() + 3;
    let rest = &s[i..];
    rest[..rest.find([',', '}']).unwrap_or(rest.len())].trim()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).unwrap_or_else(|_| panic!("not hex: {s}"))
}

#[test]
fn tracing_callsites_ip_is_the_address_of_the_callsites_static() {
    let d = TestDaemon::start();
    let out = d.output("spans-ip");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "-a"]);
    d.ust_ok(&["add-context", "-u", "-t", "ip", "-t", "vpid"]);
    d.ust_ok(&["start"]);
    let prog = program("debug", "tracingspans");
    let o = Command::new(&prog).env("UST_RUNDIR", d.rundir.as_path()).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    d.stop_and_destroy("s");
    let evs = contexts(&babeltrace(&out));
    let exe = std::fs::canonicalize(&prog).unwrap();
    let bin = evs
        .iter()
        .find(|e| e.0 == "lttng_ust_statedump:bin_info" && value(&e.2, "path") == format!("{:?}", exe.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no bin_info for {}: {evs:?}", exe.display()));
    let baddr = hex(value(&bin.2, "baddr"));
    // The program's symbols: `tracing`'s macros put each callsite in a static named
    // `<enclosing fn>::__CALLSITE`.
    let nm = Command::new("nm").arg("-C").arg(&exe).output().expect("nm (binutils) is installed");
    let nm = String::from_utf8_lossy(&nm.stdout);
    let symbol_at = |vaddr: u64| -> Option<&str> {
        nm.lines().find_map(|l| {
            let (addr, rest) = l.split_once(' ')?;
            (u64::from_str_radix(addr, 16).ok()? == vaddr).then(|| rest.split_once(' ').map_or(rest, |r| r.1))
        })
    };
    let ours: Vec<_> = evs.iter().filter(|e| e.0.starts_with("tracingspans:")).collect();
    assert_eq!(ours.len(), 20, "{ours:#?}");
    let mut by_callsite = std::collections::BTreeMap::<u64, Vec<&str>>::new();
    for e in &ours {
        let ip = hex(value(&e.1, "ip"));
        assert!(ip > baddr, "{e:?}");
        let sym = symbol_at(ip - baddr).unwrap_or_else(|| panic!("no symbol at {:#x} for {e:?}", ip - baddr));
        let want = if e.0.starts_with("tracingspans:fetch_") {
            "tracingspans::fetch::{{closure}}::__CALLSITE"
        } else if e.2.contains("\"start\"") || e.2.contains("\"resumed\"") {
            "tracingspans::fetch::{{closure}}::{{closure}}::__CALLSITE"
        } else {
            "tracingspans::main::__CALLSITE"
        };
        assert_eq!(sym, want, "{e:?}");
        by_callsite.entry(ip).or_default().push(e.0.as_str());
    }
    // One ip per callsite: the span's events share its callsite's, each event its own.
    let mut groups: Vec<Vec<&str>> = by_callsite
        .into_values()
        .map(|mut v| {
            v.sort();
            v.dedup();
            v
        })
        .collect();
    groups.sort();
    let want: Vec<Vec<&str>> = vec![
        vec!["tracingspans:batch_close", "tracingspans:batch_follows_from", "tracingspans:batch_new"],
        vec!["tracingspans:conn_close", "tracingspans:conn_enter", "tracingspans:conn_exit", "tracingspans:conn_new", "tracingspans:conn_record"],
        vec!["tracingspans:event"],
        vec!["tracingspans:event"],
        vec!["tracingspans:event"],
        vec!["tracingspans:event"],
        vec!["tracingspans:fetch_close", "tracingspans:fetch_enter", "tracingspans:fetch_exit", "tracingspans:fetch_new"],
    ];
    assert_eq!(groups, want);
}

/// Runs tracingspans against `d`'s daemon; returns its first line (`max_level L`).
fn max_level_line(d: &TestDaemon) -> String {
    let o = Command::new(program("debug", "tracingspans")).env("UST_RUNDIR", d.rundir.as_path()).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or_default().to_string()
}

#[test]
fn tracing_max_level_follows_the_levels_the_sessions_enable() {
    let d = TestDaemon::start();
    assert_eq!(max_level_line(&d), "max_level off", "no session: every tracing callsite is ruled out");
    let out = d.output("spans-warn");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "tracingspans:*", "--loglevel", "warning"]);
    d.ust_ok(&["start"]);
    assert_eq!(max_level_line(&d), "max_level warn");
    d.ust_ok(&["stop"]);
    assert_eq!(max_level_line(&d), "max_level off", "a stopped session enables nothing");
    // The hint ignores the patterns: an enabler of another provider counts too (a callsite
    // must register to be matched by name).
    d.ust_ok(&["enable-event", "otherprov:*", "--loglevel-only", "debug_line"]);
    d.ust_ok(&["start"]);
    assert_eq!(max_level_line(&d), "max_level debug", "TRACE_DEBUG_LINE is tracing's DEBUG");
    d.ust_ok(&["destroy"]);
    // The first and the last runs were traced at `--loglevel warning`: the warning of each,
    // none of the INFO spans and events.
    let got = span_events(&out);
    let slow = ("tracingspans:event".to_string(), format!("{}, {}", msg("slow"), tag("polls", "u64", 2, "2")));
    assert_eq!(got, [slow.clone(), slow]);
}

#[test]
fn events_inside_spans_carry_the_span_id_context() {
    let d = TestDaemon::start();
    let out = d.output("spans-ctx");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "tracingspans:*"]);
    d.ust_ok(&["enable-event", "spanprobe:*"]);
    let said = d.ust_ok(&["add-context", "-u", "-t", "span_id"]);
    assert!(said.contains("UST context span_id added to every channel"), "{said}");
    d.ust_ok(&["start"]);
    let o = Command::new(program("debug", "tracingspans")).env("UST_RUNDIR", d.rundir.as_path()).output().unwrap();
    assert!(o.status.success(), "{o:?}");
    d.stop_and_destroy("s");
    let tsdl = std::fs::read_to_string(std::fs::read_dir(out.join("ust/pid")).unwrap().flatten().next().unwrap().path().join("metadata")).unwrap();
    assert!(tsdl.contains("signed = 0; encoding = none; base = 10; } _span_id;"), "{tsdl}");
    let evs = contexts(&babeltrace(&out));
    let fid = value(&evs.iter().find(|e| e.0 == "tracingspans:fetch_new").unwrap_or_else(|| panic!("{evs:#?}")).2, "_span_id").to_string();
    let got: Vec<(&str, &str, &str)> = evs
        .iter()
        .map(|e| {
            // The message, to tell the `event`s apart.
            let m = e.2.split("message = { ").nth(1).map_or("", |r| r.split(' ').next().unwrap());
            (e.0.as_str(), m, value(&e.1, "span_id"))
        })
        .collect();
    let f = fid.as_str();
    let want = [
        ("tracingspans:conn_new", "", "0"),
        ("tracingspans:conn_enter", "", "1"),
        ("tracingspans:event", "\"opened\"", "1"),
        ("spanprobe:inside", "", "1"),
        ("tracingspans:conn_exit", "", "0"),
        ("tracingspans:conn_record", "", "0"),
        ("tracingspans:batch_new", "", "0"),
        ("tracingspans:batch_follows_from", "", "0"),
        ("tracingspans:batch_close", "", "0"),
        ("tracingspans:conn_close", "", "0"),
        ("tracingspans:fetch_new", "", "0"),
        ("tracingspans:fetch_enter", "", f),
        ("tracingspans:event", "\"start\"", f),
        ("tracingspans:fetch_exit", "", "0"),
        ("tracingspans:fetch_enter", "", f),
        ("tracingspans:event", "\"resumed\"", f),
        ("tracingspans:fetch_exit", "", "0"),
        ("tracingspans:fetch_enter", "", f),
        ("tracingspans:fetch_exit", "", "0"),
        ("tracingspans:fetch_close", "", "0"),
        ("tracingspans:event", "\"slow\"", "0"),
    ];
    assert_eq!(got, want);
    // The payloads are those of the session without the context.
    assert_eq!(evs.iter().find(|e| e.0 == "spanprobe:inside").unwrap().2, "step = 1");
}

#[test]
fn a_session_started_later_raises_the_level_and_a_ruled_out_callsite_then_records() {
    let d = TestDaemon::start();
    let out = d.output("spans-late");
    let mut child = KillOnDrop(
        Command::new(program("debug", "tracingspans"))
            .arg("wait")
            .env("UST_RUNDIR", d.rundir.as_path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = || lines.next().expect("a line").expect("stdout");
    assert_eq!(next(), "max_level off");
    // Reached while ruled out: `tracing`'s level check comes first, so the callsite does not
    // register (no session could have taken it).
    writeln!(stdin, "log").unwrap();
    assert_eq!(next(), "logged");
    d.ust_ok(&["create", "s", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-event", "tracingspans:*"]);
    d.ust_ok(&["start"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        writeln!(stdin, "level").unwrap();
        let l = next();
        if l == "max_level trace" {
            break;
        }
        assert_eq!(l, "max_level off", "off until the session's SetEnabled arrives");
        assert!(Instant::now() < deadline, "tracing's level never followed the session");
        std::thread::sleep(Duration::from_millis(20));
    }
    writeln!(stdin, "log").unwrap();
    assert_eq!(next(), "logged");
    drop(stdin);
    assert!(child.wait().unwrap().success());
    d.ust_ok(&["destroy"]);
    // The callsite registered when next reached, and the session's enabler took it.
    assert_eq!(span_events(&out), [("tracingspans:event".to_string(), format!("{}, {}", msg("late"), tag("n", "u64", 2, "1")))]);
}
