//! Enablers as the daemon applies them (LTTng's event enablers): which events of a process
//! a channel (or a trigger) records.
//!
//! An enabler is a glob on `provider:name` (`*` matches any run of characters, anywhere)
//! with an optional log-level filter, exclusions, and a filter expression. The request's
//! content is [`ust_ctl::config::Enabler`]; the daemon keeps it as a [`Rule`], with the
//! filter parsed once, when the request is checked ([`ust_ctl::config::check_enable_event`]),
//! and resolved against each event's fields whenever masks are computed.

use ust_core::filter::Expr;
use ust_core::EventDesc;
use ust_ctl::config::Enabler;

/// An enabler and its parsed filter.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// The enabler as requested (listed by `ust list`, saved by `ust save`).
    pub enabler: Enabler,
    /// [`Enabler::filter`] parsed.
    filter: Option<Expr>,
}

impl Rule {
    /// The rule of `enabler` whose filter text parsed as `filter` (what
    /// [`ust_ctl::config::check_enable_event`] returned for it).
    pub fn new(enabler: Enabler, filter: Option<Expr>) -> Rule {
        Rule { enabler, filter }
    }

    /// The rule of `enabler`, its filter text parsed now.
    ///
    /// # Errors
    /// The filter does not parse ([`ust_ctl::filter::parse`]).
    pub fn parse(enabler: Enabler) -> Result<Rule, ust_ctl::filter::ParseError> {
        let filter = enabler.filter.as_deref().map(ust_ctl::filter::parse).transpose()?;
        Ok(Rule { enabler, filter })
    }

    /// True when this enabler is on and matches `e` by name and level, and no exclusion
    /// names it (the filter, evaluated per event in the process, is apart).
    pub fn matches(&self, e: &EventDesc) -> bool {
        let en = &self.enabler;
        if !en.enabled || !en.level.accepts(e.level) {
            return false;
        }
        let name = e.full_name();
        glob_match(&en.pattern, &name) && !en.exclusions.iter().any(|x| glob_match(x, &name))
    }

    /// Why this rule's filter must be refused for `e`, when the rule matches `e` and the
    /// filter names one of its BLOB fields as a whole (LTTng 2.16 BLOB fields,
    /// `ust::Blob<M>`): a BLOB is opaque bytes, compared neither as a string nor as a
    /// number, so the filter could never select the event. One byte (`image[0]`) is an
    /// integer and may be compared. The message names the field, the event and the media
    /// type.
    pub fn whole_blob_refusal(&self, e: &EventDesc) -> Option<String> {
        let filter = self.filter.as_ref()?;
        if !self.matches(e) {
            return None;
        }
        let f = ust_core::filter::whole_blob_field(filter, e)?;
        let media = match &f.ty {
            ust_core::FieldType::Blob { media_type } => media_type.as_ref(),
            _ => "bytes",
        };
        Some(format!(
            "invalid filter: field `{name}` of event {event} is a BLOB ({media}); a filter cannot compare a whole BLOB, only one of its bytes (e.g. `{name}[0] == 0x89`)",
            name = f.name,
            event = e.full_name(),
        ))
    }

    /// What this enabler says about `e`: not recorded, recorded, or recorded when the
    /// filter (resolved against `e`) matches. A filter naming a field `e` lacks, or
    /// comparing one of its fields with a value of another kind, records nothing.
    pub fn decide(&self, e: &EventDesc) -> Decision {
        if !self.matches(e) {
            return Decision::Off;
        }
        let Some(filter) = &self.filter else { return Decision::On };
        match ust_core::filter::resolve(filter, e) {
            Some(r) => Decision::Filtered(vec![r]),
            None => Decision::Off,
        }
    }
}

/// Whether a channel records an event.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Not recorded.
    Off,
    /// Recorded, unconditionally.
    On,
    /// Recorded when one of these (resolved, deduplicated) filters matches.
    Filtered(Vec<Expr>),
}

impl Decision {
    /// Enablers OR together: on beats filtered beats off; filters accumulate.
    pub fn or(self, other: Decision) -> Decision {
        match (self, other) {
            (Decision::On, _) | (_, Decision::On) => Decision::On,
            (Decision::Off, d) | (d, Decision::Off) => d,
            (Decision::Filtered(mut a), Decision::Filtered(b)) => {
                for x in b {
                    if !a.contains(&x) && a.len() < ust_core::filter::MAX_FILTERS_PER_EVENT {
                        a.push(x);
                    }
                }
                Decision::Filtered(a)
            }
        }
    }
}

