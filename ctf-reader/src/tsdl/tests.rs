use std::path::Path;

use crate::model::*;

fn parse(text: &str) -> Trace {
    super::parse(text.as_bytes(), Path::new("m")).unwrap_or_else(|e| panic!("{e}"))
}

const HEAD: &str = "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 32; align = 8; signed = true; } := int;
trace { major = 1; minor = 8; byte_order = be; };
";

#[test]
fn untagged_variant_gets_its_tag_at_the_use() {
    let t = parse(&format!(
        "{HEAD} variant v {{ uint8_t a; string b; }};
        event {{ name = e; fields := struct {{ enum : uint8_t {{ a, b }} sel; variant v <sel> x; }}; }};"
    ));
    let Some(FieldType::Struct { fields, .. }) = &t.streams[0].events[0].payload else { panic!() };
    let FieldType::Variant { tag, ranges, .. } = &fields[1].ty else { panic!() };
    assert_eq!(tag, &FieldPath { scope: Scope::EventPayload, indices: vec![0] });
    assert_eq!(ranges, &vec![vec![(0, 0)], vec![(1, 1)]]);
    assert!(fields[0].ty.as_int().unwrap().referenced);
}

#[test]
fn enums_implicit_negative_and_escaped() {
    let t = parse(&format!("{HEAD} event {{ name = e; fields := struct {{ enum : int {{ \"a\\\"b\" = -5 ... -2, c, d = 7, e }} x; }}; }};"));
    let Some(FieldType::Struct { fields, .. }) = &t.streams[0].events[0].payload else { panic!() };
    let FieldType::Enum { mappings, int } = &fields[0].ty else { panic!() };
    assert_eq!(int.byte_order, ByteOrder::Big);
    let got: Vec<(&str, i128, i128)> = mappings.iter().map(|m| (m.label.as_str(), m.lo, m.hi)).collect();
    assert_eq!(got, vec![("a\"b", -5, -2), ("c", -1, -1), ("d", 7, 7), ("e", 8, 8)]);
}

#[test]
fn absolute_and_relative_sequence_lengths_and_scoped_aliases() {
    let t = parse(&format!(
        "{HEAD} stream {{ event.header := struct {{ uint8_t n; }}; }};
        event {{ name = e; typealias integer {{ size = 3; }} := small;
                 fields := struct {{ small s[stream.event.header.n]; struct {{ uint8_t _len; uint8_t b[_len]; }} in; }}; }};"
    ));
    let Some(FieldType::Struct { fields, .. }) = &t.streams[0].events[0].payload else { panic!() };
    let FieldType::Sequence { len, elem } = &fields[0].ty else { panic!() };
    assert_eq!(len, &FieldPath { scope: Scope::EventHeader, indices: vec![0] });
    assert_eq!(elem.as_int().unwrap().size, 3);
    let FieldType::Struct { fields: inner, .. } = &fields[1].ty else { panic!() };
    assert_eq!(inner[0].name, "len");
    assert!(matches!(&inner[1].ty, FieldType::Sequence { len, .. } if len.indices == vec![1, 0]));
    // The alias is scoped to its event block.
    let e = super::parse(format!("{HEAD} event {{ name = f; fields := struct {{ small x; }}; }};").as_bytes(), Path::new("m")).unwrap_err();
    assert!(e.to_string().contains("unknown type `small`"), "{e}");
}

#[test]
fn a_length_marks_its_own_event_class_only() {
    let t = parse(&format!(
        "{HEAD} stream {{ event.header := struct {{ uint8_t id; }}; }};
        event {{ name = a; id = 0; fields := struct {{ uint8_t n; uint8_t s[n]; }}; }};
        event {{ name = b; id = 1; fields := struct {{ uint8_t x; int y; }}; }};"
    ));
    let first = |e: &EventClass| match &e.payload {
        Some(FieldType::Struct { fields, .. }) => fields[0].ty.as_int().unwrap().referenced,
        _ => panic!(),
    };
    assert!(first(&t.streams[0].events[0]), "a's length");
    assert!(!first(&t.streams[0].events[1]), "b's first field is no length");
}

#[test]
fn lttng_216_blob_comments_give_the_media_type() {
    // The metadata lttng-sessiond 2.16 writes for LTTng-UST's BLOB fields (a static one
    // after its alignment padding, a dynamic one after its length, one without a type).
    let t = parse(&format!(
        "{HEAD} event {{ name = e; fields := struct {{
            uint8_t _n;
            // dynamic length BLOB field with `image/png` media type
            integer {{ size = 8; align = 8; signed = 0; base = 16; }} _img[ _n ];
            // static length BLOB field with `lttng/testmediatype_fix` media type
            struct {{ }} align(8) _fix_padding;
            integer {{ size = 8; align = 8; signed = 0; base = 16; }} _fix[4];
            // dynamic length BLOB field
            uint8_t _raw[ _n ];
            uint8_t _plain[ _n ]; // not a blob
            int _after;
        }}; }};"
    ));
    let e = &t.streams[0].events[0];
    assert_eq!(e.media_type("img"), Some("image/png"));
    assert_eq!(e.media_type("fix"), Some("lttng/testmediatype_fix"));
    assert_eq!(e.media_type("fix_padding"), None, "the padding is not the blob");
    assert_eq!(e.media_type("raw"), Some("application/octet-stream"));
    assert_eq!(e.media_type("plain"), None);
    assert_eq!(e.media_type("after"), None);
    assert_eq!(e.media_type("n"), None);
    let Some(FieldType::Struct { fields, .. }) = &e.payload else { panic!() };
    assert!(matches!(&fields[1].ty, FieldType::Sequence { elem, .. } if elem.as_int().unwrap().base == 16));
}
