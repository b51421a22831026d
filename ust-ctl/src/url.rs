//! LTTng's output URLs, as `lttng create --set-url/--ctrl-url/--data-url` take them
//! (lttng-create(1), "URL format"), parsed by the CLI and carried to the daemon.
//!
//! ```text
//! file://PATH                                   local output (the same as --output PATH)
//! net://HOST[:CTRL_PORT[:DATA_PORT]][/TRACE_PATH]   both relayd connections (5342, 5343)
//! net6://HOST[:CTRL_PORT[:DATA_PORT]][/TRACE_PATH]  the same over IPv6
//! tcp://HOST:PORT[/TRACE_PATH]                  one connection (--ctrl-url or --data-url)
//! tcp6://HOST:PORT[/TRACE_PATH]                 the same over IPv6
//! ```
//!
//! `HOST` is a name, an IPv4 address, or an IPv6 address in brackets (`[::1]`). The
//! optional `TRACE_PATH` replaces `<session>-<stamp>` in the relay daemon's output
//! (`<relayd output>/<hostname>/<TRACE_PATH>`), as LTTng's base path does.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// lttng-relayd's default control port.
pub const DEFAULT_CONTROL_PORT: u16 = 5342;
/// lttng-relayd's default data port.
pub const DEFAULT_DATA_PORT: u16 = 5343;

/// One TCP endpoint of a relay daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Host name or address (without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Resolve as IPv6 only (`net6://`, `tcp6://`).
    pub ipv6: bool,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Where a network session streams: the relay daemon's control and data endpoints, and
/// the optional trace path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkUrl {
    /// The control connection (session, streams, metadata, indexes).
    pub control: Endpoint,
    /// The data connection (packets).
    pub data: Endpoint,
    /// `TRACE_PATH`, relative, without leading or trailing `/`; `None` when not given.
    pub trace_path: Option<String>,
}

impl std::fmt::Display for NetworkUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.trace_path.as_deref().map(|p| format!("/{p}")).unwrap_or_default();
        if self.control.host == self.data.host && self.control.ipv6 == self.data.ipv6 {
            let scheme = if self.control.ipv6 { "net6" } else { "net" };
            write!(f, "{scheme}://{}:{}{path}", self.control, self.data.port)
        } else {
            let s = |e: &Endpoint| if e.ipv6 { "tcp6" } else { "tcp" };
            write!(f, "{}://{}{path} (control), {}://{} (data)", s(&self.control), self.control, s(&self.data), self.data)
        }
    }
}

/// A parsed output URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputUrl {
    /// `file://PATH`.
    File(PathBuf),
    /// `net://` or `net6://`: both endpoints.
    Net(NetworkUrl),
    /// `tcp://` or `tcp6://`: one endpoint, and the trace path.
    Tcp(Endpoint, Option<String>),
}

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL {url:?}: {why} (expected file://PATH, net://HOST[:CTRL_PORT[:DATA_PORT]][/PATH], net6://…, tcp://HOST:PORT or tcp6://HOST:PORT)")]
pub struct UrlError {
    /// The URL given.
    pub url: String,
    /// What is wrong with it.
    pub why: String,
}

/// Parses one URL.
///
/// # Errors
/// [`UrlError`] for an unknown scheme, an empty host, a bad or zero port, a `tcp://` URL
/// without a port, a relative `file://` path, or a trace path that walks up (`..`).
pub fn parse(url: &str) -> Result<OutputUrl, UrlError> {
    let err = |why: &str| UrlError { url: url.to_string(), why: why.to_string() };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| err("no scheme"))?;
    match scheme {
        "file" => {
            if !rest.starts_with('/') {
                return Err(err("a file:// path must be absolute"));
            }
            Ok(OutputUrl::File(PathBuf::from(rest)))
        }
        "net" | "net6" | "tcp" | "tcp6" => {
            let ipv6 = scheme.ends_with('6');
            let (hostport, path) = match rest.find('/') {
                Some(i) if !rest.starts_with('[') || rest[..i].contains(']') => (&rest[..i], Some(&rest[i + 1..])),
                _ => (rest, None),
            };
            let trace_path = match path.map(|p| p.trim_matches('/')) {
                None | Some("") => None,
                Some(p) if p.split('/').any(|c| c == ".." || c == ".") => return Err(err("the trace path may not hold . or .. components")),
                Some(p) => Some(p.to_string()),
            };
            let (host, ports) = split_host(hostport).map_err(|w| err(&w))?;
            let ports: Vec<u16> =
                ports.iter().map(|p| p.parse::<u16>().ok().filter(|&n| n > 0).ok_or_else(|| err(&format!("bad port {p:?}")))).collect::<Result<_, _>>()?;
            if scheme.starts_with("tcp") {
                let [port] = ports[..] else { return Err(err("a tcp:// URL takes exactly one port")) };
                return Ok(OutputUrl::Tcp(Endpoint { host, port, ipv6 }, trace_path));
            }
            let (c, d) = match ports[..] {
                [] => (DEFAULT_CONTROL_PORT, DEFAULT_DATA_PORT),
                [c] => (c, DEFAULT_DATA_PORT),
                [c, d] => (c, d),
                _ => return Err(err("at most two ports")),
            };
            Ok(OutputUrl::Net(NetworkUrl { control: Endpoint { host: host.clone(), port: c, ipv6 }, data: Endpoint { host, port: d, ipv6 }, trace_path }))
        }
        _ => Err(err(&format!("unknown scheme {scheme:?}"))),
    }
}

