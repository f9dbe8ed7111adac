# A watch event and another writer of the same job at the same time.
# apply_watch_event locks the job's row of paidb.framework FOR UPDATE by its
# key (src/pkey_lookup.c, no statement; src/write_merger.c lock_framework),
# and must behave as the statement SELECT ... FOR UPDATE it replaced:
#
#   * two events of one job in one statement: the second sees the first's
#     update (the job is not taken for an unknown framework);
#   * a writer holding the row: the event waits for it, then compares its
#     resourceVersion with the committed version's (stale), or, the writer
#     rolled back, is applied;
#   * the row deleted while the event waited: the framework is an orphan;
#   * REPEATABLE READ: a row updated after the transaction's snapshot is a
#     serialization failure (40001).
#
# The same checks pass with lock_framework's SPI statement (plan_lock).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t/lib';
use PaidbTest;

my $node = PostgreSQL::Test::Cluster->new('framework_row_lock');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION paidb CASCADE;
CREATE FUNCTION job(n text) RETURNS jsonb LANGUAGE sql AS $$
SELECT jsonb_build_object('metadata', jsonb_build_object('name', n,
         'labels', '{"userName": "alice", "virtualCluster": "default"}'::jsonb),
       'spec', jsonb_build_object('executionType', 'Start'))
$$;
-- a framework as the API server sends it: the job's, at resourceVersion rv
CREATE FUNCTION event(n text, rv int, state text DEFAULT 'AttemptRunning') RETURNS jsonb LANGUAGE sql AS $$
SELECT jsonb_build_object('apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', n, 'resourceVersion', rv::text,
                                 'annotations', jsonb_build_object('requestGeneration', '1')),
  'spec', jsonb_build_object('executionType', 'Start'),
  'status', jsonb_build_object('state', state, 'attemptStatus', jsonb_build_object('id', 0),
                               'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0)))
$$;
SELECT count(*) FROM unnest(ARRAY['a', 'c', 'r', 'd', 'e']) n, paidb.put_framework_request(job(n)) p;
});

sub settled { return lock_wait_settled($node, @_); }

sub stored_rv
{
	my ($name) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(resource_version::text, 'none') FROM paidb.framework WHERE name = '$name'");
}

# ---- two events of one job in one statement
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(paidb.apply_watch_event('MODIFIED', e), ',' ORDER BY i)
  FROM (VALUES (1, event('a', 10)), (2, event('a', 11, 'AttemptPreparing'))) v(i, e)}),
	'synced,updated',
	'two events of a job in one statement: the second sees the first (synced, then updated)');
is(stored_rv('a'), '11', 'the second event is stored');
is($node->safe_psql('postgres', q{SELECT state FROM paidb.framework WHERE name = 'a'}),
	'WAITING', 'with its state');

my $watcher = $node->background_psql('postgres', on_error_stop => 0);
my $writer = $node->background_psql('postgres', on_error_stop => 0);
my $watcher_pid = $watcher->query_safe('SELECT pg_backend_pid()');

# ---- a writer holds the row and commits a later version
$writer->query_safe(q{BEGIN; SELECT paidb.apply_watch_event('MODIFIED', event('c', 20))});
$watcher->query_until(qr/sent/,
	"\\echo sent\nSELECT paidb.apply_watch_event('MODIFIED', event('c', 15)) AS outcome;\n");
is(settled($watcher_pid, 'apply_watch_event'), 'waits', 'an event waits for a writer holding its job');
$writer->query_safe('COMMIT');
like($watcher->query_safe('SELECT 1'), qr/^stale\b/m,
	'then compares with the committed version: an older resourceVersion is stale');
is(stored_rv('c'), '20', 'the writer\'s version stays');

# ---- the writer rolls back
$writer->query_safe(q{BEGIN; SELECT paidb.apply_watch_event('MODIFIED', event('r', 20))});
$watcher->query_until(qr/sent/,
	"\\echo sent\nSELECT paidb.apply_watch_event('MODIFIED', event('r', 15)) AS outcome;\n");
is(settled($watcher_pid, 'apply_watch_event'), 'waits', 'an event waits again');
$writer->query_safe('ROLLBACK');
like($watcher->query_safe('SELECT 1'), qr/^synced\b/m, 'and is applied once the writer rolled back');
is(stored_rv('r'), '15', 'its version is stored');

# ---- the row deleted while the event waits
$writer->query_safe(q{BEGIN; DELETE FROM paidb.framework WHERE name = 'd'});
$watcher->query_until(qr/sent/,
	"\\echo sent\nSELECT paidb.apply_watch_event('MODIFIED', event('d', 5)) AS outcome;\n");
is(settled($watcher_pid, 'apply_watch_event'), 'waits', 'an event waits for a delete of its job');
$writer->query_safe('COMMIT');
like($watcher->query_safe('SELECT 1'), qr/^orphan\b/m, 'then finds no job: the framework is an orphan');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.orphan WHERE name = 'd'}),
	'1', 'queued for deletion');

# ---- REPEATABLE READ and a row updated after the snapshot
$watcher->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM paidb.framework});
$writer->query_safe(q{SELECT paidb.apply_watch_event('MODIFIED', event('e', 30))});
$watcher->query(q{SELECT paidb.apply_watch_event('MODIFIED', event('e', 31))});
like($watcher->{stderr}, qr/could not serialize access due to concurrent update/,
	'REPEATABLE READ: a job updated after the snapshot is a serialization failure')
  or diag("stderr: $watcher->{stderr}");
$watcher->{stderr} = '';
$watcher->query_safe('ROLLBACK');
is(stored_rv('e'), '30', 'the other writer\'s version stays');

$watcher->quit;
$writer->quit;
$node->stop;
done_testing();
