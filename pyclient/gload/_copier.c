/*
 * gload's native batch copier: a thread with no Python in it that takes doorbell batches out of a shared-memory
 * ring (loader/shm/doorbell.go), makes the keys a training loop asked for (input_ids, attention_mask, labels,
 * position_ids, cu_seqlens, index, lengths; int32 or int64; for a mixture the index split per source, the source key
 * and the rows and tokens per source) into an output buffer the Python client gave it, returns the slot to the
 * server, and marks the batch ready. With CUDA the keys are made in a pinned staging buffer and one
 * DMA on a side stream takes them to a device buffer, recorded with an event that next() makes the training stream
 * wait on (no host sync anywhere). next() then costs the loop a ready check, that wait and the tensor views: no
 * Python thread converts batches, so nothing waits for the GIL while the loop holds it.
 *
 * The Python side is gload/_native.py (ctypes). This file holds no Python API, so one build serves every Python
 * version. Must not touch: anything but the ring's header words, the released word and the waiting flags (the
 * protocol in loader/shm/futex.go), the output buffers it was given, and its own staging memory.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define GL_EXPORT __attribute__((visibility("default")))

/* Keys, in the codes gload/_native.py uses. */
enum { K_IDS, K_MASK, K_LABELS, K_POS, K_CU, K_INDEX, K_LENGTHS, K_SOURCE, K_COUNT };
/* Slot fields, in SlotLayout's order as the Python side passes them. */
enum { F_IDS, F_LENGTHS, F_INDEX, F_POS, F_CU, F_LABELS, F_COUNT };
/* Entry states (a futex word). */
enum { S_EMPTY = 0, S_FREE = 1, S_FILLING = 2, S_READY = 3, S_FAILED = 4, S_NEED = 5 };
/* Words of an entry's info. */
enum {
	I_SEQ, I_GLOBAL, I_RANK_STEP, I_ROWS, I_LENGTH, I_PIECES, I_CU_LEN, I_TRAINED, I_REAL, I_BYTES,
	I_OFF, /* K_COUNT offsets follow: UINT64_MAX where the key is absent */
	I_ERROR = I_OFF + K_COUNT, I_NEED, I_DETAIL,
	I_COUNTS, /* mixtures: where the rows and tokens per source are (after the keys, not copied to a device) */
	I_WORDS
};
/* Errors (I_ERROR). */
enum { E_NONE, E_SLOT_CHANGED, E_FIELD_OVERFLOW, E_EMPTY_SHAPE, E_CUDA, E_SOURCE };

#define HEADER_WORDS 8
#define ABSENT UINT64_MAX

typedef struct {
	int (*ctx_set)(void *);
	int (*ctx_push)(void *);
	int (*ctx_pop)(void **);
	int (*primary_retain)(void **, int);
	int (*primary_release)(int);
	int (*device_get)(int *, int);
	int (*mem_host_alloc)(void **, size_t, unsigned);
	int (*mem_free_host)(void *);
	int (*memcpy_htod)(uint64_t, const void *, size_t, void *);
	int (*event_create)(void **, unsigned);
	int (*event_destroy)(void *);
	int (*event_record)(void *, void *);
	int (*event_sync)(void *);
	int (*stream_wait)(void *, void *, unsigned);
} cuda_api;

typedef struct {
	uint32_t state; /* futex word */
	uint32_t pad;
	uint64_t out;      /* output buffer: a device address (CUDA) or a host pointer */
	uint64_t cap;      /* its bytes */
	uint64_t info[I_WORDS];
	void *copied;      /* CUDA: the DMA into out is done */
	void *fence;       /* CUDA: where the consumer's stream stood when out was allocated on it */
	int fence_set, copied_set;
	uint8_t *staging;  /* CUDA: pinned */
	uint64_t staging_cap;
	const uint8_t *counts; /* mixtures: the batch's counts, in out or staging */
} entry;

