/* Shared parts of the host's response path: the router (_response.c), its block reader
 * (_response_wire.c) and its set-up (_response_setup.c) share these tables, filled once by
 * configure_response, and a frame's fields as the router reads them.
 */
#ifndef CARTRIDGE_RUNTIME_RESPONSE_H
#define CARTRIDGE_RUNTIME_RESPONSE_H

#include "_frames.h"

/* The flow's slots the router reads and writes. */
enum { F_DONE, F_ABANDONED, F_OBSERVATION, F_XID, F_RECEIVER, F_FRAMES, F_QUEUED, F_EVENTS,
       F_OUTPUTS, F_WAITER, F_END_META, F_COUNT };
/* A receiver stream's slots (every one is set when the router opens a stream). */
enum { S_ASSEMBLER, S_CHUNKS, S_IS_SEQUENCE, S_ITEM_META, S_PENDING, S_STATE, S_STREAM_ID,
       S_UNBOUNDED, S_WINDOW, S_COUNT };

typedef struct {
    int configured;
    PyObject *ft_start, *ft_chunk, *ft_stream_end, *ft_end;
    PyObject *frame_class, *flow_class, *receiver_class, *stream_class, *deque_class;
    PyObject *deque_append;
    PyObject *rs_open, *rs_done, *ss_open, *ss_closed, *credit_dir;
    PyObject *out_started, *out_data, *out_ended;
    Py_ssize_t flow[F_COUNT], stream[S_COUNT], started[6], data[4], ended[3];
    PyObject *s_routing, *s_calls, *s_origins, *s_frame_type, *s_id, *s_routing_id, *s_rid,
        *s_state, *s_streams, *s_outgoing, *s_verify, *s_credit, *s_stream_id, *s_chunk_index,
        *s_checksum, *s_payload, *s_chunk_count, *s_meta, *s_media_urn, *s_is_sequence,
        *s_unbounded, *s_output, *s_finish, *s_set, *s_xid, *s_batch, *s_credit_dir;
    PyObject *empty_str, *zero;
} ResponseTables;

extern ResponseTables rp;

/* A slot of an object at a member descriptor's offset (NULL: not set). */
#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* The fields of a frame the router reads (borrowed; Py_None when absent), from a Frame's
 * dict or straight from the wire. */
typedef struct {
    PyObject *frame_type, *id, *routing_id, *stream_id, *chunk_index, *checksum, *payload,
        *chunk_count, *meta, *media_urn, *is_sequence, *unbounded, *output;
} Fields;

/* The routing of HostConnection.receive_frame for a response frame of one of our calls, its
 * fields read already: 1 taken, 0 not (nothing changed), -1 an exception. */
int response_route(PyObject *core, const Fields *fr);

/* The Ready type's set-up (_ready.c), from response_init. */
int ready_init(void);

#endif
