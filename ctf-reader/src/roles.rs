//! Field meanings and the last checks of a trace model, shared by both metadata readers.
//!
//! CTF 1.8 gives meanings by name (babeltrace2's `ctf-meta-update-meanings`): packet header
//! `magic`, `stream_id`, `stream_instance_id`; packet context `timestamp_begin`,
//! `timestamp_end`, `content_size`, `packet_size`, `events_discarded`, `packet_seq_num`;
//! any integer member named `id` in the event header. An unmapped `timestamp` (event header)
//! or `timestamp_begin`/`timestamp_end` (packet context) is mapped to the only clock class,
//! or to a 1 GHz `default` clock when there is none (babeltrace2's auto-mapping).
//! `timestamp_end` never updates the stream clock. CTF 2 gives the same meanings by role.

use crate::model::*;

/// Assigns CTF 1.8 meanings by name and auto-maps timestamps.
pub(crate) fn assign_ctf1(trace: &mut Trace) {
    if let Some(FieldType::Struct { fields, .. }) = &mut trace.packet_header {
        for f in fields.iter_mut() {
            let role = match f.name.as_str() {
                "magic" => Role::Magic,
                "stream_id" => Role::StreamClassId,
                "stream_instance_id" => Role::StreamInstanceId,
                _ => continue,
            };
            set_role(&mut f.ty, role);
        }
    }
    let mut need_default_clock = false;
    let only_clock = if trace.clocks.len() == 1 { Some(0) } else { None };
    let n_clocks = trace.clocks.len();
    let mut auto_map = |ty: &mut FieldType| {
        if let Some(i) = int_mut(ty) {
            if i.clock.is_none() {
                if n_clocks == 0 {
                    need_default_clock = true;
                    i.clock = Some(0);
                } else {
                    i.clock = only_clock;
                }
            }
        }
    };
    for sc in &mut trace.streams {
        if let Some(FieldType::Struct { fields, .. }) = &mut sc.packet_context {
            for f in fields.iter_mut() {
                let role = match f.name.as_str() {
                    "timestamp_begin" => {
                        auto_map(&mut f.ty);
                        Role::PacketBeginTime
                    }
                    "timestamp_end" => {
                        auto_map(&mut f.ty);
                        Role::PacketEndTime
                    }
                    "content_size" => Role::ContentSize,
                    "packet_size" => Role::PacketSize,
                    "events_discarded" => Role::DiscardedEvents,
                    "packet_seq_num" => Role::PacketSeqNum,
                    _ => continue,
                };
                set_role(&mut f.ty, role);
            }
        }
        if let Some(h) = &mut sc.event_header {
            if let FieldType::Struct { fields, .. } = h {
                if let Some(f) = fields.iter_mut().find(|f| f.name == "timestamp") {
                    auto_map(&mut f.ty);
                }
            }
            set_id_role(h, None);
        }
    }
    if need_default_clock {
        trace.clocks.push(ClockClass {
            name: "default".into(),
            freq: 1_000_000_000,
            offset_s: 0,
            offset_cycles: 0,
            origin_is_unix_epoch: false,
            description: None,
            uuid: None,
            precision: 0,
        });
    }
}

fn int_mut(ty: &mut FieldType) -> Option<&mut IntType> {
    match ty {
        FieldType::Int(i) | FieldType::Enum { int: i, .. } => Some(i),
        _ => None,
    }
}

fn set_role(ty: &mut FieldType, role: Role) {
    if let Some(i) = int_mut(ty) {
        i.role = Some(role);
    }
}

/// babeltrace2's recursive search for `id` members: structure members by name, through
/// variant options and array elements (which have no name of their own).
fn set_id_role(ty: &mut FieldType, name: Option<&str>) {
    match ty {
        FieldType::Int(i) | FieldType::Enum { int: i, .. } if name == Some("id") => i.role = Some(Role::EventClassId),
        FieldType::Struct { fields, .. } => fields.iter_mut().for_each(|f| set_id_role(&mut f.ty, Some(&f.name))),
        FieldType::Variant { options, .. } => options.iter_mut().for_each(|f| set_id_role(&mut f.ty, None)),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => set_id_role(elem, None),
        _ => {}
    }
}

