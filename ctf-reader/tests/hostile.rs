//! Hostile input: mutated packets and metadata of the field traces, truncated and lying
//! packets, absurd sequence lengths, cyclic and exploding typealiases, deep nesting, bad
//! UTF-8. Every case must end in messages and/or errors naming the file and offset: never a
//! panic, never unbounded memory, recursion or time (each read here is bounded by the
//! input's size and the reader's limits; proptest would report a panic as a failure).

use std::path::{Path, PathBuf};

use proptest::prelude::*;

const FIELD_TRACES: &str = "/work/shared/field-traces";

/// Reads every message of `dir` (merged), returning (messages, errors).
fn read_all(dir: &Path) -> (usize, Vec<String>) {
    let t = match ctf_reader::CtfTrace::open(dir) {
        Ok(t) => t,
        Err(e) => return (0, vec![e.to_string()]),
    };
    let (mut n, mut errs) = (0, Vec::new());
    let mut it = t.messages();
    while let Some(r) = it.next() {
        match r {
            Ok(m) => {
                if let ctf_reader::Message::Event(e) = &m {
                    // Build every value tree too.
                    for s in [ctf_reader::Scope::EventCommonContext, ctf_reader::Scope::EventSpecificContext, ctf_reader::Scope::EventPayload] {
                        let _ = e.scope(s);
                    }
                }
                n += 1
            }
            Err(e) => errs.push(e.to_string()),
        }
    }
    (n, errs)
}

/// A scratch copy of a field trace with one stream file (the first `max` bytes) and its
/// metadata; `None` when the field traces are absent.
fn small_copy(name: &str, stream: &str, max: usize, tmp: &Path) -> Option<PathBuf> {
    let src = Path::new(FIELD_TRACES).join(name);
    if !src.exists() {
        return None;
    }
    let dst = tmp.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::copy(src.join("metadata"), dst.join("metadata")).unwrap();
    let data = std::fs::read(src.join(stream)).unwrap();
    std::fs::write(dst.join(stream), &data[..data.len().min(max)]).unwrap();
    Some(dst)
}

#[test]
fn truncated_packet_names_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = small_copy("hello-lost", "channel1_2", 4096 + 100, tmp.path()) else { return eprintln!("SKIP: no field traces") };
    let (_, errs) = read_all(&dir);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("channel1_2") && errs[0].contains("offset 4096") && errs[0].contains("packet_size"), "{}", errs[0]);
}

#[test]
fn lying_content_size() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = small_copy("debuginfo-test-app4", "channel0_0", 4096, tmp.path()) else { return eprintln!("SKIP: no field traces") };
    let p = dir.join("channel0_0");
    let mut b = std::fs::read(&p).unwrap();
    // LTTng-UST packet context: after the 40-byte header, timestamp_begin, timestamp_end,
    // then content_size (u64 LE, bits): claim more than the packet holds.
    b[56..64].copy_from_slice(&(1u64 << 40).to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let (n, errs) = read_all(&dir);
    assert_eq!(n, 0);
    assert!(errs[0].contains("content_size") && errs[0].contains("offset 0"), "{errs:?}");
}

fn tsdl_trace(tmp: &Path, metadata: &str, stream: &[u8]) -> PathBuf {
    let dir = tmp.join("t");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("metadata"), metadata).unwrap();
    std::fs::write(dir.join("s0"), stream).unwrap();
    dir
}

const SEQ_META: &str = r#"/* CTF 1.8 */
typealias integer { size = 64; align = 8; signed = false; } := u64;
typealias integer { size = 8; align = 8; signed = false; } := u8;
trace { major = 1; minor = 8; byte_order = le; };
stream { packet.context := struct { u64 packet_size; u64 content_size; }; };
event { name = "e"; fields := struct { u64 n; u8 s[n]; struct {} e[n]; }; };
"#;

#[test]
fn absurd_sequence_length_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(&(64u64 * 8).to_le_bytes());
    b.extend_from_slice(&(64u64 * 8).to_le_bytes());
    b.extend_from_slice(&(1u64 << 40).to_le_bytes());
    b.resize(64, 0xAA);
    let dir = tsdl_trace(tmp.path(), SEQ_META, &b);
    let (n, errs) = read_all(&dir);
    assert_eq!(n, 0);
    assert!(errs[0].contains("s0") && errs[0].contains("offset 24: array of 1099511627776 elements"), "{errs:?}");
}

