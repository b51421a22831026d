//! What `ust show-maps` prints (lttng-show-maps(1)): the counters a selection keeps
//! (channel, type, owner, CPU, key and value axes: OR within an axis, AND across), summed
//! at the aggregation level (`--per channel|owner|cpu|part`), as LTTng's tables:
//!
//! ```text
//! Recording session `s`:
//! User space map channel `c`, process ID 4242 (`app`) (64-bit int. values), CPU 1:
//! ┏━━━━━━━━━━━━━━━━━┯━━━━━━━┯━━━━━━━━━━━┓
//! ┃ Key             │ Value │ Overflow? ┃
//! ┣━━━━━━━━━━━━━━━━━┿━━━━━━━┿━━━━━━━━━━━┫
//! ┃ count/tp:tptest │   100 │           ┃
//! ┗━━━━━━━━━━━━━━━━━┷━━━━━━━┷━━━━━━━━━━━┛
//! ```
//!
//! (ASCII `+`, `-`, `|` borders and `*` for overflow when the locale is not UTF-8, as
//! LTTng's table writer.) No selected counter: `Nothing to show!`.

use std::collections::BTreeMap;

use ust_ctl::maps::{GroupDump, GroupType, MapsDump};

use clap::{Args, ValueEnum};

use super::SessionOpt;

/// `--type` of a map channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MapType {
    /// Linux kernel map channel (not supported: ust traces user space).
    Kernel,
    /// User space map channel.
    User,
}

/// `--per` of `show-maps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Per {
    /// One table per map channel (default).
    Channel,
    /// One table per owner (user, process, or the shared counters) per channel.
    Owner,
    /// One table per CPU per owner per channel (alias of `part`).
    Cpu,
    /// One table per partition (CPU) per owner per channel.
    Part,
}

/// `--sort-by` of `show-maps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SortBy {
    /// By key, as strings (default).
    Key,
    /// By value, as integers.
    Value,
}

/// `--sort-order` of `show-maps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SortOrder {
    /// Ascending (default).
    Asc,
    /// Descending.
    Desc,
}

/// `ust show-maps`.
#[derive(Debug, Args)]
pub struct ShowMapsArgs {
    /// Session.
    #[command(flatten)]
    pub session: SessionOpt,
    /// Select the counters of this map channel (repeatable).
    #[arg(short = 'c', long = "channel", value_name = "CHANNEL")]
    pub channels: Vec<String>,
    /// Select the map channels of this type (repeatable).
    #[arg(long = "type", value_enum)]
    pub types: Vec<MapType>,
    /// Aggregation level of the tables.
    #[arg(long, value_enum, default_value = "channel")]
    pub per: Per,
    /// Select the counters of Unix user USER (id or name; repeatable).
    #[arg(long = "uid", value_name = "USER", conflicts_with = "all_uids")]
    pub uids: Vec<String>,
    /// Select the counters of every Unix user.
    #[arg(long)]
    pub all_uids: bool,
    /// Select the counters of process PID (repeatable).
    #[arg(long = "pid", value_name = "PID", conflicts_with = "all_pids")]
    pub pids: Vec<i64>,
    /// Select the counters of every process.
    #[arg(long)]
    pub all_pids: bool,
    /// Select the shared counters.
    #[arg(long)]
    pub shared: bool,
    /// Select the system (Linux kernel) counters: there are none in ust.
    #[arg(long)]
    pub system: bool,
    /// Select the counters of CPU ID (repeatable).
    #[arg(long = "part-id", value_name = "ID")]
    pub part_ids: Vec<u32>,
    /// Alias of --part-id.
    #[arg(long = "cpu-id", value_name = "ID")]
    pub cpu_ids: Vec<u32>,
    /// Select the counters of this exact key (repeatable).
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
    /// Select the counters whose key matches GLOB (`*` matches anything, `\*` a `*`;
    /// repeatable).
    #[arg(long = "key-glob", value_name = "GLOB")]
    pub key_globs: Vec<String>,
    /// Select only the counters whose value is not zero.
    #[arg(long)]
    pub non_init_values: bool,
    /// Column the rows are sorted by.
    #[arg(long, value_enum, default_value = "key")]
    pub sort_by: SortBy,
    /// Sort order.
    #[arg(long, value_enum, default_value = "asc")]
    pub sort_order: SortOrder,
    /// Print the first COUNT sorted rows of each table.
    #[arg(long, value_name = "COUNT")]
    pub limit: Option<usize>,
    /// Print the daemon's dump of every counter as JSON instead (a CPU's part lists only its
    /// counters that are not 0).
    #[arg(long)]
    pub json: bool,
}

