//! `tracing` spans across threads and out of order, through ust's subscriber and through
//! ust's layer on a registry: examples/testprogs/src/bin/tracingasync.rs traced with the
//! `vtid` and `span_id` contexts and read back by babeltrace2 event by event. Both must
//! record the same events; only the span ids differ, so the ids are compared as the spans
//! they name.

use system_tests as common;

use std::collections::{BTreeMap, HashMap, HashSet};

use common::{babeltrace, program, TestDaemon};

/// One `tracingasync:*` event: name, `vtid`, `span_id` context, payload.
#[derive(Debug)]
struct Ev {
    name: String,
    vtid: i64,
    ctx: u64,
    payload: String,
}

fn events(text: &str) -> Vec<Ev> {
    text.lines()
        .filter(|l| l.contains(") tracingasync:"))
        .map(|l| {
            let name = l.split_whitespace().nth(3).unwrap().trim_end_matches(':').to_string();
            // `{ cpu_id = N }, { vtid = V, span_id = S }, { payload }`
            let mut groups = l.splitn(4, "}, { ");
            let _ = groups.next();
            let ctx = groups.next().unwrap_or_else(|| panic!("no context: {l}")).trim_end();
            let payload = groups.next().and_then(|p| p.strip_suffix(" }")).unwrap_or_else(|| panic!("no payload: {l}")).to_string();
            let num = |key: &str| -> i64 {
                let v = ctx.split(", ").find_map(|kv| kv.strip_prefix(key)).unwrap_or_else(|| panic!("no {key} in {l}"));
                v.parse().unwrap_or_else(|_| panic!("{key} in {l}"))
            };
            Ev { name: name.clone(), vtid: num("vtid = "), ctx: num("span_id = ") as u64, payload }
        })
        .collect()
}

/// The value of `_span_id` (or `key`) in a payload.
fn id_in(payload: &str, key: &str) -> u64 {
    let at = payload.find(&format!("{key} = ")).unwrap_or_else(|| panic!("no {key} in {payload}"));
    payload[at + key.len() + 3..].split([',', ' ']).next().unwrap().parse().unwrap()
}

/// Runs tracingasync in `mode` under `ust trace`; returns its events and the main, `a`
/// and `b` thread ids it printed.
fn run(d: &TestDaemon, mode: &str) -> (Vec<Ev>, [i64; 3]) {
    let out = d.output(mode);
    let o = d
        .ust_cmd()
        .args(["trace", "-t", "vtid", "-t", "span_id", "--output"])
        .arg(&out)
        .arg("--")
        .arg(program("debug", "tracingasync"))
        .arg(mode)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), d.log());
    let stdout = String::from_utf8_lossy(&o.stdout);
    let tids: Vec<i64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("tids "))
        .unwrap_or_else(|| panic!("{stdout}"))
        .split(' ')
        .map(|kv| kv.split_once('=').unwrap().1.parse().unwrap())
        .collect();
    assert!(stdout.contains("done"), "{stdout}");
    // babeltrace2 fails the test on any warning: no discarded event, no lost packet.
    (events(&babeltrace(&out)), [tids[0], tids[1], tids[2]])
}

/// The events of parts 1 to 3 of tracingasync (all but the `unit` spans), each as
/// `name tid ctx payload` with thread ids as `M`, `A`, `B` and span ids as the span they
/// name (`F`, `J`, `O`, `I`, `L`, in the order their `_new` come).
fn named(evs: &[Ev], [m, a, b]: [i64; 3]) -> Vec<String> {
    let mut spans: HashMap<u64, String> = HashMap::new();
    let letters = ["F", "J", "O", "I", "L"];
    let mut out = Vec::new();
    for e in evs.iter().filter(|e| !e.name.starts_with("tracingasync:unit_")) {
        if e.name.ends_with("_new") {
            let n = spans.len();
            spans.insert(id_in(&e.payload, "_span_id"), letters.get(n).unwrap_or(&"?").to_string());
        }
        let span = |id: u64| if id == 0 { "0".to_string() } else { spans.get(&id).cloned().unwrap_or_else(|| format!("unknown {id}")) };
        let mut payload = e.payload.clone();
        for key in ["_span_id", "_parent_id"] {
            if payload.contains(&format!("{key} = ")) {
                let id = id_in(&payload, key);
                payload = payload.replacen(&format!("{key} = {id}"), &format!("{key} = {}", span(id)), 1);
            }
        }
        let tid = match e.vtid {
            t if t == m => "M",
            t if t == a => "A",
            t if t == b => "B",
            _ => "other",
        };
        out.push(format!("{} {tid} {} {payload}", e.name.trim_start_matches("tracingasync:"), span(e.ctx)));
    }
    out
}

