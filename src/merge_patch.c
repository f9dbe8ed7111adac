/*
 * merge_patch.c — RFC 7396 JSON merge patch on binary jsonb
 *
 * The result is written straight into jsonb's on-disk format, without an
 * intermediate JsonbValue tree and without a text round trip.  Only the
 * objects on the paths the patch touches are rebuilt; every other member of
 * the target (a string, a number, or a whole nested array or object) is
 * copied as raw bytes.  That is sound because a jsonb container is position
 * independent: its JEntry offsets are relative to its own data area, and its
 * inner alignment padding only depends on where it starts modulo 4, so an
 * int-aligned copy of its bytes is byte-identical to what PostgreSQL's own
 * encoder (convertJsonbValue in jsonb_util.c) would produce for it there.
 * The layout written here follows that encoder exactly: keys in jsonb order
 * (length, then bytes), keys before values, an end offset instead of a length
 * in every JB_OFFSET_STRIDE'th JEntry, containers and numerics int-aligned
 * with the padding counted in their length.
 *
 * So a small patch on a large snapshot costs a memcpy of the snapshot plus
 * the work on the patched objects, whereas jsonb || decodes and re-encodes
 * everything.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "merge_patch.h"
#include "miscadmin.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(paidb_jsonb_merge_patch);

/* The pairs of a binary jsonb object with the start offset of each entry. */
typedef struct ObjectReader
{
	const JsonbContainer *jc;	/* the object, or NULL for {} */
	int			count;			/* number of pairs */
	const char *data;			/* start of the variable-length data */
	uint32	   *offsets;		/* 2 * count + 1 start offsets (keys, values,
								 * end) */
} ObjectReader;

/* One member of a merged object: where its key and value come from. */
typedef struct MergeStep
{
	int			t;				/* pair index in the target, or -1 */
	int			p;				/* pair index in the patch, or -1 */
} MergeStep;

static JEntry merge_objects(StringInfo buf, const JsonbContainer *target,
							uint32 target_len, const JsonbContainer *patch);

/* Reserve len bytes at the end of buf and return their offset. */
static inline int
buf_reserve(StringInfo buf, int len)
{
	int			offset;

	enlargeStringInfo(buf, len);
	offset = buf->len;
	buf->len += len;
	buf->data[buf->len] = '\0';
	return offset;
}

/* Append len bytes to buf. */
static inline void
buf_append(StringInfo buf, const char *data, int len)
{
	int			offset = buf_reserve(buf, len);

	memcpy(buf->data + offset, data, len);
}

/* Pad buf with zero bytes to an int boundary; return the padding length. */
static inline int
buf_pad_to_int(StringInfo buf)
{
	int			padlen = INTALIGN(buf->len) - buf->len;
	int			offset;

	if (padlen == 0)
		return 0;
	offset = buf_reserve(buf, padlen);
	memset(buf->data + offset, 0, padlen);
	return padlen;
}

/* Fail like PostgreSQL's encoder when a container outgrows a JEntry. */
static inline void
check_container_length(uint32 totallen)
{
	if (totallen > JENTRY_OFFLENMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("total size of jsonb object elements exceeds the maximum of %u bytes",
						JENTRY_OFFLENMASK)));
}

/* Index the pairs of an object container (NULL reads as {}). */
static void
object_reader_init(ObjectReader *r, const JsonbContainer *jc)
{
	int			nentries;
	uint32		offset = 0;
	int			i;

	r->jc = jc;
	r->count = jc ? JsonContainerSize(jc) : 0;
	r->data = NULL;
	r->offsets = NULL;
	if (r->count == 0)
		return;

	nentries = r->count * 2;
	r->data = (const char *) &jc->children[nentries];
	r->offsets = palloc(sizeof(uint32) * (nentries + 1));
	for (i = 0; i < nentries; i++)
	{
		r->offsets[i] = offset;
		JBE_ADVANCE_OFFSET(offset, jc->children[i]);
	}
	r->offsets[nentries] = offset;
}

/* Compare key i of a with key j of b in jsonb key order. */
static inline int
compare_keys(const ObjectReader *a, int i, const ObjectReader *b, int j)
{
	uint32		alen = a->offsets[i + 1] - a->offsets[i];
	uint32		blen = b->offsets[j + 1] - b->offsets[j];

	if (alen != blen)
		return (alen > blen) ? 1 : -1;
	return memcmp(a->data + a->offsets[i], b->data + b->offsets[j], alen);
}

