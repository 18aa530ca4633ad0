/* Shared parts of the codec fast paths: a direct CBOR reader and writer for frame bodies.
 *
 * The reader (_cbor_read.c) reads the subset of CBOR that frames use (definite-length maps,
 * arrays, byte and text strings, integers within 64 bits, true/false/null, floats) into the
 * same Python objects cbor2 builds, straight from the buffer. Anything else (tags, indefinite
 * lengths, undefined, invalid UTF-8, non-scalar map keys, deep nesting, truncation) makes it
 * give up, and the caller lets cbor2 and the Python path read the body and name any error.
 *
 * The writer (_cbor_write.c) writes exactly what cbor2.dumps writes for the types frames hold
 * (shortest integer heads, definite lengths, finite floats as 8 bytes, maps in insertion
 * order). Any other type or value (subclasses, non-finite floats, integers beyond 64 bits,
 * deep nesting) makes it give up, and the caller uses cbor2.
 */
#ifndef CARTRIDGE_RUNTIME_CBOR_H
#define CARTRIDGE_RUNTIME_CBOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define CBOR_GIVE_UP ((PyObject *)1) /* not an object: "let Python decide" */
#define CBOR_MAX_DEPTH 8

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} CborReader;

/* The next item as a new reference, CBOR_GIVE_UP, or NULL with an exception set. */
PyObject *cbor_read_item(CborReader *r, int depth);

typedef struct {
    unsigned char *buf; /* small, or a PyMem block once it outgrows it */
    Py_ssize_t len;
    Py_ssize_t cap;
    unsigned char small[512];
} CborWriter;

/* An empty writer that keeps ``reserve`` bytes at the front (for a length prefix). */
void cbor_writer_init(CborWriter *w, Py_ssize_t reserve);
/* Frees what the writer allocated (the writer itself is the caller's). */
void cbor_writer_free(CborWriter *w);
/* 1 written, 0 error (exception set), -1 give up. */
int cbor_write_item(CborWriter *w, PyObject *v, int depth);
/* The head of an item of major type ``major`` with argument ``arg`` (shortest form).
 * 1 written, 0 error (exception set). */
int cbor_write_head(CborWriter *w, int major, uint64_t arg);

#endif