/* What gload/_native.py fills in (the same struct there). */
typedef struct {
	uint64_t ring;          /* address of the mapping */
	uint64_t slot_bytes;
	uint64_t headers;       /* address of slot 0's header */
	uint64_t released;      /* address of the released word */
	uint64_t server_waiting;
	uint64_t client_waiting;
	uint64_t batches;
	uint64_t field_off[F_COUNT];
	uint32_t slots;
	uint32_t low_water;
	uint32_t entries;
	int32_t key_bytes[K_COUNT]; /* element bytes of each key handed out; 0: not asked for */
	int32_t key_order[K_COUNT]; /* keys in the order their bytes follow each other in out; -1 ends it */
	int32_t stored_labels;
	int32_t shift_labels;
	int64_t ignore_index;
	int32_t position_start;
	int32_t cuda;           /* 0: host output, no CUDA */
	int32_t device;
	uint64_t side_stream;
	int32_t spin_us;
	uint32_t sources;        /* mixtures: how many; 0 otherwise */
	uint64_t source_offsets; /* mixtures: address of sources int64 offsets (index v is row v - offsets[s] of s) */
	uint64_t counts_out;     /* mixtures: where gl_take copies a batch's rows and tokens per source (2 × sources) */
} config;

typedef struct {
	config cfg;
	cuda_api cu;
	void *ctx; /* the device's primary context, retained (CUDA) */
	int dev;
	entry *e;
	pthread_t thread;
	int started;
	uint32_t stop;
	uint32_t c_waiting;  /* the copier sleeps on gave */
	uint32_t gave;       /* futex word: entries given back to the copier (counts, wraps) */
	uint32_t py_waiting; /* the client sleeps on an entry's state */
	char err[256];
} copier;

static long futex_wait(uint32_t *addr, uint32_t val, long ns)
{
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
	return syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(uint32_t *addr) { syscall(SYS_futex, addr, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0); }

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t load_acq(uint64_t addr) { return __atomic_load_n((uint64_t *)addr, __ATOMIC_ACQUIRE); }

static void fail(copier *c, entry *e, int code, uint64_t detail, const char *what)
{
	e->info[I_ERROR] = (uint64_t)code;
	e->info[I_DETAIL] = detail;
	strncpy(c->err, what, sizeof(c->err) - 1);
	__atomic_store_n(&e->state, S_FAILED, __ATOMIC_SEQ_CST);
	futex_wake(&e->state);
}

/* Waits until the entry's state is want (or stop): 0, or -1 on stop. It sleeps on the copier's gave word, not on
 * the entry: a give wakes it only once half the entries ahead are taken, and that give is of another entry. */
static int wait_state(copier *c, entry *e, uint32_t want)
{
	for (;;) {
		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == want)
			return 0;
		if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
			return -1;
		__atomic_store_n(&c->c_waiting, 1, __ATOMIC_SEQ_CST);
		uint32_t g = __atomic_load_n(&c->gave, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&e->state, __ATOMIC_SEQ_CST) != want)
			futex_wait(&c->gave, g, 5000000L); /* (the timeout is a safety net) */
		__atomic_store_n(&c->c_waiting, 0, __ATOMIC_RELAXED);
	}
}

/* Waits for batch seq's header word: spins spin_us (yielding), then sleeps on it (the server wakes a waiting client;
 * the timeouts are a safety net). Without the spin a tight loop over the doorbell got half the batches per second
 * on 2 cores (each batch a futex wake-up of this thread). 0, or -1 on stop. */
static int wait_slot(copier *c, uint64_t word, uint64_t seq)
{
	uint64_t start = now_ns(), spin = (uint64_t)c->cfg.spin_us * 1000ull;
	long pause = 20000L;
	uint32_t *cw = (uint32_t *)c->cfg.client_waiting;
	while (load_acq(word) != seq + 1) {
		if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
			return -1;
		if (now_ns() - start < spin) {
			sched_yield();
			continue;
		}
		__atomic_store_n(cw, 1, __ATOMIC_SEQ_CST);
		uint64_t seen = __atomic_load_n((uint64_t *)word, __ATOMIC_SEQ_CST);
		if (seen != seq + 1)
			futex_wait((uint32_t *)word, (uint32_t)seen, pause); /* the low half of the word (little-endian) */
		__atomic_store_n(cw, 0, __ATOMIC_RELAXED);
		if (pause < 1000000L)
			pause *= 2;
	}
	return 0;
}

/* Returns every batch up to seq to the server; wakes it if it sleeps for that and few batches are announced ahead
 * (its own timed poll sees the release otherwise). Mirrors Stream._release. */
