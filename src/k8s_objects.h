/*
 * k8s_objects.h — what paidb may name and create in the API server (SPEC §8):
 * the framework-name rule, the Kubernetes name rules, the add-on slots and
 * the ownership label.  The SQL functions and the workers both use these,
 * so each rule is written once.
 */
#ifndef PAIDB_K8S_OBJECTS_H
#define PAIDB_K8S_OBJECTS_H

/* Framework names: ^[a-z0-9]{1,63}$ (the frameworkcontroller CRD pattern) */
#define PAIDB_FRAMEWORK_NAME_MAX	63
/* ... and a buffer (or hash key) that holds one with its terminator */
#define PAIDB_FRAMEWORK_NAME_SIZE	(PAIDB_FRAMEWORK_NAME_MAX + 1)
#define PAIDB_FRAMEWORK_NAME_RULE	"^[a-z0-9]{1,63}$"

/* The label every object paidb creates carries: <label>: <framework name> */
#define PAIDB_FRAMEWORK_LABEL		"paidb.io/framework"
/* which placement of the job an object belongs to (SPEC §11) */
#define PAIDB_PLACEMENT_LABEL		"paidb.io/placement"

/* Whether name follows the framework-name rule. */
extern bool paidb_valid_framework_name(const char *name);

/* Whether s is a DNS-1123 label (namespaces): [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63. */
extern bool k8s_valid_dns_label(const char *s);

/* Whether s is a DNS-1123 subdomain (secrets, priority classes, events), at most 253. */
extern bool k8s_valid_dns_subdomain(const char *s);

/* The add-on slots of put_framework_request (SPEC §3, §8) */
typedef struct PaidbAddonSlot
{
	const char *key;			/* add_ons key, e.g. configSecretDef */
	const char *column;			/* paidb.framework column */
	const char *api_version;	/* the one apiVersion the slot takes */
	const char *kind;			/* the one kind the slot takes */
	bool		namespaced;		/* lives in paidb.k8s_namespace */
} PaidbAddonSlot;

#define PAIDB_NUM_ADDONS			5
#define PAIDB_ADDON_PRIORITY_CLASS	2	/* index of priorityClassDef */

extern const PaidbAddonSlot paidb_addon_slots[PAIDB_NUM_ADDONS];

/*
 * What is wrong with an add-on definition for its slot (SPEC §8), or NULL:
 * a kind or apiVersion that is not the slot's (absent means the slot's), a
 * metadata.name that is not a DNS-1123 subdomain, a namespace on a
 * cluster-scoped kind, or a namespace other than `namespace`.  The message
 * is palloc'd, a full sentence.
 */
struct JsonbContainer;
extern char *paidb_addon_problem(const PaidbAddonSlot *slot,
								 struct JsonbContainer *def, const char *namespace);

#endif							/* PAIDB_K8S_OBJECTS_H */
