//! Every trace of /work/shared/field-traces, read by this crate and by babeltrace2 2.0.4
//! (through `tests/bt2_dump.py`), compared message by message: event names, class and stream
//! ids, timestamps in ns, cpu, every field of the packet context, stream event context,
//! event context and payload (integers exactly, floats bit for bit, enumerations label and
//! value), discarded-events and discarded-packets notices with counts and time ranges.
//! Skips, saying why, when babeltrace2's Python bindings or the traces are missing.

mod dump;
mod oracle;

use std::path::Path;

use oracle::*;

fn ready() -> bool {
    if let Some(why) = bt2_missing() {
        eprintln!("SKIP: {why} (apt-get install babeltrace2 python3-bt2)");
        return false;
    }
    if !Path::new(FIELD_TRACES).join("README.md").exists() {
        eprintln!("SKIP: {FIELD_TRACES} is absent");
        return false;
    }
    true
}

/// Muxed comparison, plus: our parallel merge equals our sequential one, the event count
/// is the README's, and `stale` babeltrace2 stale-string differences are expected.
fn muxed(name: &str, events: usize, stale: usize) {
    if !ready() {
        return;
    }
    let dir = Path::new(FIELD_TRACES).join(name);
    let ours = our_lines(&dir, "merged");
    let theirs = bt2_lines(&dir, false);
    assert_eq!(compare(name, &ours, &theirs), stale, "{name}: stale strings");
    assert_eq!(count_events(&ours), events, "{name}: events (README)");
    assert!(our_lines(&dir, "parallel") == ours, "{name}: parallel merge differs from sequential merge");
    assert!(our_lines(&dir, "prepared") == ours, "{name}: prepared merge differs from sequential merge");
}

#[test]
fn many_threads() {
    // One sys_open-like event has an empty string that babeltrace2 shows stale.
    muxed("many-threads", 240_644, 1);
}

#[test]
fn bug446190() {
    muxed("bug446190", 31_556, 3);
}

#[test]
fn flipping_endianness() {
    muxed("flipping-endianness", 14_310, 0);
}

#[test]
fn ros2() {
    muxed("ros2", 99_338, 0);
}

#[test]
fn debuginfo_test_app4() {
    muxed("debuginfo-test-app4", 32, 0);
}

#[test]
fn ctf_sequence_empty() {
    muxed("ctf-sequence-empty", 10, 0);
}

/// The muxer of babeltrace2 stops on overlapping packets: compare stream by stream.
fn per_stream(name: &str, events: usize, discarded: (usize, u64)) {
    if !ready() {
        return;
    }
    let dir = Path::new(FIELD_TRACES).join(name);
    let ours = our_lines(&dir, "per-stream");
    let theirs = bt2_lines(&dir, true);
    assert_eq!(compare(name, &ours, &theirs), 0, "{name}: stale strings");
    assert_eq!(count_events(&ours), events, "{name}: events (README)");
    let notices: Vec<serde_json::Value> = ours.iter().filter(|l| l.contains("\"discarded_events\"")).map(|l| serde_json::from_str(l).unwrap()).collect();
    let sum: u64 = notices.iter().filter_map(|n| n["count"].as_u64()).sum();
    assert_eq!((notices.len(), sum), discarded, "{name}: discarded-events notices and their sum (README)");
    // Our merge does not stop on overlapping packets: every message, in time order.
    let merged = our_lines(&dir, "merged");
    assert_eq!(merged.len(), ours.len());
    assert!(!merged.iter().any(|l| l.contains("\"error\"")));
}

#[test]
fn hello_lost() {
    per_stream("hello-lost", 32_300, (562, 967_700));
}

#[test]
fn scp_src() {
    per_stream("scp_src", 110_771, (0, 0));
}

#[test]
fn ctfwriter_clock_offset_overflow() {
    if !ready() {
        return;
    }
    let dir = Path::new(FIELD_TRACES).join("ctfwriter_JF8nq3");
    // Like babeltrace2, refuse the clock whose offset overflows 64-bit ns, with a clear error.
    let err = ctf_reader::CtfTrace::open(&dir).err().expect("the offset overflows");
    assert!(matches!(err, ctf_reader::Error::ClockOverflow { .. }), "{err}");
    assert!(err.to_string().contains("test_clock"), "{err}");
    let theirs = bt2_lines(&dir, false);
    assert!(theirs.iter().all(|l| !l.contains("\"event\"")), "babeltrace2 refuses it too");
    // A scratch copy with offset_s = 0 reads like babeltrace2 reads it.
    let tmp = tempfile::tempdir().unwrap();
    let copy = scratch_copy(&dir, &tmp.path().join("cw"));
    let meta = std::fs::read_to_string(copy.join("metadata")).unwrap();
    assert!(meta.contains("offset_s = 1351530929945824323;"));
    std::fs::write(copy.join("metadata"), meta.replace("offset_s = 1351530929945824323;", "offset_s = 0;")).unwrap();
    let ours = our_lines(&copy, "merged");
    let theirs = bt2_lines(&copy, false);
    assert_eq!(compare("ctfwriter_JF8nq3 (offset_s = 0)", &ours, &theirs), 0);
    assert_eq!(count_events(&ours), 100_003, "README: Spammy_Event 100,000; Simple Event 1; nu name 1; sequence_event 1");
    for (name, n) in [("Spammy_Event", 100_000), ("Simple Event", 1), ("nu name", 1), ("sequence_event", 1)] {
        assert_eq!(ours.iter().filter(|l| l.contains(&format!("\"name\":\"{name}\""))).count(), n, "{name}");
    }
}