static void release(copier *c, uint64_t seq)
{
	uint64_t n = seq + 1;
	__atomic_store_n((uint64_t *)c->cfg.released, n, __ATOMIC_SEQ_CST);
	uint32_t wake_at = __atomic_load_n((uint32_t *)c->cfg.server_waiting, __ATOMIC_SEQ_CST);
	if (!wake_at || (((uint32_t)n - wake_at) & 0xffffffffu) >= 0x80000000u)
		return;
	uint64_t ahead = n + c->cfg.low_water;
	if (ahead < c->cfg.batches &&
	    load_acq(c->cfg.headers + (ahead % c->cfg.slots) * HEADER_WORDS * 8) == ahead + 1)
		return;
	futex_wake((uint32_t *)c->cfg.released);
}

static inline uint64_t align64(uint64_t n) { return (n + 63) & ~63ull; }

/* dst[i] = src[i] for i in [0, n), widened to bytes. */
static void put_ints(uint8_t *dst, int bytes, const int32_t *src, uint64_t n)
{
	if (bytes == 4) {
		memcpy(dst, src, n * 4);
	} else {
		int64_t *d = (int64_t *)dst;
		for (uint64_t i = 0; i < n; i++)
			d[i] = src[i];
	}
}

static inline void put_one(uint8_t *dst, int bytes, uint64_t i, int64_t v)
{
	if (bytes == 4)
		((int32_t *)dst)[i] = (int32_t)v;
	else
		((int64_t *)dst)[i] = v;
}

/* dst[i] = v for i in [a, b) (elements of bytes 4 or 8). Plain loops per element size, so that the compiler
 * vectorizes them (-O3). */
static void fill(uint8_t *dst, int bytes, uint64_t a, uint64_t b, int64_t v)
{
	if (bytes == 4) {
		int32_t *d = (int32_t *)dst, w = (int32_t)v;
		for (uint64_t i = a; i < b; i++)
			d[i] = w;
	} else {
		int64_t *d = (int64_t *)dst;
		for (uint64_t i = a; i < b; i++)
			d[i] = v;
	}
}

/*
 * The keys of one batch from its slot into out, at the offsets in info (set here). The rules are Converter._np_batch's
 * (gload/_convert.py): attention_mask is t < lengths[r]; computed labels are input_ids where the mask is set, else
 * ignore_index, and ignore_index on a packed batch's position_start positions; stored labels (SFT) keep the slot's
 * -100 (as ignore_index); shift_labels moves targets one to the left with ignore_index last; position_ids and
 * cu_seqlens exist for packed batches only. Returns 0, or an error code (info[I_DETAIL]: which field).
 */
