# The workers' own session and the install's roles (SPEC §8):
#  1. a fresh CREATE EXTENSION refuses pre-existing paidb_writer/paidb_reader
#     roles it did not create unless they look like paidb's (NOLOGIN, no
#     attributes, no members unless paidb granted them in another database),
#     and leaves nothing behind when it refuses;
#  2. a user who may create objects in public plants operators that would
#     hijack the workers' statements (int4 * interval, ->> / -> on an
#     unknown literal): none of them runs, under the default role and under
#     paidb.worker_role;
#  3. paidb.worker_role: the workers connect as that role and do their work.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;

$PaidbTest::STEP = 0.05;

my $fake = PaidbTest::start_fake();
my $node = PaidbTest::new_node('worker_role', $fake, no_extension => 1,
	retain_mode => 'off', restart_after_crash => 'off');

# psql without dying: (exit code, stderr)
sub try_sql
{
	my ($db, $sql) = @_;
	my ($rc, $out, $err) = $node->psql($db, $sql);
	return ($rc, $err // '');
}

# ============================================================ 1. roles at install
{
	$node->safe_psql('postgres', 'CREATE ROLE paidb_writer LOGIN');
	my ($rc, $err) = try_sql('postgres', 'CREATE EXTENSION paidb CASCADE');
	isnt($rc, 0, 'a pre-existing paidb_writer that can log in: CREATE EXTENSION refused');
	like($err, qr/role "paidb_writer" exists already and was not created by paidb/, 'with a clear message');
	like($err, qr/can log in/, 'saying why');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_extension WHERE extname = 'paidb'}), '0',
		'nothing is installed');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'paidb'}), '0',
		'not even the schema');

	$node->safe_psql('postgres', q{ALTER ROLE paidb_writer NOLOGIN; CREATE ROLE mallory LOGIN;
		GRANT paidb_writer TO mallory});
	($rc, $err) = try_sql('postgres', 'CREATE EXTENSION paidb CASCADE');
	isnt($rc, 0, 'a pre-existing paidb_writer with a member: refused');
	like($err, qr/has members/, 'saying why');

	$node->safe_psql('postgres', q{CREATE SCHEMA mallorys AUTHORIZATION paidb_writer});
	$node->safe_psql('postgres', q{REVOKE paidb_writer FROM mallory});
	($rc, $err) = try_sql('postgres', 'CREATE EXTENSION paidb CASCADE');
	isnt($rc, 0, 'a pre-existing paidb_writer owning a schema: refused');
	like($err, qr/owns objects/, 'saying why');

	$node->safe_psql('postgres', q{DROP SCHEMA mallorys});
	($rc, $err) = try_sql('postgres', 'CREATE EXTENSION paidb CASCADE');
	is($rc, 0, 'a pre-existing NOLOGIN paidb_writer without members or objects is accepted') or diag($err);

	# a second database of the cluster: the roles are paidb's now, members and all
	$node->safe_psql('postgres', q{CREATE ROLE alice LOGIN; GRANT paidb_writer TO alice; CREATE DATABASE second});
	($rc, $err) = try_sql('second', 'CREATE EXTENSION paidb CASCADE');
	is($rc, 0, 'a second database installs over the roles the first made (members and all)') or diag($err);
	# and an upgrade from 0.1 is not checked
	($rc, $err) = try_sql('second', q{DROP EXTENSION paidb; CREATE EXTENSION paidb VERSION '0.1' CASCADE;
		ALTER EXTENSION paidb UPDATE});
	is($rc, 0, 'ALTER EXTENSION paidb UPDATE keeps working with members') or diag($err);
}

ok(PaidbTest::wait_for_workers($node), 'the three workers run once the extension exists');

