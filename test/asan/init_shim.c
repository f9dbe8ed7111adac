/*
 * init_shim.c — preloaded after the ASan runtime into the (uninstrumented)
 * postgres binary by test/suites/90_asan.sh.
 *
 * A preloaded ASan runtime initialises itself on the first malloc.  In the
 * postgres binary that first malloc comes from libgpg-error's constructor,
 * inside glibc's bindtextdomain() while it holds the gettext lock; ASan's
 * start-up then calls dlerror(), which takes the same lock for reading and
 * corrupts it, and the next bindtextdomain() (PostgreSQL's own, in main)
 * waits forever.  Interposing bindtextdomain() to make one allocation before
 * the real call lets ASan start outside the lock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

char	   *bindtextdomain(const char *domainname, const char *dirname);

/* glibc's bindtextdomain(), after one allocation outside its lock */
char *
bindtextdomain(const char *domainname, const char *dirname)
{
	static char *(*real) (const char *, const char *) = NULL;

	if (real == NULL)
	{
		void	   *volatile p = malloc(1);

		free(p);
		real = (char *(*) (const char *, const char *)) dlsym(RTLD_NEXT, "bindtextdomain");
	}
	return real(domainname, dirname);
}
