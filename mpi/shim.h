// Copyright ©2025 The tdmpi Authors. All rights reserved.
// Use of this source code is governed by a BSD-style license.

// shim.h holds the small static C helpers of package mpi. Open MPI's
// predefined handles are macros over addresses of globals, so Go reaches them
// through these functions, once, at package initialisation.

#ifndef TDMPI_SHIM_H
#define TDMPI_SHIM_H

#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline MPI_Comm tdmpi_comm_world(void) { return MPI_COMM_WORLD; }
static inline MPI_Comm tdmpi_comm_self(void) { return MPI_COMM_SELF; }
static inline MPI_Comm tdmpi_comm_null(void) { return MPI_COMM_NULL; }
static inline MPI_Group tdmpi_group_null(void) { return MPI_GROUP_NULL; }
static inline MPI_Request tdmpi_request_null(void) { return MPI_REQUEST_NULL; }
static inline MPI_Message tdmpi_message_null(void) { return MPI_MESSAGE_NULL; }
static inline MPI_Message tdmpi_message_no_proc(void) { return MPI_MESSAGE_NO_PROC; }
static inline MPI_Errhandler tdmpi_errors_return(void) { return MPI_ERRORS_RETURN; }
static inline MPI_Datatype tdmpi_datatype_null(void) { return MPI_DATATYPE_NULL; }

// Words. At every call into C, cgo checks each argument whose type may
// hold a Go pointer: a void * buffer, an MPI handle (a pointer under Open
// MPI), a pointer to a matched message or to a status holding a request.
// A void * argument into Go memory is checked as the whole object that
// holds it: cgo cannot know the element type, so every pointer word of the
// allocation must point outside Go memory or be pinned. That check fails
// on a buffer of plain elements inside an object with pointers (a small
// received TensorDict keeps its storage in one allocation with its tree,
// see tensordict's template.go), and costs 10-15 ns a call even where it
// passes, some 60 ns of a small message's one-way time through Send and
// Recv. So every function here that MPI reads or writes a Go buffer
// through takes the buffer as a tdmpi_mem (char) pointer, which cgo leaves
// alone (buffer.mem and buffer.at in buffer.go make them); and the
// functions of the point-to-point path (blocking, and Isend and Irecv but
// for their request) take handles as tdmpi_word integers too: Go converts
// a handle to its word once, when it gets the handle.
typedef uintptr_t tdmpi_word;
typedef char tdmpi_mem;
#define TDMPI_COMM(w) ((MPI_Comm)(w))
#define TDMPI_TYPE(w) ((MPI_Datatype)(w))
#define TDMPI_MESSAGE(w) ((MPI_Message)(w))
static inline tdmpi_word tdmpi_comm_word(MPI_Comm c) { return (tdmpi_word)c; }
static inline tdmpi_word tdmpi_type_word(MPI_Datatype t) { return (tdmpi_word)t; }
static inline tdmpi_word tdmpi_message_word(MPI_Message m) { return (tdmpi_word)m; }

// Datatype indices; must match the kind constants in types.go.
static inline MPI_Datatype tdmpi_datatype(int k) {
	switch (k) {
	case 1: return MPI_C_BOOL;
	case 2: return MPI_INT8_T;
	case 3: return MPI_UINT8_T;
	case 4: return MPI_INT16_T;
	case 5: return MPI_UINT16_T;
	case 6: return MPI_INT32_T;
	case 7: return MPI_UINT32_T;
	case 8: return MPI_INT64_T;
	case 9: return MPI_UINT64_T;
	case 10: return MPI_FLOAT;
	case 11: return MPI_DOUBLE;
	case 12: return MPI_C_FLOAT_COMPLEX;
	case 13: return MPI_C_DOUBLE_COMPLEX;
	case 14: return MPI_BYTE;
	}
	return MPI_DATATYPE_NULL;
}

// Op indices; must match the Op constants in op.go.
static inline MPI_Op tdmpi_op(int k) {
	switch (k) {
	case 0: return MPI_SUM;
	case 1: return MPI_PROD;
	case 2: return MPI_MIN;
	case 3: return MPI_MAX;
	case 4: return MPI_LAND;
	case 5: return MPI_LOR;
	case 6: return MPI_LXOR;
	case 7: return MPI_BAND;
	case 8: return MPI_BOR;
	case 9: return MPI_BXOR;
	}
	return MPI_OP_NULL;
}

// tdmpi_type_pair builds and commits the datatype of na elements of dt at
// a followed by nb at b (both 1 to INT_MAX), a two-block hindexed type
// addressed from MPI_BOTTOM, for one message in two buffers
// (tdmpi_send_pair, tdmpi_mrecv_pair). The caller frees it.
static int tdmpi_type_pair(const void *a, int na, const void *b, int nb, MPI_Datatype dt, MPI_Datatype *t) {
	int lens[2] = {na, nb};
	MPI_Aint disps[2];
	int rc = MPI_Get_address(a, &disps[0]);
	if (rc == MPI_SUCCESS) rc = MPI_Get_address(b, &disps[1]);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_create_hindexed(2, lens, disps, dt, t);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_commit(t);
	if (rc != MPI_SUCCESS) MPI_Type_free(t);
	return rc;
}