/// The selection and presentation options of `show-maps`, resolved.
#[derive(Debug, Default)]
pub struct Selection {
    channels: Vec<String>,
    /// `--type` given, and `user` not among them: no user space channel is selected.
    no_user: bool,
    owner_axis: bool,
    uids: Vec<i64>,
    all_uids: bool,
    pids: Vec<i64>,
    all_pids: bool,
    shared: bool,
    parts: Vec<u32>,
    keys: Vec<String>,
    globs: Vec<String>,
    non_init: bool,
    per: Option<Per>,
    sort_by_value: bool,
    desc: bool,
    limit: Option<usize>,
}

/// A user name or id, as `--uid` takes it (names from `/etc/passwd`).
fn resolve_uid(u: &str) -> Result<i64, String> {
    if let Ok(n) = u.parse::<u32>() {
        return Ok(i64::from(n));
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[0] == u).then(|| f[2].parse::<i64>().ok()).flatten()
        })
        .ok_or_else(|| format!("--uid {u:?}: no such user"))
}

impl Selection {
    /// From the arguments.
    ///
    /// # Errors
    /// A `--uid` naming no user.
    pub fn from_args(a: &ShowMapsArgs) -> Result<Selection, String> {
        Ok(Selection {
            channels: a.channels.clone(),
            no_user: !a.types.is_empty() && !a.types.contains(&MapType::User),
            owner_axis: !a.uids.is_empty() || a.all_uids || !a.pids.is_empty() || a.all_pids || a.shared || a.system,
            uids: a.uids.iter().map(|u| resolve_uid(u)).collect::<Result<_, _>>()?,
            all_uids: a.all_uids,
            pids: a.pids.clone(),
            all_pids: a.all_pids,
            shared: a.shared,
            parts: a.part_ids.iter().chain(&a.cpu_ids).copied().collect(),
            keys: a.keys.clone(),
            globs: a.key_globs.clone(),
            non_init: a.non_init_values,
            per: Some(a.per),
            sort_by_value: a.sort_by == SortBy::Value,
            desc: a.sort_order == SortOrder::Desc,
            limit: a.limit,
        })
    }

    fn takes_group(&self, g: &GroupDump) -> bool {
        if !self.owner_axis {
            return true;
        }
        let id = g.owner_id.unwrap_or(-1);
        match g.kind {
            GroupType::Shared => self.shared,
            GroupType::UserPerUser => self.all_uids || self.uids.contains(&id),
            GroupType::UserPerProcess => self.all_pids || self.pids.contains(&id),
        }
    }

    fn takes_part(&self, part: Option<u32>) -> bool {
        match part {
            None => true,
            Some(p) => self.parts.is_empty() || self.parts.contains(&p),
        }
    }

    fn takes_key(&self, k: &str) -> bool {
        (self.keys.is_empty() && self.globs.is_empty()) || self.keys.iter().any(|x| x == k) || self.globs.iter().any(|g| glob(g.as_bytes(), k.as_bytes()))
    }
}

