/*
 * k8s_objects.c — the name rules and add-on slots of k8s_objects.h.
 */
#include "postgres.h"

#include "k8s_objects.h"

const PaidbAddonSlot paidb_addon_slots[PAIDB_NUM_ADDONS] = {
	{"configSecretDef", "config_secret_def", "v1", "Secret", true},
	{"userExtensionSecretDef", "user_extension_secret_def", "v1", "Secret", true},
	{"priorityClassDef", "priority_class_def", "scheduling.k8s.io/v1", "PriorityClass", false},
	{"dockerSecretDef", "docker_secret_def", "v1", "Secret", true},
	{"tokenSecretDef", "token_secret_def", "v1", "Secret", true}
};

/* Whether name matches ^[a-z0-9]{1,63}$. */
bool
paidb_valid_framework_name(const char *name)
{
	int			i;

	for (i = 0; name[i] != '\0'; i++)
	{
		if (i >= PAIDB_FRAMEWORK_NAME_MAX)
			return false;
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
			return false;
	}
	return i > 0;
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