// tdmpi_send_pair is MPI_Send of na elements of dt at a followed by nb at b
// as one message (tdmpi_type_pair; the type costs about 0.1 us). The
// message has the type signature of na+nb elements, and any receive takes
// it, but Open MPI moves a buffer that is not contiguous through
// shared-memory fragments that sender and receiver copy at once, instead of
// the single copy (CMA) it uses for a contiguous one above its eager limit
// (SendConcat, SetTwoCopySends).
static int tdmpi_send_pair(const void *a, int na, const void *b, int nb, MPI_Datatype dt, int dest, int tag, MPI_Comm c) {
	MPI_Datatype t;
	int rc = tdmpi_type_pair(a, na, b, nb, dt, &t);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Send(MPI_BOTTOM, 1, t, dest, tag, c);
	MPI_Type_free(&t);
	return rc;
}

// tdmpi_send_two_copy is MPI_Send of n elements of dt (2 to INT_MAX, each
// of size bytes, 16 at most) at buf as two blocks that are not adjacent in
// memory (tdmpi_send_pair): the first n-1 elements in place and a copy of
// the last on this function's stack (SetTwoCopySends).
static int tdmpi_send_two_copy(const tdmpi_mem *buf, int n, int size, tdmpi_word dt, int dest, int tag, tdmpi_word c) {
	_Alignas(16) unsigned char tail[16];
	memcpy(tail, buf + (size_t)(n - 1) * (size_t)size, (size_t)size);
	return tdmpi_send_pair(buf, n - 1, tail, 1, TDMPI_TYPE(dt), dest, tag, TDMPI_COMM(c));
}

// tdmpi_send is MPI_Send, taking words (see tdmpi_word).
static inline int tdmpi_send(const tdmpi_mem *buf, int n, tdmpi_word dt, int dest, int tag, tdmpi_word c) {
	return MPI_Send(buf, n, TDMPI_TYPE(dt), dest, tag, TDMPI_COMM(c));
}

// tdmpi_isend and tdmpi_irecv are MPI_Isend and MPI_Irecv, taking words
// (the request stays MPI's: package mpi keeps requests in arrays that
// MPI_Waitall reads).
static inline int tdmpi_isend(const tdmpi_mem *buf, int n, tdmpi_word dt, int dest, int tag, tdmpi_word c, MPI_Request *q) {
	return MPI_Isend(buf, n, TDMPI_TYPE(dt), dest, tag, TDMPI_COMM(c), q);
}

static inline int tdmpi_irecv(tdmpi_mem *buf, int n, tdmpi_word dt, int src, int tag, tdmpi_word c, MPI_Request *q) {
	return MPI_Irecv(buf, n, TDMPI_TYPE(dt), src, tag, TDMPI_COMM(c), q);
}

// tdmpi_copy_send is a send of a copy (package mpi's SendCopy): its
// request, then room for the copied bytes, 16-byte aligned.
typedef struct {
	union {
		MPI_Request q;
		_Alignas(16) unsigned char room[16];
	} h;
} tdmpi_copy_send;

// tdmpi_copy_send_new allocates a tdmpi_copy_send with room for cap bytes
// (NULL when the C heap has none).
static inline tdmpi_copy_send *tdmpi_copy_send_new(int cap) {
	tdmpi_copy_send *s = malloc(sizeof *s + (size_t)cap);
	if (s != NULL) s->h.q = MPI_REQUEST_NULL;
	return s;
}

// tdmpi_copy_send_start copies the n bytes at buf into s and starts their
// send (MPI_Isend) from there.
static inline int tdmpi_copy_send_start(tdmpi_copy_send *s, const tdmpi_mem *buf, int n, int dest, int tag, tdmpi_word c) {
	unsigned char *d = (unsigned char *)(s + 1);
	if (n > 0) memcpy(d, buf, (size_t)n);
	return MPI_Isend(d, n, MPI_BYTE, dest, tag, TDMPI_COMM(c), &s->h.q);
}

// tdmpi_copy_send_test is MPI_Test of s's send.
static inline int tdmpi_copy_send_test(tdmpi_copy_send *s, int *done) {
	return MPI_Test(&s->h.q, done, MPI_STATUS_IGNORE);
}

// tdmpi_started is a nonblocking operation just started: its request and
// the code MPI returned, by value, so that the Go side passes no pointer
// (package mpi's startUntil).
typedef struct {
	MPI_Request q;
	int rc;
} tdmpi_started;

// tdmpi_ibcast_start is MPI_Ibcast (IbcastWait).
static inline tdmpi_started tdmpi_ibcast_start(tdmpi_mem *buf, int n, MPI_Datatype dt, int root, MPI_Comm c) {
	tdmpi_started s;
	s.q = MPI_REQUEST_NULL;
	s.rc = MPI_Ibcast(buf, n, dt, root, c, &s.q);
	return s;
}