/// Final pass for both formats: the stream clock does not follow `timestamp_end`, every
/// length/selector target is marked [`IntType::referenced`], clock indices are checked, and
/// each stream class gets its default clock.
pub(crate) fn finish(trace: &mut Trace) -> Result<(), String> {
    let n_clocks = trace.clocks.len();
    let mut targets: Vec<FieldPath> = Vec::new();
    let mut check = |ty: &FieldType| -> Result<(), String> {
        visit(ty, &mut |t| {
            match t {
                FieldType::Int(i) | FieldType::Enum { int: i, .. } if i.clock.is_some_and(|c| c >= n_clocks) => {
                    return Err("integer mapped to an unknown clock".to_string())
                }
                FieldType::Sequence { len, .. } => targets.push(len.clone()),
                FieldType::Variant { tag, .. } => targets.push(tag.clone()),
                _ => {}
            }
            Ok(())
        })
    };
    for t in trace.packet_header.iter() {
        check(t)?;
    }
    for sc in &trace.streams {
        for t in sc.packet_context.iter().chain(&sc.event_header).chain(&sc.event_context) {
            check(t)?;
        }
        for ec in &sc.events {
            for t in ec.context.iter().chain(&ec.payload) {
                check(t)?;
            }
        }
    }
    for sc in &mut trace.streams {
        let mut clock = None;
        for t in sc.event_header.iter().chain(&sc.packet_context) {
            let _ = visit(t, &mut |t| {
                if let (None, Some(i)) = (clock, t.as_int()) {
                    if i.role != Some(Role::PacketEndTime) {
                        clock = i.clock;
                    }
                }
                Ok(())
            });
        }
        sc.default_clock = clock;
    }
    for p in targets {
        let root = match p.scope {
            Scope::PacketHeader => trace.packet_header.as_mut(),
            _ => None,
        };
        if let Some(r) = root {
            mark(r, &p.indices);
            continue;
        }
        for sc in &mut trace.streams {
            let roots: Vec<&mut FieldType> = match p.scope {
                Scope::PacketContext => sc.packet_context.iter_mut().collect(),
                Scope::EventHeader => sc.event_header.iter_mut().collect(),
                Scope::EventCommonContext => sc.event_context.iter_mut().collect(),
                Scope::EventSpecificContext => sc.events.iter_mut().filter_map(|e| e.context.as_mut()).collect(),
                Scope::EventPayload => sc.events.iter_mut().filter_map(|e| e.payload.as_mut()).collect(),
                Scope::PacketHeader => Vec::new(),
            };
            for r in roots {
                mark(r, &p.indices);
            }
        }
    }
    Ok(())
}

fn mark(root: &mut FieldType, indices: &[u32]) {
    let mut t = root;
    for &i in indices {
        t = match t {
            FieldType::Struct { fields, .. } | FieldType::Variant { options: fields, .. } => match fields.get_mut(i as usize) {
                Some(f) => &mut f.ty,
                None => return,
            },
            FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => elem,
            _ => return,
        };
    }
    if let Some(i) = int_mut(t) {
        i.referenced = true;
    }
}

/// Calls `f` on `ty` and every type below it, depth first, in decoding order.
pub(crate) fn visit<'a>(ty: &'a FieldType, f: &mut dyn FnMut(&'a FieldType) -> Result<(), String>) -> Result<(), String> {
    f(ty)?;
    match ty {
        FieldType::Struct { fields, .. } | FieldType::Variant { options: fields, .. } => fields.iter().try_for_each(|x| visit(&x.ty, f)),
        FieldType::Array { elem, .. } | FieldType::Sequence { elem, .. } => visit(elem, f),
        _ => Ok(()),
    }
}
