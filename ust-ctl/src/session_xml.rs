//! Session configurations in LTTng's session XML format (`lttng save`, `lttng load`;
//! schema `session.xsd` of lttng-tools 2.13, installed as
//! `/usr/share/xml/lttng/session.xsd`, and what `src/common/config/session-config.c`
//! writes): `ust save` writes what `lttng load` reads, and `ust load` reads what
//! `lttng save` writes for a user-space session.
//!
//! ```text
//! <sessions><session>
//!   <name>s</name> [<shared_memory_path>DIR</shared_memory_path>]
//!   <domains><domain><type>UST</type><buffer_type>PER_PID</buffer_type>
//!     <channels><channel><name>ch</name><enabled>true</enabled>
//!       <overwrite_mode>DISCARD|OVERWRITE</overwrite_mode><subbuffer_size>..</subbuffer_size>
//!       <subbuffer_count>..</subbuffer_count><switch_timer_interval>us</switch_timer_interval>
//!       <read_timer_interval>us</read_timer_interval><output_type>MMAP</output_type>
//!       <blocking_timeout>us|-1</blocking_timeout><monitor_timer_interval>..</monitor_timer_interval>
//!       <tracefile_size>..</tracefile_size><tracefile_count>..</tracefile_count>
//!       <live_timer_interval>..</live_timer_interval>
//!       [<allocation_policy>PER_CPU|PER_CHANNEL</allocation_policy>]          (2.14)
//!       [<preallocation_policy>PREALLOCATE|ON_DEMAND</preallocation_policy>]  (2.15)
//!       [<reclaim_policy><periodic><age_threshold>us</age_threshold></periodic>
//!        | <reclaim_policy><consumed></consumed></reclaim_policy>]   (2.15's session.xsd)
//!       <events><event><name>GLOB</name><enabled>..</enabled><type>TRACEPOINT</type>
//!         <loglevel_type>ALL|RANGE|SINGLE</loglevel_type><loglevel>N|-1</loglevel>
//!         [<filter>EXPR</filter>] [<exclusions><exclusion>GLOB</exclusion>..</exclusions>]
//!       </event>..</events>
//!       <contexts><context><type>VPID</type></context>
//!                 <context><app><provider_name>ust</provider_name><ctx_name>span_id</ctx_name></app></context>
//!       </contexts></channel></channels>
//!     [<process_attr_trackers><vpid_process_attr_tracker><process_attr_values>
//!        <vpid><id>PID</id></vpid>..</process_attr_values></vpid_process_attr_tracker>
//!        (vuid, vgid likewise)</process_attr_trackers>]
//!   </domain></domains>
//!   <started>true|false</started> [<attributes><snapshot_mode>true</snapshot_mode></attributes>]
//!   <output><consumer_output><enabled>true</enabled><destination><path>DIR</path>
//!     | <net_output><control_uri>..</control_uri><data_uri>..</data_uri></net_output>
//!   </destination></consumer_output></output>     (snapshot sessions: <snapshot_outputs>)
//! </session></sessions>
//! ```
//!
//! LTTng's loglevel `RANGE n` is "level n or more severe" (ust's `--loglevel`), `SINGLE n`
//! is `--loglevel-only`. A tracker element with its values is an inclusion set; no element
//! means every process. Contexts LTTng has no name for (`cpu_id`, which LTTng records in
//! every packet context, and `span_id`) are saved as application contexts of provider
//! `ust` (`$app.ust:cpu_id`), which `lttng load` accepts. Kernel, JUL, LOG4J and Python
//! domains are skipped on load (ust traces user space); their presence is reported.

use std::path::PathBuf;

use quick_xml::events::Event;
use ust_core::context::ContextType;
use ust_core::Level;

use crate::config::{ChannelConfig, Enabler, LevelFilter, VpidTracker};
use crate::probes::{ProbeLocation, UserspaceProbe};

pub mod triggers;

/// Largest session file read, in bytes.
pub const MAX_FILE: usize = 16 << 20;
/// Deepest element nesting accepted (LTTng's files nest 9 deep).
const MAX_DEPTH: usize = 32;

/// LTTng's buffer ownership scheme of a domain (`buffer_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BufferType {
    /// `PER_PID`: buffers per process (ust's default).
    #[default]
    PerPid,
    /// `PER_UID`: buffers shared by the processes of a user (LTTng's default for user space).
    PerUid,
}

/// A channel of a saved session.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SavedChannel {
    /// Name.
    pub name: String,
    /// `<enabled>`.
    pub enabled: bool,
    /// Sizes, mode, timers, trace files.
    pub config: ChannelConfig,
    /// Event rules, in file order.
    pub events: Vec<Enabler>,
    /// Context fields, in file order.
    pub contexts: Vec<ContextType>,
    /// Contexts of the file ust cannot record (named, for a warning).
    pub unsupported_contexts: Vec<String>,
}