// tdmpi_iallreduce_start is MPI_Iallreduce in place (IallreduceInPlaceWait).
static inline tdmpi_started tdmpi_iallreduce_start(tdmpi_mem *buf, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
	tdmpi_started s;
	s.q = MPI_REQUEST_NULL;
	s.rc = MPI_Iallreduce(MPI_IN_PLACE, buf, n, dt, op, c, &s.q);
	return s;
}

// tdmpi_isend_start is MPI_Isend (SendUntil).
static inline tdmpi_started tdmpi_isend_start(const tdmpi_mem *buf, int n, MPI_Datatype dt, int dest, int tag, tdmpi_word c) {
	tdmpi_started s;
	s.q = MPI_REQUEST_NULL;
	s.rc = MPI_Isend(buf, n, dt, dest, tag, TDMPI_COMM(c), &s.q);
	return s;
}

// tdmpi_isend_pair_start is MPI_Isend of tdmpi_send_pair's message of
// bytes (SendConcatUntil); MPI keeps the type until the send completes.
static inline tdmpi_started tdmpi_isend_pair_start(const tdmpi_mem *a, int na, const tdmpi_mem *b, int nb, int dest, int tag, tdmpi_word c) {
	tdmpi_started s;
	MPI_Datatype t;
	s.q = MPI_REQUEST_NULL;
	s.rc = tdmpi_type_pair(a, na, b, nb, MPI_BYTE, &t);
	if (s.rc != MPI_SUCCESS) return s;
	s.rc = MPI_Isend(MPI_BOTTOM, 1, t, dest, tag, TDMPI_COMM(c), &s.q);
	MPI_Type_free(&t);
	return s;
}

// tdmpi_imrecv_start is MPI_Imrecv of matched message m (MrecvUntil).
static inline tdmpi_started tdmpi_imrecv_start(tdmpi_mem *buf, int n, MPI_Datatype dt, tdmpi_word m) {
	tdmpi_started s;
	MPI_Message mm = TDMPI_MESSAGE(m);
	s.q = MPI_REQUEST_NULL;
	s.rc = MPI_Imrecv(buf, n, dt, &mm, &s.q);
	return s;
}

// tdmpi_send_bytes is tdmpi_send_pair of bytes, taking words.
static inline int tdmpi_send_bytes(const tdmpi_mem *a, int na, const tdmpi_mem *b, int nb, int dest, int tag, tdmpi_word c) {
	return tdmpi_send_pair(a, na, b, nb, MPI_BYTE, dest, tag, TDMPI_COMM(c));
}

// tdmpi_isend_blocks_start is MPI_Isend of the n blocks of bytes at
// addrs, of lens bytes each, as one message (SendBlocksUntil): an hindexed
// type addressed from MPI_BOTTOM, which MPI keeps until the send
// completes.
static inline tdmpi_started tdmpi_isend_blocks_start(int n, const int *lens, const MPI_Aint *addrs, int dest, int tag, tdmpi_word c) {
	tdmpi_started s;
	MPI_Datatype t;
	s.q = MPI_REQUEST_NULL;
	s.rc = MPI_Type_create_hindexed(n, lens, addrs, MPI_BYTE, &t);
	if (s.rc != MPI_SUCCESS) return s;
	s.rc = MPI_Type_commit(&t);
	if (s.rc == MPI_SUCCESS) s.rc = MPI_Isend(MPI_BOTTOM, 1, t, dest, tag, TDMPI_COMM(c), &s.q);
	MPI_Type_free(&t);
	return s;
}

// tdmpi_type_big builds a committed datatype describing n consecutive
// elements of base, for n beyond INT_MAX (the BigMPI recipe): q blocks of
// chunk elements (at most INT_MAX) followed by r leftover elements, joined
// by a struct type.
static int tdmpi_type_big(MPI_Datatype base, MPI_Count n, MPI_Count chunk, MPI_Datatype *out) {
	MPI_Count q = n / chunk, r = n % chunk;
	MPI_Aint lb, ext;
	MPI_Datatype blk = MPI_DATATYPE_NULL, vec = MPI_DATATYPE_NULL, rem = MPI_DATATYPE_NULL;
	int rc = MPI_Type_get_extent(base, &lb, &ext);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_contiguous((int)chunk, base, &blk);
	if (rc != MPI_SUCCESS) goto out;
	rc = MPI_Type_contiguous((int)q, blk, &vec);
	if (rc != MPI_SUCCESS) goto out;
	if (r > 0) {
		rc = MPI_Type_contiguous((int)r, base, &rem);
		if (rc != MPI_SUCCESS) goto out;
	}
	{
		int lens[2] = {1, 1};
		MPI_Aint disps[2] = {0, (MPI_Aint)(q * chunk) * ext};
		MPI_Datatype types[2] = {vec, rem};
		rc = MPI_Type_create_struct(r > 0 ? 2 : 1, lens, disps, types, out);
		if (rc != MPI_SUCCESS) goto out;
	}
	rc = MPI_Type_commit(out);
	if (rc != MPI_SUCCESS) MPI_Type_free(out);
out:
	if (blk != MPI_DATATYPE_NULL) MPI_Type_free(&blk);
	if (vec != MPI_DATATYPE_NULL) MPI_Type_free(&vec);
	if (rem != MPI_DATATYPE_NULL) MPI_Type_free(&rem);
	return rc;
}