/* The JEntry of value i of an object. */
static inline JEntry
value_entry(const ObjectReader *r, int i)
{
	return r->jc->children[r->count + i];
}

/* The container that value i of an object holds (its JEntry says it is one). */
static inline const JsonbContainer *
value_container(const ObjectReader *r, int i, uint32 *len)
{
	uint32		start = r->offsets[r->count + i];
	uint32		end = r->offsets[r->count + i + 1];

	*len = end - INTALIGN(start);
	return (const JsonbContainer *) (r->data + INTALIGN(start));
}

/* Copy entry `index` of a reader verbatim to buf; return its new JEntry. */
static JEntry
copy_entry(StringInfo buf, const ObjectReader *r, int index)
{
	JEntry		je = r->jc->children[index];
	uint32		type = je & JENTRY_TYPEMASK;
	uint32		start = r->offsets[index];
	uint32		end = r->offsets[index + 1];

	switch (type)
	{
		case JENTRY_ISSTRING:
			buf_append(buf, r->data + start, end - start);
			return type | (end - start);

		case JENTRY_ISNUMERIC:
		case JENTRY_ISCONTAINER:
			{
				/* drop the old alignment padding, add the one needed here */
				uint32		aligned = INTALIGN(start);
				int			padlen = buf_pad_to_int(buf);

				buf_append(buf, r->data + aligned, end - aligned);
				return type | (padlen + end - aligned);
			}

		default:
			/* null, true and false have no variable-length data */
			return type;
	}
}

/* Store a JEntry, turning every JB_OFFSET_STRIDE'th length into an offset. */
static inline void
store_entry(StringInfo buf, int jentry_offset, int index, JEntry meta,
			uint32 *totallen)
{
	*totallen += JBE_OFFLENFLD(meta);
	check_container_length(*totallen);
	if ((index % JB_OFFSET_STRIDE) == 0)
		meta = (meta & JENTRY_TYPEMASK) | *totallen | JENTRY_HAS_OFF;
	memcpy(buf->data + jentry_offset + index * sizeof(JEntry), &meta,
		   sizeof(JEntry));
}

/*
 * Write merge(target, patch) for an object patch at the end of buf and return
 * its JEntry; target is an object container of target_len bytes, or NULL when
 * the target is absent or not an object (RFC 7396 then starts from {}).
 */
