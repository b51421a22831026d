//! `ust reclaim-memory` (LTTng 2.15's `lttng reclaim-memory`) over a session's channels,
//! the check of a channel's automatic reclaim policy, and the channels' memory for
//! `ust list SESSION` (allocated and resident, per buffer owner and CPU, as LTTng's
//! `data_stream_info_sets`). Each stream's part is [`Stream::reclaim_memory`].

use std::sync::{Arc, Mutex};

use ust_ctl::protocol::{ChannelDetail, ReclaimRequest};
use ust_ctl::reclaim::{AutoReclaim, ChannelMemory, ChannelReclaimed, OwnerMemory};

use crate::model::session::{ChannelConfig, Session};
use crate::ops::state::Daemon;
use crate::ops::stream::Stream;

/// Reclaims the memory of `req`'s channels (every channel when it names none), stream by
/// stream, never under the state lock. Returns one entry per channel, in the session's
/// channel order.
///
/// # Errors
/// No such session; a channel the session does not have (LTTng's words: "Channel `x`
/// does not exist in session `s`").
pub fn reclaim(daemon: &Daemon, req: ReclaimRequest) -> Result<Vec<ChannelReclaimed>, String> {
    let (names, streams) = {
        let st = daemon.lock();
        let sname = st.resolve(&req.session)?;
        let ss = st.sessions.get(&sname).expect("resolved");
        let have: Vec<String> = ss.session.channels.iter().map(|c| c.name.clone()).collect();
        for c in &req.channels {
            if !have.contains(c) {
                return Err(format!("Channel `{c}` does not exist in session `{sname}`"));
            }
        }
        let names: Vec<String> = have.into_iter().filter(|n| req.channels.is_empty() || req.channels.contains(n)).collect();
        (names, ss.streams())
    };
    let mut out: Vec<ChannelReclaimed> = names.into_iter().map(|name| ChannelReclaimed { name, ..Default::default() }).collect();
    for s in streams {
        let mut s = s.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = out.iter_mut().find(|c| c.name == s.channel()) else { continue };
        let r = s.reclaim_memory(req.older_than_us, req.wait);
        c.reclaimed += r.subbufs;
        c.pending += r.pending;
        c.dropped += r.dropped;
    }
    Ok(out)
}

/// Refuses an automatic reclaim policy the session cannot run: `consumed` in a snapshot
/// session, which consumes nothing (LTTng: "Invalid reclamation policy for this channel").
///
/// # Errors
/// LTTng's message, with why.
pub fn check_policy(session: &Session, channel: &str, config: &ChannelConfig) -> Result<(), String> {
    if config.auto_reclaim == Some(AutoReclaim::Consumed) && session.snapshot {
        return Err(format!(
            "Failed to enable channel `{channel}` under session `{}`: Invalid reclamation policy for this channel (consumed: a snapshot session consumes nothing; use older-than:AGE)",
            session.name
        ));
    }
    Ok(())
}

/// One buffer owner of a session (a process, or a user with per-UID buffers) and its
/// streams, gathered under the state lock for [`fill_memory`].
pub type Owner = (Option<i32>, Option<u32>, Vec<Arc<Mutex<Stream>>>);

/// Fills each channel's [`ChannelDetail::memory`] from the owners' streams (each locked in
/// turn, after the state lock is released). A channel without a mapped buffer keeps `None`.
pub fn fill_memory(channels: &mut [ChannelDetail], owners: Vec<Owner>) {
    for (pid, uid, streams) in owners {
        for s in streams {
            let s = s.lock().unwrap_or_else(|e| e.into_inner());
            let Some(m) = s.memory_use() else { continue };
            let Some(c) = channels.iter_mut().find(|c| c.name == s.channel()) else { continue };
            let mem = c.memory.get_or_insert_with(ChannelMemory::default);
            let resident = m.resident.unwrap_or(m.allocated);
            mem.allocated = mem.allocated.saturating_add(m.allocated);
            mem.resident = mem.resident.saturating_add(resident);
            let owner = match (uid, pid) {
                (Some(u), _) => format!("UID {u}"),
                (None, Some(p)) => format!("PID {p}"),
                (None, None) => "?".into(),
            };
            let o = match mem.owners.iter().position(|o| o.owner == owner) {
                Some(i) => &mut mem.owners[i],
                None => {
                    mem.owners.push(OwnerMemory { owner, pid: if uid.is_none() { pid } else { None }, uid, cpus: Vec::new() });
                    mem.owners.last_mut().expect("pushed")
                }
            };
            o.cpus.push((s.identity().cpu, m.allocated, resident));
        }
    }
}