static inline int tdmpi_type_free(MPI_Datatype t) { return MPI_Type_free(&t); }

// tdmpi_status is an MPI_Status with the facts Go needs from it, filled in
// by the same C call that completes the operation (one cgo call each).
// A blocking wait that polled for a slice without a match returns
// TDMPI_AGAIN (see tdmpi_wait_mprobe) and keeps where it was in its status,
// zero before the first call, for the call that resumes it.
typedef struct {
	MPI_Status st;
	long long bytes; // message size in bytes, -1 if unknown
	int cancelled;
	long long wait_start; // when the wait began to poll (ns), 0 before
	int wait_phase;       // TDMPI_SPIN, TDMPI_YIELD or TDMPI_NAP (tdmpi_wait_mprobe)
	int sent;             // tdmpi_sendrecv: the send is posted, in req
	tdmpi_word req;       // a word (see tdmpi_word), so that cgo need not check the status
} tdmpi_status;

static inline int tdmpi_status_error(const MPI_Status *s) { return s->MPI_ERROR; }

// tdmpi_finish completes s after an operation that returned rc: the size is
// the number of elements of base (the datatype the message was received or
// probed with) times size.
static inline int tdmpi_finish(int rc, tdmpi_status *s, MPI_Datatype base, long long size) {
	MPI_Count n = 0;
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Test_cancelled(&s->st, &s->cancelled);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Get_elements_x(&s->st, base, &n);
	if (rc != MPI_SUCCESS) return rc;
	s->bytes = n == MPI_UNDEFINED ? -1 : (long long)n * size;
	return MPI_SUCCESS;
}

// Checked receives. Open MPI 4.1's shared-memory transport (vader with CMA
// single copy) writes a message longer than the receive buffer past the
// buffer's end before it reports MPI_ERR_TRUNCATE. These receives know the
// message size first (from a matched probe): a message that does not fit is
// received into scratch memory, its first cap bytes are copied into buf,
// and MPI_ERR_TRUNCATE is returned, as MPI specifies, without overrunning buf.

// tdmpi_mrecv_checked receives the matched message *m of msg_bytes bytes
// (-1 if unknown) into buf, count elements of dt making cap bytes.
static int tdmpi_mrecv_checked(void *buf, int count, MPI_Datatype dt, long long cap, long long msg_bytes, MPI_Message *m, MPI_Status *st) {
	if (msg_bytes < 0 || msg_bytes <= cap) return MPI_Mrecv(buf, count, dt, m, st);
	char *tmp = malloc((size_t)msg_bytes);
	if (tmp == NULL) return MPI_ERR_NO_MEM;
	MPI_Datatype bt = MPI_BYTE;
	int n = (int)msg_bytes, rc;
	if (msg_bytes > 2147483647LL) {
		rc = tdmpi_type_big(MPI_BYTE, msg_bytes, (MPI_Count)1 << 30, &bt);
		if (rc != MPI_SUCCESS) { free(tmp); return rc; }
		n = 1;
	}
	rc = MPI_Mrecv(tmp, n, bt, m, st);
	if (bt != MPI_BYTE) MPI_Type_free(&bt);
	if (rc == MPI_SUCCESS) {
		if (cap > 0) memcpy(buf, tmp, (size_t)cap);
		rc = MPI_ERR_TRUNCATE;
	}
	free(tmp);
	return rc;
}

// tdmpi_spin_ns is how long a blocking probe polls MPI before it gives its
// core away between polls (see tdmpi_wait_mprobe); 0 never does.
// tdmpi_slice_ns is how long one call of a blocking wait polls before it
// returns TDMPI_AGAIN to Go; 0 never does. Both are defined in spin.go,
// tdmpi_spin_ns set by SetSpinWait, tdmpi_slice_ns by its init.
extern long long tdmpi_spin_ns, tdmpi_slice_ns;

// TDMPI_AGAIN is returned by a blocking wait that polled for
// tdmpi_slice_ns without a match: no MPI function returns a negative code.
#define TDMPI_AGAIN (-1)

static inline long long tdmpi_now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

// tdmpi_slice_ended reports whether a call that began to poll at *begin
// (0 before its first check, which sets it to now) has polled for
// tdmpi_slice_ns.
static inline int tdmpi_slice_ended(long long now, long long *begin) {
	if (*begin == 0) *begin = now;
	return tdmpi_slice_ns > 0 && now - *begin >= tdmpi_slice_ns;
}

