/*
 * snapshot_pack.c — packed snapshots: a framework snapshot as paidb stores
 * it (issue 19, docs/design.md "Stored snapshots").
 *
 * jsonb keeps a typical snapshot in ~6 KB that lz4 takes to ~3.1 KB; its
 * JSON text compressed against a dictionary of the keys and constants
 * every OpenPAI framework carries takes ~0.6 KB without the job config,
 * which the row holds anyway.  Two formats, one dictionary:
 *
 *   1  zstd level 3: 360-560 bytes a typical snapshot.  Rows written once
 *      and read (completed jobs, history) are stored this way.
 *   2  lz4 with the same dictionary: ~1.5 times that, but ~9 us to compress where
 *      zstd takes ~30 us in a busy backend (its hash tables and code are
 *      cold at every call; lz4 copies one 16 KB table).  A job row is stored
 *      this way until its framework completes, if its text is at most 16 kB:
 *      submissions and status updates pack one at every write.
 */
#include "postgres.h"

#include <lz4.h>
#include <zstd.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "guc.h"
#include "jsonb_util.h"
#include "k8s_objects.h"
#include "snapshot_dict.h"
#include "snapshot_pack.h"

PG_FUNCTION_INFO_V1(paidb_snapshot_pack);
PG_FUNCTION_INFO_V1(paidb_snapshot_unpack);

#define PACK_FORMAT_1		1		/* zstd frame */
#define PACK_FORMAT_2		2		/* uint32 length (little-endian), lz4 block */
#define PACK_HEADER_BYTES	2
#define PACK_LENGTH_BYTES	4
/* flags: metadata.annotations.config left out (it equals job_config) */
#define PACK_FLAG_NO_CONFIG 0x01
/* zstd's level 3: 6 KB in ~10 us; 6 and up cost 3x for ~15% less */
#define PACK_LEVEL			3
/*
 * Format 2 only for text up to this size: above it zstd's fixed cost is
 * small beside the rest of the write, and lz4 keeps about twice the bytes
 * (a 1,000-task job: 109 KB against 54 KB, in its row and in the WAL of
 * every update).
 */
#define PACK_FAST_MAX_TEXT	(16 * 1024)

/*
 * zstd's contexts and the dictionary, digested once per backend.  zstd
 * allocates them with malloc; they live as long as the process.
 */
static ZSTD_CCtx *pack_cctx = NULL;
static ZSTD_DCtx *pack_dctx = NULL;
static ZSTD_CDict *pack_cdict = NULL;
static ZSTD_DDict *pack_ddict = NULL;

/*
 * lz4: a stream with the dictionary loaded, made once per process, and
 * copied into the working stream before each compression (the copy is what
 * lz4's documentation offers for a dictionary used many times; the stream
 * refers to the dictionary, which never moves).
 */
static LZ4_stream_t *lz4_dict_stream = NULL;
static LZ4_stream_t *lz4_work_stream = NULL;

/*
 * Unpacking parses the JSON text again (~35 us for a typical snapshot,
 * ~3 ms for one of 1,000 tasks), and the next update of a job unpacks what
 * the previous one packed.  So each process remembers, for each job, the
 * packed snapshot it last stored or read and what that unpacks to: one
 * entry per job, least recently used dropped first when over the byte
 * budget (paidb.snapshot_cache_size in a backend, so a write merger's
 * pooled connections skip the parse; the framework watcher sets its own
 * with paidb_snapshot_cache_enable).  Unpacking is a function of the packed
 * bytes and the job config, and an entry answers only when both are byte
 * for byte the ones it was made from: a write rolled back, or another
 * backend's write, leaves an entry that never answers again.
 */
typedef struct SnapshotCacheEntry
{
	char		name[PAIDB_FRAMEWORK_NAME_SIZE];	/* hash key */
	bytea	   *packed;
	text	   *config;			/* NULL: packed with the config inside */
	Jsonb	   *snapshot;
	Size		bytes;
	dlist_node	lru;			/* most recently used at the head */
} SnapshotCacheEntry;

