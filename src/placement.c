/*
 * placement.c — which cluster a job belongs to (SPEC §11).
 *
 * A new job is placed in the transaction that submits it, so a job is
 * never without a cluster and never in two.  The cluster row is locked
 * FOR KEY SHARE (what the foreign key takes anyway): remove_cluster's FOR
 * UPDATE waits for the submission, then counts its job.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "guc.h"
#include "pkey_lookup.h"
#include "placement.h"
#include "spi_plan.h"

static SPIPlanPtr plan_cluster = NULL;

#define CLUSTER_COLUMNS \
	"SELECT name, api_server, namespace, token_file, ca_file, retain_mode, state " \
	"FROM paidb.cluster WHERE name = $1"

static void
prepare_plans(void)
{
	Oid			types[1] = {TEXTOID};

	if (plan_cluster != NULL)
		return;
	plan_cluster = paidb_prepare_kept(CLUSTER_COLUMNS, 1, types);
}

/* Copy a text column into a fixed buffer ("" for NULL). */
static void
copy_column(HeapTuple tup, TupleDesc desc, int col, char *buf, size_t size)
{
	char	   *v = SPI_getvalue(tup, desc, col);

	strlcpy(buf, v ? v : "", size);
}

/* Read a cluster row (optionally locked); false if absent. */
static bool
read_cluster(SPIPlanPtr plan, const char *name, PaidbClusterConfig *conf, char **state)
{
	Datum		arg = CStringGetTextDatum(name);
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;

	if (SPI_execute_plan(plan, &arg, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read paidb.cluster");
	if (SPI_processed == 0)
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	memset(conf, 0, sizeof(*conf));
	copy_column(tup, desc, 1, conf->name, sizeof(conf->name));
	copy_column(tup, desc, 2, conf->api_server, sizeof(conf->api_server));
	copy_column(tup, desc, 3, conf->namespace, sizeof(conf->namespace));
	copy_column(tup, desc, 4, conf->token_file, sizeof(conf->token_file));
	copy_column(tup, desc, 5, conf->ca_file, sizeof(conf->ca_file));
	d = SPI_getbinval(tup, desc, 6, &isnull);
	conf->retain_mode = isnull ? -1 : (DatumGetBool(d) ? 1 : 0);
	if (state)
		*state = SPI_getvalue(tup, desc, 7);
	return true;
}

/*
 * Read and lock a cluster row FOR KEY SHARE by its key, without a
 * statement (~25 us of a submission went to the statement's set-up).
 */
static bool
lock_cluster(const char *name, PaidbClusterConfig *conf, char **state)
{
	static const char *const columns[] = {"name", "api_server", "namespace", "token_file", "ca_file",
	"retain_mode", "state"};
	Datum		v[lengthof(columns)];
	bool		isnull[lengthof(columns)];
	char	   *const fields[] = {conf->name, conf->api_server, conf->namespace, conf->token_file,
	conf->ca_file};
	const size_t sizes[] = {sizeof(conf->name), sizeof(conf->api_server), sizeof(conf->namespace),
	sizeof(conf->token_file), sizeof(conf->ca_file)};
	Oid			clusters = RangeVarGetRelid(makeRangeVar("paidb", "cluster", -1), NoLock, false);

	/* the columns as datums: text and boolean, read without output functions */
	if (!paidb_pkey_lock_datums(clusters, name, LockTupleKeyShare, lengthof(columns), columns, v, isnull))
		return false;
	memset(conf, 0, sizeof(*conf));
	for (int i = 0; i < (int) lengthof(fields); i++)
		if (!isnull[i])
			text_to_cstring_buffer(DatumGetTextPP(v[i]), fields[i], sizes[i]);
	conf->retain_mode = isnull[5] ? -1 : (DatumGetBool(v[5]) ? 1 : 0);
	*state = isnull[6] ? NULL : TextDatumGetCString(v[6]);
	return true;
}

bool
paidb_read_cluster(const char *name, PaidbClusterConfig *conf, char **state)
{
	prepare_plans();
	return read_cluster(plan_cluster, name, conf, state);
}

void
paidb_place_new_job(const char *cluster_arg, const char *virtual_cluster,
					PaidbClusterConfig *conf)
{
	const char *name = cluster_arg;
	const char *source = "the cluster argument";
	char	   *state = NULL;

	prepare_plans();
	if (name == NULL && virtual_cluster != NULL)
	{
		/*
		 * Read by its key, not by a statement (~10 µs of a submission's
		 * ~500 went to the statement), with the snapshot a read-only
		 * statement would have used.
		 */
		Oid			placements = RangeVarGetRelid(makeRangeVar("paidb", "virtual_cluster_placement", -1),
												  AccessShareLock, false);
		char	   *placed = NULL;

		if (paidb_pkey_lookup(placements, virtual_cluster, GetActiveSnapshot(), "cluster", &placed) &&
			placed != NULL)
		{
			name = placed;
			source = psprintf("the placement of virtual cluster \"%s\"", virtual_cluster);
		}
	}
	if (name == NULL)
	{
		name = paidb_default_cluster ? paidb_default_cluster : PAIDB_DEFAULT_CLUSTER;
		source = "paidb.default_cluster";
	}
	if (!lock_cluster(name, conf, &state))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cluster \"%s\" does not exist", name),
				 errdetail("The cluster was named by %s.", source),
				 errhint("Clusters are the rows of paidb.cluster.")));
	if (strcmp(state, "active") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cluster \"%s\" is %s: it takes no new jobs", name, state),
				 errdetail("The cluster was named by %s.", source),
				 errhint("Place the job in an active cluster.")));
}
