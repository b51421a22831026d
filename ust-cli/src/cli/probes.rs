//! `--userspace-probe SPEC` of `ust trace`: each spec parsed and resolved in the file it
//! names before anything runs (a missing or ambiguous symbol fails the command, listing
//! candidates; what DWARF could not give is said on stderr), and `ust list
//! --userspace-probes PATH [GLOB]`, the functions a probe can go on (as `perf probe -F`
//! lists them, demangled). The probes themselves are `ust_kernel::uprobe`'s.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use crate::kernel::uprobe::{self, elf, Probe, Spec};

use super::connect::Failure;
use super::print::print_json;
use crate::out::outln;

/// Resolves every spec (`elf:PATH:SYMBOL[%return]`) to a probe ready to place, printing
/// each probe and what of its arguments is recorded.
///
/// # Errors
/// A spec that does not parse (usage, exit 2), or whose symbol is missing or ambiguous.
pub fn resolve_all(specs: &[String]) -> Result<Vec<Probe>, Failure> {
    let mut out: Vec<Probe> = Vec::new();
    for text in specs {
        let spec = Spec::parse(text).map_err(Failure::usage)?;
        let p = uprobe::resolve(&spec, None).map_err(|e| Failure::new(format!("--userspace-probe {text}: {e}")))?;
        if out.iter().any(|q| q.event == p.event) {
            return Err(Failure::usage(format!("--userspace-probe {text}: a second probe named {} (each function once per kind)", p.event)));
        }
        let args: Vec<String> = p.args.iter().map(|a| format!("{}={}:{}", a.name, a.fetch, a.ty)).collect();
        eprintln!("ust: probe {} on {} ({} at file offset 0x{:x}): {}", p.event, p.function, spec.path.display(), p.offset, args.join(" "));
        if let Some(n) = &p.note {
            eprintln!("ust: probe {}: {n}", p.event);
        }
        out.push(p);
    }
    Ok(out)
}

/// `ust list --userspace-probes PATH [GLOB]`: one line per function, `OFFSET SIZE NAME`
/// (hexadecimal file offset, size in bytes), or JSON objects `{name, symbol, offset,
/// size}`.
///
/// # Errors
/// The file cannot be read, is not ELF, or has no symbols.
pub fn list(path: &Path, glob: Option<&str>, json: bool) -> Result<ExitCode, Failure> {
    let at = |e: String| Failure::new(format!("{}: {e}", path.display()));
    let f = std::fs::File::open(path).map_err(|e| at(e.to_string()))?;
    let mut data = Vec::new();
    f.take(elf::MAX_FILE).read_to_end(&mut data).map_err(|e| at(e.to_string()))?;
    let funcs = elf::functions(data.as_slice()).map_err(at)?;
    let shown: Vec<&elf::Function> = funcs
        .iter()
        .filter(|f| match glob {
            None => true,
            Some(g) => elf::glob_match(g, &f.name) || elf::glob_match(g, &f.raw),
        })
        .collect();
    if json {
        let v: Vec<serde_json::Value> =
            shown.iter().map(|f| serde_json::json!({"name": f.name, "symbol": f.raw, "offset": f.offset, "size": f.size})).collect();
        print_json(&v);
    } else {
        for f in &shown {
            outln!("0x{:08x} {:>7} {}", f.offset, f.size, f.name);
        }
    }
    Ok(ExitCode::SUCCESS)
}