static HTAB *snapshot_cache = NULL;
static dlist_head snapshot_cache_lru = DLIST_STATIC_INIT(snapshot_cache_lru);
static MemoryContext snapshot_cache_cxt = NULL;
static Size snapshot_cache_own_budget = 0;	/* 0: paidb.snapshot_cache_size */
static Size snapshot_cache_bytes = 0;

/* See snapshot_pack.h. */
void
paidb_snapshot_cache_enable(Size budget)
{
	snapshot_cache_own_budget = budget;
}

/* The byte budget now: the process's own, or the setting's (in kB). */
static Size
cache_budget(void)
{
	if (snapshot_cache_own_budget > 0)
		return snapshot_cache_own_budget;
	return (Size) paidb_snapshot_cache_kb * 1024;
}

/* The table, made on first use (a backend that never updates a job has none). */
static void
cache_create(void)
{
	HASHCTL		ctl;

	/*
	 * Blocks of 256 kB and up: malloc maps them apart from its heap.  In
	 * small blocks, among each statement's short-lived memory, 8 sessions'
	 * status updates fell to half their rate, malloc growing its heap again
	 * at every transaction and faulting the pages in.
	 */
	snapshot_cache_cxt = AllocSetContextCreate(TopMemoryContext, "paidb unpacked snapshots",
											   0, 256 * 1024, ALLOCSET_DEFAULT_MAXSIZE);
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = PAIDB_FRAMEWORK_NAME_SIZE;
	ctl.entrysize = sizeof(SnapshotCacheEntry);
	ctl.hcxt = snapshot_cache_cxt;
	snapshot_cache = hash_create("paidb unpacked snapshots", 1024, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

static bool
same_bytes(const struct varlena *a, const struct varlena *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

static struct varlena *
copy_varlena(const struct varlena *v)
{
	Size		len = VARSIZE_ANY_EXHDR(v);
	struct varlena *out = palloc(VARHDRSZ + len);

	SET_VARSIZE(out, VARHDRSZ + len);
	memcpy(VARDATA(out), VARDATA_ANY(v), len);
	return out;
}

/* Forget a job's entry. */
static void
cache_forget(SnapshotCacheEntry *e)
{
	pfree(e->packed);
	if (e->config != NULL)
		pfree(e->config);
	pfree(e->snapshot);
	snapshot_cache_bytes -= e->bytes;
	dlist_delete(&e->lru);
	hash_search(snapshot_cache, e->name, HASH_REMOVE, NULL);
}

/*
 * Whether the cache is on and can hold a job of this name.  A budget
 * lowered since (SET, a reload) is enforced here, before any use.
 */
static bool
cache_usable(const char *name)
{
	Size		budget = cache_budget();

	while (snapshot_cache_bytes > budget && !dlist_is_empty(&snapshot_cache_lru))
		cache_forget(dlist_container(SnapshotCacheEntry, lru, dlist_tail_node(&snapshot_cache_lru)));
	if (budget == 0 || name == NULL || strlen(name) >= PAIDB_FRAMEWORK_NAME_SIZE)
		return false;
	if (snapshot_cache == NULL)
		cache_create();
	return true;
}

/* Remember that the job's packed snapshot (with config) unpacks to snapshot. */
static void
cache_put(const char *name, bytea *packed, text *config, Jsonb *snapshot)
{
	SnapshotCacheEntry *e;
	bool		found;
	MemoryContext old;
	Size		bytes = VARSIZE_ANY(packed) + (config ? VARSIZE_ANY(config) : 0) + VARSIZE(snapshot);

	if (!cache_usable(name))
		return;
	e = hash_search(snapshot_cache, name, HASH_FIND, NULL);
	if (e != NULL)
		cache_forget(e);
	/* one entry may take a quarter of the budget */
	if (bytes > cache_budget() / 4)
		return;
	while (snapshot_cache_bytes + bytes > cache_budget() && !dlist_is_empty(&snapshot_cache_lru))
		cache_forget(dlist_container(SnapshotCacheEntry, lru, dlist_tail_node(&snapshot_cache_lru)));
	/* copied before the entry exists: an error leaves no half-made entry */
	old = MemoryContextSwitchTo(snapshot_cache_cxt);
	packed = (bytea *) copy_varlena((struct varlena *) packed);
	config = config ? (text *) copy_varlena((struct varlena *) config) : NULL;
	snapshot = (Jsonb *) copy_varlena((struct varlena *) snapshot);
	MemoryContextSwitchTo(old);
	e = hash_search(snapshot_cache, name, HASH_ENTER, &found);
	e->packed = packed;
	e->config = config;
	e->snapshot = snapshot;
	e->bytes = bytes;
	snapshot_cache_bytes += bytes;
	dlist_push_head(&snapshot_cache_lru, &e->lru);
}

/* A copy of what the job's packed snapshot (with config) unpacks to, if remembered; else NULL. */
static Jsonb *
cache_get(const char *name, bytea *packed, text *config)
{
	SnapshotCacheEntry *e;

	if (!cache_usable(name))
		return NULL;
	e = hash_search(snapshot_cache, name, HASH_FIND, NULL);
	if (e == NULL || !same_bytes((struct varlena *) e->packed, (struct varlena *) packed) ||
		!same_bytes((struct varlena *) e->config, (struct varlena *) config))
		return NULL;
	dlist_move_head(&snapshot_cache_lru, &e->lru);
	return (Jsonb *) copy_varlena((struct varlena *) e->snapshot);
}

static void
out_of_memory(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OUT_OF_MEMORY),
			 errmsg("out of memory"),
			 errdetail("Could not set up the snapshot compressor.")));
}