// A blocking wait of tdmpi_wait_mprobe, or of tdmpi_wait_req with pause,
// goes through three phases, kept in its status across the calls that
// resume it (why: "Waiting" in doc.go):
//   - TDMPI_SPIN: it polls without pause, for tdmpi_spin_ns;
//   - TDMPI_YIELD: it yields the core after each poll (sched_yield), up to
//     TDMPI_NAP_AFTER_NS of waiting;
//   - TDMPI_NAP: it sleeps after each poll, 1/16 of the time waited so far
//     (at least TDMPI_NAP_MIN_NS, at most TDMPI_NAP_MAX_NS).
// tdmpi_spin_ns 0 keeps a wait in the first phase.
enum { TDMPI_SPIN, TDMPI_YIELD, TDMPI_NAP };
#define TDMPI_NAP_AFTER_NS 1000000LL
#define TDMPI_NAP_MIN_NS 5000LL
#define TDMPI_NAP_MAX_NS 1000000LL

// tdmpi_nap sleeps for 1/16 of waited nanoseconds, within the bounds above.
static inline void tdmpi_nap(long long waited) {
	long long d = waited / 16;
	if (d < TDMPI_NAP_MIN_NS) d = TDMPI_NAP_MIN_NS;
	if (d > TDMPI_NAP_MAX_NS) d = TDMPI_NAP_MAX_NS;
	struct timespec ts = {0, (long)d};
	nanosleep(&ts, NULL);
}

// tdmpi_pause pauses a wait (its status s, its call's slice begin) after
// its i-th poll that found nothing, as the phases above say. It returns
// TDMPI_AGAIN when the wait is to return to Go (after one nap, or once the
// call has polled for tdmpi_slice_ns), 0 when it is to poll again.
static inline int tdmpi_pause(tdmpi_status *s, unsigned i, long long *begin) {
	if (s->wait_phase == TDMPI_SPIN && i % 64 != 0) return 0;
	if (s->wait_phase == TDMPI_YIELD) {
		sched_yield();
		if (i % 4 != 0) return 0;
	}
	long long now = tdmpi_now_ns();
	if (s->wait_start == 0) s->wait_start = now;
	long long waited = now - s->wait_start;
	if (s->wait_phase == TDMPI_NAP) {
		tdmpi_nap(waited);
		return TDMPI_AGAIN;
	}
	long long spin = tdmpi_spin_ns;
	if (spin > 0 && waited >= spin) s->wait_phase = waited >= TDMPI_NAP_AFTER_NS ? TDMPI_NAP : TDMPI_YIELD;
	return tdmpi_slice_ended(now, begin) ? TDMPI_AGAIN : 0;
}

// tdmpi_wait_mprobe is MPI_Mprobe (probe is 0) or MPI_Probe (probe is 1,
// m unused) as a loop of nonblocking probes that pauses between them as
// the phases above say. After tdmpi_slice_ns in one call (or one nap) it
// returns TDMPI_AGAIN: the Go side then lets its scheduler run
// (runtime.Gosched) and calls again with the same s, so that the
// goroutines and collector workers waiting for this thread's processor
// (the only one of a rank bound to one core) run in the time the rank
// waits anyway.
static int tdmpi_wait_mprobe(int probe, int src, int tag, MPI_Comm c, MPI_Message *m, tdmpi_status *s) {
	long long begin = 0;
	int flag = 0;
	for (unsigned i = 1;; i++) {
		int rc = probe ? MPI_Iprobe(src, tag, c, &flag, &s->st) : MPI_Improbe(src, tag, c, &flag, m, &s->st);
		if (rc != MPI_SUCCESS || flag) return rc;
		if (tdmpi_pause(s, i, &begin)) return TDMPI_AGAIN;
	}
}

// tdmpi_pause_req pauses the wait for a request after its i-th test that
// found it pending: as tdmpi_pause with pause; without, not at all, but it
// returns TDMPI_AGAIN every tdmpi_slice_ns (see tdmpi_wait_req).
static inline int tdmpi_pause_req(tdmpi_status *s, unsigned i, long long *begin, int pause) {
	if (pause) return tdmpi_pause(s, i, begin);
	return i % 64 == 0 && tdmpi_slice_ended(tdmpi_now_ns(), begin) ? TDMPI_AGAIN : 0;
}

// tdmpi_wait_req is MPI_Wait on request *r as a loop of MPI_Test, which
// returns TDMPI_AGAIN as tdmpi_wait_mprobe does and keeps where the wait
// was in s. With pause (an operation small enough that a long wait is
// spent waiting for a peer, not moving data), it pauses between tests as
// tdmpi_wait_mprobe does. Without, it tests without pause, however long,
// and returns every tdmpi_slice_ns: a large transfer may be moving in these
// tests (MPICH moves large messages on shared memory in steps that need
// both sides' polls).
static int tdmpi_wait_req(MPI_Request *r, tdmpi_status *s, int pause) {
	long long begin = 0;
	for (unsigned i = 1;; i++) {
		int flag = 0;
		int rc = MPI_Test(r, &flag, &s->st);
		if (rc != MPI_SUCCESS || flag) return rc;
		if (tdmpi_pause_req(s, i, &begin, pause)) return TDMPI_AGAIN;
	}
}