/// A session as LTTng's XML describes it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SavedSession {
    /// Name.
    pub name: String,
    /// Local output directory (`<path>` of the consumer or snapshot output).
    pub output: Option<PathBuf>,
    /// Network output: control and data URLs (`<net_output>`).
    pub net_output: Option<(String, String)>,
    /// `<snapshot_mode>`.
    pub snapshot: bool,
    /// `<live_timer_interval>` of the session attributes, µs (live sessions).
    pub live_timer_us: Option<u64>,
    /// `<shared_memory_path>`.
    pub shm_path: Option<PathBuf>,
    /// `<started>`: start it after loading.
    pub started: bool,
    /// `<buffer_type>` of the user-space domain.
    pub buffers: BufferType,
    /// User-space channels.
    pub channels: Vec<SavedChannel>,
    /// Virtual process-id tracker.
    pub vpid: VpidTracker,
    /// Virtual user-id tracker: `None` every user, else the inclusion set.
    pub vuid: Option<Vec<u32>>,
    /// Virtual group-id tracker, likewise.
    pub vgid: Option<Vec<u32>>,
    /// Domains of the file other than user space (skipped), and `KERNEL` when its kernel
    /// domain has events other than userspace probes.
    pub other_domains: Vec<String>,
    /// The kernel domain's userspace probes (`USERSPACE_PROBE` events), in file order.
    pub probes: Vec<UserspaceProbe>,
}

fn esc(s: &str) -> String {
    quick_xml::escape::escape(s).into_owned()
}

fn context_xml(c: ContextType) -> String {
    let lttng = match c {
        ContextType::Vpid => Some("VPID"),
        ContextType::Vtid => Some("VTID"),
        ContextType::Procname => Some("PROCNAME"),
        ContextType::PthreadId => Some("PTHREAD_ID"),
        ContextType::Ip => Some("IP"),
        ContextType::CpuId | ContextType::SpanId => None,
    };
    match lttng {
        Some(t) => format!("\t\t\t\t\t\t\t<context>\n\t\t\t\t\t\t\t\t<type>{t}</type>\n\t\t\t\t\t\t\t</context>\n"),
        None => format!(
            "\t\t\t\t\t\t\t<context>\n\t\t\t\t\t\t\t\t<app>\n\t\t\t\t\t\t\t\t\t<provider_name>ust</provider_name>\n\t\t\t\t\t\t\t\t\t<ctx_name>{}</ctx_name>\n\t\t\t\t\t\t\t\t</app>\n\t\t\t\t\t\t\t</context>\n",
            c.name()
        ),
    }
}

/// A channel's `<allocation_policy>` and `<preallocation_policy>` (lttng-tools 2.14 and
/// 2.15's `session.xsd`), written only when not the default, so that a session of default
/// channels still validates against 2.13's schema.
fn alloc_xml(out: &mut String, cfg: &ChannelConfig) {
    if !cfg.allocation.is_default() {
        out.push_str(&format!("\t\t\t\t\t\t<allocation_policy>{}</allocation_policy>\n", cfg.allocation.xml_name()));
    }
    if !cfg.preallocation.is_default() {
        out.push_str(&format!("\t\t\t\t\t\t<preallocation_policy>{}</preallocation_policy>\n", cfg.preallocation.xml_name()));
    }
}

fn tracker_xml(out: &mut String, kind: &str, ids: Option<Vec<i64>>) {
    let Some(ids) = ids else { return };
    out.push_str(&format!("\t\t\t\t\t<{kind}_process_attr_tracker>\n"));
    if ids.is_empty() {
        out.push_str("\t\t\t\t\t\t<process_attr_values/>\n");
    } else {
        out.push_str("\t\t\t\t\t\t<process_attr_values>\n");
        for id in ids {
            out.push_str(&format!("\t\t\t\t\t\t\t<{kind}>\n\t\t\t\t\t\t\t\t<id>{id}</id>\n\t\t\t\t\t\t\t</{kind}>\n"));
        }
        out.push_str("\t\t\t\t\t\t</process_attr_values>\n");
    }
    out.push_str(&format!("\t\t\t\t\t</{kind}_process_attr_tracker>\n"));
}