GL_EXPORT int gl_convert(const config *cfg, const uint8_t *slot, const uint64_t *words, uint8_t *out, uint64_t cap,
			 uint64_t *info)
{
	uint64_t rows = words[3] & 0xffffffffu, length = words[3] >> 32;
	uint64_t pieces = words[4] & 0xffffffffu, cu_len = words[4] >> 32;
	uint64_t cells = rows * length;
	int packed = cu_len > 0;
	info[I_ROWS] = rows;
	info[I_LENGTH] = length;
	info[I_PIECES] = pieces;
	info[I_CU_LEN] = cu_len;
	info[I_TRAINED] = words[5];
	if (rows == 0 || length == 0)
		return E_EMPTY_SHAPE;
	uint64_t count[F_COUNT] = {cells, rows, pieces, packed ? cells : 0, cu_len, cfg->stored_labels ? cells : 0};
	uint64_t size[F_COUNT] = {4, 4, 8, 4, 4, 4};
	for (int f = 0; f < F_COUNT; f++) {
		if (count[f] == 0)
			continue;
		if (cfg->field_off[f] > cfg->slot_bytes || count[f] > (cfg->slot_bytes - cfg->field_off[f]) / size[f]) {
			info[I_DETAIL] = (uint64_t)f;
			return E_FIELD_OVERFLOW;
		}
	}
	const int32_t *ids = (const int32_t *)(slot + cfg->field_off[F_IDS]);
	const int32_t *lens = (const int32_t *)(slot + cfg->field_off[F_LENGTHS]);
	const int32_t *pos = (const int32_t *)(slot + cfg->field_off[F_POS]);
	const int32_t *stored = (const int32_t *)(slot + cfg->field_off[F_LABELS]);
	uint64_t elems[K_COUNT] = {cells, cells, cells, packed ? cells : 0, packed ? cu_len : 0, pieces, rows, pieces};
	uint64_t nsrc = cfg->sources;
	int present[K_COUNT];
	uint64_t end = 0;
	for (int k = 0; k < K_COUNT; k++) {
		present[k] = 0;
		info[I_OFF + k] = ABSENT;
	}
	for (int i = 0; i < K_COUNT && cfg->key_order[i] >= 0; i++) {
		int k = cfg->key_order[i];
		if (cfg->key_bytes[k] == 0 || ((k == K_POS || k == K_CU) && !packed) || (k == K_SOURCE && !nsrc))
			continue;
		present[k] = 1;
		info[I_OFF + k] = end;
		end += align64(elems[k] * (uint64_t)cfg->key_bytes[k]);
	}
	uint64_t real = 0;
	int full = 1;
	for (uint64_t r = 0; r < rows; r++) {
		int64_t l = lens[r];
		if (l < (int64_t)length)
			full = 0;
		real += (uint64_t)(l < 0 ? 0 : l);
	}
	info[I_REAL] = real;
	info[I_BYTES] = end;
	info[I_COUNTS] = end;
	info[I_NEED] = end + 16 * nsrc;
	if (nsrc && !packed && pieces != rows) {
		info[I_DETAIL] = F_INDEX;
		return E_FIELD_OVERFLOW;
	}
	if (info[I_NEED] > cap)
		return -1; /* the caller gives a larger buffer */
	if (present[K_IDS])
		put_ints(out + info[I_OFF + K_IDS], cfg->key_bytes[K_IDS], ids, cells);
	if (present[K_MASK]) {
		uint8_t *m = out + info[I_OFF + K_MASK];
		int b = cfg->key_bytes[K_MASK];
		for (uint64_t r = 0; r < rows; r++) {
			int64_t l = full ? (int64_t)length : lens[r];
			uint64_t n = l < 0 ? 0 : ((uint64_t)l > length ? length : (uint64_t)l);
			uint8_t *row = m + r * length * (uint64_t)b;
			fill(row, b, 0, n, 1);
			fill(row, b, n, length, 0);
		}
	}
	if (present[K_LABELS]) {
		uint8_t *lab = out + info[I_OFF + K_LABELS];
		int b = cfg->key_bytes[K_LABELS];
		int64_t ign = cfg->ignore_index;
		uint64_t shift = cfg->shift_labels ? 1 : 0;
		/* target t of a row is base[t + shift], base being the unshifted labels; past the row: ignore_index */
		for (uint64_t r = 0; r < rows; r++) {
			uint8_t *row = lab + r * length * (uint64_t)b;
			if (cfg->stored_labels) {
				const int32_t *src = stored + r * length + shift;
				uint64_t n = length - shift;
				if (ign == -100) {
					put_ints(row, b, src, n);
				} else {
					for (uint64_t t = 0; t < n; t++)
						put_one(row, b, t, src[t] == -100 ? ign : src[t]);
				}
				fill(row, b, n, length, ign);
			} else if (packed) {
				const int32_t *src = ids + r * length, *p = pos + r * length;
				int64_t l = full ? (int64_t)length : lens[r];
				for (uint64_t t = 0; t < length; t++) {
					uint64_t u = t + shift;
					int64_t v = (u >= length || (int64_t)u >= l || p[u] == cfg->position_start) ? ign : src[u];
					put_one(row, b, t, v);
				}
			} else {
				int64_t l = full ? (int64_t)length : lens[r];
				uint64_t n = l < 0 ? 0 : ((uint64_t)l > length ? length : (uint64_t)l);
				n = n > shift ? n - shift : 0; /* targets inside the row's tokens */
				put_ints(row, b, ids + r * length + shift, n);
				fill(row, b, n, length, ign);
			}
		}
	}
	if (present[K_POS])
		put_ints(out + info[I_OFF + K_POS], cfg->key_bytes[K_POS], pos, cells);
	if (present[K_CU])
		put_ints(out + info[I_OFF + K_CU], cfg->key_bytes[K_CU],
			 (const int32_t *)(slot + cfg->field_off[F_CU]), cu_len);
	if (nsrc) {
		/* Converter._split_sources: source s of index entry v is the last s with offsets[s] <= v; the index handed
		 * out is v - offsets[s]; rows (documents) and, unpacked, tokens are counted per source. */
		const int64_t *offs = (const int64_t *)cfg->source_offsets;
		const int64_t *idx = (const int64_t *)(slot + cfg->field_off[F_INDEX]);
		int64_t *nrows = (int64_t *)(out + info[I_COUNTS]), *ntok = nrows + nsrc;
		memset(nrows, 0, 16 * nsrc);
		uint8_t *di = present[K_INDEX] ? out + info[I_OFF + K_INDEX] : NULL;
		int64_t *ds = present[K_SOURCE] ? (int64_t *)(out + info[I_OFF + K_SOURCE]) : NULL;
		for (uint64_t i = 0; i < pieces; i++) {
			int64_t v = idx[i];
			uint64_t lo = 0, hi = nsrc; /* first s with offsets[s] > v */
			while (lo < hi) {
				uint64_t mid = (lo + hi) / 2;
				if (offs[mid] <= v)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo == 0) {
				info[I_DETAIL] = i;
				return E_SOURCE;
			}
			uint64_t src = lo - 1;
			if (di)
				put_one(di, cfg->key_bytes[K_INDEX], i, v - offs[src]);
			if (ds)
				ds[i] = (int64_t)src;
			nrows[src]++;
			if (!packed)
				ntok[src] += lens[i];
		}
	} else if (present[K_INDEX]) {
		uint8_t *d = out + info[I_OFF + K_INDEX];
		const uint8_t *s = slot + cfg->field_off[F_INDEX];
		if (cfg->key_bytes[K_INDEX] == 8) {
			memcpy(d, s, pieces * 8);
		} else {
			for (uint64_t i = 0; i < pieces; i++)
				((int32_t *)d)[i] = (int32_t)((const int64_t *)s)[i];
		}
	}
	if (present[K_LENGTHS])
		put_ints(out + info[I_OFF + K_LENGTHS], cfg->key_bytes[K_LENGTHS], lens, rows);
	return 0;
}

