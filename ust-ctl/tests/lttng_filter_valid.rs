//! Port of LTTng-tools' `tests/regression/tools/filtering/test_valid_filter` (UST part):
//! every filter of its lists parses, and evaluated (`ust_core::filter::eval`) on the events
//! LTTng's test applications emit, it matches the events LTTng's validators expect.
//!
//! - `tp:tptest` (gen-ust-events), emitted 100 times with `intfield = longfield = i`,
//!   `arrfield1 = seqfield4 = [1, 2, 3]`, `stringfield = "test"`, `stringfield2 = "\*"`,
//!   `floatfield = 2222.0`, `doublefield = 2.0`, ... Each validator is stated as the exact
//!   set of `i` recorded (LTTng's check the min and max of the recorded fields).
//! - `tp:the_string` (gen-ust-nevents-str), one event per word of LTTng's list, field
//!   `str`: `str_has_events` means at least one word is recorded, `str_has_no_event` none
//!   (the Kirk Krauss glob tests compare two literals and are constant).
//! - `tp:tptest_blob`: the blob fields as byte arrays and sequences `[2, 3, 4, 5]`.
//!
//! Network byte order fields (`netintfield`, `arrfield3`, `seqfield3`) are plain integers
//! here: ust has no network-order type, and the values are what the filter sees either way.

use std::borrow::Cow;
use std::cell::Cell;

use ust_core::context::ContextType;
use ust_core::filter::{eval, resolve, validate, ContextSource, Expr};
use ust_core::{EventDesc, FieldDesc, FieldType, IntegerType, Level};