static void
ensure_compressor(void)
{
	if (pack_cdict == NULL)
	{
		if (pack_cctx == NULL && (pack_cctx = ZSTD_createCCtx()) == NULL)
			out_of_memory();
		pack_cdict = ZSTD_createCDict(paidb_snapshot_dict_v1, sizeof(paidb_snapshot_dict_v1) - 1,
									  PACK_LEVEL);
		if (pack_cdict == NULL)
			out_of_memory();
	}
}

static void
ensure_decompressor(void)
{
	if (pack_ddict == NULL)
	{
		if (pack_dctx == NULL && (pack_dctx = ZSTD_createDCtx()) == NULL)
			out_of_memory();
		pack_ddict = ZSTD_createDDict(paidb_snapshot_dict_v1, sizeof(paidb_snapshot_dict_v1) - 1);
		if (pack_ddict == NULL)
			out_of_memory();
	}
}

static void
ensure_lz4(void)
{
	if (lz4_dict_stream == NULL)
	{
		if (lz4_work_stream == NULL && (lz4_work_stream = LZ4_createStream()) == NULL)
			out_of_memory();
		if ((lz4_dict_stream = LZ4_createStream()) == NULL)
			out_of_memory();
		LZ4_loadDict(lz4_dict_stream, paidb_snapshot_dict_v1, sizeof(paidb_snapshot_dict_v1) - 1);
	}
}

/* The snapshot's JSON text without metadata.annotations.config. */
static char *
json_without_config(Jsonb *snapshot)
{
	StringInfoData out;

	initStringInfo(&out);
	enlargeStringInfo(&out, VARSIZE(snapshot));
	jb_print(&out, &snapshot->root, 3, (const char *[]) {"metadata", "annotations", "config"});
	return out.data;
}

/* Whether the snapshot's config annotation is a string equal to job_config. */
static bool
config_is_job_config(Jsonb *snapshot, text *job_config)
{
	JsonbValue	v;

	return jb_get_path(&snapshot->root, &v, 3, (const char *[]) {"metadata", "annotations", "config"}) &&
		v.type == jbvString &&
		(Size) v.val.string.len == VARSIZE_ANY_EXHDR(job_config) &&
		memcmp(v.val.string.val, VARDATA_ANY(job_config), v.val.string.len) == 0;
}

static void
corrupted(const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("stored snapshot is corrupted"),
			 errdetail("%s", detail)));
}

/* Whether the framework has completed (status.state "Completed"): its row is written for the last time or nearly. */
static bool
framework_completed(Jsonb *snapshot)
{
	JsonbValue	v;

	return jb_get_path(&snapshot->root, &v, 2, (const char *[]) {"status", "state"}) &&
		v.type == jbvString && v.val.string.len == 9 && memcmp(v.val.string.val, "Completed", 9) == 0;
}