static int cuda_ok(copier *c, entry *e, int rc, const char *what)
{
	if (rc == 0)
		return 1;
	char msg[128];
	snprintf(msg, sizeof msg, "%s failed with CUDA error %d", what, rc);
	fail(c, e, E_CUDA, (uint64_t)rc, msg);
	return 0;
}

static void *run(void *arg)
{
	copier *c = arg;
	config *cfg = &c->cfg;
	if (cfg->cuda && c->cu.ctx_set(c->ctx) != 0) {
		fail(c, &c->e[0], E_CUDA, 0, "cuCtxSetCurrent on the copier thread failed");
		return NULL;
	}
	for (uint64_t seq = 0; seq < cfg->batches; seq++) {
		entry *e = &c->e[seq % cfg->entries];
		uint64_t slot = seq % cfg->slots;
		uint64_t hdr = cfg->headers + slot * HEADER_WORDS * 8;
		if (wait_state(c, e, S_FREE) != 0 || wait_slot(c, hdr, seq) != 0)
			return NULL;
		__atomic_store_n(&e->state, S_FILLING, __ATOMIC_RELAXED);
		uint64_t words[6];
		for (int i = 0; i < 6; i++)
			words[i] = load_acq(hdr + (uint64_t)i * 8);
		const uint8_t *src = (const uint8_t *)(cfg->ring + slot * cfg->slot_bytes);
		e->info[I_SEQ] = seq;
		e->info[I_GLOBAL] = words[1];
		e->info[I_RANK_STEP] = words[2];
		e->info[I_ERROR] = E_NONE;
		uint8_t *dst = (uint8_t *)e->out;
		uint64_t cap = e->cap;
		if (cfg->cuda) { /* the staging buffer's last copy must be done before it is written again */
			if (e->copied_set && !cuda_ok(c, e, c->cu.event_sync(e->copied), "cuEventSynchronize"))
				return NULL;
			e->copied_set = 0;
			dst = e->staging;
			cap = e->staging_cap;
		}
		int rc;
		for (;;) {
			rc = gl_convert(cfg, src, words, dst, cap, e->info);
			if (rc != -1)
				break;
			uint64_t need = e->info[I_NEED];
			if (cfg->cuda && e->staging_cap < need) { /* grow the staging buffer first */
				uint64_t room = 1ull << 16;
				while (room < need)
					room <<= 1;
				if (e->staging)
					c->cu.mem_free_host(e->staging);
				e->staging = NULL;
				e->staging_cap = 0;
				void *p = NULL;
				if (!cuda_ok(c, e, c->cu.mem_host_alloc(&p, room, 0), "cuMemHostAlloc"))
					return NULL;
				e->staging = p;
				e->staging_cap = room;
				dst = e->staging;
				cap = room;
				if (e->cap >= need)
					continue;
			}
			if (e->cap < need) { /* the client gives a larger output buffer, then this batch is made again */
				__atomic_store_n(&e->state, S_NEED, __ATOMIC_SEQ_CST);
				if (__atomic_load_n(&c->py_waiting, __ATOMIC_SEQ_CST))
					futex_wake(&e->state);
				if (wait_state(c, e, S_FREE) != 0)
					return NULL;
				__atomic_store_n(&e->state, S_FILLING, __ATOMIC_RELAXED);
				if (!cfg->cuda) {
					dst = (uint8_t *)e->out;
					cap = e->cap;
				}
			}
		}
		if (rc != 0) {
			const char *what = rc == E_EMPTY_SHAPE ? "empty shape" :
					   rc == E_SOURCE ? "an index entry below the first source" : "a field does not fit its slot";
			fail(c, e, rc, e->info[I_DETAIL], what);
			return NULL;
		}
		if (load_acq(hdr) != seq + 1) {
			fail(c, e, E_SLOT_CHANGED, slot, "slot changed while its batch was read");
			return NULL;
		}
		e->counts = dst + e->info[I_COUNTS];
		release(c, seq);
		if (cfg->cuda) {
			/* The output buffer was allocated on the consumer's stream: the copy waits for that stream's position
			 * then (torch's caching allocator orders a block's reuse on its own stream only). */
			void *side = (void *)cfg->side_stream;
			if (e->fence_set && !cuda_ok(c, e, c->cu.stream_wait(side, e->fence, 0), "cuStreamWaitEvent"))
				return NULL;
			e->fence_set = 0;
			if (!cuda_ok(c, e, c->cu.memcpy_htod(e->out, e->staging, e->info[I_BYTES], side), "cuMemcpyHtoDAsync") ||
			    !cuda_ok(c, e, c->cu.event_record(e->copied, side), "cuEventRecord"))
				return NULL;
			e->copied_set = 1;
		}
		__atomic_store_n(&e->state, S_READY, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&c->py_waiting, __ATOMIC_SEQ_CST))
			futex_wake(&e->state);
	}
	return NULL;
}