/// Counts this thread's allocations, to show that evaluation makes none.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// const-initialized thread-local `Cell`, whose access never allocates.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded with the caller's layout, which meets `alloc`'s contract.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        // SAFETY: `p` came from `System.alloc` with layout `l` (every allocation does).
        unsafe { std::alloc::System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

struct Ctx;
impl ContextSource for Ctx {
    fn int(&self, c: ContextType) -> i128 {
        match c {
            ContextType::Vtid => 4242,
            ContextType::Vpid => 4241,
            _ => 1,
        }
    }
    fn procname(&self) -> &[u8] {
        b"gen-ust-events"
    }
}

fn field(name: &'static str, ty: FieldType) -> FieldDesc {
    FieldDesc { name: Cow::Borrowed(name), ty }
}

fn event(name: &'static str, fields: Vec<FieldDesc>) -> EventDesc {
    EventDesc { provider: Cow::Borrowed("tp"), name: Cow::Borrowed(name), level: Level::Info, fields: Cow::Owned(fields), location: Cow::Borrowed("") }
}

const I32_HEX: IntegerType = IntegerType::new(32, true, 16);

fn seq(elem: IntegerType, text: bool) -> FieldType {
    FieldType::Sequence { length: IntegerType::U64, elem, text }
}

/// `tp:tptest` of LTTng's filtering test application.
fn tptest() -> EventDesc {
    event(
        "tptest",
        vec![
            field("intfield", FieldType::Integer(IntegerType::I32)),
            field("intfield2", FieldType::Integer(I32_HEX)),
            field("longfield", FieldType::Integer(IntegerType::I64)),
            field("netintfield", FieldType::Integer(IntegerType::I32)),
            field("netintfieldhex", FieldType::Integer(I32_HEX)),
            field("arrfield1", FieldType::Array { elem: IntegerType::I64, len: 3 }),
            field("arrfield2", FieldType::Array { elem: IntegerType::U8, len: 10 }),
            field("arrfield3", FieldType::Array { elem: IntegerType::U32, len: 3 }),
            field("seqfield1", seq(IntegerType::U8, false)),
            field("seqfield2", seq(IntegerType::U8, true)),
            field("seqfield3", seq(IntegerType::U32, false)),
            field("seqfield4", seq(IntegerType::I64, false)),
            field("stringfield", FieldType::String),
            field("stringfield2", FieldType::String),
            field("floatfield", FieldType::Float { exp_dig: 8, mant_dig: 24 }),
            field("doublefield", FieldType::Float { exp_dig: 11, mant_dig: 53 }),
        ],
    )
}

/// The payload of the `i`th `tp:tptest` event.
fn tptest_payload(i: i32) -> Vec<u8> {
    let mut p = Vec::new();
    for v in [i, i] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p.extend_from_slice(&i64::from(i).to_le_bytes());
    for v in [i, i] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    let longs = |p: &mut Vec<u8>| (1i64..=3).for_each(|v| p.extend_from_slice(&v.to_le_bytes()));
    let u32s = |p: &mut Vec<u8>| (1u32..=3).for_each(|v| p.extend_from_slice(&v.to_le_bytes()));
    longs(&mut p);
    p.extend_from_slice(b"test\0\0\0\0\0\0");
    u32s(&mut p);
    for _ in 0..2 {
        p.extend_from_slice(&4u64.to_le_bytes());
        p.extend_from_slice(b"test");
    }
    p.extend_from_slice(&3u64.to_le_bytes());
    u32s(&mut p);
    p.extend_from_slice(&3u64.to_le_bytes());
    longs(&mut p);
    p.extend_from_slice(b"test\0");
    p.extend_from_slice(b"\\*\0");
    p.extend_from_slice(&2222.0f32.to_le_bytes());
    p.extend_from_slice(&2.0f64.to_le_bytes());
    p
}

/// The words gen-ust-nevents-str emits, in LTTng's test order.
const WORDS: &[&str] = &[
    "hypothec",
    "hypotheca",
    "hypothecary",
    "hypothecate",
    "hypothecation",
    "hypothecator",
    "hypothecium",
    "hypothenar",
    "hypothenuse",
    "hypothermal",
    "hypothermia",
    "hypothermic",
    "hypotheses",
    "hypothesis",
    "hypothesise",
    "hypothesised",
    "hypothesises",
    "hypothesize",
    "hypothesizing",
    "hypothetic",
    "electrothermic",
    "endothermic",
    "exothermic",
    "geothermic",
    "apothecary",
    "hypothecary",
    "peccary",
    "scary",
    "actinomycosis",
    "adenohypophysis",
    "adiposis",
    "emesis",
    "emphasis",
    "conformal",
    "coseismal",
    "decimal",
    "dermal",
];

fn blob() -> EventDesc {
    let fix = || FieldType::Array { elem: IntegerType::U8, len: 4 };
    event(
        "tptest_blob",
        vec![
            field("fixblobfield_nomediatype", fix()),
            field("varblobfield_nomediatype", seq(IntegerType::U8, false)),
            field("fixblobfield_mediatype", fix()),
            field("varblobfield_mediatype", seq(IntegerType::U8, false)),
        ],
    )
}

fn blob_payload() -> Vec<u8> {
    let mut p = Vec::new();
    for var in [false, true, false, true] {
        if var {
            p.extend_from_slice(&4u64.to_le_bytes());
        }
        p.extend_from_slice(&[2, 3, 4, 5]);
    }
    p
}

/// Parses `filter` (it must parse: these are LTTng's valid filters), resolves it against
/// `desc` and returns the indexes of the payloads it matches, checking that evaluation
/// allocates nothing and that the resolved form survives the trip to a process.
fn matches(filter: &str, desc: &EventDesc, payloads: &[Vec<u8>]) -> Vec<usize> {
    let e = ust_ctl::filter::parse(filter).unwrap_or_else(|e| panic!("LTTng accepts this filter:\n{}", e.render(filter)));
    let Some(r) = resolve(&e, desc) else { return Vec::new() };
    validate(&r, desc).unwrap_or_else(|e| panic!("{filter}: resolved but invalid: {e}"));
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<Expr>(&json).unwrap(), r, "{filter}: the resolved form travels as JSON");
    let mut out = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let before = allocations();
        let m = eval(&r, desc, p, &Ctx);
        assert_eq!(allocations(), before, "{filter}: evaluation allocated");
        if m {
            out.push(i);
        }
    }
    out
}

/// The `i`s a `tp:tptest` validator of LTTng expects.
fn expected(validator: &str) -> Vec<usize> {
    let r = |a: usize, b: usize| (a..=b).collect::<Vec<_>>();
    match validator {
        "intfield" | "intfield_ge" => r(1, 99),
        "intfield_gt" => r(2, 99),
        "intfield_lt" => r(0, 1),
        "intfield_le" => r(0, 2),
        "intfield_eq" => vec![1],
        "intfield_ne" => r(0, 98),
        "intfield_not" => vec![0],
        "intfield_gt_and_longfield_gt" => r(43, 99),
        "intfield_ge_and_longfield_le" => vec![42],
        "intfield_lt_or_longfield_gt" => vec![0, 99],
        "mixed_str_or_int_and_int" => r(34, 99),
        "mixed_int_double" => r(0, 42),
        "true_statement" | "has_events" => r(0, 99),
        "has_no_event" => vec![],
        other => panic!("no validator {other}"),
    }
}

