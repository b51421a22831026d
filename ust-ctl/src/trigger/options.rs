//! What an action of a trigger carries besides its kind (lttng-add-trigger(1), "Action
//! specifier"): its rate policy (`--rate-policy every:N | once-after:N`, every action but
//! `incr-map-value`) and, for `snapshot-session`, the snapshot output (`--path`, `--url`,
//! `--ctrl-url`/`--data-url`, `--name`, `--max-size`), kept as LTTng keeps them
//! (`lttng_rate_policy`, `lttng_snapshot_output`), so that `list-triggers` and the session
//! XML show what the user gave.

use serde::{Deserialize, Serialize};

use crate::url::{destination, Destination};

/// When an action runs (LTTng's `lttng_rate_policy`). Each time its trigger fires, the
/// action's execution request count `C` grows by one; the action then runs when `C`
/// satisfies the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RatePolicy {
    /// `every:N`: when `C` is a multiple of `N` (`every:1`, the default: always).
    EveryN(u64),
    /// `once-after:N`: when `C` equals `N`, once.
    OnceAfterN(u64),
}

impl Default for RatePolicy {
    fn default() -> Self {
        RatePolicy::EveryN(1)
    }
}

impl RatePolicy {
    /// Whether the `count`-th execution request (from 1) runs the action.
    pub fn admits(self, count: u64) -> bool {
        match self {
            RatePolicy::EveryN(n) => n > 0 && count.is_multiple_of(n),
            RatePolicy::OnceAfterN(n) => count == n,
        }
    }

    /// Parses `every:N` or `once-after:N` (`N` > 0), with lttng add-trigger's messages.
    ///
    /// # Errors
    /// Not two `:`-separated fields, an unknown type, a value that is not an integer or is 0.
    pub fn parse(s: &str) -> Result<RatePolicy, String> {
        let Some((kind, value)) = s.split_once(':').filter(|(_, v)| !v.contains(':')) else {
            return Err("Rate policy format is invalid.".into());
        };
        let n: u64 = value.parse().map_err(|_| format!("Failed to parse rate policy value `{value}` as an integer."))?;
        if n == 0 {
            return Err(format!("Rate policy value `{value}` must be > 0."));
        }
        match kind {
            "every" => Ok(RatePolicy::EveryN(n)),
            "once-after" => Ok(RatePolicy::OnceAfterN(n)),
            _ => Err(format!("Rate policy type `{kind}` unknown.")),
        }
    }

    /// What `list-triggers` adds after the action, as lttng's (nothing for `every:1`).
    pub fn describe(self) -> String {
        match self {
            RatePolicy::EveryN(1) => String::new(),
            RatePolicy::EveryN(n) => format!(", rate policy: every {n} occurrences"),
            RatePolicy::OnceAfterN(n) => format!(", rate policy: once after {n} occurrences"),
        }
    }
}

/// Where a `snapshot-session` action writes (LTTng's `lttng_snapshot_output`), instead of
/// the session's snapshot output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotOutput {
    /// `--name NAME`: the snapshot directory is `NAME-<N>-<YYYYmmdd-HHMMSS>` instead of
    /// `snapshot-<N>-<YYYYmmdd-HHMMSS>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `--max-size SIZE`: total bytes at most, as `ust snapshot record --max-size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<u64>,
    /// An absolute directory (`--path`, or the path of a `file://` `--url`), a `net://`
    /// or `net6://` URL (`--url`), or the control URL (`--ctrl-url`).
    pub ctrl_url: String,
    /// `--data-url`, with `--ctrl-url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_url: Option<String>,
}

impl SnapshotOutput {
    /// Where the snapshot goes: a local directory or a relay daemon.
    ///
    /// # Errors
    /// A URL [`crate::url`] refuses (checked when the action is parsed; checked again by
    /// the daemon on what it receives).
    pub fn destination(&self) -> Result<Destination, String> {
        if self.ctrl_url.starts_with('/') {
            if self.data_url.is_some() {
                return Err("a snapshot output path takes no data URL".into());
            }
            return Ok(Destination::Local(self.ctrl_url.clone().into()));
        }
        let d = match &self.data_url {
            Some(data) => destination(None, Some(&self.ctrl_url), Some(data))?,
            None => destination(Some(&self.ctrl_url), None, None)?,
        };
        d.ok_or_else(|| "a snapshot output needs a destination".into())
    }