#define LOAD(field, name)                                                                                          \
	do {                                                                                                       \
		*(void **)&c->cu.field = dlsym(lib, name);                                                         \
		if (!c->cu.field) {                                                                                \
			snprintf(c->err, sizeof c->err, "libcuda.so.1 has no %s", name);                          \
			return -1;                                                                                 \
		}                                                                                                  \
	} while (0)

static int load_cuda(copier *c)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		snprintf(c->err, sizeof c->err, "libcuda.so.1: %s", dlerror());
		return -1;
	}
	LOAD(ctx_set, "cuCtxSetCurrent");
	LOAD(ctx_push, "cuCtxPushCurrent_v2");
	LOAD(ctx_pop, "cuCtxPopCurrent_v2");
	LOAD(primary_retain, "cuDevicePrimaryCtxRetain");
	LOAD(primary_release, "cuDevicePrimaryCtxRelease_v2");
	LOAD(device_get, "cuDeviceGet");
	LOAD(mem_host_alloc, "cuMemHostAlloc");
	LOAD(mem_free_host, "cuMemFreeHost");
	LOAD(memcpy_htod, "cuMemcpyHtoDAsync_v2");
	LOAD(event_create, "cuEventCreate");
	LOAD(event_destroy, "cuEventDestroy_v2");
	LOAD(event_record, "cuEventRecord");
	LOAD(event_sync, "cuEventSynchronize");
	LOAD(stream_wait, "cuStreamWaitEvent");
	if (c->cu.device_get(&c->dev, c->cfg.device) != 0 || c->cu.primary_retain(&c->ctx, c->dev) != 0) {
		snprintf(c->err, sizeof c->err, "CUDA device %d: no primary context", c->cfg.device);
		return -1;
	}
	/* The device's primary context (torch's) around the calls made on the client's threads, whatever device is
	 * current there. */
	if (c->cu.ctx_push(c->ctx) != 0) {
		snprintf(c->err, sizeof c->err, "cuCtxPushCurrent failed");
		return -1;
	}
	int rc = 0;
	for (uint32_t i = 0; i < c->cfg.entries && rc == 0; i++) {
		/* CU_EVENT_DISABLE_TIMING = 2 */
		if (c->cu.event_create(&c->e[i].copied, 2) != 0 || c->cu.event_create(&c->e[i].fence, 2) != 0) {
			snprintf(c->err, sizeof c->err, "cuEventCreate failed");
			rc = -1;
		}
	}
	void *popped = NULL;
	c->cu.ctx_pop(&popped);
	return rc;
}