fn expected() -> Vec<String> {
    let msg = |m: &str| format!("_message_tag = ( \"str\" : container = 5 ), message = {{ \"{m}\" }}");
    let step = |i: u8| format!("{}, _i_tag = ( \"u64\" : container = 2 ), i = {{ {i} }}", msg("step"));
    [
        // 1. The argument `id` keeps its name beside the span's own `_span_id`.
        "f_new M 0 _span_id = F, _parent_id = 0, _id_tag = ( \"u64\" : container = 2 ), id = { 7 }, _name_tag = ( \"str\" : container = 5 ), name = { \"x\" }"
            .to_string(),
        "f_enter M F _span_id = F".to_string(),
        format!("event M F {}", msg("in_f")),
        "f_exit M 0 _span_id = F".to_string(),
        "f_close M 0 _span_id = F".to_string(),
        // 2. Made and entered on `a`, polled on `b`, finished and closed on the main thread:
        // each enter and its exit on one thread, the span's id in the context between them.
        "job_new A 0 _span_id = J, _parent_id = 0, _n_tag = ( \"u64\" : container = 2 ), n = { 2 }".to_string(),
        "job_enter A J _span_id = J".to_string(),
        format!("event A J {}", step(0)),
        "job_exit A 0 _span_id = J".to_string(),
        "job_enter B J _span_id = J".to_string(),
        format!("event B J {}", step(1)),
        "job_exit B 0 _span_id = J".to_string(),
        "job_enter M J _span_id = J".to_string(),
        "job_exit M 0 _span_id = J".to_string(),
        // `Instrumented` enters the span around dropping the finished future.
        "job_enter M J _span_id = J".to_string(),
        "job_exit M 0 _span_id = J".to_string(),
        "job_close M 0 _span_id = J".to_string(),
        // 3. `outer` exited while `inner` is entered: the thread stays in `inner`.
        "outer_new M 0 _span_id = O, _parent_id = 0".to_string(),
        "inner_new M 0 _span_id = I, _parent_id = 0".to_string(),
        "outer_enter M O _span_id = O".to_string(),
        "inner_enter M I _span_id = I".to_string(),
        "outer_exit M I _span_id = O".to_string(),
        format!("event M I {}", msg("after_outer_exit")),
        "late_new M I _span_id = L, _parent_id = I".to_string(),
        "late_close M I _span_id = L".to_string(),
        "inner_exit M 0 _span_id = I".to_string(),
        format!("event M 0 {}", msg("outside")),
        // `Span::current()` holds `inner` past its handle's drop.
        format!("event M 0 {}", msg("inner_still_open")),
        "inner_close M 0 _span_id = I".to_string(),
        "outer_close M 0 _span_id = O".to_string(),
    ]
    .into()
}

/// Part 4: 1200 `unit` spans made, entered and exited on four threads and closed on a
/// fifth. Each id's events come as `_new`, `_enter`, `_exit` on the thread that made it,
/// then `_close` on the closer; an id is live at most once at a time.
fn check_units(evs: &[Ev]) {
    let mut live: HashMap<u64, (i64, &str)> = HashMap::new();
    let mut made: BTreeMap<String, u32> = BTreeMap::new();
    let mut makers = HashSet::new();
    let mut closers = HashSet::new();
    for e in evs.iter().filter(|e| e.name.starts_with("tracingasync:unit_")) {
        let id = id_in(&e.payload, "_span_id");
        let kind = e.name.trim_start_matches("tracingasync:unit");
        let state = live.get(&id).map(|s| s.1);
        match (kind, state) {
            ("_new", None) => {
                assert!(e.payload.starts_with(&format!("_span_id = {id}, _parent_id = 0, ")), "{e:?}");
                *made.entry(e.payload.split(", ").skip(2).collect::<Vec<_>>().join(", ")).or_default() += 1;
                makers.insert(e.vtid);
                live.insert(id, (e.vtid, "_new"));
            }
            ("_enter", Some("_new")) | ("_exit", Some("_enter")) => {
                assert_eq!(live[&id].0, e.vtid, "entered and exited on the thread that made it: {e:?}");
                assert_eq!(e.ctx, if kind == "_enter" { id } else { 0 }, "{e:?}");
                live.insert(id, (e.vtid, kind));
            }
            ("_close", Some("_exit")) => {
                closers.insert(e.vtid);
                live.remove(&id);
            }
            _ => panic!("{kind} of span {id} after {state:?}: {e:?}"),
        }
    }
    assert!(live.is_empty(), "spans never closed: {live:?}");
    assert_eq!(made.len(), 1200, "every (w, i) once");
    assert!(made.values().all(|&n| n == 1));
    assert_eq!(makers.len(), 4);
    assert_eq!(closers.len(), 1, "one closer thread");
    assert!(makers.is_disjoint(&closers), "every span closed on another thread than its maker's");
}

#[test]
fn spans_across_threads_and_out_of_order_through_the_subscriber_and_the_layer() {
    let d = TestDaemon::start();
    for mode in ["subscriber", "layer"] {
        let (evs, tids) = run(&d, mode);
        assert_eq!(named(&evs, tids), expected(), "{mode}");
        check_units(&evs);
    }
}