#[test]
fn ust_filters_match_as_lttng_validates() {
    let d = tptest();
    let payloads: Vec<Vec<u8>> = (0..100).map(tptest_payload).collect();
    let mut failures = Vec::new();
    for (validator, filter) in UST_FILTERS {
        let got = matches(filter, &d, &payloads);
        if got != expected(validator) {
            failures.push(format!("{filter:?} ({validator}): matched {got:?}"));
        }
    }
    assert_eq!(UST_FILTERS.len(), 91);
    assert!(failures.is_empty(), "{} of {} differ from LTTng:\n{}", failures.len(), UST_FILTERS.len(), failures.join("\n"));
}

#[test]
fn string_filters_match_as_lttng_validates() {
    let d = event("the_string", vec![field("str", FieldType::String)]);
    let payloads: Vec<Vec<u8>> = WORDS.iter().map(|w| [w.as_bytes(), b"\0"].concat()).collect();
    let mut failures = Vec::new();
    for (validator, filter) in UST_STR_FILTERS.iter().chain(KIRK_KRAUSS) {
        let got = matches(filter, &d, &payloads);
        let ok = match *validator {
            "str_has_events" => !got.is_empty(),
            "str_has_no_event" => got.is_empty(),
            other => panic!("no validator {other}"),
        };
        if !ok {
            failures.push(format!("{filter:?} ({validator}): matched {:?}", got.iter().map(|&i| WORDS[i]).collect::<Vec<_>>()));
        }
    }
    assert_eq!(UST_STR_FILTERS.len() + KIRK_KRAUSS.len(), 96 + 47);
    assert!(failures.is_empty(), "{} differ from LTTng:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn string_filters_select_the_words_they_name() {
    let d = event("the_string", vec![field("str", FieldType::String)]);
    let payloads: Vec<Vec<u8>> = WORDS.iter().map(|w| [w.as_bytes(), b"\0"].concat()).collect();
    let words = |f: &str| matches(f, &d, &payloads).into_iter().map(|i| WORDS[i]).collect::<Vec<_>>();
    assert_eq!(words(r#"str == "hypothecary""#), ["hypothecary", "hypothecary"]);
    assert_eq!(words(r#""*cary" == str"#), ["hypothecary", "apothecary", "hypothecary", "peccary", "scary"]);
    assert_eq!(words(r#"str == "de*al""#), ["decimal", "dermal"]);
    assert_eq!(words(r#"str == "*po*siz*""#), ["hypothesize", "hypothesizing"]);
    assert_eq!(words(r#"str != "**""#), Vec::<&str>::new());
    assert_eq!(words(r#"str == "de\*al""#), Vec::<&str>::new());
}

#[test]
fn blob_filters_match_as_lttng_validates() {
    let d = blob();
    let payloads = vec![blob_payload()];
    for (validator, filter) in UST_BLOB_FILTERS {
        let got = matches(filter, &d, &payloads);
        let want = match *validator {
            "blob_has_events" => vec![0],
            "blob_has_no_event" => vec![],
            other => panic!("no validator {other}"),
        };
        assert_eq!(got, want, "{filter} ({validator})");
    }
}

#[test]
fn a_flat_chain_of_a_hundred_terms_parses_and_runs() {
    let d = tptest();
    let payloads: Vec<Vec<u8>> = (0..100).map(tptest_payload).collect();
    let and = (0..100).map(|k| format!("intfield != {}", k + 1000)).collect::<Vec<_>>().join(" && ");
    assert_eq!(matches(&and, &d, &payloads).len(), 100);
    let or = (0..100).map(|k| format!("intfield == {k}")).collect::<Vec<_>>().join(" || ");
    assert_eq!(matches(&or, &d, &payloads).len(), 100);
    let mixed = (0..100).map(|k| format!("intfield > {k} && longfield > {k}")).collect::<Vec<_>>().join(" || ");
    assert_eq!(matches(&mixed, &d, &payloads), (1..100).collect::<Vec<_>>());
}

#[test]
fn the_deepest_filter_accepted_runs_and_travels_and_deeper_is_refused() {
    let d = tptest();
    let payloads: Vec<Vec<u8>> = (0..100).map(tptest_payload).collect();
    // Each `== 1` takes the previous comparison as its operand: one level per operator.
    let deep = |n: usize| format!("intfield{}", " == 1".repeat(n));
    assert_eq!(matches(&deep(31), &d, &payloads), vec![1]);
    let e = ust_ctl::filter::parse(&deep(40)).unwrap_err();
    assert!(e.message.contains("nested deeper than 32"), "{e}");
}

/// `KIRK_KRAUSS_TESTS` of test_valid_filter: (validator, filter).
const KIRK_KRAUSS: &[(&str, &str)] = &[
    (r##"str_has_events"##, r##""abcccd" == "*ccd""##),
    (r##"str_has_events"##, r##""mississipissippi" == "*issip*ss*""##),
    (r##"str_has_no_event"##, r##""xxxx\*zzzzzzzzy\*f" == "xxxx*zzy*fffff""##),
    (r##"str_has_events"##, r##""xxxx\*zzzzzzzzy\*f" == "xxx*zzy*f""##),
    (r##"str_has_no_event"##, r##""xxxxzzzzzzzzyf" == "xxxx*zzy*fffff""##),
    (r##"str_has_events"##, r##""xxxxzzzzzzzzyf" == "xxxx*zzy*f""##),
    (r##"str_has_events"##, r##""xyxyxyzyxyz" == "xy*z*xyz""##),
    (r##"str_has_events"##, r##""mississippi" == "*sip*""##),
    (r##"str_has_events"##, r##""xyxyxyxyz" == "xy*xyz""##),
    (r##"str_has_events"##, r##""mississippi" == "mi*sip*""##),
    (r##"str_has_events"##, r##""ababac" == "*abac*""##),
    (r##"str_has_events"##, r##""ababac" == "*abac*""##),
    (r##"str_has_events"##, r##""aaazz" == "a*zz*""##),
    (r##"str_has_no_event"##, r##""a12b12" == "*12*23""##),
    (r##"str_has_no_event"##, r##""a12b12" == "a12b""##),
    (r##"str_has_events"##, r##""a12b12" == "*12*12*""##),
    (r##"str_has_events"##, r##""\*" == "*""##),
    (r##"str_has_events"##, r##""a\*abab" == "a*b""##),
    (r##"str_has_events"##, r##""a\*r" == "a*""##),
    (r##"str_has_no_event"##, r##""a\*ar" == "a*aar""##),
    (r##"str_has_events"##, r##""XYXYXYZYXYz" == "XY*Z*XYz""##),
    (r##"str_has_events"##, r##""missisSIPpi" == "*SIP*""##),
    (r##"str_has_events"##, r##""mississipPI" == "*issip*PI""##),
    (r##"str_has_events"##, r##""xyxyxyxyz" == "xy*xyz""##),
    (r##"str_has_events"##, r##""miSsissippi" == "mi*sip*""##),
    (r##"str_has_no_event"##, r##""miSsissippi" == "mi*Sip*""##),
    (r##"str_has_events"##, r##""abAbac" == "*Abac*""##),
    (r##"str_has_events"##, r##""abAbac" == "*Abac*""##),
    (r##"str_has_events"##, r##""aAazz" == "a*zz*""##),
    (r##"str_has_no_event"##, r##""A12b12" == "*12*23""##),
    (r##"str_has_events"##, r##""a12B12" == "*12*12*""##),
    (r##"str_has_events"##, r##""oWn" == "*oWn*""##),
    (r##"str_has_events"##, r##""bLah" == "bLah""##),
    (r##"str_has_no_event"##, r##""bLah" == "bLaH""##),
    (r##"str_has_events"##, r##""aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab" == "a*a*a*a*a*a*aa*aaa*a*a*b""##),
    (
        r##"str_has_events"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*a*aa*aaa*fa*ga*b*""##,
    ),
    (
        r##"str_has_no_event"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*a*x*aaa*fa*ga*b*""##,
    ),
    (
        r##"str_has_no_event"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*aaaa*fa*ga*gggg*b*""##,
    ),
    (
        r##"str_has_events"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*aaaa*fa*ga*ggg*b*""##,
    ),
    (r##"str_has_events"##, r##""aaabbaabbaab" == "*aabbaa*a*""##),
    (r##"str_has_events"##, r##""a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*" == "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*""##),
    (r##"str_has_events"##, r##""aaaaaaaaaaaaaaaaa" == "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*""##),
    (r##"str_has_no_event"##, r##""aaaaaaaaaaaaaaaa" == "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*""##),
    (
        r##"str_has_no_event"##,
        r##""abc\*abcd\*abcde\*abcdef\*abcdefg\*abcdefgh\*abcdefghi\*abcdefghij\*abcdefghijk\*abcdefghijkl\*abcdefghijklm\*abcdefghijklmn" == "abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*""##,
    ),
    (
        r##"str_has_events"##,
        r##""abc\*abcd\*abcde\*abcdef\*abcdefg\*abcdefgh\*abcdefghi\*abcdefghij\*abcdefghijk\*abcdefghijkl\*abcdefghijklm\*abcdefghijklmn" == "abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*""##,
    ),
    (r##"str_has_no_event"##, r##""abc\*abcd\*abcd\*abc\*abcd" == "abc*abc*abc*abc*abc""##),
    (r##"str_has_events"##, r##""abc\*abc\*abc\*abc\*abc\*abc\*abc\*abc\*abc\*abc\*abcd" == "abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abcd""##),
];

/// `UST_FILTERS` of test_valid_filter: (validator, filter).
const UST_FILTERS: &[(&str, &str)] = &[
    (r##"intfield"##, r##"intfield"##),
    (r##"intfield_gt"##, r##"intfield > 1"##),
    (r##"intfield_ge"##, r##"intfield >= 1"##),
    (r##"intfield_lt"##, r##"intfield < 2"##),
    (r##"intfield_le"##, r##"intfield <= 2"##),
    (r##"intfield_eq"##, r##"intfield == 1"##),
    (r##"intfield_ne"##, r##"intfield != 99"##),
    (r##"intfield_not"##, r##"!intfield"##),
    (r##"intfield"##, r##"-intfield"##),
    (r##"intfield"##, r##"--intfield"##),
    (r##"intfield"##, r##"+intfield"##),
    (r##"intfield"##, r##"++intfield"##),
    (r##"intfield_gt_and_longfield_gt"##, r##"intfield > 1 && longfield > 42"##),
    (r##"intfield_ge_and_longfield_le"##, r##"intfield >= 42 && longfield <= 42"##),
    (r##"intfield_lt_or_longfield_gt"##, r##"intfield < 1 || longfield > 98"##),
    (r##"mixed_str_or_int_and_int"##, r##"(stringfield == "test" || intfield != 10) && intfield > 33"##),
    (r##"mixed_int_double"##, r##"intfield < 42.4242424242"##),
    (r##"true_statement"##, r##""test" == "test""##),
    (r##"true_statement"##, r##"stringfield == "test""##),
    (r##"true_statement"##, r##"stringfield == "t*""##),
    (r##"true_statement"##, r##"stringfield == "*""##),
    (
        r##"intfield"##,
        r##"intfield > 0 && intfield > 1 && intfield > 2 && intfield > 3 && intfield > 4 && intfield > 5 && intfield > 6 && intfield > 7 && intfield > 8 || intfield > 0"##,
    ),
    (r##"true_statement"##, r##"1&1"##),
    (r##"true_statement"##, r##"0|1"##),
    (r##"true_statement"##, r##"0^1"##),
    (r##"true_statement"##, r##"seqfield4[1]==2"##),
    (r##"true_statement"##, r##"arrfield1[1]==2"##),
    (r##"true_statement"##, r##"arrfield1[1]==2"##),
    (r##"true_statement"##, r##"arrfield3[1]==2"##),
    (r##"true_statement"##, r##"seqfield3[1]==2"##),
    (r##"true_statement"##, r##"1 | (1 | (1 | 1))"##),
    (r##"true_statement"##, r##"1 >= (1 >= (1 >= 1))"##),
    (r##"true_statement"##, r##"(0x101 & 0x100) == 0x100"##),
    (r##"true_statement"##, r##"(0x101 | 0x10100) == 0x10101"##),
    (r##"true_statement"##, r##"(0xF00F0F ^ 0xFF0F00) == 0x0F000F"##),
    (r##"true_statement"##, r##"(1 << 1) == 2"##),
    (r##"true_statement"##, r##"(4 >> 1) == 2"##),
    (r##"true_statement"##, r##"(1 << 8) == 256"##),
    (r##"true_statement"##, r##"(262144 >> 16) == 4"##),
    (r##"true_statement"##, r##"(~0 & 0xffff) == 0xffff"##),
    (r##"true_statement"##, r##"(~0 & 0xffffffff) == 0xffffffff"##),
    (r##"true_statement"##, r##"(~0 & 0xffffffffffffffff) == 0xffffffffffffffff"##),
    (r##"true_statement"##, r##"-1==~0"##),
    (r##"true_statement"##, r##"~0>>4==0x0fffffffffffffff"##),
    (r##"has_no_event"##, r##"1<<-1"##),
    (r##"has_no_event"##, r##"1<<10000"##),
    (r##"true_statement"##, r##"(1<<63) < 0"##),
    (r##"true_statement"##, r##"(1<<2!=4)==0"##),
    (r##"true_statement"##, r##"1&3==1"##),
    (r##"true_statement"##, r##"(3|1==3)==1"##),
    (r##"true_statement"##, r##"(2^1==3)==1"##),
    (r##"true_statement"##, r##"(1 << 32) == 4294967296"##),
    (r##"true_statement"##, r##"(1 << 63) == 9223372036854775808"##),
    (r##"true_statement"##, r##"(arrfield1[2] & 1) == 1"##),
    (r##"true_statement"##, r##"(arrfield1[2] | 0x111000) == 0x111003"##),
    (r##"true_statement"##, r##"(arrfield1[0] | arrfield1[1] | arrfield1[2]) == 0x3"##),
    (r##"true_statement"##, r##"(seqfield4[2] & 1) == 1"##),
    (r##"true_statement"##, r##"(seqfield4[2] | 0x111000) == 0x111003"##),
    (r##"true_statement"##, r##"intfield < 0xDEADBEEF"##),
    (r##"intfield_lt"##, r##"intfield < 0x2"##),
    (r##"intfield_lt"##, r##"intfield < 02"##),
    (r##"true_statement"##, r##"stringfield2 == "\\*""##),
    (r##"true_statement"##, r##"1.0 || intfield || 1.0"##),
    (r##"intfield_gt"##, r##"1 < intfield"##),
    (r##"has_no_event"##, r##"$ctx.vtid == 0"##),
    (r##"has_events"##, r##"$ctx.vtid != 0"##),
    (r##"has_no_event"##, r##"0 == $ctx.vtid"##),
    (r##"has_events"##, r##"0 != $ctx.vtid"##),
    (r##"has_no_event"##, r##"$ctx.vpid == 0"##),
    (r##"has_events"##, r##"$ctx.vpid != 0"##),
    (r##"has_no_event"##, r##"0 == $ctx.vpid"##),
    (r##"has_events"##, r##"0 != $ctx.vpid"##),
    (r##"has_no_event"##, r##"$ctx.procname != "gen-ust-events""##),
    (r##"has_events"##, r##"$ctx.procname == "gen-ust-events""##),
    (r##"has_no_event"##, r##""gen-ust-events" != $ctx.procname"##),
    (r##"has_events"##, r##""gen-ust-events" == $ctx.procname"##),
    (r##"has_no_event"##, r##"$ctx.procname != "gen-ust-events*""##),
    (r##"has_events"##, r##"$ctx.procname == "gen-ust-events*""##),
    (r##"has_no_event"##, r##""gen-ust-events*" != $ctx.procname"##),
    (r##"has_events"##, r##""gen-ust-events*" == $ctx.procname"##),
    (r##"has_no_event"##, r##"$ctx.procname != "*""##),
    (r##"has_events"##, r##"$ctx.procname == "*""##),
    (r##"has_no_event"##, r##""*" != $ctx.procname"##),
    (r##"has_events"##, r##""*" == $ctx.procname"##),
    (r##"has_no_event"##, r##"!a.f.d"##),
    (r##"has_no_event"##, r##"a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a"##),
    (r##"has_no_event"##, r##"$ctx.vtid.blah == 0"##),
    (r##"has_no_event"##, r##"asdf.asdfsd.sadf < 4"##),
    (r##"has_no_event"##, r##"0 == $ctx.vtid.blah"##),
    (r##"has_no_event"##, r##"arrfield1 != "dontmatch""##),
    (r##"has_no_event"##, r##"seqfield1 != "dontmatch""##),
];

/// `UST_STR_FILTERS` of test_valid_filter: (validator, filter).
const UST_STR_FILTERS: &[(&str, &str)] = &[
    (r##"str_has_events"##, r##"str == "hypothecary""##),
    (r##"str_has_events"##, r##""hypothecary" == str"##),
    (r##"str_has_events"##, r##"str != "hypothecary""##),
    (r##"str_has_events"##, r##""hypothecary" != str"##),
    (r##"str_has_events"##, r##"str == "*cary""##),
    (r##"str_has_events"##, r##""*cary" == str"##),
    (r##"str_has_events"##, r##"str != "*cary""##),
    (r##"str_has_events"##, r##""*cary" != str"##),
    (r##"str_has_events"##, r##"str == "hypo*""##),
    (r##"str_has_events"##, r##""hypo*" == str"##),
    (r##"str_has_events"##, r##"str != "hypo*""##),
    (r##"str_has_events"##, r##""hypo*" != str"##),
    (r##"str_has_events"##, r##"str == "*the*""##),
    (r##"str_has_events"##, r##""*the*" == str"##),
    (r##"str_has_events"##, r##"str != "*the*""##),
    (r##"str_has_events"##, r##""*the*" != str"##),
    (r##"str_has_events"##, r##"str == "**""##),
    (r##"str_has_events"##, r##""**" == str"##),
    (r##"str_has_no_event"##, r##"str != "**""##),
    (r##"str_has_no_event"##, r##""**" != str"##),
    (r##"str_has_events"##, r##"str == "sc*""##),
    (r##"str_has_events"##, r##""sc*" == str"##),
    (r##"str_has_events"##, r##"str != "sc*""##),
    (r##"str_has_events"##, r##""sc*" != str"##),
    (r##"str_has_events"##, r##"str == "de*al""##),
    (r##"str_has_events"##, r##""de*al" == str"##),
    (r##"str_has_events"##, r##"str != "de*al""##),
    (r##"str_has_events"##, r##""de*al" != str"##),
    (r##"str_has_events"##, r##"str == "*po*siz*""##),
    (r##"str_has_events"##, r##""*po*siz*" == str"##),
    (r##"str_has_events"##, r##"str != "*po*siz*""##),
    (r##"str_has_events"##, r##""*po*siz*" != str"##),
    (r##"str_has_events"##, r##"str == "*po***siz*""##),
    (r##"str_has_events"##, r##""*po***siz*" == str"##),
    (r##"str_has_events"##, r##"str != "*po***siz*""##),
    (r##"str_has_events"##, r##""*po***siz*" != str"##),
    (r##"str_has_no_event"##, r##"str == "*po*\**siz*""##),
    (r##"str_has_no_event"##, r##""*po*\**siz*" == str"##),
    (r##"str_has_no_event"##, r##"str == "*zulu*""##),
    (r##"str_has_no_event"##, r##""*zulu*" == str"##),
    (r##"str_has_no_event"##, r##"str == "8*""##),
    (r##"str_has_no_event"##, r##""8*" == str"##),
    (r##"str_has_no_event"##, r##"str == "*8""##),
    (r##"str_has_no_event"##, r##""*8" == str"##),
    (r##"str_has_no_event"##, r##"str == "de\*al""##),
    (r##"str_has_no_event"##, r##""de\*al" == str"##),
    (r##"str_has_events"##, r##""salut*" == "salut vous""##),
    (r##"str_has_events"##, r##""salut*" == "salut vous*""##),
    (r##"str_has_events"##, r##""salut vous*" == "salut*""##),
    (r##"str_has_events"##, r##""abcccd" == "*ccd""##),
    (r##"str_has_events"##, r##""mississipissippi" == "*issip*ss*""##),
    (r##"str_has_no_event"##, r##""xxxx\*zzzzzzzzy\*f" == "xxxx*zzy*fffff""##),
    (r##"str_has_events"##, r##""xxxx\*zzzzzzzzy\*f" == "xxx*zzy*f""##),
    (r##"str_has_no_event"##, r##""xxxxzzzzzzzzyf" == "xxxx*zzy*fffff""##),
    (r##"str_has_events"##, r##""xxxxzzzzzzzzyf" == "xxxx*zzy*f""##),
    (r##"str_has_events"##, r##""xyxyxyzyxyz" == "xy*z*xyz""##),
    (r##"str_has_events"##, r##""mississippi" == "*sip*""##),
    (r##"str_has_events"##, r##""xyxyxyxyz" == "xy*xyz""##),
    (r##"str_has_events"##, r##""mississippi" == "mi*sip*""##),
    (r##"str_has_events"##, r##""ababac" == "*abac*""##),
    (r##"str_has_events"##, r##""ababac" == "*abac*""##),
    (r##"str_has_events"##, r##""aaazz" == "a*zz*""##),
    (r##"str_has_no_event"##, r##""a12b12" == "*12*23""##),
    (r##"str_has_no_event"##, r##""a12b12" == "a12b""##),
    (r##"str_has_events"##, r##""a12b12" == "*12*12*""##),
    (r##"str_has_events"##, r##""\*" == "*""##),
    (r##"str_has_events"##, r##""a\*abab" == "a*b""##),
    (r##"str_has_events"##, r##""a\*r" == "a*""##),
    (r##"str_has_no_event"##, r##""a\*ar" == "a*aar""##),
    (r##"str_has_events"##, r##""XYXYXYZYXYz" == "XY*Z*XYz""##),
    (r##"str_has_events"##, r##""missisSIPpi" == "*SIP*""##),
    (r##"str_has_events"##, r##""mississipPI" == "*issip*PI""##),
    (r##"str_has_events"##, r##""xyxyxyxyz" == "xy*xyz""##),
    (r##"str_has_events"##, r##""miSsissippi" == "mi*sip*""##),
    (r##"str_has_no_event"##, r##""miSsissippi" == "mi*Sip*""##),
    (r##"str_has_events"##, r##""abAbac" == "*Abac*""##),
    (r##"str_has_events"##, r##""abAbac" == "*Abac*""##),
    (r##"str_has_events"##, r##""aAazz" == "a*zz*""##),
    (r##"str_has_no_event"##, r##""A12b12" == "*12*23""##),
    (r##"str_has_events"##, r##""a12B12" == "*12*12*""##),
    (r##"str_has_events"##, r##""oWn" == "*oWn*""##),
    (r##"str_has_events"##, r##""bLah" == "bLah""##),
    (r##"str_has_no_event"##, r##""bLah" == "bLaH""##),
    (r##"str_has_events"##, r##""aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab" == "a*a*a*a*a*a*aa*aaa*a*a*b""##),
    (
        r##"str_has_events"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*a*aa*aaa*fa*ga*b*""##,
    ),
    (
        r##"str_has_no_event"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*a*x*aaa*fa*ga*b*""##,
    ),
    (
        r##"str_has_no_event"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*aaaa*fa*ga*gggg*b*""##,
    ),
    (
        r##"str_has_events"##,
        r##""abababababababababababababababababababaacacacacacacacadaeafagahaiajakalaaaaaaaaaaaaaaaaaffafagaagggagaaaaaaaab" == "*a*b*ba*ca*aaaa*fa*ga*ggg*b*""##,
    ),
    (r##"str_has_events"##, r##""aaabbaabbaab" == "*aabbaa*a*""##),
    (r##"str_has_events"##, r##""a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*a\*" == "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*""##),
    (r##"str_has_events"##, r##""aaaaaaaaaaaaaaaaa" == "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*""##),
    (r##"str_has_no_event"##, r##""aaaaaaaaaaaaaaaa" == "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*""##),
    (
        r##"str_has_no_event"##,
        r##""abc\*abcd\*abcde\*abcdef\*abcdefg\*abcdefgh\*abcdefghi\*abcdefghij\*abcdefghijk\*abcdefghijkl\*abcdefghijklm\*abcdefghijklmn" == "abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*""##,
    ),
    (
        r##"str_has_events"##,
        r##""abc\*abcd\*abcde\*abcdef\*abcdefg\*abcdefgh\*abcdefghi\*abcdefghij\*abcdefghijk\*abcdefghijkl\*abcdefghijklm\*abcdefghijklmn" == "abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*""##,
    ),
    (r##"str_has_no_event"##, r##""abc\*abcd\*abcd\*abc\*abcd" == "abc*abc*abc*abc*abc""##),
    (r##"str_has_events"##, r##""abc\*abc\*abc\*abc\*abc\*abc\*abc\*abc\*abc\*abc\*abcd" == "abc*abc*abc*abc*abc*abc*abc*abc*abc*abc*abcd""##),
];

/// `UST_BLOB_FILTERS` of test_valid_filter: (validator, filter).
const UST_BLOB_FILTERS: &[(&str, &str)] = &[
    (r##"blob_has_events"##, r##"fixblobfield_nomediatype[1] == 3"##),
    (r##"blob_has_events"##, r##"fixblobfield_mediatype[1] == 3"##),
    (r##"blob_has_events"##, r##"varblobfield_nomediatype[1] == 3"##),
    (r##"blob_has_events"##, r##"varblobfield_mediatype[1] == 3"##),
    (r##"blob_has_no_event"##, r##"fixblobfield_nomediatype[0] == 100"##),
    (r##"blob_has_no_event"##, r##"fixblobfield_mediatype[0] == 100"##),
    (r##"blob_has_no_event"##, r##"varblobfield_nomediatype[0] == 100"##),
    (r##"blob_has_no_event"##, r##"varblobfield_mediatype[0] == 100"##),
];
