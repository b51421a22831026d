//! A session's userspace-probe rules (`ust enable-event --userspace-probe=SPEC NAME`,
//! LTTng's kernel-domain `--userspace-probe`): what the user asked for, kept by the
//! session, shown by `ust list SESSION`, saved by `ust save` as LTTng's
//! `<userspace_probe_function_attributes>` (`<userspace_probe_tracepoint_attributes>` for
//! SDT probes), and placed as tracefs uprobes while the session records (the resolution
//! and placing are `ust_kernel::uprobe`'s).
//!
//! ```text
//! --userspace-probe=elf:/usr/bin/app:app::db::query%return  q
//!   ──> UserspaceProbe { name: "q", enabled: true,
//!                        location: Function { path: "/usr/bin/app", symbol: "app::db::query", ret: true } }
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Most userspace probes one session keeps (the recorder places at most as many).
pub const MAX_SESSION_PROBES: usize = 32;

/// Where a probe goes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum ProbeLocation {
    /// `elf:PATH:SYMBOL[%return]`: a function's entry, or its return.
    Function {
        /// The ELF file, absolute, as given (a symbolic link is kept, as LTTng saves it).
        path: PathBuf,
        /// A Rust path (`app::db::query`) or C symbol.
        symbol: String,
        /// A return probe (`%return`; LTTng has none: saved as `SYMBOL%return`).
        ret: bool,
    },
    /// `sdt:PATH:PROVIDER:PROBE`: a SystemTap SDT note.
    Sdt {
        /// The ELF file, absolute, as given.
        path: PathBuf,
        /// The provider.
        provider: String,
        /// The probe's name.
        probe: String,
    },
}

impl ProbeLocation {
    /// The file.
    pub fn path(&self) -> &std::path::Path {
        match self {
            ProbeLocation::Function { path, .. } | ProbeLocation::Sdt { path, .. } => path,
        }
    }

    /// LTTng's lookup method word (`ELF`, `SDT`).
    pub fn lookup_method(&self) -> &'static str {
        match self {
            ProbeLocation::Function { .. } => "ELF",
            ProbeLocation::Sdt { .. } => "SDT",
        }
    }

    /// The spec text, as `--userspace-probe` takes it (a `:` of the path escaped as `\:`).
    pub fn spec(&self) -> String {
        let esc = |p: &std::path::Path| p.to_string_lossy().replace(':', "\\:");
        match self {
            ProbeLocation::Function { path, symbol, ret } => format!("elf:{}:{symbol}{}", esc(path), if *ret { "%return" } else { "" }),
            ProbeLocation::Sdt { path, provider, probe } => format!("sdt:{}:{provider}:{probe}", esc(path)),
        }
    }
}

/// One userspace-probe rule of a session.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UserspaceProbe {
    /// The event name (`[A-Za-z_][A-Za-z0-9_]*`; a return probe's events are named so too).
    pub name: String,
    /// Placed at the next `start` (`ust disable-event NAME` clears it, as LTTng's
    /// `disable-event -k NAME`).
    pub enabled: bool,
    /// Where.
    pub location: ProbeLocation,
}

/// Checks a probe rule's shape (the daemon runs it on what it receives; resolving the
/// symbol is the CLI's and the recorder's): an event name tracefs takes, an absolute path.
///
/// # Errors
/// What is wrong.
pub fn check_probe(p: &UserspaceProbe) -> Result<(), String> {
    let n = &p.name;
    let ok = !n.is_empty() && n.len() <= 48 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !n.starts_with(|c: char| c.is_ascii_digit());
    if !ok {
        return Err(format!("userspace probe event name {n:?}: letters, digits and _ only, not starting with a digit, at most 48 bytes"));
    }
    if !p.location.path().is_absolute() {
        return Err(format!("userspace probe {n}: the path {} is not absolute", p.location.path().display()));
    }
    match &p.location {
        ProbeLocation::Function { symbol, .. } if symbol.is_empty() => Err(format!("userspace probe {n}: no symbol")),
        ProbeLocation::Sdt { provider, probe, .. } if provider.is_empty() || probe.is_empty() => Err(format!("userspace probe {n}: no provider or probe name")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_print_as_they_parse() {
        let f = ProbeLocation::Function { path: "/tmp/a:b/app".into(), symbol: "app::f".into(), ret: true };
        assert_eq!(f.spec(), "elf:/tmp/a\\:b/app:app::f%return");
        assert_eq!(f.lookup_method(), "ELF");
        let s = ProbeLocation::Sdt { path: "/bin/x".into(), provider: "p".into(), probe: "n".into() };
        assert_eq!(s.spec(), "sdt:/bin/x:p:n");
        let ok = UserspaceProbe { name: "f".into(), enabled: true, location: f.clone() };
        assert!(check_probe(&ok).is_ok());
        assert!(check_probe(&UserspaceProbe { name: "9f".into(), ..ok.clone() }).is_err());
        assert!(check_probe(&UserspaceProbe { name: "a b".into(), ..ok.clone() }).is_err());
        let rel = ProbeLocation::Function { path: "app".into(), symbol: "f".into(), ret: false };
        assert!(check_probe(&UserspaceProbe { location: rel, ..ok }).is_err());
    }
}