static JEntry
merge_objects(StringInfo buf, const JsonbContainer *target, uint32 target_len,
			  const JsonbContainer *patch)
{
	ObjectReader t;
	ObjectReader p;
	MergeStep  *steps;
	int			nsteps = 0;
	int			ti = 0;
	int			pi = 0;
	int			base_offset;
	int			jentry_offset;
	uint32		header;
	uint32		totallen = 0;
	int			i;

	check_stack_depth();

	/* An empty patch leaves an object alone: copy it whole. */
	if (JsonContainerSize(patch) == 0)
	{
		int			padlen = buf_pad_to_int(buf);

		if (target != NULL)
		{
			buf_append(buf, (const char *) target, target_len);
			return JENTRY_ISCONTAINER | (padlen + target_len);
		}
		header = JB_FOBJECT;
		buf_append(buf, (const char *) &header, sizeof(uint32));
		return JENTRY_ISCONTAINER | (padlen + sizeof(uint32));
	}

	object_reader_init(&t, target);
	object_reader_init(&p, patch);

	/* Merge the two sorted key lists into the result's key list. */
	steps = palloc(sizeof(MergeStep) * (t.count + p.count));
	while (ti < t.count || pi < p.count)
	{
		int			cmp;

		CHECK_FOR_INTERRUPTS();

		if (ti >= t.count)
			cmp = 1;
		else if (pi >= p.count)
			cmp = -1;
		else
			cmp = compare_keys(&t, ti, &p, pi);

		if (cmp < 0)
		{
			/* member the patch does not mention: keep it */
			steps[nsteps].t = ti++;
			steps[nsteps].p = -1;
			nsteps++;
		}
		else
		{
			int			tidx = -1;
			int			pidx = pi++;

			if (cmp == 0)
				tidx = ti++;
			/* null in the patch removes the member (or adds nothing) */
			if (JBE_ISNULL(value_entry(&p, pidx)))
				continue;
			steps[nsteps].t = tidx;
			steps[nsteps].p = pidx;
			nsteps++;
		}
	}

	/* Container header and room for the JEntries, as convertJsonbObject. */
	base_offset = buf->len;
	buf_pad_to_int(buf);
	header = (uint32) nsteps | JB_FOBJECT;
	buf_append(buf, (const char *) &header, sizeof(uint32));
	jentry_offset = buf_reserve(buf, sizeof(JEntry) * nsteps * 2);

	/* Keys first ... */
	for (i = 0; i < nsteps; i++)
	{
		JEntry		meta;

		if (steps[i].t >= 0)
			meta = copy_entry(buf, &t, steps[i].t);
		else
			meta = copy_entry(buf, &p, steps[i].p);
		store_entry(buf, jentry_offset, i, meta, &totallen);
	}

	/* ... then the values. */
	for (i = 0; i < nsteps; i++)
	{
		int			tidx = steps[i].t;
		int			pidx = steps[i].p;
		JEntry		meta;

		CHECK_FOR_INTERRUPTS();

		if (pidx < 0)
			meta = copy_entry(buf, &t, t.count + tidx);
		else
		{
			JEntry		pje = value_entry(&p, pidx);
			const JsonbContainer *pobj = NULL;
			uint32		len;

			if (JBE_ISCONTAINER(pje))
			{
				pobj = value_container(&p, pidx, &len);
				if (!JsonContainerIsObject(pobj))
					pobj = NULL;
			}

			if (pobj == NULL)
			{
				/* a scalar or an array in the patch replaces the value */
				meta = copy_entry(buf, &p, p.count + pidx);
			}
			else
			{
				/* an object in the patch merges into the value */
				const JsonbContainer *tobj = NULL;
				uint32		tlen = 0;

				if (tidx >= 0 && JBE_ISCONTAINER(value_entry(&t, tidx)))
				{
					tobj = value_container(&t, tidx, &tlen);
					if (!JsonContainerIsObject(tobj))
						tobj = NULL;
				}
				meta = merge_objects(buf, tobj, tlen, pobj);
			}
		}
		store_entry(buf, jentry_offset, nsteps + i, meta, &totallen);
	}

	totallen = buf->len - base_offset;
	check_container_length(totallen);
	return JENTRY_ISCONTAINER | totallen;
}

/* RFC 7396: apply patch to target (NULL = absent); see merge_patch.h. */
Jsonb *
paidb_merge_patch(Jsonb *target, Jsonb *patch)
{
	MemoryContext scratch;
	MemoryContext oldcxt;
	StringInfoData buf;
	Size		size_hint;
	uint32		target_len = 0;

	/* A patch that is not an object replaces the target whole. */
	if (!JB_ROOT_IS_OBJECT(patch))
		return patch;

	if (target != NULL && !JB_ROOT_IS_OBJECT(target))
		target = NULL;
	if (target != NULL)
	{
		if (JB_ROOT_COUNT(patch) == 0)
			return target;
		target_len = VARSIZE(target) - VARHDRSZ;
	}

	/* The output buffer lives in the caller's context, sized for the usual case. */
	size_hint = (Size) target_len + VARSIZE(patch) + 64;
	if (size_hint >= MaxAllocSize)
		size_hint = MaxAllocSize - 1;
	buf.data = palloc(size_hint);
	buf.maxlen = (int) size_hint;
	buf.len = 0;
	buf.cursor = 0;
	buf.data[0] = '\0';

	/* Offsets and merge steps are scratch; enlargeStringInfo keeps buf where it is. */
	scratch = AllocSetContextCreate(CurrentMemoryContext,
									"paidb merge patch",
									ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(scratch);

	buf_reserve(&buf, VARHDRSZ);
	(void) merge_objects(&buf, target ? &target->root : NULL, target_len,
						 &patch->root);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(scratch);

	SET_VARSIZE(buf.data, buf.len);
	return (Jsonb *) buf.data;
}

/* SQL: paidb.jsonb_merge_patch(target jsonb, patch jsonb) returns jsonb */
Datum
paidb_jsonb_merge_patch(PG_FUNCTION_ARGS)
{
	Jsonb	   *patch = PG_GETARG_JSONB_P(1);

	/* don't even detoast the target when the patch replaces it */
	if (!JB_ROOT_IS_OBJECT(patch))
		PG_RETURN_JSONB_P(patch);

	PG_RETURN_JSONB_P(paidb_merge_patch(PG_GETARG_JSONB_P(0), patch));
}