/// LTTng's key glob: `*` matches anything, `\*` a literal `*`, every other byte itself.
/// Greedy with one backtrack point (the last `*`), so time is at most pattern × key
/// whatever the number of stars.
fn glob(p: &[u8], s: &[u8]) -> bool {
    // The pattern as tokens: `None` a star, `Some(b)` one byte.
    let mut toks = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            b'*' => toks.push(None),
            b'\\' if p.get(i + 1) == Some(&b'*') => {
                toks.push(Some(b'*'));
                i += 1;
            }
            c => toks.push(Some(c)),
        }
        i += 1;
    }
    let (mut t, mut k) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while k < s.len() {
        match toks.get(t) {
            Some(Some(c)) if *c == s[k] => {
                t += 1;
                k += 1;
            }
            Some(None) => {
                star = Some((t, k));
                t += 1;
            }
            _ => match star {
                Some((st, sk)) => {
                    t = st + 1;
                    k = sk + 1;
                    star = Some((st, sk + 1));
                }
                None => return false,
            },
        }
    }
    toks[t..].iter().all(Option::is_none)
}

/// One table: its title line (after the session line) and key → (value, overflow).
type Table = (String, BTreeMap<String, (i64, bool)>);

fn owner_title(g: &GroupDump) -> String {
    let bits = if g.value_type == "signed-int-32" { "32-bit int. values" } else { "64-bit int. values" };
    let name = g.owner_name.as_deref().filter(|n| !n.is_empty()).map(|n| format!(" (`{n}`)")).unwrap_or_default();
    match g.kind {
        GroupType::Shared => ", shared counters".into(),
        GroupType::UserPerUser => format!(", user ID {}{name} ({bits})", g.owner_id.unwrap_or(-1)),
        GroupType::UserPerProcess => format!(", process ID {}{name} ({bits})", g.owner_id.unwrap_or(-1)),
    }
}

/// The tables of `d` under `sel`, in order (channel, then owner, then CPU).
pub fn tables(d: &MapsDump, sel: &Selection) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    if sel.no_user {
        return out;
    }
    let per = sel.per.unwrap_or(Per::Channel);
    for ch in d.channels.iter().filter(|c| sel.channels.is_empty() || sel.channels.contains(&c.name)) {
        let head = format!("User space map channel `{}`", ch.name);
        let mut channel_rows = BTreeMap::new();
        let mut any = false;
        for g in ch.groups.iter().filter(|g| sel.takes_group(g)) {
            let mut owner_rows = BTreeMap::new();
            let mut owner_any = false;
            for p in g.parts.iter().filter(|p| sel.takes_part(p.part)) {
                let mut rows = BTreeMap::new();
                for e in p.entries.iter().filter(|e| sel.takes_key(&e.key) && !(sel.non_init && e.value == 0)) {
                    rows.insert(e.key.clone(), (e.value, e.overflow));
                    for m in [&mut owner_rows, &mut channel_rows] {
                        let v: &mut (i64, bool) = m.entry(e.key.clone()).or_insert((0, false));
                        let (sum, wrapped) = v.0.overflowing_add(e.value);
                        v.0 = sum;
                        v.1 |= e.overflow || wrapped;
                    }
                }
                owner_any |= !rows.is_empty();
                if matches!(per, Per::Cpu | Per::Part) && !rows.is_empty() {
                    let cpu = p.part.map(|c| format!(", CPU {c}")).unwrap_or_default();
                    out.push((format!("{head}{}{cpu}", owner_title(g)), rows));
                }
            }
            any |= owner_any;
            if per == Per::Owner && owner_any {
                out.push((format!("{head}{}", owner_title(g)), owner_rows));
            }
        }
        if per == Per::Channel && any {
            out.push((head, channel_rows));
        }
    }
    out
}

/// True when the locale says UTF-8 (`LC_ALL`, `LC_CTYPE`, `LANG`, first set wins).
pub fn utf8_locale() -> bool {
    let v = ["LC_ALL", "LC_CTYPE", "LANG"].iter().find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty())).unwrap_or_default().to_ascii_lowercase();
    v.contains("utf-8") || v.contains("utf8")
}