// tdmpi_wait_all is MPI_Waitall on the n requests at r, statuses into sts,
// as a loop of MPI_Testall that returns TDMPI_AGAIN and pauses as
// tdmpi_wait_req does. Not MPI_Waitall: in MPICH 4.0.2, MPI_Waitall and
// MPI_Wait may never return once another thread has completed their
// request (a receive of a message the rank sent itself, matched in that
// thread's MPI_Send): their progress loop (MPID_Progress_wait) waits for
// progress made by its own polls, which never comes, where MPI_Test,
// MPI_Testall and MPI_Waitany test the request after every poll
// (TestWaitSelfSendConcurrent, testdata/mpich_self_wait.c).
static int tdmpi_wait_all(int n, MPI_Request *r, MPI_Status *sts, tdmpi_status *s, int pause) {
	long long begin = 0;
	for (unsigned i = 1;; i++) {
		int flag = 0;
		int rc = MPI_Testall(n, r, &flag, sts);
		if (rc != MPI_SUCCESS || flag) return rc;
		if (tdmpi_pause_req(s, i, &begin, pause)) return TDMPI_AGAIN;
	}
}

// tdmpi_waited completes a wait's result rc as tdmpi_finish, unless it is
// TDMPI_AGAIN.
static inline int tdmpi_waited(int rc, tdmpi_status *s) {
	return rc == TDMPI_AGAIN ? rc : tdmpi_finish(rc, s, MPI_BYTE, 1);
}

// The blocking receives and probes below take words (see tdmpi_word): a
// matched message is the word at *m, MPI_MESSAGE_NULL's once received.

// tdmpi_recv is MPI_Recv as a matched probe and a checked receive.
static int tdmpi_recv(tdmpi_mem *buf, int count, tdmpi_word dt, long long cap, int src, int tag, tdmpi_word c,
	tdmpi_word base, long long size, tdmpi_status *s) {
	MPI_Message m;
	int rc = tdmpi_waited(tdmpi_wait_mprobe(0, src, tag, TDMPI_COMM(c), &m, s), s);
	if (rc != MPI_SUCCESS) return rc;
	rc = tdmpi_mrecv_checked(buf, count, TDMPI_TYPE(dt), cap, s->bytes, &m, &s->st);
	return tdmpi_finish(rc, s, TDMPI_TYPE(base), size);
}

// tdmpi_recv_exact matches a message (MPI_Mprobe) and, if it is exactly n
// bytes (n <= INT_MAX), receives it into buf in the same call, setting
// *got; a message of another size stays matched in *m, unreceived.
static int tdmpi_recv_exact(tdmpi_mem *buf, long long n, int src, int tag, tdmpi_word c, tdmpi_word *m, int *got,
	tdmpi_status *s) {
	MPI_Message mm = MPI_MESSAGE_NULL;
	*got = 0;
	int rc = tdmpi_waited(tdmpi_wait_mprobe(0, src, tag, TDMPI_COMM(c), &mm, s), s);
	if (rc == MPI_SUCCESS && s->bytes == n && n <= 2147483647LL) {
		*got = 1;
		rc = tdmpi_finish(MPI_Mrecv(buf, (int)n, MPI_BYTE, &mm, &s->st), s, MPI_BYTE, 1);
	}
	if (rc != TDMPI_AGAIN) *m = (tdmpi_word)mm;
	return rc;
}

// tdmpi_mrecv receives matched message *m, probed at msg_bytes bytes.
static int tdmpi_mrecv(tdmpi_mem *buf, int count, tdmpi_word dt, long long cap, long long msg_bytes, tdmpi_word *m,
	tdmpi_word base, long long size, tdmpi_status *s) {
	MPI_Message mm = TDMPI_MESSAGE(*m);
	int rc = tdmpi_mrecv_checked(buf, count, TDMPI_TYPE(dt), cap, msg_bytes, &mm, &s->st);
	*m = (tdmpi_word)mm;
	return tdmpi_finish(rc, s, TDMPI_TYPE(base), size);
}

// tdmpi_mrecv_pair receives the matched message *m, na+nb bytes, into na
// bytes at a followed by nb at b (tdmpi_type_pair; MrecvConcat).
static int tdmpi_mrecv_pair(tdmpi_mem *a, int na, tdmpi_mem *b, int nb, tdmpi_word *m, tdmpi_status *s) {
	MPI_Datatype t;
	int rc = tdmpi_type_pair(a, na, b, nb, MPI_BYTE, &t);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Message mm = TDMPI_MESSAGE(*m);
	rc = MPI_Mrecv(MPI_BOTTOM, 1, t, &mm, &s->st);
	*m = (tdmpi_word)mm;
	MPI_Type_free(&t);
	return tdmpi_finish(rc, s, MPI_BYTE, 1);
}

