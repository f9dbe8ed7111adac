/*
 * snapshot_pack.c — packed snapshot format 1: a framework snapshot as
 * paidb stores it (issue 19, docs/design.md "Stored snapshots").
 *
 * jsonb keeps a typical snapshot in ~6 KB that lz4 takes to ~3.1 KB; its
 * JSON text compressed by zstd against a dictionary of the keys and
 * constants every OpenPAI framework carries takes ~0.9 KB, and ~0.6 KB
 * without the job config, which the row holds anyway.  zstd rather than
 * zlib: at the same size it compresses a snapshot about four times faster,
 * and a status update packs one.
 */
#include "postgres.h"

#include <zstd.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "jsonb_util.h"
#include "snapshot_dict.h"
#include "snapshot_pack.h"

PG_FUNCTION_INFO_V1(paidb_snapshot_pack);
PG_FUNCTION_INFO_V1(paidb_snapshot_unpack);

#define PACK_FORMAT_1		1
#define PACK_HEADER_BYTES	2
/* flags: metadata.annotations.config left out (it equals job_config) */
#define PACK_FLAG_NO_CONFIG 0x01
/* zstd's level 3: 6 KB in ~10 us; 6 and up cost 3x for ~15% less */
#define PACK_LEVEL			3

/*
 * zstd's contexts and the dictionary, digested once per backend.  zstd
 * allocates them with malloc; they live as long as the process.
 */
static ZSTD_CCtx *pack_cctx = NULL;
static ZSTD_DCtx *pack_dctx = NULL;
static ZSTD_CDict *pack_cdict = NULL;
static ZSTD_DDict *pack_ddict = NULL;

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

/* The path metadata.annotations.config as a text[] for jsonb_set/#-. */
static Datum
config_path(void)
{
	Datum		elems[3];

	elems[0] = CStringGetTextDatum("metadata");
	elems[1] = CStringGetTextDatum("annotations");
	elems[2] = CStringGetTextDatum("config");
	return PointerGetDatum(construct_array(elems, 3, TEXTOID, -1, false, TYPALIGN_INT));
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

bytea *
paidb_pack_snapshot(Jsonb *snapshot, text *job_config)
{
	uint8		flags = 0;
	char	   *json;
	size_t		len,
				bound,
				written;
	bytea	   *out;

	if (job_config != NULL && config_is_job_config(snapshot, job_config))
	{
		snapshot = DatumGetJsonbP(DirectFunctionCall2(jsonb_delete_path, JsonbPGetDatum(snapshot),
													  config_path()));
		flags |= PACK_FLAG_NO_CONFIG;
	}
	json = JsonbToCString(NULL, &snapshot->root, VARSIZE(snapshot));
	len = strlen(json);
	bound = ZSTD_compressBound(len);
	if (bound > MaxAllocSize - VARHDRSZ - PACK_HEADER_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("framework snapshot is too large to store"),
				 errdetail("Its JSON text takes %zu bytes.", len)));
	ensure_compressor();
	out = (bytea *) palloc(VARHDRSZ + PACK_HEADER_BYTES + bound);
	((uint8 *) VARDATA(out))[0] = PACK_FORMAT_1;
	((uint8 *) VARDATA(out))[1] = flags;
	written = ZSTD_compress_usingCDict(pack_cctx, VARDATA(out) + PACK_HEADER_BYTES, bound,
									   json, len, pack_cdict);
	if (ZSTD_isError(written))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compress a framework snapshot: %s", ZSTD_getErrorName(written))));
	SET_VARSIZE(out, VARHDRSZ + PACK_HEADER_BYTES + written);
	pfree(json);
	return out;
}

Jsonb *
paidb_unpack_snapshot(bytea *packed, text *job_config)
{
	const uint8 *data = (const uint8 *) VARDATA_ANY(packed);
	size_t		size = VARSIZE_ANY_EXHDR(packed);
	unsigned long long raw;
	size_t		got;
	char	   *json;
	Jsonb	   *snapshot;

	if (size < PACK_HEADER_BYTES || data[0] != PACK_FORMAT_1 || (data[1] & ~PACK_FLAG_NO_CONFIG) != 0)
		corrupted("It is not in packed snapshot format 1.");
	raw = ZSTD_getFrameContentSize(data + PACK_HEADER_BYTES, size - PACK_HEADER_BYTES);
	if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN)
		corrupted("Its compressed frame has no readable size.");
	if (raw >= MaxAllocSize)
		corrupted("Its compressed frame claims more than 1 GB.");
	ensure_decompressor();
	json = palloc(raw + 1);
	got = ZSTD_decompress_usingDDict(pack_dctx, json, raw, data + PACK_HEADER_BYTES,
									 size - PACK_HEADER_BYTES, pack_ddict);
	if (ZSTD_isError(got) || got != raw)
		corrupted(ZSTD_isError(got) ? ZSTD_getErrorName(got) : "It is shorter than its frame says.");
	json[raw] = '\0';
	snapshot = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
	pfree(json);
	if (data[1] & PACK_FLAG_NO_CONFIG)
	{
		JsonbValue	v;

		if (job_config == NULL)
			corrupted("Its job config was left out, and the row's job_config is NULL.");
		v.type = jbvString;
		v.val.string.val = VARDATA_ANY(job_config);
		v.val.string.len = VARSIZE_ANY_EXHDR(job_config);
		snapshot = DatumGetJsonbP(DirectFunctionCall4(jsonb_set, JsonbPGetDatum(snapshot), config_path(),
													  JsonbPGetDatum(JsonbValueToJsonb(&v)),
													  BoolGetDatum(true)));
	}
	return snapshot;
}

/* paidb.pack_snapshot(snapshot jsonb, job_config text) returns bytea */
Datum
paidb_snapshot_pack(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(paidb_pack_snapshot(PG_GETARG_JSONB_P(0), PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1)));
}

/* paidb.unpack_snapshot(packed bytea, job_config text) returns jsonb */
Datum
paidb_snapshot_unpack(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(paidb_unpack_snapshot(PG_GETARG_BYTEA_PP(0), PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1)));
}
