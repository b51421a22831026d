//! BLOB fields (LTTng 2.16's `lttng_ust_field_blob`, `ust::Blob<M>`), end to end: the
//! example program `blobs` records BLOBs of known bytes (empty, 6 bytes, one as large as a
//! sub-buffer holds, one of its own media type) in a channel of 16 KiB sub-buffers;
//! babeltrace2 reads every event with its exact bytes, the metadata carries each media type
//! in lttng-sessiond 2.16's comment (also through babeltrace2's `metadata-info` query, as
//! LTTng's `test_blob_type.py` checks it), ust's ctf-reader returns the media types and the
//! same bytes. A filter on a whole BLOB is refused at `enable-event` with a message naming
//! the field; a filter on one of its bytes records exactly the event it selects.

use system_tests as common;

use std::io::Read;
use std::path::Path;
use std::process::Command;

use common::{babeltrace, bt_events, program_here, spawn_ready, TestDaemon};

const SUBBUF: usize = 16384;
/// The largest BLOB an `image` event of this channel holds whatever its event header: the
/// sub-buffer less the packet header and context (`ust_core::packet::HEADER_SIZE`), an
/// extended event header (13 bytes, which an event long after the previous one needs), the
/// BLOB's `u64` length and the `u32` field `n`. With a compact (4-byte) header 9 bytes more
/// fit, and one more is discarded (checked by hand: 16284 recorded, 16285 discarded).
const LARGE: usize = SUBBUF - 84 - 13 - 8 - 4;

fn few() -> Vec<u8> {
    vec![0x89, 0x50, 0x4e, 0x47, 0x00, 0xff]
}

fn large() -> Vec<u8> {
    (0..LARGE).map(|k| (k * 7 % 251) as u8).collect()
}

/// The bytes babeltrace2 prints for sequence field `name` of `fields`
/// (`name = [ [0] = 0x89, [1] = 0x50 ]`, `name = [ ]`), checking the indices.
fn bt_bytes(fields: &str, name: &str) -> Vec<u8> {
    let start = fields.find(&format!("{name} = [")).unwrap_or_else(|| panic!("no {name} in {fields}")) + name.len() + 4;
    let body = &fields[start..];
    let body = &body[..body.find(" ]").unwrap_or_else(|| panic!("unterminated {name} in {fields}"))];
    body.split(", ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(k, item)| {
            let (idx, v) = item.split_once(" = ").unwrap_or_else(|| panic!("bad element {item:?}"));
            assert_eq!(idx, format!("[{k}]"), "element {k} of {name}");
            u8::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("not a hex byte: {v:?}"))
        })
        .collect()
}

/// The metadata file of the (single) per-process trace under `out`.
fn metadata_dir(out: &Path) -> std::path::PathBuf {
    std::fs::read_dir(out.join("ust/pid")).unwrap().flatten().next().unwrap().path()
}