/// The kernel domain holding `probes` (nothing without any): one channel, `channel0`, with
/// LTTng's kernel defaults, each probe a `USERSPACE_PROBE` event with its
/// `<userspace_probe_function_attributes>` (or `_tracepoint_` for SDT). A return probe's
/// `<function_name>` is `SYMBOL%return` (LTTng has no return uprobes: `lttng load` would
/// look for a function of that name).
fn kernel_xml(o: &mut String, probes: &[UserspaceProbe]) {
    if probes.is_empty() {
        return;
    }
    let t = "\t\t\t\t\t\t\t\t";
    o.push_str("\t\t\t<domain>\n\t\t\t\t<type>KERNEL</type>\n\t\t\t\t<buffer_type>GLOBAL</buffer_type>\n\t\t\t\t<channels>\n");
    o.push_str("\t\t\t\t\t<channel>\n\t\t\t\t\t\t<name>channel0</name>\n\t\t\t\t\t\t<enabled>true</enabled>\n\t\t\t\t\t\t<overwrite_mode>DISCARD</overwrite_mode>\n\t\t\t\t\t\t<subbuffer_size>1048576</subbuffer_size>\n\t\t\t\t\t\t<subbuffer_count>4</subbuffer_count>\n\t\t\t\t\t\t<switch_timer_interval>0</switch_timer_interval>\n\t\t\t\t\t\t<read_timer_interval>200000</read_timer_interval>\n\t\t\t\t\t\t<output_type>SPLICE</output_type>\n\t\t\t\t\t\t<events>\n");
    for p in probes {
        o.push_str(&format!(
            "\t\t\t\t\t\t\t<event>\n{t}<name>{}</name>\n{t}<enabled>{}</enabled>\n{t}<type>USERSPACE_PROBE</type>\n{t}<attributes>\n",
            esc(&p.name),
            p.enabled
        ));
        let path = esc(&p.location.path().to_string_lossy());
        match &p.location {
            ProbeLocation::Function { symbol, ret, .. } => o.push_str(&format!(
                "{t}\t<userspace_probe_function_attributes>\n{t}\t\t<lookup_method>ELF</lookup_method>\n{t}\t\t<binary_path>{path}</binary_path>\n{t}\t\t<function_name>{}{}</function_name>\n{t}\t</userspace_probe_function_attributes>\n",
                esc(symbol),
                if *ret { "%return" } else { "" }
            )),
            ProbeLocation::Sdt { provider, probe, .. } => o.push_str(&format!(
                "{t}\t<userspace_probe_tracepoint_attributes>\n{t}\t\t<lookup_method>SDT</lookup_method>\n{t}\t\t<binary_path>{path}</binary_path>\n{t}\t\t<probe_name>{}</probe_name>\n{t}\t\t<provider_name>{}</provider_name>\n{t}\t</userspace_probe_tracepoint_attributes>\n",
                esc(probe),
                esc(provider)
            )),
        }
        o.push_str(&format!("{t}</attributes>\n\t\t\t\t\t\t\t</event>\n"));
    }
    o.push_str("\t\t\t\t\t\t</events>\n\t\t\t\t\t</channel>\n\t\t\t\t</channels>\n\t\t\t</domain>\n");
}

/// The userspace probes of a kernel domain `d` (its `USERSPACE_PROBE` events, whatever
/// the channel), and whether it has other events (skipped).
fn probes_from(d: &Node, session: &str) -> Result<(Vec<UserspaceProbe>, bool), String> {
    let mut probes = Vec::new();
    let mut others = false;
    for c in d.child("channels").map(|c| c.all("channel").collect::<Vec<_>>()).unwrap_or_default() {
        for e in c.child("events").map(|e| e.all("event").collect::<Vec<_>>()).unwrap_or_default() {
            if e.text_of("type") != Some("USERSPACE_PROBE") {
                others = true;
                continue;
            }
            let name = e.text_of("name").ok_or_else(|| format!("session {session}: a userspace probe event without <name>"))?.to_string();
            let attrs = e.child("attributes");
            let location = if let Some(f) = attrs.and_then(|a| a.child("userspace_probe_function_attributes")) {
                let path = PathBuf::from(f.text_of("binary_path").unwrap_or(""));
                let func = f.text_of("function_name").unwrap_or("");
                let (symbol, ret) = match func.strip_suffix("%return") {
                    Some(s) => (s, true),
                    None => (func, false),
                };
                ProbeLocation::Function { path, symbol: symbol.to_string(), ret }
            } else if let Some(t) = attrs.and_then(|a| a.child("userspace_probe_tracepoint_attributes")) {
                ProbeLocation::Sdt {
                    path: PathBuf::from(t.text_of("binary_path").unwrap_or("")),
                    provider: t.text_of("provider_name").unwrap_or("").to_string(),
                    probe: t.text_of("probe_name").unwrap_or("").to_string(),
                }
            } else {
                return Err(format!("session {session}: userspace probe {name} without its attributes"));
            };
            let p = UserspaceProbe { name, enabled: e.flag("enabled", true)?, location };
            crate::probes::check_probe(&p).map_err(|x| format!("session {session}: {x}"))?;
            probes.push(p);
        }
    }
    Ok((probes, others))
}

