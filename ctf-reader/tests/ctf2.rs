//! The two CTF 2 traces of /work/shared/field-traces/ctf2, read by this crate, against
//! babeltrace2 2.0.4 reading their CTF 1.8 twins: the same stream files beside a TSDL
//! metadata written here by hand for LTTng-UST 2.11's layout (the layout the JSON describes:
//! packet header magic/uuid/stream_id/stream_instance_id, packet context with
//! `packet_seq_num`, LTTng's large event header). The twins' TSDL is independent of the CTF 2
//! reader, so a wrong translation of the JSON would show as a difference.

mod dump;
mod oracle;

use std::path::Path;

use oracle::*;

const COMMON: &str = r#"/* CTF 1.8 */
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 16; align = 8; signed = false; } := uint16_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
trace {
    major = 1; minor = 8; byte_order = le;
    packet.header := struct { uint32_t magic; uint8_t uuid[16]; uint32_t stream_id; uint64_t stream_instance_id; } align(8);
};
env { domain = "ust"; tracer_name = "lttng-ust"; tracer_major = 2; tracer_minor = 11; };
clock { name = "monotonic"; description = "Monotonic Clock"; freq = 1000000000; offset_s = OFFSET_S; offset = OFFSET_C; };
typealias integer { size = 32; align = 8; signed = false; map = clock.monotonic.value; } := uint32_clock_t;
typealias integer { size = 64; align = 8; signed = false; map = clock.monotonic.value; } := uint64_clock_t;
stream {
    id = 0;
    event.header := struct {
        enum : uint16_t { compact = 0 ... 65534, extended = 65535 } id;
        variant <id> {
            struct { uint32_clock_t timestamp; } align(8) compact;
            struct { uint32_t id; uint64_clock_t timestamp; } align(8) extended;
        } v;
    } align(8);
    packet.context := struct {
        uint64_clock_t timestamp_begin; uint64_clock_t timestamp_end; uint64_t content_size; uint64_t packet_size;
        uint64_t packet_seq_num; uint64_t events_discarded; uint32_t cpu_id;
    } align(8);
};
"#;

fn twin(name: &str, offset: (i64, u64), event: &str, count: usize) {
    if let Some(why) = bt2_missing() {
        eprintln!("SKIP: {why}");
        return;
    }
    let dir = Path::new(FIELD_TRACES).join("ctf2").join(name);
    if !dir.exists() {
        eprintln!("SKIP: {} is absent", dir.display());
        return;
    }
    let t = ctf_reader::CtfTrace::open(&dir).unwrap();
    assert_eq!(t.metadata().version, ctf_reader::CtfVersion::Ctf2);
    let tmp = tempfile::tempdir().unwrap();
    let copy = scratch_copy(&dir, &tmp.path().join(name));
    let tsdl = COMMON.replace("OFFSET_S", &offset.0.to_string()).replace("OFFSET_C", &offset.1.to_string()) + event;
    std::fs::write(copy.join("metadata"), tsdl).unwrap();
    let ours = our_lines(&dir, "merged");
    let theirs = bt2_lines(&copy, false);
    assert_eq!(compare(name, &ours, &theirs), 0);
    assert_eq!(count_events(&ours), count, "README");
    // And our TSDL reading of the twin agrees with our CTF 2 reading.
    assert!(our_lines(&copy, "merged") == ours);
}

#[test]
fn trace_with_index() {
    twin(
        "CTF2-7.0-trace-with-index",
        (1_564_079_206, 484_157_339),
        r#"event { name = "sample_component:message"; id = 0; stream_id = 0; fields := struct { string message; }; };"#,
        4000,
    );
}

#[test]
fn lttng_crash() {
    twin(
        "CTF2-7.0-lttng-crash",
        (1_565_056_443, 54_742_594),
        r#"event { name = "my_app:current_temp"; id = 0; stream_id = 0; fields := struct { integer { size = 32; align = 8; signed = true; } temp; string status; }; };"#,
        400,
    );
}

#[test]
fn model_of_the_json() {
    let dir = Path::new(FIELD_TRACES).join("ctf2/CTF2-7.0-lttng-crash");
    if !dir.exists() {
        eprintln!("SKIP: {} is absent", dir.display());
        return;
    }
    let t = ctf_reader::CtfTrace::open(&dir).unwrap();
    let m = t.metadata();
    assert_eq!(m.clocks.len(), 1);
    assert_eq!(
        (m.clocks[0].name.as_str(), m.clocks[0].freq, m.clocks[0].offset_s, m.clocks[0].offset_cycles),
        ("monotonic", 1_000_000_000, 1_565_056_443, 54_742_594)
    );
    assert_eq!(m.env.get("hostname"), Some(&ctf_reader::EnvValue::Str("raton".into())));
    let sc = &m.streams[0];
    assert_eq!(sc.default_clock, Some(0));
    assert_eq!(sc.events[0].name, "my_app:current_temp");
    let Some(ctf_reader::FieldType::Struct { fields, .. }) = &sc.event_header else { panic!("event header") };
    assert!(matches!(&fields[0].ty, ctf_reader::FieldType::Enum { mappings, .. } if mappings.len() == 2));
    assert!(matches!(&fields[1].ty, ctf_reader::FieldType::Variant { options, .. } if options.len() == 2));
}

#[test]
fn blob_media_types_of_ctf2() {
    // Field classes as lttng-sessiond 2.16 writes BLOB fields in CTF 2
    // (`ctf2-trace-class-visitor.cpp`): `media-type` when the field has one.
    let frags = [
        r#"{"type":"preamble","version":2}"#,
        r#"{"type":"trace-class"}"#,
        r#"{"type":"data-stream-class","id":0}"#,
        r#"{"type":"event-record-class","id":0,"data-stream-class-id":0,"name":"tp:blob","payload-field-class":{"type":"structure","member-classes":[
            {"name":"len","field-class":{"type":"fixed-length-unsigned-integer","length":8,"byte-order":"little-endian","alignment":8}},
            {"name":"img","field-class":{"type":"dynamic-length-blob","length-field-location":{"origin":"event-record-payload","path":["len"]},"media-type":"image/png"}},
            {"name":"fix","field-class":{"type":"static-length-blob","length":4}},
            {"name":"n","field-class":{"type":"fixed-length-unsigned-integer","length":8,"byte-order":"little-endian","alignment":8}}]}}"#,
    ];
    let text: Vec<u8> = frags.iter().flat_map(|f| std::iter::once(0x1eu8).chain(f.bytes())).collect();
    let t = ctf_reader::parse_metadata(&text, Path::new("metadata")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.version, ctf_reader::CtfVersion::Ctf2);
    let e = &t.streams[0].events[0];
    assert_eq!(e.media_type("img"), Some("image/png"));
    assert_eq!(e.media_type("fix"), Some("application/octet-stream"), "CTF 2's default");
    assert_eq!(e.media_type("n"), None);
    assert_eq!(e.media_type("len"), None);
}