#[test]
fn blobs_are_recorded_byte_for_byte_with_their_media_types() {
    let d = TestDaemon::start();
    let out = d.output("blob");
    let sel = d.output("blob-byte");
    d.ust_ok(&["create", "blob", "--output", out.to_str().unwrap()]);
    d.ust_ok(&["enable-channel", "-s", "blob", "ch", "--subbuf-size", &SUBBUF.to_string()]);
    d.ust_ok(&["enable-event", "-s", "blob", "-c", "ch", "blob:*"]);
    d.ust_ok(&["create", "byte", "--output", sel.to_str().unwrap()]);

    let mut cmd = Command::new(program_here("blobs"));
    cmd.arg(LARGE.to_string()).env("UST_RUNDIR", &d.rundir);
    let (mut child, mut stdout) = spawn_ready(&mut cmd);

    // The process is registered: its events' fields are known to the daemon.
    for filter in [r#"image == "x""#, "n == 1 && image", "!(image != 0)"] {
        let o = d.ust(&["enable-event", "-s", "byte", "blob:*", "--filter", filter]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{filter}: accepted");
        assert!(
            err.contains("field `image` of event blob:image is a BLOB (image/png); a filter cannot compare a whole BLOB, only one of its bytes"),
            "{filter}: {err}"
        );
    }
    let said = d.ust_ok(&["enable-event", "-s", "byte", "blob:*", "--filter", "image[0] == 0x89 && image[5] == 0xff"]);
    assert!(said.contains("with filter"), "{said}");
    d.ust_ok(&["start", "-s", "blob"]);
    d.ust_ok(&["start", "-s", "byte"]);

    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "blobs exited with {status}");
    let mut printed = String::new();
    stdout.read_to_string(&mut printed).unwrap();
    assert_eq!(printed.trim(), "blobs: 4 events emitted");
    d.stop_and_destroy("blob");
    d.stop_and_destroy("byte");

    // babeltrace2 (which warns of any discarded event): every event, every byte.
    let evs = bt_events(&babeltrace(&out));
    let names: Vec<&str> = evs.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["blob:image", "blob:image", "blob:image", "blob:custom"], "{evs:?}");
    let want = [Vec::new(), few(), large()];
    for (n, (e, bytes)) in evs.iter().zip(&want).enumerate() {
        assert!(e.fields.starts_with(&format!("_image_length = {}, image = [", bytes.len())), "{}", &e.fields[..e.fields.len().min(200)]);
        assert_eq!(&bt_bytes(&e.fields, "image"), bytes, "event {n}");
        assert!(e.fields.ends_with(&format!("], n = {n}")), "event {n}: {}", &e.fields[e.fields.len().saturating_sub(60)..]);
    }
    assert_eq!(bt_bytes(&evs[3].fields, "body"), [0xa1, 0x61, 0x6b, 0x01]);

    // The metadata: lttng-sessiond 2.16's comment before each BLOB, the bytes in base 16.
    let dir = metadata_dir(&out);
    let tsdl = std::fs::read_to_string(dir.join("metadata")).unwrap();
    for (name, media) in [("image", "image/png"), ("body", "application/vnd.ust.test+cbor")] {
        let decl = format!(
            "// dynamic length BLOB field with `{media}` media type\n\t\tinteger {{ size = 8; align = 8; signed = 0; encoding = none; base = 16; }} _{name}[ __{name}_length ];"
        );
        assert!(tsdl.contains(&decl), "{decl}\nnot in\n{tsdl}");
    }
    // What LTTng's test_blob_type.py looks for, through babeltrace2's query.
    let q = Command::new("babeltrace2")
        .args(["query", "src.ctf.fs", "metadata-info", "--params"])
        .arg(format!("path=\"{}\"", dir.display()))
        .output()
        .expect("babeltrace2");
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let info = String::from_utf8_lossy(&q.stdout);
    assert!(info.contains("dynamic length BLOB field with `image/png` media type"), "{info}");
    assert!(info.contains("dynamic length BLOB field with `application/vnd.ust.test+cbor` media type"), "{info}");

    // ust's ctf-reader: the media types, and the same bytes.
    let trace = ctf_reader::CtfTrace::open(&dir).unwrap();
    let class = |name: &str| trace.metadata().streams.iter().flat_map(|s| &s.events).find(|e| e.name == name).unwrap_or_else(|| panic!("no class {name}"));
    assert_eq!(class("blob:image").media_type("image"), Some("image/png"));
    assert_eq!(class("blob:image").media_type("n"), None);
    assert_eq!(class("blob:custom").media_type("body"), Some("application/vnd.ust.test+cbor"));
    let mut got: Vec<(String, Vec<u8>)> = Vec::new();
    let mut msgs = trace.messages();
    while let Some(m) = msgs.next() {
        if let ctf_reader::Message::Event(e) = m.unwrap() {
            if !e.name().starts_with("blob:") {
                continue;
            }
            let p = e.payload().unwrap();
            let field = if e.name() == "blob:image" { "image" } else { "body" };
            let ctf_reader::Value::Array(items) = p.get(field).unwrap() else { panic!("{field} is not a sequence: {p:?}") };
            got.push((e.name().to_string(), items.iter().map(|v| v.as_i128().unwrap() as u8).collect()));
        }
    }
    let expect: Vec<(String, Vec<u8>)> =
        want.iter().map(|b| ("blob:image".to_string(), b.clone())).chain([("blob:custom".to_string(), vec![0xa1, 0x61, 0x6b, 0x01])]).collect();
    assert!(got == expect, "ctf-reader read other bytes: {:?}", got.iter().map(|(n, b)| (n, b.len())).collect::<Vec<_>>());

    // The filter on bytes 0 and 5 selected the 6-byte BLOB only.
    let evs = bt_events(&babeltrace(&sel));
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(bt_bytes(&evs[0].fields, "image"), few());
}