/// Width in terminal columns (one per char: keys are mostly ASCII).
fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, w: usize, right: bool, center: bool) -> String {
    let n = w.saturating_sub(width(s));
    if center {
        format!("{}{s}{}", " ".repeat(n / 2), " ".repeat(n - n / 2))
    } else if right {
        format!("{}{s}", " ".repeat(n))
    } else {
        format!("{s}{}", " ".repeat(n))
    }
}

fn box_table(rows: &[(String, String, String)], utf8: bool) -> String {
    let g: [&str; 12] = if utf8 {
        ["┏", "┯", "┓", "┣", "┿", "┫", "┗", "┷", "┛", "━", "┃", "│"]
    } else {
        ["+", "+", "+", "+", "+", "+", "+", "+", "+", "-", "|", "|"]
    };
    let head = ("Key".to_string(), "Value".to_string(), "Overflow?".to_string());
    let mut w = [3, 5, 9];
    for r in rows {
        w = [w[0].max(width(&r.0)), w[1].max(width(&r.1)), w[2].max(width(&r.2))];
    }
    let sep = |l: &str, j: &str, r: &str| format!("{l}{}{j}{}{j}{}{r}\n", g[9].repeat(w[0] + 2), g[9].repeat(w[1] + 2), g[9].repeat(w[2] + 2));
    let line = |r: &(String, String, String), header: bool| {
        format!(
            "{o} {} {i} {} {i} {} {o}\n",
            pad(&r.0, w[0], false, false),
            pad(&r.1, w[1], !header, header),
            pad(&r.2, w[2], false, true),
            o = g[10],
            i = g[11]
        )
    };
    let mut s = sep(g[0], g[1], g[2]);
    s += &line(&head, true);
    s += &sep(g[3], g[4], g[5]);
    for r in rows {
        s += &line(r, false);
    }
    s + &sep(g[6], g[7], g[8])
}