static void
too_large(size_t len)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("framework snapshot is too large to store"),
			 errdetail("Its JSON text takes %zu bytes.", len)));
}

/* Pack in format 1 (compact) or, when fast and the text is small, 2. */
static bytea *
pack(Jsonb *snapshot, text *job_config, bool fast)
{
	uint8		flags = 0;
	char	   *json;
	size_t		len,
				bound,
				written;
	bytea	   *out;
	uint8	   *head;

	if (job_config != NULL && config_is_job_config(snapshot, job_config))
	{
		json = json_without_config(snapshot);
		flags |= PACK_FLAG_NO_CONFIG;
	}
	else
		json = jb_to_text(&snapshot->root, VARSIZE(snapshot));
	len = strlen(json);
	fast = fast && len <= PACK_FAST_MAX_TEXT;
	if (fast)
		bound = PACK_LENGTH_BYTES + LZ4_compressBound((int) len);
	else
		bound = ZSTD_compressBound(len);
	if (bound > MaxAllocSize - VARHDRSZ - PACK_HEADER_BYTES)
		too_large(len);
	out = (bytea *) palloc(VARHDRSZ + PACK_HEADER_BYTES + bound);
	head = (uint8 *) VARDATA(out);
	head[1] = flags;
	if (fast)
	{
		int			n;

		ensure_lz4();
		head[0] = PACK_FORMAT_2;
		for (int i = 0; i < PACK_LENGTH_BYTES; i++)
			head[PACK_HEADER_BYTES + i] = (uint8) ((uint64) len >> (8 * i));
		memcpy(lz4_work_stream, lz4_dict_stream, sizeof(LZ4_stream_t));
		n = LZ4_compress_fast_continue(lz4_work_stream, json,
									   (char *) head + PACK_HEADER_BYTES + PACK_LENGTH_BYTES,
									   (int) len, LZ4_compressBound((int) len), 1);
		if (n <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not compress a framework snapshot with lz4")));
		written = PACK_LENGTH_BYTES + n;
	}
	else
	{
		ensure_compressor();
		head[0] = PACK_FORMAT_1;
		written = ZSTD_compress_usingCDict(pack_cctx, head + PACK_HEADER_BYTES, bound,
										   json, len, pack_cdict);
		if (ZSTD_isError(written))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not compress a framework snapshot: %s", ZSTD_getErrorName(written))));
	}
	SET_VARSIZE(out, VARHDRSZ + PACK_HEADER_BYTES + written);
	pfree(json);
	return out;
}

/* See snapshot_pack.h. */
bytea *
paidb_pack_snapshot(Jsonb *snapshot, text *job_config, bool as_job_row)
{
	return pack(snapshot, job_config, as_job_row && !framework_completed(snapshot));
}

/* The JSON text of a format 1 packed value (data, size: after the header). */
static char *
unpack_zstd(const uint8 *data, size_t size, size_t *len)
{
	unsigned long long raw;
	size_t		got;
	char	   *json;

	raw = ZSTD_getFrameContentSize(data, size);
	if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN)
		corrupted("Its compressed frame has no readable size.");
	if (raw >= MaxAllocSize)
		corrupted("Its compressed frame claims more than 1 GB.");
	ensure_decompressor();
	json = palloc(raw + 1);
	got = ZSTD_decompress_usingDDict(pack_dctx, json, raw, data, size, pack_ddict);
	if (ZSTD_isError(got) || got != raw)
		corrupted(ZSTD_isError(got) ? ZSTD_getErrorName(got) : "It is shorter than its frame says.");
	*len = raw;
	return json;
}

