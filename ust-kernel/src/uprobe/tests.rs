//! Unit tests of the uprobe specs' parsing, resolution and validation.
use super::*;

#[test]
fn specs_parse() {
    let s = Spec::parse("elf:/bin/app:app::db::query").unwrap();
    assert_eq!((s.path.to_str().unwrap(), s.symbol.as_str(), s.ret), ("/bin/app", "app::db::query", false));
    assert_eq!(s.default_name(), "query");
    let r = Spec::parse("elf:/bin/app:malloc%return").unwrap();
    assert!(r.ret);
    assert_eq!(r.default_name(), "malloc_return");
    assert_eq!(Spec::parse("elf:/a:_ZN7uprobed5label17h0123456789abcdefE").unwrap().default_name(), "label");
    let o = Spec::parse("elf:/bin/app:app::db::query+0x21").unwrap();
    assert_eq!(
        (o.symbol.as_str(), o.offset, o.symbol_text().as_str(), o.default_name().as_str()),
        ("app::db::query", Some(0x21), "app::db::query+0x21", "query_33")
    );
    assert_eq!(Spec::parse("elf:/a:f+4").unwrap().offset, Some(4));
    for bad in [
        "/bin/app",
        "elf:/bin/app",
        "elf::x",
        "elf:/a:",
        "elf:/a:f+",
        "elf:/a:+4",
        "elf:/a:f+x",
        "elf:/a:f+4%return",
        "elf:/a:0x400030",
        "elf:/a:4194364",
        "sdt:/a:p:n",
    ] {
        assert!(Spec::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(Spec::parse("/bin/app:x").unwrap().path, PathBuf::from("/bin/app"));
    let c = Spec::parse("elf:/tmp/colon_\\:_in_name:f").unwrap();
    assert_eq!((c.path, c.symbol.as_str()), (PathBuf::from("/tmp/colon_:_in_name"), "f"));
    assert_eq!(Spec::parse("elf:sh:main").unwrap().file().parent().map(|p| p.is_absolute()), Some(true));
}

#[test]
fn names_and_args_are_checked() {
    assert!(validate_name("query").is_ok());
    assert!(validate_name("sched_switch").is_err());
    assert!(validate_name("syscall_entry_read").is_err());
    assert!(validate_name("9x").is_err());
    assert!(validate_name("a b").is_err());
    let a = |n: &str, f: &str, t: &str| FetchArg { name: n.into(), fetch: f.into(), ty: t.into() };
    assert!(validate(&[a("x", "%di", "u32")], false).is_ok());
    assert!(validate(&[a("x", "+0(%di)", "string")], false).is_err());
    assert!(validate(&[a("x_bytes", "+0(%di)", "u8[32]")], false).is_ok());
    assert!(validate(&[a("x_bytes", "+0(%di)", "u8[32]")], true).is_err());
    assert!(validate(&[a("x_bytes", "+8(%di)", "u8[32]")], false).is_err());
    assert!(validate(&[a("x_bytes", "+0(%di)", "u8[4096]")], false).is_err());
    assert!(validate(&[a("x_bytes", "+0(%di)", "u64")], false).is_err());
    assert!(validate(&[a("x", "%di", "string")], false).is_err());
    assert!(validate(&[a("x", "$retval", "u64")], false).is_err());
    assert!(validate(&[a("x", "$retval", "u64")], true).is_ok());
    assert!(validate(&[a("x y", "%di", "u32")], false).is_err());
}

#[test]
fn offsets_into_a_real_function_are_proven_by_decoding_it() {
    #[inline(never)]
    fn decoded_fn(a: u64, b: u64) -> u64 {
        let mut x = a;
        for i in 0..b {
            x = x.wrapping_mul(31).wrapping_add(i ^ a);
        }
        x
    }
    let call: fn(u64, u64) -> u64 = std::hint::black_box(decoded_fn);
    std::hint::black_box(call(std::hint::black_box(3), 4));
    let exe = std::fs::read("/proc/self/exe").unwrap();
    let funcs = elf::functions(exe.as_slice()).unwrap();
    let f = elf::resolve(&funcs, "decoded_fn").expect("the function's symbol").clone();
    let code = &exe[f.offset as usize..(f.offset + f.size) as usize];
    let starts = insn::starts(code);
    // An instruction after the first that is longer than one byte: its start is
    // proven, the byte after it is not.
    let i = (1..starts.len()).find(|&i| starts.get(i + 1).unwrap_or(&f.size) - starts[i] >= 2).expect("an instruction of 2 bytes or more");
    let off = starts[i];
    let open = || File::open("/proc/self/exe").unwrap();
    let p = resolve_file(open(), Path::new("/proc/self/exe"), "decoded_fn", Some(off), false, "decoded_x", true).unwrap();
    assert_eq!((p.offset, p.args.len(), p.ret), (f.offset + off, 0, false));
    assert!(p.function.ends_with(&format!("decoded_fn+{off:#x}")), "{}", p.function);
    assert!(p.note.as_deref().unwrap().contains("recording ip, no arguments"));
    let e = resolve_file(open(), Path::new("/proc/self/exe"), "decoded_fn", Some(off + 1), false, "decoded_x", true).unwrap_err();
    assert!(e.contains("is inside an instruction") && e.contains(&format!("covers +{off:#x}..")), "{e}");
    let e = resolve_file(open(), Path::new("/proc/self/exe"), "decoded_fn", Some(f.size), false, "decoded_x", true).unwrap_err();
    assert!(e.contains(&format!("it is {} bytes", f.size)), "{e}");
    // Root's daemon, for a user: never at an offset.
    assert!(resolve_file(open(), Path::new("/proc/self/exe"), "decoded_fn", Some(off), false, "decoded_x", false).is_err());
    assert!(resolve_file(open(), Path::new("/proc/self/exe"), "decoded_fn", Some(0), false, "decoded_x", false).is_err());
}

#[test]
fn stale_groups_are_recognized() {
    assert_eq!(group_pid("ustp_123_4"), Some(123));
    assert_eq!(group_pid("ustp_123"), None);
    assert_eq!(group_pid("ust_123_4"), None);
    assert_eq!(group_pid("uprobes"), None);
}
