/* The LTTng-UST anchor's one tracepoint: bench:ev { u64 id, i32 val }, the same payload
 * as the project's `enabled u64_i32` bench event. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER bench
#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./tp.h"
#if !defined(_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define _TP_H
#include <lttng/tracepoint.h>
LTTNG_UST_TRACEPOINT_EVENT(bench, ev,
  LTTNG_UST_TP_ARGS(uint64_t, id, int32_t, val),
  LTTNG_UST_TP_FIELDS(
    lttng_ust_field_integer(uint64_t, id, id)
    lttng_ust_field_integer(int32_t, val, val)
  )
)
#endif
#include <lttng/tracepoint-event.h>