/// Matches `text` against `pattern`, where `*` matches any run of characters (also empty),
/// `\*` is a literal star, `\\` a backslash, `\:` a colon, and every other character matches
/// itself (LTTng's star-glob, with its escapes: `'*\**'` matches names holding a star).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    ust_core::filter::pattern_match(pattern.as_bytes(), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use ust_core::Level;
    use ust_ctl::config::LevelFilter;

    fn ev(p: &'static str, n: &'static str, level: Level) -> EventDesc {
        EventDesc { provider: Cow::Borrowed(p), name: Cow::Borrowed(n), level, fields: Cow::Borrowed(&[]), location: Cow::Borrowed("") }
    }

    #[test]
    fn a_filter_on_a_whole_blob_is_refused_naming_the_field() {
        static FIELDS: &[ust_core::FieldDesc] = &[
            ust_core::FieldDesc { name: Cow::Borrowed("n"), ty: ust_core::FieldType::Integer(ust_core::IntegerType::U8) },
            ust_core::FieldDesc { name: Cow::Borrowed("image"), ty: ust_core::FieldType::Blob { media_type: Cow::Borrowed("image/png") } },
        ];
        let e = EventDesc { fields: Cow::Borrowed(FIELDS), ..ev("app", "frame", Level::Info) };
        let rule = |pattern: &str, filter: &str| Rule::parse(Enabler { filter: Some(filter.into()), ..Enabler::new(pattern, LevelFilter::Any) }).unwrap();
        let m = rule("app:*", "n == 1 && image == \"x\"").whole_blob_refusal(&e).expect("refused");
        assert!(m.contains("field `image` of event app:frame is a BLOB (image/png)"), "{m}");
        assert_eq!(rule("app:*", "image[0] == 0x89").whole_blob_refusal(&e), None, "one byte is an integer");
        assert_eq!(rule("other:*", "image == 1").whole_blob_refusal(&e), None, "another event's field");
        assert_eq!(Rule::parse(Enabler::new("app:*", LevelFilter::Any)).unwrap().whole_blob_refusal(&e), None);
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "a:b"));
        assert!(glob_match("a:*", "a:b"));
        assert!(glob_match("*:b", "a:b"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(glob_match("a:b", "a:b"));
        assert!(!glob_match("a:b", "a:bc"));
        assert!(!glob_match("a*d", "abc"));
        assert!(glob_match("**", ""));
        assert!(glob_match(r"*\**", "a:b*c") && !glob_match(r"*\**", "tp:tptest"), "an escaped star is a star");
        assert!(glob_match(r"\**", "*x") && !glob_match(r"\**", "x*"));
        assert!(!glob_match("tp**tpTest", "tp:tptest") && glob_match("t*p*:*t*e*s*t", "tp:tptest"));
    }

    /// LTTng's tests/regression/tools/wildcard/test_event_wildcard (UST part): each
    /// pattern is a valid name, and matches `tp:tptest` or not as the script expects.
    #[test]
    fn lttng_wildcard_suite() {
        let none = ["tp:abc*", "*abc", "*z*", r"*\**", r"*\*", r"\**", "*:*tpte*s", "tp**tpTest"];
        let all = [
            "tp:tp*",
            "*",
            "tp:tptest*",
            "**",
            "***",
            "*tptest",
            "**tptest",
            "*tpte*",
            "*tp*",
            "*tp**",
            "*:*tptest",
            "*:*tpte*t",
            "t*p*:*t*e*s*t",
            "*t*p*:*t*e*s*t*",
            "tp*tptest",
            "tp**tptest",
            "tp*test",
        ];
        for p in none.iter().chain(&all) {
            assert_eq!(ust_ctl::config::check_event_name(p), Ok(()), "{p}");
        }
        for p in none {
            assert!(!glob_match(p, "tp:tptest"), "{p} matches nothing of tp:tptest");
        }
        for p in all {
            assert!(glob_match(p, "tp:tptest"), "{p} matches tp:tptest");
        }
    }

    /// LTTng's tests/regression/tools/exclusion/test_exclusion: `-a --exclude X` records
    /// every `tp:tptestN` but the one named; its refusals are refused.
    #[test]
    fn lttng_exclusion_suite() {
        let cases = [
            ("tp:tptest2", "tp:tptest2"),
            ("tp:tptest3", "tp:tptest3"),
            ("tp:tptest*", "tp:tptest1"),
            ("tp:tptest*", "tp:tptest2"),
            ("tp:tptest*", "tp:tptest3"),
            ("tp:tptest*", "tp:tptest4"),
            ("tp:tptest*", "tp:tptest5"),
            ("tp*tptest*", "tp:tptest1"),
            ("tp*tptest*", "tp:tptest2"),
            ("tp*tptest*", "tp:tptest3"),
            ("tp*tptest*", "tp:tptest4"),
            ("tp*tptest*", "tp:tptest5"),
            ("*test2", "tp:tptest2"),
            ("*test5", "tp:tptest5"),
            ("*p*test*", "tp:tptest1"),
            ("*p*test*", "tp:tptest2"),
            ("*p*test*", "tp:tptest3"),
            ("*p***test*", "tp:tptest4"),
            ("*p*test*", "tp:tptest5"),
            ("*3", "tp:tptest3"),
            ("tp*test3,*2", "tp:tptest2"),
            ("**tp*test3,*2", "tp:tptest3"),
        ];
        for (excl, missing) in cases {
            let exclusions: Vec<String> = excl.split(',').map(str::to_string).collect();
            assert_eq!(ust_ctl::config::check_exclusions(&["*".into()], &exclusions), Ok(()), "{excl} is accepted");
            let en = Rule::parse(Enabler { exclusions, ..Enabler::new("*", LevelFilter::Any) }).unwrap();
            assert!(!en.matches(&ev("tp", &missing[3..], Level::Info)), "-a --exclude {excl}: {missing} is excluded");
            assert!(en.matches(&ev("tp", "other", Level::Info)), "-a --exclude {excl}: tp:other is not");
        }
        let refuse = |p: &str, x: &str| ust_ctl::config::check_exclusions(&[p.to_string()], &x.split(',').map(str::to_string).collect::<Vec<_>>());
        assert!(refuse("allo*", "all*").is_err());
        assert!(refuse("allo*", "ze,all*,yes").is_err());
        assert!(refuse("allo*", "allow*").is_ok() && refuse("allo*", "z*em").is_ok());
    }
}