/* A copier for cfg (copied); NULL with err filled on failure. Called on a thread where CUDA is current (CUDA). */
GL_EXPORT copier *gl_new(const config *cfg, char *err, size_t errlen)
{
	copier *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->cfg = *cfg;
	if (c->cfg.entries == 0 || c->cfg.slots == 0) {
		snprintf(err, errlen, "no entries or no slots");
		free(c);
		return NULL;
	}
	c->e = calloc(c->cfg.entries, sizeof(entry));
	if (!c->e || (c->cfg.cuda && load_cuda(c) != 0)) {
		snprintf(err, errlen, "%s", c->e ? c->err : "out of memory");
		free(c->e);
		free(c);
		return NULL;
	}
	return c;
}

GL_EXPORT int gl_start(copier *c)
{
	if (pthread_create(&c->thread, NULL, run, c) != 0)
		return -1;
	c->started = 1;
	return 0;
}

/* Gives entry i the output buffer out of cap bytes (CUDA: allocated on the consumer's stream, which the DMA into it
 * waits for from its position now). The entry must not be READY or FILLING. */
static int give(copier *c, uint32_t i, uint64_t out, uint64_t cap, uint64_t stream)
{
	entry *e = &c->e[i];
	e->out = out;
	e->cap = cap;
	if (c->cfg.cuda) {
		void *popped = NULL;
		int rc = c->cu.ctx_push(c->ctx);
		if (rc == 0) {
			rc = c->cu.event_record(e->fence, (void *)stream);
			c->cu.ctx_pop(&popped);
		}
		if (rc != 0)
			return rc;
		e->fence_set = 1;
	}
	__atomic_store_n(&e->state, S_FREE, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&c->gave, 1, __ATOMIC_SEQ_CST);
	/* A sleeping copier is woken (a syscall on the training loop's thread) only when the batch half the entries ahead
	 * is not ready yet: it has half the ring to refill before the loop could wait. */
	uint32_t n = c->cfg.entries;
	if (__atomic_load_n(&c->c_waiting, __ATOMIC_SEQ_CST) &&
	    (n < 4 || __atomic_load_n(&c->e[(i + n / 2) % n].state, __ATOMIC_ACQUIRE) != S_READY))
		futex_wake(&c->gave);
	return 0;
}

GL_EXPORT int gl_give(copier *c, uint32_t i, uint64_t out, uint64_t cap, uint64_t stream)
{
	return give(c, i, out, cap, stream);
}

/* Batch seq if its entry holds it: copies the entry's info into info, gives the entry the next output buffer (out,
 * cap, allocated on stream) and returns S_READY (CUDA: stream waits for the batch's copy from here on). Otherwise
 * returns the entry's state and keeps out: S_NEED (info[I_NEED]: the buffer size to give with gl_give), S_FAILED (info
 * has the error), S_FREE or S_FILLING (not made yet). */