    /// Checks the name and destination.
    ///
    /// # Errors
    /// A name [`crate::config::check_name`] refuses, or a bad destination.
    pub fn check(&self) -> Result<(), String> {
        if let Some(n) = &self.name {
            crate::config::check_name("snapshot output", n)?;
        }
        if self.max_size == Some(0) {
            return Err("a snapshot output's max size must be > 0".into());
        }
        self.destination().map(|_| ())
    }

    /// What `list-triggers` adds after `snapshot session `S``, as lttng's.
    pub fn describe(&self) -> String {
        let mut s = match (&self.data_url, self.ctrl_url.starts_with('/')) {
            (_, true) => format!(", path: {}", self.ctrl_url),
            (None, false) => format!(", url: {}", self.ctrl_url),
            (Some(d), false) => format!(", control url: {}, data url: {d}", self.ctrl_url),
        };
        if let Some(n) = &self.name {
            s.push_str(&format!(", name: {n}"));
        }
        if let Some(m) = self.max_size {
            s.push_str(&format!(", max size: {m}"));
        }
        s
    }
}

/// An action's options (see the module docs); the default is `every:1` and, for a
/// snapshot, the session's own snapshot output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionOptions {
    /// `--rate-policy`.
    #[serde(default)]
    pub rate_policy: RatePolicy,
    /// A `snapshot-session` action's own output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_output: Option<SnapshotOutput>,
}

/// The `--name`, `--max-size` and destination options of one `snapshot-session` action
/// while they are parsed.
#[derive(Debug, Default)]
pub(crate) struct PendingSnapshot {
    pub name: Option<String>,
    pub max_size: Option<u64>,
    pub path: Option<String>,
    pub url: Option<String>,
    pub ctrl_url: Option<String>,
    pub data_url: Option<String>,
}

