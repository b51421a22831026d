//! The report's hash maps and sets: keyed by thread ids, CPUs and names, looked up once or
//! more per event of the trace, hundreds of thousands of times per report.
//!
//! `std`'s default hasher (SipHash-1-3) costs about 110 instructions per lookup of an `i32`
//! key here (callgrind, `ust report` of the many-threads field trace: 12 % of the report's
//! instructions); ahash's (the `ahash` crate, already built for `inferno`) a fraction of it.
//! Its keys are random per map, as `std`'s are, so a hostile trace still cannot choose
//! thread ids that collide in advance.

/// A `HashMap` with ahash's hasher; made with `HashMap::default()`.
pub type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;

/// A `HashSet` with ahash's hasher; made with `HashSet::default()`.
pub type HashSet<K> = std::collections::HashSet<K, ahash::RandomState>;