// tdmpi_sendrecv is MPI_Sendrecv with a checked receive. The send is posted
// once (s->sent) and the receive waits as tdmpi_recv does, but the call
// returns TDMPI_AGAIN only once MPI is done with sbuf: Go may move or free
// a buffer it passed to C once the call returns, and a send past the eager
// limit reads its buffer until the peer has matched it.
static int tdmpi_sendrecv(const tdmpi_mem *sbuf, int scount, tdmpi_word sdt, int dest, int stag,
	tdmpi_mem *rbuf, int rcount, tdmpi_word rdt, long long cap, int src, int rtag, tdmpi_word c,
	tdmpi_word base, long long size, tdmpi_status *s) {
	MPI_Request req = MPI_REQUEST_NULL;
	if (!s->sent) {
		int rc = MPI_Isend(sbuf, scount, TDMPI_TYPE(sdt), dest, stag, TDMPI_COMM(c), &req);
		if (rc != MPI_SUCCESS) return rc;
		s->sent = 1;
	} else {
		req = (MPI_Request)s->req;
	}
	for (;;) {
		int rrc = tdmpi_recv(rbuf, rcount, rdt, cap, src, rtag, c, base, size, s);
		if (rrc != TDMPI_AGAIN) {
			int rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
			s->req = (tdmpi_word)req;
			return rrc != MPI_SUCCESS ? rrc : rc;
		}
		int sent = 0;
		int rc = MPI_Test(&req, &sent, MPI_STATUS_IGNORE);
		s->req = (tdmpi_word)req;
		if (rc != MPI_SUCCESS || sent) return rc != MPI_SUCCESS ? rc : TDMPI_AGAIN;
	}
}

static inline int tdmpi_probe(int src, int tag, tdmpi_word c, tdmpi_status *s) {
	return tdmpi_waited(tdmpi_wait_mprobe(1, src, tag, TDMPI_COMM(c), NULL, s), s);
}

static inline int tdmpi_iprobe(int src, int tag, tdmpi_word c, int *flag, tdmpi_status *s) {
	int rc = MPI_Iprobe(src, tag, TDMPI_COMM(c), flag, &s->st);
	return *flag ? tdmpi_finish(rc, s, MPI_BYTE, 1) : rc;
}

static inline int tdmpi_mprobe(int src, int tag, tdmpi_word c, tdmpi_word *m, tdmpi_status *s) {
	MPI_Message mm = MPI_MESSAGE_NULL;
	int rc = tdmpi_waited(tdmpi_wait_mprobe(0, src, tag, TDMPI_COMM(c), &mm, s), s);
	if (rc != TDMPI_AGAIN) *m = (tdmpi_word)mm;
	return rc;
}

static inline int tdmpi_improbe(int src, int tag, tdmpi_word c, int *flag, tdmpi_word *m, tdmpi_status *s) {
	MPI_Message mm = MPI_MESSAGE_NULL;
	int rc = MPI_Improbe(src, tag, TDMPI_COMM(c), flag, &mm, &s->st);
	if (*flag) *m = (tdmpi_word)mm;
	return *flag ? tdmpi_finish(rc, s, MPI_BYTE, 1) : rc;
}

// tdmpi_imrecv is MPI_Imrecv of the matched message *m (a word).
static inline int tdmpi_imrecv(tdmpi_mem *buf, int count, MPI_Datatype dt, tdmpi_word *m, MPI_Request *q) {
	MPI_Message mm = TDMPI_MESSAGE(*m);
	int rc = MPI_Imrecv(buf, count, dt, &mm, q);
	*m = (tdmpi_word)mm;
	return rc;
}

// Signals Go's runtime handles itself. MPI libraries (UCX inside them) may
// install handlers for them in MPI_Init, which would kill the process on
// the first fault Go expects to turn into a panic: tdmpi_sig_save records
// the handlers before MPI_Init and tdmpi_sig_restore puts back any MPI
// replaced.
typedef struct { struct sigaction sa[4]; } tdmpi_sigsave;
static const int tdmpi_fault_signals[4] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static inline void tdmpi_sig_save(tdmpi_sigsave *s) {
	for (int i = 0; i < 4; i++) sigaction(tdmpi_fault_signals[i], NULL, &s->sa[i]);
}
static inline void tdmpi_sig_restore(const tdmpi_sigsave *s) {
	for (int i = 0; i < 4; i++) {
		struct sigaction cur;
		if (sigaction(tdmpi_fault_signals[i], NULL, &cur) != 0) continue;
		if (cur.sa_sigaction != s->sa[i].sa_sigaction || cur.sa_flags != s->sa[i].sa_flags) {
			sigaction(tdmpi_fault_signals[i], &s->sa[i], NULL);
		}
	}
}

// tdmpi_request_free frees a request of a failed, partly started operation.
static inline int tdmpi_request_free(MPI_Request r) { return MPI_Request_free(&r); }

