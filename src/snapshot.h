/*
 * snapshot.h — a framework snapshot: its request part, its status, and the
 * table columns derived from it.
 */
#ifndef PAIDB_SNAPSHOT_H
#define PAIDB_SNAPSHOT_H

#include "utils/jsonb.h"

/* The columns of paidb.framework computed from a snapshot, in this order. */
#define PAIDB_NUM_DERIVED 27
/* Positions of columns other modules read. */
#define PAIDB_COL_JOB_CONFIG 3
#define PAIDB_COL_RETRIES 14
#define PAIDB_COL_SUB_STATE 20

extern const char *const paidb_derived_column_names[PAIDB_NUM_DERIVED];
extern const Oid paidb_derived_column_types[PAIDB_NUM_DERIVED];

typedef struct DerivedColumns
{
	Datum		values[PAIDB_NUM_DERIVED];
	bool		nulls[PAIDB_NUM_DERIVED];
	/* facts the write merger needs besides the columns */
	int			attempt_index;	/* status.attemptStatus.id, -1 if absent */
	bool		completed;		/* status.state = Completed */
} DerivedColumns;

/* Attempt index (-1 if none) and whether it is Completed, without deriving every column. */
extern void paidb_snapshot_progress(Jsonb *snapshot, int *attempt_index, bool *completed);

/* Compute every derived column of a snapshot (the single place that does). */
extern void paidb_derive_columns(Jsonb *snapshot, DerivedColumns *out);

/*
 * The snapshot with status.attemptStatus.taskRoleStatusesCompressed replaced
 * by the decompressed taskRoleStatuses array.  Returns the input when there
 * is nothing to decompress.  On a malformed field returns NULL and sets
 * *error to a message (never raises for bad data).
 */
extern Jsonb *paidb_decompress_snapshot_internal(Jsonb *snapshot, char **error);

/* The request part of a framework object, with requestGeneration set to
 * `generation` (> 0) or removed (generation == 0). */
extern Jsonb *paidb_request_part(JsonbContainer *object, int64 generation);

/* The requestGeneration of an object's annotations; 1 when absent, -1 if malformed. */
extern int64 paidb_request_generation(JsonbContainer *object);

/* A snapshot made of `request` (a request part) and the given status
 * (NULL: the pending status of SPEC §5); other members of `object`
 * (uid, resourceVersion, ...) are kept when object is not NULL. */
extern Jsonb *paidb_compose_snapshot(JsonbContainer *request, JsonbContainer *object,
									 JsonbValue *status);

/* The pending status of SPEC §5 as a jsonb value. */
extern JsonbValue *paidb_pending_status(void);

/* The failed status given to a framework the API server refused for good. */
extern JsonbValue *paidb_permanent_failure_status(const char *diagnostics);

/* The resourceVersion of an object as an integer; false if absent or not decimal. */
extern bool paidb_object_resource_version(JsonbContainer *object, int64 *rv);

#endif							/* PAIDB_SNAPSHOT_H */
