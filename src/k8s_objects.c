/*
 * k8s_objects.c — the name rules and add-on slots of k8s_objects.h.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/jsonb.h"

#include "jsonb_util.h"
#include "k8s_objects.h"

const PaidbAddonSlot paidb_addon_slots[PAIDB_NUM_ADDONS] = {
	{"configSecretDef", "config_secret_def", "v1", "Secret", true},
	{"userExtensionSecretDef", "user_extension_secret_def", "v1", "Secret", true},
	{"priorityClassDef", "priority_class_def", "scheduling.k8s.io/v1", "PriorityClass", false},
	{"dockerSecretDef", "docker_secret_def", "v1", "Secret", true},
	{"tokenSecretDef", "token_secret_def", "v1", "Secret", true}
};

/* Whether the len bytes at name match ^[a-z0-9]{1,63}$. */
static bool
valid_framework_name_bytes(const char *name, size_t len)
{
	size_t		i;

	if (len == 0 || len > PAIDB_FRAMEWORK_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
	{
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
			return false;
	}
	return true;
}

/* Whether name matches ^[a-z0-9]{1,63}$. */
bool
paidb_valid_framework_name(const char *name)
{
	return valid_framework_name_bytes(name, strnlen(name, PAIDB_FRAMEWORK_NAME_MAX + 1));
}

PG_FUNCTION_INFO_V1(paidb_framework_name_valid);

/*
 * paidb._framework_name_valid(text): the rule as paidb.framework's CHECK.
 * PostgreSQL checks a table's constraints on every insert and update and
 * reads each one's expression again per statement: one call of this is
 * cheaper both to read and to run than the pattern as a regex (the engine
 * unrolls {1,63}: ~11 us a row).
 */
Datum
paidb_framework_name_valid(PG_FUNCTION_ARGS)
{
	text	   *name = PG_GETARG_TEXT_PP(0);

	PG_RETURN_BOOL(valid_framework_name_bytes(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)));
}

/* Whether c may appear in a DNS-1123 label. */
static inline bool
label_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* Whether s[0..len) is a DNS-1123 label (len > 0 and at most 63). */
static bool
valid_label(const char *s, size_t len)
{
	size_t		i;

	if (len < 1 || len > 63 || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (i = 0; i < len; i++)
		if (!label_char(s[i]))
			return false;
	return true;
}

/* Whether s is a DNS-1123 label. */
bool
k8s_valid_dns_label(const char *s)
{
	return valid_label(s, strnlen(s, 64));
}

/* Whether s is a DNS-1123 subdomain: dot-separated labels, at most 253 in all. */
bool
k8s_valid_dns_subdomain(const char *s)
{
	size_t		len = strnlen(s, 254);
	const char *p = s;

	if (len < 1 || len > 253)
		return false;
	for (;;)
	{
		const char *dot = strchr(p, '.');
		size_t		n = dot ? (size_t) (dot - p) : strlen(p);

		if (!valid_label(p, n))
			return false;
		if (dot == NULL)
			return true;
		p = dot + 1;
	}
}

/* A string member of def, or NULL; *bad is set when it is there but no string. */
static char *
def_string(JsonbContainer *def, int npath, const char *const *path, bool *bad)
{
	JsonbValue	v;

	if (!jb_get_path(def, &v, npath, path) || v.type == jbvNull)
		return NULL;
	if (v.type != jbvString)
	{
		*bad = true;
		return NULL;
	}
	return pnstrdup(v.val.string.val, v.val.string.len);
}

/* What is wrong with an add-on definition for its slot, or NULL. */
char *
paidb_addon_problem(const PaidbAddonSlot *slot, JsonbContainer *def, const char *namespace)
{
	bool		bad = false;
	char	   *kind;
	char	   *api_version;
	char	   *name;
	char	   *ns;
	JsonbValue	v;

	if (!JsonContainerIsObject(def) || JsonContainerIsScalar(def))
		return psprintf("It is not a JSON object.");
	if (jb_get_path(def, &v, 1, (const char *[]) {"metadata"}) &&
		!(v.type == jbvBinary && JsonContainerIsObject(v.val.binary.data)))
		return psprintf("Its metadata is not a JSON object.");
	kind = def_string(def, 1, (const char *[]) {"kind"}, &bad);
	api_version = def_string(def, 1, (const char *[]) {"apiVersion"}, &bad);
	name = def_string(def, 2, (const char *[]) {"metadata", "name"}, &bad);
	ns = def_string(def, 2, (const char *[]) {"metadata", "namespace"}, &bad);
	if (bad)
		return psprintf("Its kind, apiVersion, metadata.name and metadata.namespace must be strings.");
	if ((kind && strcmp(kind, slot->kind) != 0) ||
		(api_version && strcmp(api_version, slot->api_version) != 0))
		return psprintf("It must be apiVersion %s, kind %s; it has apiVersion %s, kind %s.",
						slot->api_version, slot->kind,
						api_version ? api_version : "(none)", kind ? kind : "(none)");
	if (name == NULL)
		return psprintf("It has no metadata.name (generateName is not supported).");
	if (!k8s_valid_dns_subdomain(name))
		return psprintf("Its name \"%.*s%s\" is not a DNS-1123 subdomain: at most 253 lower-case letters, "
						"digits, '-' and '.', each dot-separated part starting and ending with a letter or digit.",
						63, name, strlen(name) > 63 ? "..." : "");
	if (ns != NULL && !slot->namespaced)
		return psprintf("A %s is cluster-scoped: it has no namespace.", slot->kind);
	if (ns != NULL && strcmp(ns, namespace) != 0)
		return psprintf("Its namespace \"%.*s\" is not paidb's namespace \"%s\"; leave metadata.namespace out.",
						253, ns, namespace);
	return NULL;
}