/// Writes `sessions` as one LTTng session configuration file (`<sessions>` root), in the
/// element order of `session.xsd` 2.13 (it validates with `xmllint --schema`).
pub fn to_xml(sessions: &[SavedSession]) -> String {
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sessions>\n");
    for s in sessions {
        o.push_str(&format!("\t<session>\n\t\t<name>{}</name>\n", esc(&s.name)));
        if let Some(p) = &s.shm_path {
            o.push_str(&format!("\t\t<shared_memory_path>{}</shared_memory_path>\n", esc(&p.to_string_lossy())));
        }
        let bt = match s.buffers {
            BufferType::PerPid => "PER_PID",
            BufferType::PerUid => "PER_UID",
        };
        o.push_str("\t\t<domains>\n");
        kernel_xml(&mut o, &s.probes);
        o.push_str(&format!("\t\t\t<domain>\n\t\t\t\t<type>UST</type>\n\t\t\t\t<buffer_type>{bt}</buffer_type>\n"));
        o.push_str("\t\t\t\t<channels>\n");
        for c in &s.channels {
            let cfg = &c.config;
            o.push_str(&format!(
                "\t\t\t\t\t<channel>\n\t\t\t\t\t\t<name>{}</name>\n\t\t\t\t\t\t<enabled>{}</enabled>\n\t\t\t\t\t\t<overwrite_mode>{}</overwrite_mode>\n\t\t\t\t\t\t<subbuffer_size>{}</subbuffer_size>\n\t\t\t\t\t\t<subbuffer_count>{}</subbuffer_count>\n\t\t\t\t\t\t<switch_timer_interval>{}</switch_timer_interval>\n\t\t\t\t\t\t<read_timer_interval>{}</read_timer_interval>\n\t\t\t\t\t\t<output_type>MMAP</output_type>\n\t\t\t\t\t\t<blocking_timeout>{}</blocking_timeout>\n\t\t\t\t\t\t<monitor_timer_interval>0</monitor_timer_interval>\n\t\t\t\t\t\t<tracefile_size>{}</tracefile_size>\n\t\t\t\t\t\t<tracefile_count>{}</tracefile_count>\n\t\t\t\t\t\t<live_timer_interval>{}</live_timer_interval>\n",
                esc(&c.name),
                c.enabled,
                if cfg.overwrite { "OVERWRITE" } else { "DISCARD" },
                cfg.subbuf_size,
                cfg.num_subbuf,
                cfg.switch_timer_us,
                cfg.read_timer_us,
                if cfg.blocking_timeout_us == crate::config::BLOCKING_FOREVER { -1 } else { cfg.blocking_timeout_us.min(i64::MAX as u64) as i64 },
                cfg.tracefile_size,
                cfg.tracefile_count,
                s.live_timer_us.unwrap_or(0),
            ));
            alloc_xml(&mut o, cfg);
            o.push_str(&reclaim_policy_xml(cfg.auto_reclaim));
            o.push_str("\t\t\t\t\t\t<events>\n");
            for e in &c.events {
                let (lt, lv) = match e.level {
                    LevelFilter::Any => ("ALL", -1),
                    LevelFilter::UpTo(l) => ("RANGE", i32::from(l.number())),
                    LevelFilter::Only(l) => ("SINGLE", i32::from(l.number())),
                };
                o.push_str(&format!(
                    "\t\t\t\t\t\t\t<event>\n\t\t\t\t\t\t\t\t<name>{}</name>\n\t\t\t\t\t\t\t\t<enabled>{}</enabled>\n\t\t\t\t\t\t\t\t<type>TRACEPOINT</type>\n\t\t\t\t\t\t\t\t<loglevel_type>{lt}</loglevel_type>\n\t\t\t\t\t\t\t\t<loglevel>{lv}</loglevel>\n",
                    esc(&e.pattern),
                    e.enabled
                ));
                if let Some(f) = &e.filter {
                    o.push_str(&format!("\t\t\t\t\t\t\t\t<filter>{}</filter>\n", esc(f)));
                }
                if !e.exclusions.is_empty() {
                    o.push_str("\t\t\t\t\t\t\t\t<exclusions>\n");
                    for x in &e.exclusions {
                        o.push_str(&format!("\t\t\t\t\t\t\t\t\t<exclusion>{}</exclusion>\n", esc(x)));
                    }
                    o.push_str("\t\t\t\t\t\t\t\t</exclusions>\n");
                }
                o.push_str("\t\t\t\t\t\t\t</event>\n");
            }
            o.push_str("\t\t\t\t\t\t</events>\n\t\t\t\t\t\t<contexts>\n");
            for ctx in &c.contexts {
                o.push_str(&context_xml(*ctx));
            }
            o.push_str("\t\t\t\t\t\t</contexts>\n\t\t\t\t\t</channel>\n");
        }
        o.push_str("\t\t\t\t</channels>\n");
        let vpid = match &s.vpid {
            VpidTracker::All => None,
            VpidTracker::Only(set) => Some(set.iter().rev().map(|p| i64::from(*p)).collect()),
        };
        let ids = |v: &Option<Vec<u32>>| v.as_ref().map(|v| v.iter().map(|x| i64::from(*x)).collect());
        if vpid.is_some() || s.vuid.is_some() || s.vgid.is_some() {
            o.push_str("\t\t\t\t<process_attr_trackers>\n");
            tracker_xml(&mut o, "vpid", vpid);
            tracker_xml(&mut o, "vuid", ids(&s.vuid));
            tracker_xml(&mut o, "vgid", ids(&s.vgid));
            o.push_str("\t\t\t\t</process_attr_trackers>\n");
        }
        o.push_str("\t\t\t</domain>\n\t\t</domains>\n");
        o.push_str(&format!("\t\t<started>{}</started>\n", s.started));
        if s.snapshot || s.live_timer_us.is_some() {
            o.push_str("\t\t<attributes>\n");
            if s.snapshot {
                o.push_str("\t\t\t<snapshot_mode>true</snapshot_mode>\n");
            }
            if let Some(l) = s.live_timer_us {
                o.push_str(&format!("\t\t\t<live_timer_interval>{l}</live_timer_interval>\n"));
            }
            o.push_str("\t\t</attributes>\n");
        }
        let dest = |ind: &str| {
            match (&s.net_output, &s.output) {
            (Some((c, d)), _) => format!(
                "{ind}<destination>\n{ind}\t<net_output>\n{ind}\t\t<control_uri>{}</control_uri>\n{ind}\t\t<data_uri>{}</data_uri>\n{ind}\t</net_output>\n{ind}</destination>\n",
                esc(c),
                esc(d)
            ),
            (None, Some(p)) => format!("{ind}<destination>\n{ind}\t<path>{}</path>\n{ind}</destination>\n", esc(&p.to_string_lossy())),
            (None, None) => String::new(),
        }
        };
        if s.output.is_some() || s.net_output.is_some() {
            o.push_str("\t\t<output>\n");
            if s.snapshot {
                o.push_str(&format!(
                    "\t\t\t<snapshot_outputs>\n\t\t\t\t<output>\n\t\t\t\t\t<name>snapshot-1</name>\n\t\t\t\t\t<max_size>0</max_size>\n\t\t\t\t\t<consumer_output>\n\t\t\t\t\t\t<enabled>true</enabled>\n{}\t\t\t\t\t</consumer_output>\n\t\t\t\t</output>\n\t\t\t</snapshot_outputs>\n",
                    dest("\t\t\t\t\t\t")
                ));
            } else {
                o.push_str(&format!("\t\t\t<consumer_output>\n\t\t\t\t<enabled>true</enabled>\n{}\t\t\t</consumer_output>\n", dest("\t\t\t\t")));
            }
            o.push_str("\t\t</output>\n");
        }
        o.push_str("\t</session>\n");
    }
    o.push_str("</sessions>\n");
    o
}

