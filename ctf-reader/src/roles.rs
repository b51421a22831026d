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
/// length/selector target is marked [`IntType::referenced`] (in the scope it lives in: a
/// path into an event class's context or payload names that event class's field, never the
/// same position in another class), clock indices are checked, and each stream class gets
/// its default clock.
pub(crate) fn finish(trace: &mut Trace) -> Result<(), String> {
    let n_clocks = trace.clocks.len();
    let check = |ty: &FieldType, targets: &mut Vec<FieldPath>| -> Result<(), String> {
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
    // Targets in the trace's and stream classes' scopes, from any type; those in an event
    // class's own scopes, per event class.
    let mut shared: Vec<FieldPath> = Vec::new();
    let mut own: Vec<Vec<Vec<FieldPath>>> = Vec::new();
    for t in trace.packet_header.iter() {
        check(t, &mut shared)?;
    }
    for sc in &trace.streams {
        for t in sc.packet_context.iter().chain(&sc.event_header).chain(&sc.event_context) {
            check(t, &mut shared)?;
        }
        let mut per_event = Vec::with_capacity(sc.events.len());
        for ec in &sc.events {
            let mut targets = Vec::new();
            for t in ec.context.iter().chain(&ec.payload) {
                check(t, &mut targets)?;
            }
            let (event_scoped, rest): (Vec<FieldPath>, Vec<FieldPath>) =
                targets.into_iter().partition(|p| matches!(p.scope, Scope::EventSpecificContext | Scope::EventPayload));
            shared.extend(rest);
            per_event.push(event_scoped);
        }
        own.push(per_event);
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
    for p in shared {
        if p.scope == Scope::PacketHeader {
            if let Some(r) = trace.packet_header.as_mut() {
                mark(r, &p.indices);
            }
            continue;
        }
        for sc in &mut trace.streams {
            let root = match p.scope {
                Scope::PacketContext => sc.packet_context.as_mut(),
                Scope::EventHeader => sc.event_header.as_mut(),
                Scope::EventCommonContext => sc.event_context.as_mut(),
                _ => None,
            };
            if let Some(r) = root {
                mark(r, &p.indices);
            }
        }
    }
    for (sc, per_event) in trace.streams.iter_mut().zip(own) {
        for (ec, targets) in sc.events.iter_mut().zip(per_event) {
            for p in targets {
                let root = if p.scope == Scope::EventSpecificContext { ec.context.as_mut() } else { ec.payload.as_mut() };
                if let Some(r) = root {
                    mark(r, &p.indices);
                }
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
