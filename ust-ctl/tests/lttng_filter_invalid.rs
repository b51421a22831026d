//! Port of LTTng-tools' `tests/regression/tools/filtering/test_invalid_filter`: every filter
//! of its list is refused by the parser (as `lttng enable-event --filter` refuses it), with
//! a message that says why, at a column inside the text; and the bytecode size limit test:
//! a filter of 5461 `&& 1` terms is refused.

use ust_ctl::filter::parse;

/// Each of LTTng's invalid filters, grouped as its script groups them, with a word the
/// error message must hold.
const EXPECTED: &[(&str, &[&str])] = &[
    (
        "not supported",
        &[
            "intfield*1",
            "intfield/1",
            "intfield+1",
            "intfield-1",
            "1+11111-3333+1",
            "(1+2)*(55*666)",
            "1+2*55*666",
            "asdf + 1 > 1",
            "asdfas < 2332 || asdf + 1 > 1",
            "!+-+++-------+++++++++++-----!!--!44+1",
            "aaa||(gg)+(333----1)",
            "1+1",
            "a-->a",
            "a.b.c->d.e.f+1",
        ],
    ),
    ("`)`", &["((((((((((((((intfield)))))))))))))", r#"0 || ("abc" != "def")) && (3 < 4)"#]),
    ("expected a name after `->`", &["a->"]),
    (
        "not a condition",
        &[
            r#""somestring""#,
            r#""somestring" || 1"#,
            r#"1 || "somestring""#,
            r#""hello*world" || field"#,
            r#""hello*world" && field"#,
            r#"field && "hello*world""#,
            r#"field || "hello*world""#,
        ],
    ),
    ("does not apply to a string", &[r#"!"somestring""#]),
    ("cannot compare a string with", &[r#""somestring" > 42"#, r#""somestring" > 42.0"#]),
    ("with a string", &[r#"42 > "somestring""#, r#"42.0 > "somestring""#]),
    ("$ctx.<context>", &["$ctx == 0", "0 == $ctx"]),
    ("only `$ctx.<context>`", &["$global.value == 0", "0 == $global.value"]),
    ("two globbing patterns", &[r#""hello*world" == "yes*man""#, r#""hello*world" == "yesman*""#, r#""helloworld*" == "yes*man""#]),
    (
        "globbing pattern",
        &[
            r#""hello*world" < field"#,
            r#""hello*world" <= field"#,
            r#""hello*world" >= field"#,
            r#""hello*world" > field"#,
            r#"field < "hello*world""#,
            r#"field <= "hello*world""#,
            r#"field >= "hello*world""#,
            r#"field > "hello*world""#,
        ],
    ),
    ("constant integer", &["field[abc] == 1"]),
];

#[test]
fn every_invalid_filter_is_refused_with_its_reason() {
    let mut failures = Vec::new();
    for (want, filters) in EXPECTED {
        for f in *filters {
            match parse(f) {
                Ok(e) => failures.push(format!("{f:?}: accepted as {e:?}")),
                Err(e) if !e.message.contains(want) => failures.push(format!("{f:?}: {e} (wanted {want:?})")),
                Err(e) if e.offset > f.len() => failures.push(format!("{f:?}: column {} past the end", e.offset + 1)),
                Err(_) => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_list_is_lttngs_whole_list() {
    let ours: Vec<&str> = EXPECTED.iter().flat_map(|(_, f)| f.iter().copied()).collect();
    let mut theirs = INVALID_FILTERS.to_vec();
    let mut mine = ours.clone();
    theirs.sort_unstable();
    mine.sort_unstable();
    assert_eq!(mine, theirs, "every filter of test_invalid_filter, each once");
    for f in INVALID_FILTERS {
        assert!(parse(f).is_err(), "{f}");
    }
}

#[test]
fn bytecode_size_limit() {
    let f = format!("intfield{}", " && 1".repeat(5461));
    let e = parse(&f).unwrap_err();
    assert!(e.message.contains("longer than"), "{e}");
}

/// `INVALID_FILTERS` of test_invalid_filter.
const INVALID_FILTERS: &[&str] = &[
    r##"intfield*1"##,
    r##"intfield/1"##,
    r##"intfield+1"##,
    r##"intfield-1"##,
    r##"1+11111-3333+1"##,
    r##"(1+2)*(55*666)"##,
    r##"1+2*55*666"##,
    r##"asdf + 1 > 1"##,
    r##"asdfas < 2332 || asdf + 1 > 1"##,
    r##"!+-+++-------+++++++++++-----!!--!44+1"##,
    r##"aaa||(gg)+(333----1)"##,
    r##"1+1"##,
    r##"((((((((((((((intfield)))))))))))))"##,
    r##"0 || ("abc" != "def")) && (3 < 4)"##,
    r##"a->"##,
    r##"a-->a"##,
    r##"a.b.c->d.e.f+1"##,
    r##""somestring""##,
    r##"!"somestring""##,
    r##""somestring" > 42"##,
    r##""somestring" > 42.0"##,
    r##"42 > "somestring""##,
    r##"42.0 > "somestring""##,
    r##""somestring" || 1"##,
    r##"1 || "somestring""##,
    r##"$ctx == 0"##,
    r##"0 == $ctx"##,
    r##"$global.value == 0"##,
    r##"0 == $global.value"##,
    r##""hello*world" == "yes*man""##,
    r##""hello*world" == "yesman*""##,
    r##""helloworld*" == "yes*man""##,
    r##""hello*world" < field"##,
    r##""hello*world" <= field"##,
    r##""hello*world" >= field"##,
    r##""hello*world" > field"##,
    r##""hello*world" || field"##,
    r##""hello*world" && field"##,
    r##"field < "hello*world""##,
    r##"field <= "hello*world""##,
    r##"field >= "hello*world""##,
    r##"field > "hello*world""##,
    r##"field && "hello*world""##,
    r##"field || "hello*world""##,
    r##"field[abc] == 1"##,
];
