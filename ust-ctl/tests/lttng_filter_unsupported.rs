//! Port of LTTng-tools' `tests/regression/tools/filtering/test_unsupported_op`: the filter
//! `intfield OP 1` for each arithmetic operator LTTng parses but does not run (MUL, DIV,
//! MOD, PLUS, MINUS) is refused, and the error says "not supported" (the script greps
//! stderr for `not[[:space:]]\+supported`, case-insensitive), pointing at the operator.

use ust_ctl::filter::parse;

/// LTTng's `OP_STR` and `OP_TKN`.
const OPS: [(&str, &str); 5] = [("MUL", "*"), ("DIV", "/"), ("MOD", "%"), ("PLUS", "+"), ("MINUS", "-")];

#[test]
fn each_unsupported_operator_is_refused_as_not_supported() {
    for (name, tok) in OPS {
        let filter = format!("intfield {tok} 1");
        let e = parse(&filter).expect_err(name);
        let words: Vec<String> = e.message.to_lowercase().split_whitespace().map(str::to_string).collect();
        assert!(words.windows(2).any(|w| w[0] == "not" && w[1] == "supported"), "{name} ({tok}): {e}");
        assert_eq!(e.offset, 9, "{name}: the column of the operator");
    }
}

#[test]
fn the_same_operators_unary_or_elsewhere() {
    // Unary `+` and `-` are supported; only their binary forms are not.
    assert!(parse("-intfield").is_ok() && parse("+intfield").is_ok());
    for f in ["(intfield) * 1", "1 % intfield", "intfield == 1 && longfield / 2 == 1", "a[1] + 1"] {
        assert!(parse(f).unwrap_err().message.contains("not supported"), "{f}");
    }
}
