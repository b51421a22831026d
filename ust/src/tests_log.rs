//! The `log` bridge's records, read back byte by byte, and its emit path allocation-free.

use ::log::{Level as LLevel, LevelFilter, Log, Record};

use super::{serial, site_named, text_len, TestChannel};

/// Length of a `ust_log` payload: line, file, func, msg, target, module_path.
fn log_len(b: &[u8]) -> usize {
    let cstr = |at: usize| at + b[at..].iter().position(|&c| c == 0).unwrap() + 1;
    let f = cstr(4);
    let g = cstr(f);
    let m = g + text_len(&b[g..]);
    cstr(cstr(m))
}

fn log_at(l: &crate::log::Logger, level: LLevel, n: u32) {
    l.log(
        &Record::builder()
            .level(level)
            .target("db::pool")
            .file(Some("src/pool.rs"))
            .line(Some(41))
            .module_path(Some("app::db"))
            .args(format_args!("connected {n} times"))
            .build(),
    );
}

#[test]
fn records_are_tracelog_shaped_with_target_and_module_and_allocate_nothing() {
    let _g = serial();
    let ch = TestChannel::new(13, 1 << 16);
    let logger = crate::log::Logger::new();
    let info = site_named("ust_log", "TRACE_INFO");
    let debug = site_named("ust_log", "TRACE_DEBUG_LINE");
    assert_eq!(info.desc().level, ust_core::Level::Info);
    assert_eq!(crate::log::max_level(), LevelFilter::Off);
    info.set_mask(1 << 13);
    assert_eq!(crate::log::max_level(), LevelFilter::Info);
    assert!(logger.enabled(&::log::Metadata::builder().level(LLevel::Info).build()));
    assert!(!logger.enabled(&::log::Metadata::builder().level(LLevel::Debug).build()));
    log_at(&logger, LLevel::Info, 0);
    let before = crate::test_alloc::allocations();
    for n in 1..=10 {
        log_at(&logger, LLevel::Info, n);
        log_at(&logger, LLevel::Debug, n);
    }
    let after = crate::test_alloc::allocations();
    debug.set_mask(1 << 13);
    assert_eq!(crate::log::max_level(), LevelFilter::Debug);
    log_at(&logger, LLevel::Debug, 99);
    info.set_mask(0);
    debug.set_mask(0);
    assert_eq!(after, before, "recording a log record allocated");
    let recs = ch.records(|_, b| log_len(b));
    assert_eq!(recs.len(), 12, "11 info records and the debug one after it was enabled");
    let expect = |n: u32| {
        let msg = format!("connected {n} times");
        let mut e = 41i32.to_le_bytes().to_vec();
        e.extend(b"src/pool.rs\0app::db\0");
        e.extend((msg.len() as u32).to_le_bytes());
        e.extend(msg.as_bytes());
        e.extend(b"db::pool\0app::db\0");
        e
    };
    for (n, r) in recs[..11].iter().enumerate() {
        assert_eq!(r.0, info.id());
        assert_eq!(r.1, expect(n as u32));
    }
    assert_eq!(recs[11], (debug.id(), expect(99)));
}

/// Eight copies of a string literal, as one literal.
macro_rules! x8 {
    ($s:expr) => {
        concat!($s, $s, $s, $s, $s, $s, $s, $s)
    };
}

#[test]
fn literal_messages_are_recorded_whole_up_to_the_capacity_and_cut_past_it() {
    use crate::text::{MSG_CAPACITY, TRUNCATION_MARKER};
    let _g = serial();
    let ch = TestChannel::new(13, 1 << 16);
    let logger = crate::log::Logger::new();
    let info = site_named("ust_log", "TRACE_INFO");
    info.set_mask(1 << 13);
    let log = |args: std::fmt::Arguments<'_>| logger.log(&Record::builder().level(LLevel::Info).target("t").module_path(Some("m")).args(args).build());
    // Literals (`as_str` is `Some`) of 4096 bytes (the capacity) and of 8192 bytes.
    let whole = format_args!(x8!(concat!(x8!("0123456789abcdef"), x8!("0123456789abcdef"), x8!("0123456789abcdef"), x8!("0123456789abcdef"))));
    assert_eq!(whole.as_str().map(str::len), Some(MSG_CAPACITY));
    let long = format_args!(x8!(x8!(x8!("0123456789abcdef"))));
    assert_eq!(long.as_str().map(str::len), Some(8192));
    log(whole);
    log(long);
    log(format_args!("short"));
    info.set_mask(0);
    let msgs: Vec<Vec<u8>> = ch
        .records(|_, b| log_len(b))
        .into_iter()
        .map(|(_, b)| {
            let at = 4 + b[4..].iter().position(|&c| c == 0).unwrap() + 1;
            let at = at + b[at..].iter().position(|&c| c == 0).unwrap() + 1;
            let n = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            b[at + 4..at + 4 + n].to_vec()
        })
        .collect();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0], whole.as_str().unwrap().as_bytes(), "a literal of the capacity is recorded whole");
    let cut = MSG_CAPACITY - TRUNCATION_MARKER.len();
    assert_eq!(msgs[1].len(), MSG_CAPACITY, "a longer literal is cut to the capacity");
    assert_eq!(&msgs[1][..cut], &long.as_str().unwrap().as_bytes()[..cut]);
    assert_eq!(&msgs[1][cut..], TRUNCATION_MARKER.as_bytes());
    assert_eq!(msgs[2], b"short");
}