#[test]
fn empty_elements_are_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(&(24u64 * 8).to_le_bytes());
    b.extend_from_slice(&(24u64 * 8).to_le_bytes());
    b.extend_from_slice(&(1u64 << 40).to_le_bytes());
    // `s` would need 2^40 bytes: refused before the empty-struct array is reached.
    let dir = tsdl_trace(tmp.path(), &SEQ_META.replace("u8 s[n];", ""), &b);
    let (_, errs) = read_all(&dir);
    assert!(errs[0].contains("elements that may be empty"), "{errs:?}");
}

/// Elements that take no bits are bounded per packet by its content's bits: a packet of
/// 64 bytes whose events each ask for 300 empty structures (below the 2^20 of one array)
/// reads its first event (300 of its 512 bits' worth of such elements) and refuses the second, where before
/// every event made its 300 values (a 89 KB trace so mutated held 4 GB in `ust report`).
#[test]
fn empty_elements_are_bounded_per_packet() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(&(64u64 * 8).to_le_bytes());
    b.extend_from_slice(&(64u64 * 8).to_le_bytes());
    for _ in 0..6 {
        b.extend_from_slice(&300u64.to_le_bytes());
    }
    let dir = tsdl_trace(tmp.path(), &SEQ_META.replace("u8 s[n];", ""), &b);
    let (n, errs) = read_all(&dir);
    assert_eq!(n, 1, "{errs:?}");
    assert!(
        errs.len() == 1
            && errs[0].contains("s0")
            && errs[0].contains("offset 32: array of 300 elements that may be empty: the packet may hold 212 more (one per bit of its content)"),
        "{errs:?}"
    );
}

#[test]
fn bad_utf8_strings_are_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let meta = SEQ_META.replace("u64 n; u8 s[n]; struct {} e[n];", "string s;");
    let mut b = Vec::new();
    b.extend_from_slice(&(20u64 * 8).to_le_bytes());
    b.extend_from_slice(&(20u64 * 8).to_le_bytes());
    b.extend_from_slice(&[0xff, 0xfe, b'a', 0]);
    let dir = tsdl_trace(tmp.path(), &meta, &b);
    let t = ctf_reader::CtfTrace::open(&dir).unwrap();
    let mut it = t.stream(0);
    let Some(Ok(ctf_reader::Message::Event(e))) = it.next() else { panic!("one event") };
    assert_eq!(e.payload().unwrap().get("s").unwrap().as_str(), Some("\u{fffd}\u{fffd}a"));
}

fn metadata_error(text: &str) -> String {
    match ctf_reader::parse_metadata(text.as_bytes(), Path::new("m")) {
        Ok(_) => panic!("accepted: {}", &text[..text.len().min(200)]),
        Err(e) => e.to_string(),
    }
}

