//! The CTF writer without a daemon: a trace set up by `process_trace::create_process_trace` for
//! events of every field type, written through the granted buffers and drained by the
//! streams, parses in babeltrace2 with the expected values; the index matches the packets.

use std::borrow::Cow;

use ringbuffer::{Buffer, SlotSize};
use ust_consumerd::model::session::{Channel, ChannelConfig, Session};
use ust_consumerd::ops::process_trace::{create_process_trace, ProcessInfo};
use ust_core::clock::Monotonic;
use ust_core::packet::CtfPacketLayout;
use ust_core::{EnumMapping, EventDesc, FieldDesc, FieldType, IntegerType, Level};

fn ev(name: &'static str, ty: FieldType) -> EventDesc {
    EventDesc {
        provider: Cow::Borrowed("types"),
        name: Cow::Borrowed(name),
        level: Level::Notice,
        fields: Cow::Owned(vec![FieldDesc { name: Cow::Borrowed("v"), ty }]),
        location: Cow::Borrowed(""),
    }
}

#[test]
fn every_field_type_round_trips_through_babeltrace2() {
    let i = |bits, signed, base| IntegerType::new(bits, signed, base);
    let cases: Vec<(EventDesc, Vec<u8>, &str)> = vec![
        (ev("u8", FieldType::Integer(i(8, false, 10))), vec![200], "v = 200"),
        (ev("i16", FieldType::Integer(i(16, true, 10))), (-300i16).to_le_bytes().to_vec(), "v = -300"),
        (ev("u64hex", FieldType::Integer(i(64, false, 16))), 0xdeadu64.to_le_bytes().to_vec(), "v = 0xDEAD"),
        (ev("bin", FieldType::Integer(i(8, false, 2))), vec![5], "v = 0b00000101"),
        (ev("oct", FieldType::Integer(i(16, false, 8))), 8u16.to_le_bytes().to_vec(), "v = 010"),
        (ev("f32", FieldType::Float { exp_dig: 8, mant_dig: 24 }), 2.25f32.to_le_bytes().to_vec(), "v = 2.25"),
        (ev("f64", FieldType::Float { exp_dig: 11, mant_dig: 53 }), (-0.125f64).to_le_bytes().to_vec(), "v = -0.125"),
        (ev("chr", FieldType::Integer(IntegerType::U32.with_base(16))), ('é' as u32).to_le_bytes().to_vec(), "v = 0xE9"),
        (ev("string", FieldType::String), b"a \"quoted\" str\0".to_vec(), r#"v = "a \"quoted\" str""#),
        (
            ev("seq", FieldType::Sequence { length: IntegerType::U8, elem: i(32, true, 10), text: false }),
            [vec![2u8], (-1i32).to_le_bytes().to_vec(), 7i32.to_le_bytes().to_vec()].concat(),
            "_v_length = 2, v = [ [0] = -1, [1] = 7 ]",
        ),
        (
            ev("text", FieldType::Sequence { length: IntegerType::U16, elem: IntegerType::U8, text: true }),
            [2u16.to_le_bytes().to_vec(), b"hi".to_vec()].concat(),
            "_v_length = 2, v = \"hi\"",
        ),
        (ev("arr", FieldType::Array { elem: IntegerType::U8.with_base(16), len: 2 }), vec![0xab, 0x01], "v = [ [0] = 0xAB, [1] = 0x1 ]"),
        (
            ev(
                "senum",
                FieldType::Enum {
                    container: i(8, true, 10),
                    name: Cow::Borrowed("S"),
                    mappings: Cow::Owned(vec![
                        EnumMapping { label: Cow::Borrowed("NEG"), value: -1 },
                        EnumMapping { label: Cow::Borrowed("with \"quote\""), value: 3 },
                    ]),
                },
            ),
            vec![0xff],
            "v = ( \"NEG\" : container = -1 )",
        ),
        (
            ev(
                "enum64",
                FieldType::Enum {
                    container: IntegerType::U64,
                    name: Cow::Borrowed("E"),
                    mappings: Cow::Owned(vec![EnumMapping { label: Cow::Borrowed("BIG"), value: 1 << 40 }]),
                },
            ),
            (1u64 << 40).to_le_bytes().to_vec(),
            "v = ( \"BIG\" : container = 1099511627776 )",
        ),
    ];
    for (e, _, _) in &cases {
        e.validate().unwrap();
    }
    let events: Vec<EventDesc> = cases.iter().map(|c| c.0.clone()).collect();
    let out = tempfile::tempdir().unwrap();
    let mut session = Session::new("w".into(), out.path().to_path_buf(), None);
    session.out = Some(ust_consumerd::ops::output::open_output(out.path(), None).unwrap());
    session.channels.push(Channel::new("chan", ChannelConfig { subbuf_size: 4096, num_subbuf: 4, ..Default::default() }));
    let mut next = 0;
    let info = ProcessInfo { pid: 4242, procname: "writer", ncpus: 1, registered: 0, events: &events, tsc: None };
    let (trace, fds) = create_process_trace(&session, None, &info, &mut next, &mut Default::default()).unwrap();
    let f = std::fs::File::from(fds.into_iter().next().unwrap().into_iter().next().unwrap());
    let buf = Buffer::open(memmap2::MmapOptions::new().map_raw(&f).unwrap()).unwrap().into_writer();
    for round in 0..40 {
        for (idx, (_, payload, _)) in cases.iter().enumerate() {
            let id = ust_core::protocol::event_id(idx as u32);
            let (c, e) = ust_core::event_header::sizes(id);
            let size = SlotSize { compact: (c + payload.len()) as u32, extended: (e + payload.len()) as u32 };
            let mut r = buf.reserve(&CtfPacketLayout, &Monotonic, size).unwrap();
            let (ts, ext) = (r.timestamp, r.extended);
            let s = buf.slot(&mut r);
            let (b0, h) = ust_core::event_header::write(s, id, ts, ext);
            s[h..h + payload.len()].copy_from_slice(payload);
            buf.commit(&CtfPacketLayout, r, b0);
        }
        if round % 8 == 0 {
            trace.streams[0].lock().unwrap().drain();
        }
    }
    trace.streams[0].lock().unwrap().finish();
    let o = std::process::Command::new("babeltrace2").arg(out.path()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.is_empty(), "babeltrace2: {err}");
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.lines().count(), 40 * cases.len());
    for (e, _, want) in &cases {
        let line = text.lines().find(|l| l.contains(&format!("{}: ", e.full_name()))).unwrap_or_else(|| panic!("{} missing", e.full_name()));
        assert!(line.contains(want), "{want:?} not in {line}");
        assert!(line.contains("writer:(4242)"), "{line}");
    }
    let file = std::fs::read(trace.dir.join("chan_0")).unwrap();
    let idx = ust_ctf::index::parse(&std::fs::read(trace.dir.join("index/chan_0.idx")).unwrap()).unwrap();
    assert_eq!(idx.len(), file.len() / 4096);
    let mut prev_end = 0;
    for (n, e) in idx.iter().enumerate() {
        let pkt = &file[e.offset as usize..(e.offset + e.packet_size_bits / 8) as usize];
        let info = ust_ctf::reader::parse_packet(pkt).unwrap();
        assert_eq!((info.packet_seq_num, info.content_size * 8, info.timestamp_begin), (n as u64, e.content_size_bits, e.timestamp_begin));
        assert!(e.timestamp_begin >= prev_end);
        prev_end = e.timestamp_end;
    }
}
