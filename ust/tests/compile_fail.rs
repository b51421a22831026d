//! Compile-fail tests: what the macros reject, and that the errors name the culprit.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