/// An element of the parsed file: name, text (leaf elements), children.
#[derive(Debug, Default)]
struct Node {
    name: String,
    text: String,
    children: Vec<Node>,
}

impl Node {
    fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
    fn text_of(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.trim())
    }
    fn num<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        match self.text_of(name) {
            None => Ok(None),
            Some(t) => t.parse().map(Some).map_err(|_| format!("<{name}>: {t:?} is not a valid number here")),
        }
    }
    fn flag(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.text_of(name) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(t) => Err(format!("<{name}>: {t:?} is not a boolean")),
        }
    }
}

fn parse_tree(xml: &str) -> Result<Node, String> {
    if xml.len() > MAX_FILE {
        return Err(format!("session file larger than {MAX_FILE} bytes"));
    }
    let mut r = quick_xml::Reader::from_str(xml);
    let mut stack = vec![Node::default()];
    let pos = |r: &quick_xml::Reader<&[u8]>| r.buffer_position();
    loop {
        let ev = r.read_event().map_err(|e| format!("XML error at byte {}: {e}", pos(&r)))?;
        match ev {
            Event::Start(e) => {
                if stack.len() > MAX_DEPTH {
                    return Err(format!("elements nested deeper than {MAX_DEPTH}"));
                }
                stack.push(Node { name: String::from_utf8_lossy(e.name().as_ref()).into_owned(), ..Node::default() });
            }
            Event::Empty(e) => {
                let n = Node { name: String::from_utf8_lossy(e.name().as_ref()).into_owned(), ..Node::default() };
                stack.last_mut().expect("root").children.push(n);
            }
            Event::End(_) => {
                let n = stack.pop().expect("quick-xml checks that end tags match");
                stack.last_mut().ok_or("unbalanced end tag")?.children.push(n);
            }
            Event::Text(t) => {
                let s = t.decode().map_err(|e| format!("XML text at byte {}: {e}", pos(&r)))?;
                stack.last_mut().expect("root").text.push_str(&s);
            }
            Event::CData(t) => {
                let s = t.decode().map_err(|e| format!("XML CDATA at byte {}: {e}", pos(&r)))?;
                stack.last_mut().expect("root").text.push_str(&s);
            }
            Event::GeneralRef(g) => {
                let name = g.decode().map_err(|e| format!("XML reference at byte {}: {e}", pos(&r)))?;
                let s = quick_xml::escape::unescape(&format!("&{name};")).map_err(|e| format!("XML reference &{name}; at byte {}: {e}", pos(&r)))?.into_owned();
                stack.last_mut().expect("root").text.push_str(&s);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if stack.len() != 1 {
        return Err("the file ends inside an element".into());
    }
    let mut root = stack.pop().expect("one");
    root.children.retain(|c| !c.name.is_empty());
    match root.children.len() {
        1 => Ok(root.children.remove(0)),
        0 => Err("no root element".into()),
        _ => Err("more than one root element".into()),
    }
}

fn context_from(n: &Node) -> Result<Result<ContextType, String>, String> {
    if let Some(t) = n.text_of("type") {
        return Ok(match t {
            "VPID" => Ok(ContextType::Vpid),
            "VTID" => Ok(ContextType::Vtid),
            "PROCNAME" => Ok(ContextType::Procname),
            "PTHREAD_ID" => Ok(ContextType::PthreadId),
            "IP" => Ok(ContextType::Ip),
            other => Err(other.to_string()),
        });
    }
    if let Some(app) = n.child("app") {
        let p = app.text_of("provider_name").unwrap_or("");
        let c = app.text_of("ctx_name").unwrap_or("");
        return Ok(match (p, c) {
            ("ust", "cpu_id") => Ok(ContextType::CpuId),
            ("ust", "span_id") => Ok(ContextType::SpanId),
            _ => Err(format!("$app.{p}:{c}")),
        });
    }
    if let Some(p) = n.child("perf") {
        return Ok(Err(format!("perf:{}", p.text_of("name").unwrap_or("?"))));
    }
    Err("<context> with neither <type>, <app> nor <perf>".into())
}

fn level_from(e: &Node) -> Result<LevelFilter, String> {
    let n: i64 = e.num("loglevel")?.unwrap_or(-1);
    let lv = || u8::try_from(n).ok().and_then(Level::from_number).ok_or_else(|| format!("<loglevel> {n} is not a log level (0-14)"));
    match e.text_of("loglevel_type").unwrap_or("ALL") {
        "ALL" => Ok(LevelFilter::Any),
        "RANGE" if n < 0 => Ok(LevelFilter::Any),
        "RANGE" => Ok(LevelFilter::UpTo(lv()?)),
        "SINGLE" => Ok(LevelFilter::Only(lv()?)),
        t => Err(format!("<loglevel_type> {t:?} is not ALL, RANGE or SINGLE")),
    }
}

/// LTTng 2.15's `<reclaim_policy>` (session.xsd: `<periodic><age_threshold>µs` or an
/// empty `<consumed>`), empty text for `off`.
fn reclaim_policy_xml(p: Option<crate::reclaim::AutoReclaim>) -> String {
    match p {
        None => String::new(),
        Some(crate::reclaim::AutoReclaim::Consumed) => "\t\t\t\t\t\t<reclaim_policy>\n\t\t\t\t\t\t\t<consumed></consumed>\n\t\t\t\t\t\t</reclaim_policy>\n".into(),
        Some(crate::reclaim::AutoReclaim::OlderThan(us)) => format!(
            "\t\t\t\t\t\t<reclaim_policy>\n\t\t\t\t\t\t\t<periodic>\n\t\t\t\t\t\t\t\t<age_threshold>{us}</age_threshold>\n\t\t\t\t\t\t\t</periodic>\n\t\t\t\t\t\t</reclaim_policy>\n"
        ),
    }
}

/// Reads `<reclaim_policy>` back (absent: `off`).
fn reclaim_policy_from(c: &Node) -> Result<Option<crate::reclaim::AutoReclaim>, String> {
    let Some(p) = c.child("reclaim_policy") else { return Ok(None) };
    if let Some(per) = p.child("periodic") {
        return match per.num::<u64>("age_threshold")? {
            Some(us) if us > 0 => Ok(Some(crate::reclaim::AutoReclaim::OlderThan(us))),
            _ => Err("<reclaim_policy><periodic> needs a positive <age_threshold> (µs)".into()),
        };
    }
    if p.child("consumed").is_some() {
        return Ok(Some(crate::reclaim::AutoReclaim::Consumed));
    }
    Err("<reclaim_policy> with neither <periodic> nor <consumed>".into())
}

fn channel_from(c: &Node) -> Result<SavedChannel, String> {
    let name = c.text_of("name").ok_or("<channel> without <name>")?.to_string();
    crate::config::check_name("channel", &name)?;
    let d = ChannelConfig::default();
    let config = ChannelConfig {
        subbuf_size: c.num("subbuffer_size")?.unwrap_or(d.subbuf_size),
        num_subbuf: c.num("subbuffer_count")?.unwrap_or(d.num_subbuf),
        overwrite: match c.text_of("overwrite_mode").unwrap_or("DISCARD") {
            "DISCARD" => false,
            "OVERWRITE" => true,
            m => return Err(format!("channel {name}: <overwrite_mode> {m:?} is not DISCARD or OVERWRITE")),
        },
        switch_timer_us: c.num("switch_timer_interval")?.unwrap_or(d.switch_timer_us),
        // LTTng writes 0 for "no read timer" (its consumer is woken by the writers); ust
        // always polls.
        read_timer_us: c.num("read_timer_interval")?.filter(|t| *t != 0).unwrap_or(d.read_timer_us),
        tracefile_size: c.num("tracefile_size")?.unwrap_or(0),
        // The ownership is the domain's (`<buffer_type>`), applied to the session.
        buffers: None,
        tracefile_count: c.num("tracefile_count")?.unwrap_or(0),
        blocking_timeout_us: match c.num::<i64>("blocking_timeout")? {
            None | Some(0) => 0,
            Some(n) if n < 0 => crate::config::BLOCKING_FOREVER,
            Some(n) => n as u64,
        },
        allocation: match c.text_of("allocation_policy") {
            None => d.allocation,
            Some(v) => crate::alloc::BufferAllocation::parse_xml(v)
                .ok_or_else(|| format!("channel {name}: <allocation_policy> {v:?} is not PER_CPU or PER_CHANNEL"))?,
        },
        preallocation: match c.text_of("preallocation_policy") {
            None => d.preallocation,
            Some(v) => crate::alloc::BufferPreallocation::parse_xml(v)
                .ok_or_else(|| format!("channel {name}: <preallocation_policy> {v:?} is not PREALLOCATE or ON_DEMAND"))?,
        },
        auto_reclaim: reclaim_policy_from(c).map_err(|e| format!("channel {name}: {e}"))?,
    };
    // LTTng writes tracefile_count 0 or 1 for "one file" and 0 for "unlimited size".
    let config = ChannelConfig { tracefile_count: if config.tracefile_size == 0 { 0 } else { config.tracefile_count }, ..config };
    config.validate().map_err(|e| format!("channel {name}: {e}"))?;
    let mut events = Vec::new();
    for e in c.child("events").map(|e| e.all("event").collect::<Vec<_>>()).unwrap_or_default() {
        let ty = e.text_of("type").unwrap_or("TRACEPOINT");
        if !matches!(ty, "TRACEPOINT" | "ALL") {
            return Err(format!("channel {name}: event type {ty} is not a user-space tracepoint"));
        }
        let pattern = e.text_of("name").unwrap_or("*").to_string();
        crate::config::check_event_name(&pattern).map_err(|x| format!("channel {name}: {x}"))?;
        let filter = e.text_of("filter").map(str::to_string);
        if let Some(f) = &filter {
            crate::filter::parse(f).map_err(|x| format!("channel {name}, event {pattern}: filter {f:?}: {x}"))?;
        }
        let exclusions = e.child("exclusions").map(|x| x.all("exclusion").map(|x| x.text.trim().to_string()).collect()).unwrap_or_default();
        events.push(Enabler {
            pattern,
            level: level_from(e).map_err(|x| format!("channel {name}: {x}"))?,
            enabled: e.flag("enabled", true)?,
            exclusions,
            filter,
        });
    }
    let mut contexts = Vec::new();
    let mut unsupported_contexts = Vec::new();
    for x in c.child("contexts").map(|x| x.all("context").collect::<Vec<_>>()).unwrap_or_default() {
        match context_from(x)? {
            Ok(t) if !contexts.contains(&t) => contexts.push(t),
            Ok(_) => {}
            Err(u) => unsupported_contexts.push(u),
        }
    }
    Ok(SavedChannel { name, enabled: c.flag("enabled", true)?, config, events, contexts, unsupported_contexts })
}

fn tracker_from(trackers: Option<&Node>, kind: &str) -> Result<Option<Vec<i64>>, String> {
    let Some(t) = trackers.and_then(|t| t.child(&format!("{kind}_process_attr_tracker"))) else { return Ok(None) };
    let values = t.child("process_attr_values");
    let mut ids = Vec::new();
    for v in values.map(|v| v.all(kind).collect::<Vec<_>>()).unwrap_or_default() {
        match v.num::<i64>("id")? {
            Some(id) => ids.push(id),
            None => return Err(format!("<{kind}> tracker value by name ({:?}) is not supported: give the id", v.text_of("name").unwrap_or(""))),
        }
    }
    ids.sort_unstable();
    Ok(Some(ids))
}

fn session_from(s: &Node) -> Result<SavedSession, String> {
    let name = s.text_of("name").ok_or("<session> without <name>")?.to_string();
    crate::config::check_name("session", &name)?;
    let mut out = SavedSession { name: name.clone(), ..SavedSession::default() };
    out.shm_path = s.text_of("shared_memory_path").map(PathBuf::from);
    out.started = s.flag("started", false)?;
    if let Some(a) = s.child("attributes") {
        out.snapshot = a.flag("snapshot_mode", false)?;
        out.live_timer_us = a.num("live_timer_interval")?;
    }
    if let Some(o) = s.child("output") {
        let consumer = match o.child("snapshot_outputs") {
            Some(so) => so.child("output").and_then(|x| x.child("consumer_output")),
            None => o.child("consumer_output"),
        };
        if let Some(dest) = consumer.and_then(|c| c.child("destination")) {
            out.output = dest.text_of("path").map(PathBuf::from);
            if let Some(n) = dest.child("net_output") {
                out.net_output = Some((n.text_of("control_uri").unwrap_or("").to_string(), n.text_of("data_uri").unwrap_or("").to_string()));
            }
        }
    }
    for d in s.child("domains").map(|d| d.all("domain").collect::<Vec<_>>()).unwrap_or_default() {
        let ty = d.text_of("type").unwrap_or("");
        if ty == "KERNEL" {
            let (probes, others) = probes_from(d, &name)?;
            out.probes.extend(probes);
            if others {
                out.other_domains.push(ty.to_string());
            }
            continue;
        }
        if ty != "UST" {
            if d.child("channels").is_some_and(|c| !c.children.is_empty()) {
                out.other_domains.push(ty.to_string());
            }
            continue;
        }
        out.buffers = match d.text_of("buffer_type").unwrap_or("PER_UID") {
            "PER_PID" => BufferType::PerPid,
            "PER_UID" => BufferType::PerUid,
            b => return Err(format!("session {name}: user-space <buffer_type> {b:?} is not PER_PID or PER_UID")),
        };
        for c in d.child("channels").map(|c| c.all("channel").collect::<Vec<_>>()).unwrap_or_default() {
            out.channels.push(channel_from(c).map_err(|e| format!("session {name}: {e}"))?);
        }
        let tr = d.child("process_attr_trackers");
        out.vpid = match tracker_from(tr, "vpid")? {
            None => VpidTracker::All,
            Some(ids) => VpidTracker::Only(ids.into_iter().filter_map(|i| i32::try_from(i).ok()).collect()),
        };
        let u32s = |v: Option<Vec<i64>>| v.map(|v| v.into_iter().filter_map(|i| u32::try_from(i).ok()).collect());
        out.vuid = u32s(tracker_from(tr, "vuid")?);
        out.vgid = u32s(tracker_from(tr, "vgid")?);
    }
    Ok(out)
}

/// Reads a session configuration file (`<sessions>` root, or one `<session>`).
///
/// # Errors
/// A message naming the session and element for malformed XML, a missing name, a value
/// out of range (sizes ust refuses, a log level beyond 14), a filter the `--filter`
/// parser refuses, or a non-tracepoint event in the user-space domain.
pub fn from_xml(xml: &str) -> Result<Vec<SavedSession>, String> {
    let root = parse_tree(xml)?;
    match root.name.as_str() {
        "sessions" => root.all("session").map(session_from).collect(),
        "session" => Ok(vec![session_from(&root)?]),
        other => Err(format!("root element <{other}> is not <sessions>: not an LTTng session file")),
    }
}

#[cfg(test)]
mod tests;
