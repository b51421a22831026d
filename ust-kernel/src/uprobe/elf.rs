//! The functions of an ELF file a uprobe can be placed on: its defined function symbols
//! (`.symtab`, else `.dynsym` for a stripped file), named as `perf probe -F` names them but
//! with Rust names demangled (legacy and v0 manglings, the hash dropped: `app::db::query`),
//! and the file offset of each one's first instruction, which is what tracefs'
//! `uprobe_events` takes (Documentation/trace/uprobetracer.rst).

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Largest file read whole (by `ust trace`, for its DWARF; root's daemon reads only the
/// headers and symbol tables of a user's file, through [`object::ReadCache`]).
pub const MAX_FILE: u64 = 2 << 30;

/// One probe-able function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Demangled name without the hash (`app::db::query`), or the C symbol.
    pub name: String,
    /// The symbol as the file has it (mangled).
    pub raw: String,
    /// The symbol's value: its link-time virtual address.
    pub address: u64,
    /// Its size in bytes (0 when the symbol table does not say).
    pub size: u64,
    /// The file offset of its first byte (what `uprobe_events` takes).
    pub offset: u64,
}

/// `raw` demangled without the hash (`{:#}` of `rustc_demangle`), or `raw` itself when it
/// is not a Rust symbol.
pub fn demangle(raw: &str) -> String {
    match rustc_demangle::try_demangle(raw) {
        Ok(d) => format!("{d:#}"),
        Err(_) => raw.to_string(),
    }
}

/// The defined functions of the ELF image `data` (bytes, or a [`object::ReadCache`] over
/// a file, which reads only the headers and symbol tables), one per address (aliases of
/// one address keep the first name, preferring a global symbol), sorted by name.
///
/// # Errors
/// Not an ELF file, or one without any function symbol ("stripped").
pub fn functions<'data, R: object::ReadRef<'data>>(data: R) -> Result<Vec<Function>, String> {
    let file = object::File::parse(data).map_err(|e| format!("not an ELF file this tool can read ({e})"))?;
    if file.format() != object::BinaryFormat::Elf {
        return Err("not an ELF file".into());
    }
    let segments: Vec<(u64, u64, u64, u64)> = file
        .segments()
        .map(|s| {
            let (off, fsize) = s.file_range();
            (s.address(), s.size(), off, fsize)
        })
        .collect();
    let to_offset =
        |addr: u64| -> Option<u64> { segments.iter().find(|(va, _, _, fsize)| addr >= *va && addr - va < *fsize).map(|(va, _, off, _)| addr - va + off) };
    let mut by_addr: std::collections::BTreeMap<u64, (Function, bool)> = Default::default();
    let mut any = false;
    for table in [file.symbols(), file.dynamic_symbols()] {
        for s in table {
            if s.kind() != SymbolKind::Text || s.is_undefined() || s.address() == 0 {
                continue;
            }
            let Ok(raw) = s.name() else { continue };
            if raw.is_empty() {
                continue;
            }
            let Some(offset) = to_offset(s.address()) else { continue };
            any = true;
            let f = Function { name: demangle(raw), raw: raw.to_string(), address: s.address(), size: s.size(), offset };
            let global = s.is_global();
            match by_addr.get(&s.address()) {
                Some((_, g)) if *g || !global => {}
                _ => {
                    by_addr.insert(s.address(), (f, global));
                }
            }
        }
        if any {
            break;
        }
    }
    if by_addr.is_empty() {
        return Err("the file has no function symbols (stripped?): probe it by name needs its symbol table".into());
    }
    let mut out: Vec<Function> = by_addr.into_values().map(|(f, _)| f).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name).then(a.address.cmp(&b.address)));
    Ok(out)
}

/// The function `symbol` names in `funcs`: the one whose demangled name or raw symbol is
/// `symbol`, else the only one whose demangled name ends in `::symbol`.
///
/// # Errors
/// None or several match: the message lists the candidates (at most 20).
pub fn resolve<'a>(funcs: &'a [Function], symbol: &str) -> Result<&'a Function, String> {
    let exact: Vec<&Function> = funcs.iter().filter(|f| f.name == symbol || f.raw == symbol).collect();
    let found = if exact.is_empty() {
        let suffix = format!("::{symbol}");
        funcs.iter().filter(|f| f.name.ends_with(&suffix)).collect()
    } else {
        exact
    };
    let list = |v: &[&Function]| v.iter().take(20).map(|f| format!("\n  {}", f.name)).collect::<String>();
    match found.as_slice() {
        [one] => Ok(one),
        [] => {
            let last = symbol.rsplit("::").next().unwrap_or(symbol);
            let near: Vec<&Function> = funcs.iter().filter(|f| f.name.contains(last)).collect();
            let hint = if near.is_empty() {
                " (no function of that name: inlined everywhere? mark it #[inline(never)], or list them with ust list --userspace-probes)".to_string()
            } else {
                format!("; functions with {last:?} in their name:{}", list(&near))
            };
            Err(format!("no function {symbol:?} in the file{hint}"))
        }
        many => Err(format!("{symbol:?} is ambiguous ({} functions match), give the full path:{}", many.len(), list(many))),
    }
}

/// A glob of `*` (any run) and `?` (one character) matched against all of `name`.
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    let (mut gi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == n[ni]) {
            gi += 1;
            ni += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some(gi);
            mark = ni;
            gi += 1;
        } else if let Some(s) = star {
            gi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str) -> Function {
        Function { name: name.into(), raw: format!("_ZN{name}"), address: 1, size: 1, offset: 1 }
    }

    #[test]
    fn demangles_without_hash() {
        assert_eq!(demangle("_ZN4core3fmt5write17h0123456789abcdefE"), "core::fmt::write");
        assert_eq!(demangle("main"), "main");
    }

    #[test]
    fn resolves_and_lists_candidates() {
        let fs = vec![f("app::db::query"), f("app::net::query"), f("app::compute"), f("strlen")];
        assert_eq!(resolve(&fs, "app::db::query").unwrap().name, "app::db::query");
        assert_eq!(resolve(&fs, "compute").unwrap().name, "app::compute");
        assert_eq!(resolve(&fs, "strlen").unwrap().name, "strlen");
        let e = resolve(&fs, "query").unwrap_err();
        assert!(e.contains("ambiguous") && e.contains("app::db::query") && e.contains("app::net::query"), "{e}");
        let e = resolve(&fs, "app::quer").unwrap_err();
        assert!(e.contains("no function"), "{e}");
        assert!(resolve(&fs, "nothing_like_it").unwrap_err().contains("inline(never)"));
    }

    #[test]
    fn globs() {
        assert!(glob_match("app::*", "app::db::query"));
        assert!(glob_match("*query", "app::db::query"));
        assert!(glob_match("a?p::*", "app::x"));
        assert!(!glob_match("app::", "app::x"));
        assert!(glob_match("*", ""));
    }
}