# ============================================================ 2. planted operators
# A user who may create objects in public (PostgreSQL 15 no longer grants
# that by default) plants operators that are an exact match where pg_catalog
# has none; each writes down that it ran, as whom.
$node->safe_psql('postgres', q{
CREATE ROLE planter LOGIN;
GRANT CREATE ON SCHEMA public TO planter;
SET ROLE planter;
CREATE TABLE public.hijacked (what text, by_whom name DEFAULT current_user, at timestamptz DEFAULT now());
GRANT INSERT, SELECT ON public.hijacked TO PUBLIC;
CREATE FUNCTION public.mul(i int4, v interval) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.hijacked (what) VALUES ('int4 * interval'); RETURN (i::float8) * v; END $$;
CREATE OPERATOR public.* (LEFTARG = int4, RIGHTARG = interval, FUNCTION = public.mul);
CREATE FUNCTION public.get_text(j jsonb, k jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.hijacked (what) VALUES ('jsonb ->> jsonb'); RETURN j ->> (k #>> '{}'); END $$;
CREATE OPERATOR public.->> (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = public.get_text);
CREATE FUNCTION public.get(j jsonb, k jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.hijacked (what) VALUES ('jsonb -> jsonb'); RETURN j -> (k #>> '{}'); END $$;
CREATE OPERATOR public.-> (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = public.get);
RESET ROLE;
});
# they are an exact match for the statements' shapes: a session with the
# default search_path is hijacked (so the test can fail)
is($node->safe_psql('postgres', q{SELECT 3 * interval '1 millisecond'; SELECT count(*) FROM public.hijacked}),
	"00:00:00.003\n1", 'the planted int4 * interval hijacks a default session');
# (an unknown literal is then read as jsonb: a key such as 'type' even breaks the statement)
is($node->safe_psql('postgres', q{SELECT '{"a": "b"}'::jsonb ->> '"a"'; SELECT count(*) FROM public.hijacked}),
	"b\n2", 'the planted ->> hijacks a default session');
$node->safe_psql('postgres', 'TRUNCATE public.hijacked');

# Work that runs those statements: a failing create (retry backoff), a job
# with pods (the event watcher's upsert), an orphan (its retry backoff).
sub drive_workers
{
	my ($tag) = @_;
	$fake->fault(status => 503, verb => 'create', resource => 'frameworks', name => "retry$tag", count => 2);
	submit($node, job_request("retry$tag"));
	submit($node, job_request(job_name('alice', "events$tag")));
	$fake->fault(status => 503, verb => 'delete', resource => 'frameworks', name => "orph$tag", count => 1);
	$node->safe_psql('postgres', "INSERT INTO paidb.orphan (name, uid) VALUES ('orph$tag', 'u-$tag'); SELECT paidb.wakeup()");
	ok(poll($node, "SELECT state = 'SUCCEEDED' FROM paidb.framework WHERE name = 'retry$tag'"), "$tag: retried job succeeds");
	ok(poll($node, "SELECT count(*) > 0 FROM paidb.framework_event WHERE framework_name = '" . job_name('alice', "events$tag") . "'"),
		"$tag: pod events were stored");
	ok(poll($node, "SELECT NOT EXISTS (SELECT 1 FROM paidb.orphan WHERE name = 'orph$tag')"), "$tag: the orphan was retried and handled");
	is($node->safe_psql('postgres', q{SELECT coalesce(string_agg(what || ' as ' || by_whom, ', '), '') FROM public.hijacked}),
		'', "$tag: none of the planted operators ran in a worker");
}
drive_workers('dflt');

# ============================================================ 3. paidb.worker_role
$node->safe_psql('postgres', q{
CREATE ROLE paidb_worker LOGIN;
GRANT USAGE ON SCHEMA paidb TO paidb_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA paidb TO paidb_worker;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA paidb TO paidb_worker;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA paidb TO paidb_worker;
ALTER ROLE paidb_worker SET search_path = public, pg_catalog;
});
$node->append_conf('postgresql.conf', "paidb.worker_role = 'paidb_worker'\n");
$node->restart;
ok(PaidbTest::wait_for_workers($node), 'the workers run as paidb.worker_role');
is($node->safe_psql('postgres', q{SELECT string_agg(DISTINCT usename, ',') FROM pg_stat_activity
	WHERE backend_type LIKE 'paidb %'}), 'paidb_worker', 'they are connected as paidb_worker');
drive_workers('role');
is(join("\n", crash_lines($node)), '', 'no process crashed');
unlike(PaidbTest::log_since($node), qr/permission denied/, 'the documented grants are enough');

$node->stop;
done_testing();
