/* Shared parts of the frame fast paths: the tables configure() receives from _codec.py, and
 * the functions that read a frame body into a Frame (_frame_read.c) and write one out
 * (_frame_write.c). _speedups.c holds the module, its entry points and the tables.
 */
#ifndef CARTRIDGE_RUNTIME_FRAMES_H
#define CARTRIDGE_RUNTIME_FRAMES_H

#include "_cbor.h"

/* Value kinds of the key table (must match _codec._c_kind). */
enum { K_INT = 0, K_STR = 1, K_BOOL = 2, K_META = 3, K_BYTES = 4, K_ID = 5, K_CHECKSUM = 6 };

#define MAX_KEY 32   /* wire keys are small integers; a larger one is unknown (FRM-4) */
#define PREFIX_LEN 4 /* the big-endian u32 length before each frame body */

/* FNV-1a 64 of a CHUNK payload, its checksum (REQ-11): one definition for every fast path. */
static inline uint64_t
fnv1a64(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

typedef struct {
    int configured;
    PyObject *key_name[MAX_KEY]; /* key number -> interned field name, or NULL */
    int key_kind[MAX_KEY];
    PyObject *dumps;           /* cbor2.dumps */
    PyObject *frame_types;     /* dict int -> FrameType */
    PyObject *frame_type_ints; /* dict FrameType -> int */
    PyObject *id_cache;        /* dict bytes|int -> MessageId (shared with Python) */
    PyObject *new_id;          /* callable(key, value) -> MessageId, may raise */
    PyObject *frame_class;     /* Frame */
    PyObject *checks;          /* dict FrameType -> check(frame) */
    PyObject *required;        /* dict FrameType -> tuple of names that pass it */
    PyObject *key_of;          /* dict name -> int key */
    PyObject *stream_start;    /* FrameType.STREAM_START */
    Py_ssize_t hard_cap;
    PyObject *id_class; /* MessageId */
    Py_ssize_t id_cache_max;
    PyObject *empty_tuple;
    PyObject *s_value, *s_version, *s_frame_type, *s_id, *s_seq, *s_output, *s_payload;
    PyObject *i_one, *i_two, *i_three, *i_thirteen; /* cached small ints: compared by identity */
} CodecTables;

extern CodecTables codec;

/* Reading (_frame_read.c). Each returns a new reference: a Frame, Py_None to let Python
 * decide, or NULL with an exception set. */
PyObject *frame_from_map(PyObject *m, int validate);
PyObject *frame_read(CborReader *r);

/* Writing (_frame_write.c). */
PyObject *frame_map(PyObject *d, PyObject *seq);
int frame_write(CborWriter *w, PyObject *d, PyObject *seq);
PyObject *frame_prefixed(const unsigned char *body, Py_ssize_t n, Py_ssize_t max_frame);
PyObject *frame_prefix_in_place(CborWriter *w, Py_ssize_t max_frame);

/* The receiver's fast path (_receiver.c). */
PyObject *receive_fast(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_receiver(PyObject *module, PyObject *args, PyObject *kw);
PyObject *serve_flow_fast(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
int receiver_init(void);
PyObject *scalar_value(PyObject *payload);
int receiver_is_configured(void);

/* The host's response path (_response.c). */
PyObject *route_response(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *route_block(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *new_receiver(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_response(PyObject *module, PyObject *args, PyObject *kw);
PyObject *ready_value(PyObject *module, PyObject *value);
int response_init(void);

/* A small call's request frames (_request.c). */
PyObject *request_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *request_wire(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_request(PyObject *module, PyObject *args, PyObject *kw);
int request_init(void);
PyObject *configure_ids(PyObject *module, PyObject *urandom);
PyObject *forget_ids(PyObject *module, PyObject *unused);
PyObject *new_id(PyObject *module, PyObject *unused);
PyObject *int_id(PyObject *module, PyObject *value);
PyObject *install_id_hash(PyObject *module, PyObject *cls);

/* Numbering and encoding a writer's batch (_numbering.c), over encode_small (_speedups.c). */
PyObject *encode_small(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_numbering(PyObject *module, PyObject *arg);
PyObject *encode_numbered(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *encode_flow(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* The cartridge session's body frames delivered into a request's input (_deliver.c). */
PyObject *deliver_flow(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_delivery(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* A run of frames queued into the cartridge's outbox (_queueing.c). */
PyObject *queue_frames(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* A small response output's frames (_outputs.c). */
PyObject *configure_outputs(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *open_small(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *close_small(PyObject *module, PyObject *stream);
PyObject *end_frame(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* A coroutine awaited with an outbox held while it runs (_held.c). */
PyObject *held_while_running(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* The cartridge's record of an incoming request made in one call (_served.c). */
PyObject *configure_served(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *new_served(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *slot_maker(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *make_slotted(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* A cartridge host's forwarding (_relay_forward.c). */
PyObject *relay_to_cartridge(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *relay_to_switch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *relay_to_app(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *configure_forwarding(PyObject *module, PyObject *fts);

#endif