/* The JSON text of a format 2 packed value (data, size: after the header). */
static char *
unpack_lz4(const uint8 *data, size_t size, size_t *len)
{
	uint64		raw = 0;
	int			got;
	char	   *json;

	if (size < PACK_LENGTH_BYTES)
		corrupted("It is shorter than its length.");
	for (int i = 0; i < PACK_LENGTH_BYTES; i++)
		raw |= (uint64) data[i] << (8 * i);
	if (raw >= MaxAllocSize || raw > LZ4_MAX_INPUT_SIZE)
		corrupted("Its length claims more than 1 GB.");
	if (size - PACK_LENGTH_BYTES > INT_MAX)
		corrupted("Its compressed block is too long.");
	json = palloc(raw + 1);
	got = LZ4_decompress_safe_usingDict((const char *) data + PACK_LENGTH_BYTES, json,
										(int) (size - PACK_LENGTH_BYTES), (int) raw,
										paidb_snapshot_dict_v1, sizeof(paidb_snapshot_dict_v1) - 1);
	if (got < 0 || (uint64) got != raw)
		corrupted(got < 0 ? "Its lz4 block cannot be decompressed." : "It is shorter than its length says.");
	*len = raw;
	return json;
}

Jsonb *
paidb_unpack_snapshot(bytea *packed, text *job_config)
{
	const uint8 *data = (const uint8 *) VARDATA_ANY(packed);
	size_t		size = VARSIZE_ANY_EXHDR(packed);
	size_t		raw;
	char	   *json;
	Jsonb	   *snapshot;

	if (size < PACK_HEADER_BYTES || (data[0] != PACK_FORMAT_1 && data[0] != PACK_FORMAT_2) ||
		(data[1] & ~PACK_FLAG_NO_CONFIG) != 0)
		corrupted("It is not in packed snapshot format 1 or 2.");
	if (data[0] == PACK_FORMAT_1)
		json = unpack_zstd(data + PACK_HEADER_BYTES, size - PACK_HEADER_BYTES, &raw);
	else
		json = unpack_lz4(data + PACK_HEADER_BYTES, size - PACK_HEADER_BYTES, &raw);
	json[raw] = '\0';
	if (data[1] & PACK_FLAG_NO_CONFIG)
	{
		JsonbValue	v;

		if (job_config == NULL)
			corrupted("Its job config was left out, and the row's job_config is NULL.");
		/* put it back as the text is parsed: no second copy of the whole */
		v.type = jbvString;
		v.val.string.val = VARDATA_ANY(job_config);
		v.val.string.len = VARSIZE_ANY_EXHDR(job_config);
		snapshot = jb_from_text_adding(json, raw, 2, (const char *[]) {"metadata", "annotations"},
									   "config", &v);
	}
	else
		snapshot = jb_from_text(json, (int) raw);
	pfree(json);
	return snapshot;
}

/* Whether a packed snapshot was packed without its config (flag 1). */
static bool
packed_without_config(bytea *packed)
{
	return VARSIZE_ANY_EXHDR(packed) >= PACK_HEADER_BYTES &&
		(((const uint8 *) VARDATA_ANY(packed))[1] & PACK_FLAG_NO_CONFIG) != 0;
}

/* See snapshot_pack.h. */
bytea *
paidb_pack_job_snapshot(const char *name, Jsonb *snapshot, text *job_config)
{
	bytea	   *packed = paidb_pack_snapshot(snapshot, job_config, true);

	/* the config only matters to unpacking when it was left out */
	cache_put(name, packed, packed_without_config(packed) ? job_config : NULL, snapshot);
	return packed;
}

/* See snapshot_pack.h. */
Jsonb *
paidb_unpack_job_snapshot(const char *name, bytea *packed, text *job_config)
{
	text	   *config = packed_without_config(packed) ? job_config : NULL;
	Jsonb	   *snapshot = cache_get(name, packed, config);

	if (snapshot != NULL)
		return snapshot;
	snapshot = paidb_unpack_snapshot(packed, job_config);
	cache_put(name, packed, config, snapshot);
	return snapshot;
}

/* paidb.pack_snapshot(snapshot jsonb, job_config text, as_job_row boolean) returns bytea */
Datum
paidb_snapshot_pack(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(paidb_pack_snapshot(PG_GETARG_JSONB_P(0), PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1),
										  PG_NARGS() > 2 && !PG_ARGISNULL(2) && PG_GETARG_BOOL(2)));
}

/* paidb.unpack_snapshot(packed bytea, job_config text) returns jsonb */
Datum
paidb_snapshot_unpack(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(paidb_unpack_snapshot(PG_GETARG_BYTEA_PP(0), PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1)));
}
