//! The event of LTTng's filtering test application (`gen-ust-events`), for
//! system-tests/tests/filter_lttng.rs: `tp:tptest` emitted 100 times with
//! `intfield = longfield = i` (0..100), `arrfield1 = seqfield4 = [1, 2, 3]`,
//! `stringfield = "test"`, `stringfield2 = "\*"`, `floatfield = 2222.0`,
//! `doublefield = 2.0`; then `tp:the_string { str }` once per word of a few of LTTng's
//! string test words.

fn main() {
    let values: [i64; 3] = [1, 2, 3];
    for i in 0..100i32 {
        ust::tracepoint!(tp, tptest,
            intfield: i32 = i, longfield: i64 = i64::from(i), arrfield1: [i64; 3] = values,
            seqfield4: &[i64] = &values[..], stringfield: &str = "test", stringfield2: &str = "\\*",
            floatfield: f32 = 2222.0, doublefield: f64 = 2.0);
    }
    for word in ["hypothecary", "apothecary", "peccary", "scary", "decimal", "dermal", "emesis"] {
        ust::tracepoint!(tp, the_string, str: &str = word);
    }
}
