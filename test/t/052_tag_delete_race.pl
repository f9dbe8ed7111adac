# A tag added to a job while the job is being deleted (SPEC §10,
# docs/queries.md): paidb.tag_job_columns() takes a key-share lock on the
# job, as OpenPAI's foreign key did, so no tag outlives its job whichever
# transaction comes first:
#
#   * the tag first: delete_job waits for it, then deletes it with the job;
#   * the delete first: the tag waits for it, then fails with 23503;
#   * retention skips a job whose tag is being added, and takes it (with
#     the tag) in a later batch.
#
# Without the lock the delete missed the uncommitted tag, or the tag was
# added to a job that was already gone: a tag without its job, which tag
# pages and counts then had to step around.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t/lib';
use PaidbTest;

my $node = PostgreSQL::Test::Cluster->new('tag_delete_race');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION paidb CASCADE');

# Jobs that are completed and gone from the API server: deletable.
$node->safe_psql('postgres', q{
CREATE FUNCTION deletable(n text) RETURNS void LANGUAGE sql AS $$
SELECT paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', n, 'labels', '{"userName": "alice", "virtualCluster": "default"}'::jsonb),
  'spec', jsonb_build_object('executionType', 'Start')), '2020-08-01 10:00:00+00');
SELECT paidb.apply_watch_event(typ, jsonb_build_object(
  'metadata', jsonb_build_object('name', n, 'resourceVersion', rv::text, 'annotations', '{"requestGeneration": "1"}'::jsonb),
  'status', jsonb_build_object('state', 'Completed', 'completionTime', '2020-08-01 11:00:00+00',
     'attemptStatus', '{"id": 0, "completionStatus": {"code": 0, "phrase": "x"}}'::jsonb,
     'retryPolicyStatus', '{"totalRetriedCount": 0, "accountableRetriedCount": 0}'::jsonb)))
  FROM (VALUES ('MODIFIED', 10), ('DELETED', 11)) e(typ, rv);
$$;
SELECT deletable(n) FROM unnest('{tagfirst,deletefirst,retained}'::text[]) n;
});
is($node->safe_psql('postgres',
		q{SELECT string_agg(name, ',' ORDER BY name) FROM paidb.framework WHERE api_server_deleted AND sub_state = 'Completed'}),
	'deletefirst,retained,tagfirst', 'three completed jobs gone from the API server');

sub settled { return lock_wait_settled($node, @_); }

sub tags_of
{
	my ($job) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM paidb.tag WHERE framework_name = '$job'");
}

# ---- the tag first
my $tagger = $node->background_psql('postgres', on_error_stop => 0);
my $deleter = $node->background_psql('postgres', on_error_stop => 0);
my $deleter_pid = $deleter->query_safe('SELECT pg_backend_pid()');
$tagger->query_safe(q{BEGIN; INSERT INTO paidb.tag (uid, framework_name, name) VALUES ('t1', 'tagfirst', 'nightly')});
$deleter->query_until(qr/sent/, "\\echo sent\nSELECT paidb.delete_job('tagfirst');\n");
is(settled($deleter_pid, 'delete_job'), 'waits', 'delete_job waits for the transaction adding a tag to the job');
$tagger->query_safe('COMMIT');
$deleter->query_safe('SELECT 1');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework WHERE name = 'tagfirst'}), '0',
	'then deletes the job');
is(tags_of('tagfirst'), '0', 'and the tag added meanwhile');

# ---- the delete first
my $tagger_pid = $tagger->query_safe('SELECT pg_backend_pid()');
$deleter->query_safe(q{BEGIN; SELECT paidb.delete_job('deletefirst')});
$tagger->query_until(qr/sent/,
	"\\echo sent\nINSERT INTO paidb.tag (uid, framework_name, name) VALUES ('t2', 'deletefirst', 'nightly');\n\\echo inserted\n");
is(settled($tagger_pid, 'INSERT INTO paidb.tag'), 'waits', 'a tag for a job being deleted waits for the delete');
$deleter->query_safe('COMMIT');
$tagger->query('SELECT 1');
like($tagger->{stderr}, qr/job "deletefirst" does not exist/, 'then fails: the job is gone')
  or diag("stderr: $tagger->{stderr}");
$tagger->{stderr} = '';
is(tags_of('deletefirst'), '0', 'and no tag is left without its job');

# ---- retention
$tagger->query_safe(q{BEGIN; INSERT INTO paidb.tag (uid, framework_name, name) VALUES ('t3', 'retained', 'nightly')});
is($node->safe_psql('postgres', q{SELECT jobs_deleted FROM paidb.retention_batch('1 day', NULL, 10)}), '0',
	'retention skips a job whose tag is being added, without waiting');
$tagger->query_safe('COMMIT');
is($node->safe_psql('postgres', q{SELECT jobs_deleted FROM paidb.retention_batch('1 day', NULL, 10)}), '1',
	'and deletes it in the next batch');
is(tags_of('retained'), '0', 'with its tag');

is($node->safe_psql('postgres',
		q{SELECT count(*) FROM paidb.tag t WHERE NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = t.framework_name)}),
	'0', 'no tag anywhere is without its job');

$tagger->quit;
$deleter->quit;
$node->stop;
done_testing();