#[test]
fn cyclic_and_recursive_typealiases_are_errors() {
    let e = metadata_error("typealias struct { a x; } := a; trace { major = 1; minor = 8; byte_order = le; };");
    assert!(e.contains("unknown type `a`"), "{e}");
    let e = metadata_error("typealias b := a; typealias a := b;");
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn exploding_typealiases_are_bounded() {
    let mut m = String::from("typealias integer { size = 8; } := t0;\n");
    for i in 1..40 {
        m += &format!("typealias struct {{ t{p} a; t{p} b; }} := t{i};\n", p = i - 1);
    }
    let e = metadata_error(&m);
    assert!(e.contains("nodes") || e.contains("deeper"), "{e}");
}

#[test]
fn deep_nesting_is_bounded() {
    let n = 1_000_000;
    let m = "trace { packet.header := ".to_string() + &"struct { ".repeat(n) + &"} x; ".repeat(n);
    let e = metadata_error(&m);
    assert!(e.contains("nesting deeper than"), "{e}");
}

#[test]
fn bad_packetized_metadata() {
    let mut b = 0x75D1_1D57u32.to_be_bytes().to_vec();
    b.resize(37, 0);
    b[27] = 0xff; // content size larger than packet size
    let e = ctf_reader::parse_metadata(&b, Path::new("m")).unwrap_err().to_string();
    assert!(e.contains("offset 0") && e.contains("sizes"), "{e}");
}

fn field_stream(name: &str, stream: &str, n: usize) -> Option<(Vec<u8>, Vec<u8>)> {
    let src = Path::new(FIELD_TRACES).join(name);
    let meta = std::fs::read(src.join("metadata")).ok()?;
    let data = std::fs::read(src.join(stream)).ok()?;
    Some((meta, data[..data.len().min(n)].to_vec()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random byte flips in the packets of three field traces (compact and large LTTng
    /// headers, big endian): errors, never a panic.
    #[test]
    fn mutated_packets(which in 0usize..3, flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..24)) {
        let (name, stream) = [("many-threads", "channel0_0"), ("hello-lost", "channel1_2"), ("flipping-endianness", "channel-context-switches_0")][which];
        let Some((meta, mut data)) = field_stream(name, stream, 16 * 4096) else { return Ok(()) };
        for (at, x) in flips {
            let i = at % data.len();
            data[i] ^= x | 1;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("metadata"), &meta).unwrap();
        std::fs::write(dir.join(stream), &data).unwrap();
        let _ = read_all(&dir);
    }

    /// Random edits of TSDL metadata text (byte flips, cuts, duplicated spans): errors,
    /// never a panic.
    #[test]
    fn mutated_metadata(which in 0usize..2, edits in proptest::collection::vec((any::<usize>(), any::<usize>(), 0u8..3, any::<u8>()), 1..8)) {
        let name = ["ctfwriter_JF8nq3", "ros2"][which];
        let Ok(raw) = std::fs::read(Path::new(FIELD_TRACES).join(name).join("metadata")) else { return Ok(()) };
        let mut text = ctf_reader::depacketize(&raw, Path::new("m")).unwrap();
        for (a, b, kind, x) in edits {
            let (i, j) = (a % text.len(), b % text.len());
            let (i, j) = (i.min(j), i.max(j));
            match kind {
                0 => text[i] = x,
                1 => { text.drain(i..j.min(i + 64)); }
                _ => { let span = text[i..j.min(i + 256)].to_vec(); text.splice(i..i, span); }
            }
            if text.is_empty() { break; }
        }
        let _ = ctf_reader::parse_metadata(&text, Path::new("m"));
    }
}

#[test]
fn metadata_is_read_only_from_a_regular_file_of_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let text = "/* CTF 1.8 */ trace { major = 1; minor = 8; byte_order = le; };";
    let dir = tsdl_trace(tmp.path(), text, &[]);
    assert!(ctf_reader::CtfTrace::open(&dir).is_ok());
    // A link to metadata elsewhere (a file of root's, planted by a user): not read, so
    // nothing of it is quoted in a syntax error.
    let elsewhere = tmp.path().join("secret");
    std::fs::write(&elsewhere, "hunter2 = password;\n").unwrap();
    std::fs::remove_file(dir.join("metadata")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("metadata")).unwrap();
    let e = ctf_reader::CtfTrace::open(&dir).err().expect("a link is refused").to_string();
    assert!(e.contains("symbolic link") && !e.contains("hunter2"), "{e}");
    // Nor a FIFO (the read would block).
    std::fs::remove_file(dir.join("metadata")).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(dir.join("metadata")).status().unwrap().success());
    let e = ctf_reader::CtfTrace::open(&dir).err().expect("a FIFO is refused").to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn a_panic_on_a_decoding_thread_is_raised_where_the_merge_is_read() {
    let dir = Path::new("/work/shared/field-traces/ros2");
    if !dir.exists() {
        return eprintln!("SKIP: no field traces");
    }
    let t = ctf_reader::CtfTrace::open(dir).unwrap();
    // The 3,000th message of a stream panics its thread: the merge must not pass that for
    // the end of the stream (and return fewer messages, silently).
    let prep: ctf_reader::Prepare<()> = std::sync::Arc::new(|| {
        let mut n = 0;
        Box::new(move |_: &ctf_reader::Message<'_>| {
            n += 1;
            assert!(n < 3000, "a prepare function's bug");
        })
    });
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut it = t.messages_prepared(prep);
        let mut n = 0u64;
        while let Some(m) = it.next_prepared() {
            m.unwrap();
            n += 1;
        }
        n
    }));
    assert!(read.is_err(), "read {:?} messages and no panic", read.ok());
}