/// The whole output of `show-maps` for dump `d`.
pub fn render(d: &MapsDump, sel: &Selection, utf8: bool) -> String {
    let ts = tables(d, sel);
    if ts.is_empty() {
        return "Nothing to show!\n".into();
    }
    let mut out = String::new();
    for (i, (title, rows)) in ts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out += &format!("Recording session `{}`:\n{title}:\n", d.session);
        let mut v: Vec<(&String, &(i64, bool))> = rows.iter().collect();
        if sel.sort_by_value {
            v.sort_by(|a, b| a.1 .0.cmp(&b.1 .0).then_with(|| a.0.cmp(b.0)));
        }
        if sel.desc {
            v.reverse();
        }
        v.truncate(sel.limit.unwrap_or(usize::MAX));
        let cells: Vec<(String, String, String)> = v
            .into_iter()
            .map(|(k, (val, o))| {
                (
                    k.clone(),
                    val.to_string(),
                    if *o {
                        if utf8 {
                            "✔"
                        } else {
                            "*"
                        }
                    } else {
                        ""
                    }
                    .to_string(),
                )
            })
            .collect();
        out += &box_table(&cells, utf8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ust_ctl::maps::{Entry, MapChannelConfig, MapChannelDump, PartDump};

    fn dump() -> MapsDump {
        let e = |k: &str, v| Entry { key: k.into(), value: v, overflow: false };
        let group = |kind, id: Option<i64>, parts: Vec<PartDump>| GroupDump {
            kind,
            owner_id: id,
            owner_name: Some("app".into()),
            value_type: "signed-int-64".into(),
            parts,
        };
        MapsDump {
            session: "s".into(),
            channels: vec![MapChannelDump {
                name: "c".into(),
                config: MapChannelConfig::default(),
                keys: 2,
                keys_dropped: 0,
                groups: vec![
                    group(GroupType::Shared, None, vec![PartDump { part: None, entries: vec![e("a:x", 5), e("b:y", 0)] }]),
                    group(
                        GroupType::UserPerProcess,
                        Some(42),
                        vec![
                            PartDump { part: Some(0), entries: vec![e("a:x", 1), e("b:y", 2)] },
                            PartDump { part: Some(1), entries: vec![e("a:x", 3), e("b:y", 0)] },
                        ],
                    ),
                ],
            }],
        }
    }

    fn sel() -> Selection {
        Selection { per: Some(Per::Channel), ..Selection::default() }
    }

    #[test]
    fn aggregation_levels_sum_what_is_selected() {
        let d = dump();
        let t = tables(&d, &sel());
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].1["a:x"], (9, false));
        assert_eq!(t[0].1["b:y"], (2, false));
        let t = tables(&d, &Selection { per: Some(Per::Owner), ..sel() });
        assert_eq!(
            t.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
            ["User space map channel `c`, shared counters", "User space map channel `c`, process ID 42 (`app`) (64-bit int. values)"]
        );
        let t = tables(&d, &Selection { per: Some(Per::Part), parts: vec![1], owner_axis: true, pids: vec![42], ..sel() });
        assert_eq!(t.len(), 1);
        assert!(t[0].0.ends_with(", CPU 1"), "{}", t[0].0);
        let t = tables(&d, &Selection { non_init: true, globs: vec!["b*".into()], ..sel() });
        assert_eq!(t[0].1.len(), 1);
        assert_eq!(tables(&d, &Selection { owner_axis: true, all_uids: true, ..sel() }).len(), 0);
        assert!(glob(b"a\\*b", b"a*b") && !glob(b"a\\*b", b"axb") && glob(b"*:x", b"a:x"));
    }

    #[test]
    fn a_sum_that_wraps_is_shown_as_an_overflow() {
        let mut d = dump();
        let parts = &mut d.channels[0].groups[1].parts;
        parts[0].entries[0].value = i64::MAX;
        let t = tables(&d, &sel());
        assert_eq!(t[0].1["a:x"], (i64::MAX.wrapping_add(3 + 5), true), "CPU 0's i64::MAX + CPU 1's 3 + shared 5");
        assert_eq!(t[0].1["b:y"], (2, false));
    }

    #[test]
    fn globs_match_as_lttngs_and_many_stars_stay_cheap() {
        for (p, k, want) in [
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("a*", "a", true),
            ("*a", "ba", true),
            ("*a", "ab", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXbY", false),
            ("**", "x", true),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("a\\", "a\\", true),
            ("*\\**", "x*y", true),
            ("*\\**", "xy", false),
        ] {
            assert_eq!(glob(p.as_bytes(), k.as_bytes()), want, "{p:?} on {k:?}");
        }
        // A key of LTTng's longest (255 bytes) against 40 stars that cannot match: the
        // recursive matcher this replaced took exponential time here and never finished.
        let key = "a".repeat(255);
        let pattern = format!("{}b", "a*".repeat(40));
        assert!(!glob(pattern.as_bytes(), key.as_bytes()));
    }

    #[test]
    fn tables_are_drawn_as_lttng_draws_them() {
        let text = render(&dump(), &Selection { sort_by_value: true, desc: true, limit: Some(1), ..sel() }, true);
        let want = "Recording session `s`:\nUser space map channel `c`:\n┏━━━━━┯━━━━━━━┯━━━━━━━━━━━┓\n┃ Key │ Value │ Overflow? ┃\n┣━━━━━┿━━━━━━━┿━━━━━━━━━━━┫\n┃ a:x │     9 │           ┃\n┗━━━━━┷━━━━━━━┷━━━━━━━━━━━┛\n";
        assert_eq!(text, want);
        assert_eq!(render(&dump(), &Selection { no_user: true, ..sel() }, false), "Nothing to show!\n");
    }
}