impl PendingSnapshot {
    /// The output these options give (`None`: none given), with lttng add-trigger's
    /// checks and messages.
    pub fn finish(self) -> Result<Option<SnapshotOutput>, String> {
        match (&self.ctrl_url, &self.data_url) {
            (Some(_), None) => return Err("--ctrl-url is specified, but --data-url is missing.".into()),
            (None, Some(_)) => return Err("--data-url is specified, but --ctrl-url is missing.".into()),
            _ => {}
        }
        let locations = usize::from(self.ctrl_url.is_some()) + usize::from(self.url.is_some()) + usize::from(self.path.is_some());
        if locations > 1 {
            return Err("The --ctrl-url/--data-url, --url, and --path options can't be used together.".into());
        }
        if locations == 0 {
            if self.name.is_some() {
                return Err("Can't provide a snapshot output name without a snapshot output destination.".into());
            }
            if self.max_size.is_some() {
                return Err("Can't provide a snapshot output max size without a snapshot output destination.".into());
            }
            return Ok(None);
        }
        let (ctrl_url, data_url) = if let Some(u) = self.url {
            if !u.contains("://") {
                return Err(format!("Failed to parse '{u}' as an URL."));
            }
            match crate::url::parse(&u).map_err(|e| format!("Failed to parse '{u}' as an URL: {e}"))? {
                crate::url::OutputUrl::File(p) => (p.to_string_lossy().into_owned(), None),
                crate::url::OutputUrl::Net(_) => (u, None),
                crate::url::OutputUrl::Tcp(..) => {
                    return Err(format!("--url {u}: a tcp:// URL names one connection; use --ctrl-url and --data-url, or net://"))
                }
            }
        } else if let Some(p) = self.path {
            let local = match p.strip_prefix("file://") {
                Some(rest) => rest.to_string(),
                None if p.contains("://") => return Err(format!("Failed to parse '{p}' as a local path.")),
                None => p.clone(),
            };
            if !local.starts_with('/') {
                return Err(format!("Failed to parse '{p}' as a local path: give an absolute path."));
            }
            (local, None)
        } else {
            (self.ctrl_url.unwrap_or_default(), self.data_url)
        };
        let out = SnapshotOutput { name: self.name, max_size: self.max_size, ctrl_url, data_url };
        out.check()?;
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_policies() {
        assert_eq!(RatePolicy::parse("every:3"), Ok(RatePolicy::EveryN(3)));
        assert_eq!(RatePolicy::parse("once-after:40"), Ok(RatePolicy::OnceAfterN(40)));
        assert!(RatePolicy::parse("every").unwrap_err().contains("format is invalid"));
        assert!(RatePolicy::parse("every:123bob").unwrap_err().contains("`123bob` as an integer"));
        assert!(RatePolicy::parse("every:").unwrap_err().contains("`` as an integer"));
        assert!(RatePolicy::parse("bob:123").unwrap_err().contains("type `bob` unknown"));
        assert!(RatePolicy::parse("every:0").unwrap_err().contains("> 0"));
        let runs = |p: RatePolicy| (1..=10).filter(|c| p.admits(*c)).collect::<Vec<_>>();
        assert_eq!(runs(RatePolicy::EveryN(1)), (1..=10).collect::<Vec<_>>());
        assert_eq!(runs(RatePolicy::EveryN(3)), vec![3, 6, 9]);
        assert_eq!(runs(RatePolicy::OnceAfterN(4)), vec![4]);
    }

    #[test]
    fn snapshot_outputs() {
        let fin = |p: PendingSnapshot| p.finish();
        assert_eq!(fin(PendingSnapshot::default()), Ok(None));
        let o = fin(PendingSnapshot { path: Some("/hello".into()), name: Some("n".into()), max_size: Some(4096), ..Default::default() }).unwrap().unwrap();
        assert_eq!(o.destination(), Ok(Destination::Local("/hello".into())));
        assert_eq!(o.describe(), ", path: /hello, name: n, max size: 4096");
        let o = fin(PendingSnapshot { url: Some("file:///x/y".into()), ..Default::default() }).unwrap().unwrap();
        assert_eq!(o.ctrl_url, "/x/y");
        let o = fin(PendingSnapshot { url: Some("net://1.2.3.4".into()), ..Default::default() }).unwrap().unwrap();
        assert!(matches!(o.destination(), Ok(Destination::Network(_))));
        let o = fin(PendingSnapshot { ctrl_url: Some("tcp://1.2.3.4:1234".into()), data_url: Some("tcp://1.2.3.4:1235".into()), ..Default::default() })
            .unwrap()
            .unwrap();
        assert!(o.describe().contains("control url: tcp://1.2.3.4:1234, data url: tcp://1.2.3.4:1235"), "{o:?}");
        let cases = [
            (PendingSnapshot { max_size: Some(1), ..Default::default() }, "max size without a snapshot output destination"),
            (PendingSnapshot { name: Some("h".into()), ..Default::default() }, "name without a snapshot output destination"),
            (PendingSnapshot { name: Some("h".into()), url: Some("/a/path".into()), ..Default::default() }, "as an URL"),
            (PendingSnapshot { name: Some("h".into()), path: Some("net://8.8.8.8/".into()), ..Default::default() }, "as a local path"),
            (PendingSnapshot { path: Some("rel".into()), ..Default::default() }, "absolute"),
            (PendingSnapshot { ctrl_url: Some("tcp://h:1".into()), ..Default::default() }, "--data-url is missing"),
            (PendingSnapshot { path: Some("/a".into()), url: Some("net://h".into()), ..Default::default() }, "can't be used together"),
            (PendingSnapshot { path: Some("/a".into()), name: Some("a/b".into()), ..Default::default() }, "invalid snapshot output name"),
        ];
        for (p, want) in cases {
            let e = fin(p).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