GL_EXPORT int gl_take(copier *c, uint64_t seq, uint64_t stream, uint64_t *info, uint64_t out, uint64_t cap)
{
	uint32_t i = (uint32_t)(seq % c->cfg.entries);
	entry *e = &c->e[i];
	uint32_t s = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
	if (s == S_READY && e->info[I_SEQ] != seq)
		return S_FILLING;
	if (s == S_READY || s == S_FAILED || s == S_NEED)
		memcpy(info, e->info, sizeof e->info);
	if (s != S_READY)
		return (int)s;
	if (c->cfg.sources) /* before the entry (and its staging buffer) goes back to the copier */
		memcpy((void *)c->cfg.counts_out, e->counts, 16 * (size_t)c->cfg.sources);
	int rc = 0;
	if (c->cfg.cuda) {
		void *popped = NULL;
		rc = c->cu.ctx_push(c->ctx);
		if (rc == 0) {
			rc = c->cu.stream_wait((void *)stream, e->copied, 0);
			c->cu.ctx_pop(&popped);
		}
	}
	if (rc == 0)
		rc = give(c, i, out, cap, stream);
	if (rc != 0) {
		info[I_ERROR] = E_CUDA;
		info[I_DETAIL] = (uint64_t)rc;
		snprintf(c->err, sizeof c->err, "cuStreamWaitEvent or cuEventRecord failed with CUDA error %d", rc);
		return S_FAILED;
	}
	return S_READY;
}

static inline int done(uint32_t s) { return s == S_READY || s == S_FAILED || s == S_NEED; }

/* The state of batch seq's entry. */
GL_EXPORT int gl_state(copier *c, uint64_t seq) { return (int)__atomic_load_n(&c->e[seq % c->cfg.entries].state, __ATOMIC_ACQUIRE); }

/* Waits until batch seq's entry is ready (or failed, or needs a larger buffer), at most timeout_us; returns its
 * state. Spins spin_us first, then sleeps in a futex the copier wakes (ctypes releases the GIL around this call). */
GL_EXPORT int gl_wait(copier *c, uint64_t seq, long timeout_us)
{
	entry *e = &c->e[seq % c->cfg.entries];
	uint64_t start = now_ns(), spin = (uint64_t)c->cfg.spin_us * 1000ull;
	uint64_t deadline = start + (uint64_t)(timeout_us < 0 ? 0 : timeout_us) * 1000ull;
	for (;;) {
		uint32_t s = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		uint64_t now = now_ns();
		if (done(s) || now >= deadline)
			return (int)s;
		if (now - start < spin) {
			sched_yield();
			continue;
		}
		__atomic_store_n(&c->py_waiting, 1, __ATOMIC_SEQ_CST);
		s = __atomic_load_n(&e->state, __ATOMIC_SEQ_CST);
		if (!done(s)) {
			uint64_t left = deadline - now;
			futex_wait(&e->state, s, (long)(left < 1000000ull ? left : 1000000ull));
		}
		__atomic_store_n(&c->py_waiting, 0, __ATOMIC_RELAXED);
	}
}

GL_EXPORT const char *gl_error(copier *c) { return c->err; }

/* Stops the thread (it looks at the stop flag at least every millisecond) and frees everything but the output
 * buffers (the client's). */
GL_EXPORT void gl_free(copier *c)
{
	__atomic_store_n(&c->stop, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&c->gave, 1, __ATOMIC_SEQ_CST);
	futex_wake(&c->gave);
	if (c->started)
		pthread_join(c->thread, NULL);
	if (c->cfg.cuda && c->cu.ctx_push(c->ctx) == 0) { /* (at interpreter exit the driver may be gone: leaked) */
		for (uint32_t i = 0; i < c->cfg.entries; i++) {
			entry *e = &c->e[i];
			if (e->copied_set)
				c->cu.event_sync(e->copied);
			if (e->staging)
				c->cu.mem_free_host(e->staging);
			if (e->copied)
				c->cu.event_destroy(e->copied);
			if (e->fence)
				c->cu.event_destroy(e->fence);
		}
		void *popped = NULL;
		c->cu.ctx_pop(&popped);
		c->cu.primary_release(c->dev);
	}
	free(c->e);
	free(c);
}

/* Bytes of the config struct, for the client's check that both sides agree. */
GL_EXPORT size_t gl_config_size(void) { return sizeof(config); }
GL_EXPORT size_t gl_info_words(void) { return I_WORDS; }
