"""Reads a Perfetto protobuf trace with the classes Perfetto generates from its own
perfetto_trace.proto (PyPI `perfetto`), checks it, and prints a JSON summary on stdout.

Checks: the file parses as perfetto.protos.Trace with no unknown field in any message; one
packet sequence, the first packet clearing its incremental state; every track uuid unique,
every parent and every event's track a described track; timestamps in order; on every
track, slice begins and ends balanced (no end without a begin, none left open); interned
names (event names, categories, argument names) defined once each, before their first use,
by a packet of the sequence, and every packet that uses them saying so
(SEQ_NEEDS_INCREMENTAL_STATE), as Perfetto's trace processor resolves them.

Summary: per track (thread tracks as "pid/tid", the others by name under their parent):
slices (begins), instants, the names of the slices and instants, the first slice of each
name with its arguments; counters per track name.
"""
import json
import sys
from collections import defaultdict

from google.protobuf import unknown_fields
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def no_unknown(msg, where):
    if len(unknown_fields.UnknownFieldSet(msg)):
        sys.exit(f"unknown fields in {where}: {msg}")
    for fd, v in msg.ListFields():
        if fd.message_type is None:
            continue
        for m in (v if fd.is_repeated else [v]):
            no_unknown(m, f"{where}.{fd.name}")


def value(a):
    which = [f.name for f, _ in a.ListFields() if f.name not in ("name", "name_iid")]
    if not which:
        return None
    k = which[0]
    if k == "dict_entries":
        return {e.name: value(e) for e in a.dict_entries}
    if k == "array_values":
        return [value(e) for e in a.array_values]
    if k == "bool_value":
        return a.bool_value
    return getattr(a, k)


def main(path):
    trace = pb.Trace()
    trace.ParseFromString(open(path, "rb").read())
    no_unknown(trace, "Trace")
    packets = list(trace.packet)
    assert packets, "no packet"
    assert all(p.trusted_packet_sequence_id == 1 for p in packets), "one sequence"
    assert packets[0].sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    tracks = {}
    for p in packets:
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid not in tracks, f"uuid {d.uuid} twice"
            tracks[d.uuid] = d
    for d in tracks.values():
        assert d.parent_uuid == 0 or d.parent_uuid in tracks, f"parent of {d}"

    def label(u):
        d = tracks[u]
        if d.HasField("thread"):
            return f"{d.thread.pid}/{d.thread.tid}"
        if d.HasField("process"):
            return f"process {d.process.pid}"
        parent = label(d.parent_uuid) + " " if d.parent_uuid else ""
        return parent + d.name

    interned = {1: {}, 2: {}, 3: {}}  # InternedData field number: iid -> name

    def lookup(kind, iid):
        assert iid in interned[kind], f"interned id {iid} (kind {kind}) used before it is defined"
        return interned[kind][iid]

    last = 0
    open_ = defaultdict(list)
    out = defaultdict(lambda: {"slices": 0, "instants": 0, "names": defaultdict(int), "first": {}})
    counters = defaultdict(list)
    for p in packets:
        if p.HasField("interned_data"):
            d = p.interned_data
            for kind, entries in ((1, d.event_categories), (2, d.event_names), (3, d.debug_annotation_names)):
                for x in entries:
                    assert x.iid not in interned[kind], f"interned id {x.iid} (kind {kind}) defined twice"
                    interned[kind][x.iid] = x.name
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        uses = e.name_iid or e.category_iids or any(a.name_iid for a in e.debug_annotations)
        assert not uses or p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE, "interned data used without SEQ_NEEDS_INCREMENTAL_STATE"
        name = lookup(2, e.name_iid) if e.name_iid else e.name
        categories = [lookup(1, i) for i in e.category_iids] or list(e.categories)
        assert p.timestamp >= last, "time order"
        last = p.timestamp
        assert e.track_uuid in tracks, f"event on an undescribed track: {e}"
        t = label(e.track_uuid)
        args = {(lookup(3, a.name_iid) if a.name_iid else a.name): value(a) for a in e.debug_annotations}
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            open_[e.track_uuid].append(name)
            out[t]["slices"] += 1
            out[t]["names"][name] += 1
            out[t]["first"].setdefault(name, {"categories": categories, "args": args})
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            assert open_[e.track_uuid], f"an end without a begin on {t} at {p.timestamp}"
            open_[e.track_uuid].pop()
        elif e.type == pb.TrackEvent.TYPE_INSTANT:
            out[t]["instants"] += 1
            out[t]["names"][name] += 1
            out[t]["first"].setdefault(name, {"categories": categories, "args": args})
        elif e.type == pb.TrackEvent.TYPE_COUNTER:
            assert tracks[e.track_uuid].HasField("counter"), "a counter value on a counter track"
            counters[t].append(e.double_counter_value)
        else:
            sys.exit(f"unexpected event type {e.type}")
    left = {label(u): s for u, s in open_.items() if s}
    assert not left, f"slices left open: {left}"
    print(json.dumps({"tracks": out, "counters": counters, "track_count": len(tracks)}))


main(sys.argv[1])