/// `HOST[:P[:P]]` or `[V6ADDR][:P[:P]]` → host and the port strings.
fn split_host(s: &str) -> Result<(String, Vec<&str>), String> {
    let (host, ports) = if let Some(r) = s.strip_prefix('[') {
        let (h, after) = r.split_once(']').ok_or("an IPv6 address needs its closing ]")?;
        let ports = match after {
            "" => "",
            a => a.strip_prefix(':').ok_or("expected : after ]")?,
        };
        (h, ports)
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, p),
            None => (s, ""),
        }
    };
    if host.is_empty() {
        return Err("empty host".into());
    }
    if host.chars().any(|c| c.is_whitespace() || c == '@' || c == '/') {
        return Err(format!("bad host {host:?}"));
    }
    let ports = if ports.is_empty() { Vec::new() } else { ports.split(':').collect() };
    Ok((host.to_string(), ports))
}

/// What `ust create` (or `ust trace`) was told about its output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// A local directory (`--output`, `file://`).
    Local(PathBuf),
    /// A relay daemon.
    Network(NetworkUrl),
}

/// Combines `--set-url` or `--ctrl-url` with `--data-url` as lttng-create does: `set_url`
/// alone (`file://`, `net://`, `net6://`), or both of `ctrl` and `data` (`tcp://`, or
/// `net://` whose control port, resp. data port, is taken). `None` when none is given.
///
/// # Errors
/// A message when a URL is invalid, when only one of `--ctrl-url`/`--data-url` is given,
/// when `--set-url` is combined with them, or when `--set-url` is a `tcp://` URL.
pub fn destination(set_url: Option<&str>, ctrl: Option<&str>, data: Option<&str>) -> Result<Option<Destination>, String> {
    match (set_url, ctrl, data) {
        (None, None, None) => Ok(None),
        (Some(u), None, None) => match parse(u).map_err(|e| e.to_string())? {
            OutputUrl::File(p) => Ok(Some(Destination::Local(p))),
            OutputUrl::Net(n) => Ok(Some(Destination::Network(n))),
            OutputUrl::Tcp(..) => Err(format!("--set-url {u}: a tcp:// URL names one connection; use --ctrl-url and --data-url, or net://")),
        },
        (Some(_), _, _) => Err("--set-url cannot be combined with --ctrl-url/--data-url".into()),
        (None, Some(c), Some(d)) => {
            let one = |u: &str, control: bool| -> Result<(Endpoint, Option<String>), String> {
                match parse(u).map_err(|e| e.to_string())? {
                    OutputUrl::Tcp(e, p) => Ok((e, p)),
                    OutputUrl::Net(n) => Ok((if control { n.control } else { n.data }, n.trace_path)),
                    OutputUrl::File(_) => Err(format!("{u}: --ctrl-url and --data-url must be network URLs")),
                }
            };
            let (control, path) = one(c, true)?;
            let (data, dpath) = one(d, false)?;
            Ok(Some(Destination::Network(NetworkUrl { control, data, trace_path: path.or(dpath) })))
        }
        (None, _, _) => Err("--ctrl-url and --data-url go together: give both".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(host: &str, port: u16, ipv6: bool) -> Endpoint {
        Endpoint { host: host.into(), port, ipv6 }
    }

    #[test]
    fn net_urls_take_defaults_and_ports() {
        let n = |u| match parse(u).unwrap() {
            OutputUrl::Net(n) => n,
            o => panic!("{o:?}"),
        };
        assert_eq!(
            n("net://relay.example"),
            NetworkUrl { control: ep("relay.example", 5342, false), data: ep("relay.example", 5343, false), trace_path: None }
        );
        assert_eq!(n("net://10.0.0.1:6000").data.port, 5343);
        let x = n("net://10.0.0.1:6000:6001/a/b/");
        assert_eq!((x.control.port, x.data.port, x.trace_path.as_deref()), (6000, 6001, Some("a/b")));
        let v6 = n("net6://[::1]:7000:7001");
        assert_eq!(v6.control, ep("::1", 7000, true));
        assert_eq!(v6.to_string(), "net6://[::1]:7000:7001");
        assert_eq!(x.to_string(), "net://10.0.0.1:6000:6001/a/b");
        assert_eq!(n("net6://[fe80::1]/p").trace_path.as_deref(), Some("p"));
    }

    #[test]
    fn tcp_and_file_urls() {
        assert_eq!(parse("tcp://h:1").unwrap(), OutputUrl::Tcp(ep("h", 1, false), None));
        assert_eq!(parse("tcp6://[::1]:9/x").unwrap(), OutputUrl::Tcp(ep("::1", 9, true), Some("x".into())));
        assert_eq!(parse("file:///tmp/t").unwrap(), OutputUrl::File("/tmp/t".into()));
    }

    #[test]
    fn bad_urls_are_refused_with_a_reason() {
        for (u, why) in [
            ("relay:5342", "no scheme"),
            ("http://x", "unknown scheme"),
            ("net://", "empty host"),
            ("net://h:0", "bad port"),
            ("net://h:70000", "bad port"),
            ("net://h:1:2:3", "at most two"),
            ("net://h:x", "bad port"),
            ("tcp://h", "exactly one port"),
            ("tcp://h:1:2", "exactly one port"),
            ("file://rel", "absolute"),
            ("net://h/../etc", ".."),
            ("net6://[::1", "closing ]"),
            ("net://a b", "bad host"),
        ] {
            let e = parse(u).unwrap_err();
            assert!(e.why.contains(why), "{u}: {e}");
            assert!(e.to_string().contains(u), "the message names the URL: {e}");
        }
    }

    #[test]
    fn destinations_combine_as_lttng_create() {
        assert_eq!(destination(None, None, None), Ok(None));
        assert_eq!(destination(Some("file:///x"), None, None), Ok(Some(Destination::Local("/x".into()))));
        let Some(Destination::Network(n)) = destination(None, Some("tcp://a:1/p"), Some("tcp://b:2")).unwrap() else { panic!() };
        assert_eq!((n.control, n.data, n.trace_path), (ep("a", 1, false), ep("b", 2, false), Some("p".into())));
        let Some(Destination::Network(n)) = destination(None, Some("net://a:1:2"), Some("net://a:1:3")).unwrap() else { panic!() };
        assert_eq!((n.control.port, n.data.port), (1, 3));
        assert!(destination(Some("tcp://a:1"), None, None).unwrap_err().contains("--ctrl-url"));
        assert!(destination(None, Some("tcp://a:1"), None).unwrap_err().contains("give both"));
        assert!(destination(Some("net://a"), Some("tcp://a:1"), Some("tcp://a:2")).is_err());
        assert!(destination(None, Some("file:///a"), Some("tcp://a:2")).is_err());
    }
}
