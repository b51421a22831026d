//! `--set-url`, `--ctrl-url`, `--data-url` and `--live` ([`NetArgs`]) turned into what
//! the daemon is sent: a local output directory or a relay daemon's URL
//! ([`ust_ctl::url`]), checked here so that a bad URL is a usage error at once.

use std::path::PathBuf;

use ust_ctl::url::{Destination, NetworkUrl};

use super::args::NetArgs;
use super::connect::Failure;

impl NetArgs {
    /// The output these options name: `(Some(dir), None)` for `file://DIR`,
    /// `(None, Some(url))` for a relay daemon, `(None, None)` when none is given.
    ///
    /// # Errors
    /// A bad URL, URLs that do not go together, or `--live` without a network URL.
    pub fn destination(&self) -> Result<(Option<PathBuf>, Option<NetworkUrl>), Failure> {
        let d = ust_ctl::url::destination(self.set_url.as_deref(), self.ctrl_url.as_deref(), self.data_url.as_deref()).map_err(Failure::new)?;
        let r = match d {
            None => (None, None),
            Some(Destination::Local(p)) => (Some(p), None),
            Some(Destination::Network(n)) => (None, Some(n)),
        };
        if self.live.is_some() && r.1.is_none() {
            return Err(Failure::new("--live needs a network URL (--set-url net://HOST, or --ctrl-url and --data-url)"));
        }
        if self.live == Some(0) {
            return Err(Failure::new("--live=0: the live timer period must be at least 1 µs"));
        }
        Ok(r)
    }
}