// Collective wrappers, taking buffers as tdmpi_mem (see tdmpi_word), that
// substitute MPI_IN_PLACE, so Go never holds it.
static inline int tdmpi_bcast(tdmpi_mem *buf, int n, MPI_Datatype dt, int root, MPI_Comm c) {
	return MPI_Bcast(buf, n, dt, root, c);
}
static inline int tdmpi_reduce(const tdmpi_mem *s, int inplace, tdmpi_mem *r, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm c) {
	return MPI_Reduce(inplace ? MPI_IN_PLACE : s, r, n, dt, op, root, c);
}
static inline int tdmpi_allreduce(const tdmpi_mem *s, int inplace, tdmpi_mem *r, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
	return MPI_Allreduce(inplace ? MPI_IN_PLACE : s, r, n, dt, op, c);
}
static inline int tdmpi_gather(const tdmpi_mem *s, int inplace, int sn, tdmpi_mem *r, int rn, MPI_Datatype dt, int root, MPI_Comm c) {
	return MPI_Gather(inplace ? MPI_IN_PLACE : s, sn, dt, r, rn, dt, root, c);
}
static inline int tdmpi_allgather(const tdmpi_mem *s, int inplace, int sn, tdmpi_mem *r, int rn, MPI_Datatype dt, MPI_Comm c) {
	return MPI_Allgather(inplace ? MPI_IN_PLACE : s, sn, dt, r, rn, dt, c);
}
static inline int tdmpi_scatter(const tdmpi_mem *s, int sn, tdmpi_mem *r, int inplace, int rn, MPI_Datatype dt, int root, MPI_Comm c) {
	return MPI_Scatter(s, sn, dt, inplace ? MPI_IN_PLACE : r, rn, dt, root, c);
}
static inline int tdmpi_gatherv(const tdmpi_mem *s, int inplace, int sn, tdmpi_mem *r, const int *counts, const int *displs, MPI_Datatype dt, int root, MPI_Comm c) {
	return MPI_Gatherv(inplace ? MPI_IN_PLACE : s, sn, dt, r, counts, displs, dt, root, c);
}
static inline int tdmpi_allgatherv(const tdmpi_mem *s, int inplace, int sn, tdmpi_mem *r, const int *counts, const int *displs, MPI_Datatype dt, MPI_Comm c) {
	return MPI_Allgatherv(inplace ? MPI_IN_PLACE : s, sn, dt, r, counts, displs, dt, c);
}
static inline int tdmpi_scatterv(const tdmpi_mem *s, const int *counts, const int *displs, tdmpi_mem *r, int inplace, int rn, MPI_Datatype dt, int root, MPI_Comm c) {
	return MPI_Scatterv(s, counts, displs, dt, inplace ? MPI_IN_PLACE : r, rn, dt, root, c);
}
static inline int tdmpi_alltoall(const tdmpi_mem *s, int inplace, int n, tdmpi_mem *r, MPI_Datatype dt, MPI_Comm c) {
	return MPI_Alltoall(inplace ? MPI_IN_PLACE : s, n, dt, r, n, dt, c);
}
static inline int tdmpi_scan(const tdmpi_mem *s, int inplace, tdmpi_mem *r, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c) {
	return MPI_Scan(inplace ? MPI_IN_PLACE : s, r, n, dt, op, c);
}

// Nonblocking collectives, with buffers and MPI_IN_PLACE as above.
static inline int tdmpi_ibcast(tdmpi_mem *buf, int n, MPI_Datatype dt, int root, MPI_Comm c, MPI_Request *q) {
	return MPI_Ibcast(buf, n, dt, root, c, q);
}
static inline int tdmpi_iallreduce(const tdmpi_mem *s, int inplace, tdmpi_mem *r, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm c, MPI_Request *q) {
	return MPI_Iallreduce(inplace ? MPI_IN_PLACE : s, r, n, dt, op, c, q);
}
static inline int tdmpi_ireduce(const tdmpi_mem *s, int inplace, tdmpi_mem *r, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm c, MPI_Request *q) {
	return MPI_Ireduce(inplace ? MPI_IN_PLACE : s, r, n, dt, op, root, c, q);
}
static inline int tdmpi_iallgatherv(const tdmpi_mem *s, int inplace, int sn, tdmpi_mem *r, const int *counts, const int *displs, MPI_Datatype dt, MPI_Comm c, MPI_Request *q) {
	return MPI_Iallgatherv(inplace ? MPI_IN_PLACE : s, sn, dt, r, counts, displs, dt, c, q);
}
static inline int tdmpi_igatherv(const tdmpi_mem *s, int inplace, int sn, tdmpi_mem *r, const int *counts, const int *displs, MPI_Datatype dt, int root, MPI_Comm c, MPI_Request *q) {
	return MPI_Igatherv(inplace ? MPI_IN_PLACE : s, sn, dt, r, counts, displs, dt, root, c, q);
}
static inline int tdmpi_iscatterv(const tdmpi_mem *s, const int *counts, const int *displs, tdmpi_mem *r, int inplace, int rn, MPI_Datatype dt, int root, MPI_Comm c, MPI_Request *q) {
	return MPI_Iscatterv(s, counts, displs, dt, inplace ? MPI_IN_PLACE : r, rn, dt, root, c, q);
}

// tdmpi_tag_ub reads MPI_TAG_UB: the attribute value is a pointer to int.
// It stores -1 if c has no such attribute (only MPI_COMM_WORLD is sure to).
static inline int tdmpi_tag_ub(MPI_Comm c, int *ub) {
	int *p = NULL, flag = 0;
	int rc = MPI_Comm_get_attr(c, MPI_TAG_UB, &p, &flag);
	if (rc != MPI_SUCCESS) return rc;
	*ub = (flag && p != NULL) ? *p : -1;
	return MPI_SUCCESS;
}

#endif
