//! `--userspace-probe SPEC` of `ust trace`: each spec parsed and resolved in the file it
//! names before anything runs (a missing or ambiguous symbol fails the command, listing
//! candidates; what DWARF could not give is said on stderr), and `ust list
//! --userspace-probes PATH [GLOB]`, the functions a probe can go on (as `perf probe -F`
//! lists them, demangled). The probes themselves are `ust_kernel::uprobe`'s.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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
        if let Some(target) = link_target(&p.path) {
            // The probe goes on the file opened through the link: say which, since who may
            // probe it (root's daemon checks its owner) is that file's business.
            eprintln!("ust: probe {}: {} is a symbolic link to {}: that file is the one probed", p.event, p.path.display(), target.display());
        }
        if let Some(n) = &p.note {
            eprintln!("ust: probe {}: {n}", p.event);
        }
        out.push(p);
    }
    Ok(out)
}

/// The file a path that is (or goes through) a symbolic link resolves to.
fn link_target(path: &Path) -> Option<PathBuf> {
    let target = std::fs::canonicalize(path).ok()?;
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    (target != absolute).then_some(target)
}

/// A probed file as it was when its probe was placed (identity, size, modification time),
/// to say afterwards whether it was replaced or changed while probed: the probe stays on
/// the inode it was placed on, at its file offset.
#[derive(Debug)]
pub struct Watch {
    events: Vec<String>,
    path: PathBuf,
    file: std::fs::File,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

/// The files of `probes` (one [`Watch`] per file), before they are placed.
pub fn watch(probes: &[Probe]) -> Vec<Watch> {
    let mut out: Vec<Watch> = Vec::new();
    for p in probes {
        let Ok(m) = p.file.metadata() else { continue };
        if let Some(w) = out.iter_mut().find(|w| w.dev == m.dev() && w.ino == m.ino()) {
            w.events.push(p.event.clone());
            continue;
        }
        let Ok(file) = p.file.try_clone() else { continue };
        out.push(Watch {
            events: vec![p.event.clone()],
            path: p.path.clone(),
            file,
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
        });
    }
    out
}

/// What happened to the watched files since [`watch`], as messages: a path that now names
/// another file (replaced, as a build or package upgrade does: the new file was never
/// probed) or none, and a file changed in place (its contents at the probe's offset may
/// no longer be the function's first instruction).
pub fn changed(watches: &[Watch]) -> Vec<String> {
    let mut out = Vec::new();
    for w in watches {
        let events = w.events.join(", ");
        match std::fs::metadata(&w.path) {
            Ok(m) if m.dev() == w.dev && m.ino() == w.ino => {}
            Ok(_) => out.push(format!(
                "probe {events}: {} was replaced by another file while probed: the probe stayed on the file it was placed on, \
                 so processes that ran the new file are not in the trace (run ust trace again to probe it)",
                w.path.display()
            )),
            Err(e) => out.push(format!(
                "probe {events}: {} is gone ({e}): the probe stayed on the file it was placed on, until the end of the recording",
                w.path.display()
            )),
        }
        if let Ok(m) = w.file.metadata() {
            if m.size() != w.size || (m.mtime(), m.mtime_nsec()) != w.mtime {
                out.push(format!(
                    "probe {events}: {} was modified in place while probed: the probe stayed at its file offset, which in the new \
                     contents may not start the function, and the kernel steps over the instruction it saved from the old contents; \
                     processes that ran the changed file may have gone wrong at the probe: replace a probed file (write a new one and \
                     rename it), never rewrite it",
                    w.path.display()
                ));
            }
        }
    }
    out
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
