# A submission and a change of its cluster at the same time (SPEC §11).
# put_framework_request locks the cluster row FOR KEY SHARE by its key
# (src/pkey_lookup.c, no statement), and must behave as the statement
# SELECT ... FOR KEY SHARE it replaced:
#
#   * the submission first: remove_cluster (FOR UPDATE) waits for it, then
#     counts its job and refuses (55000);
#   * the cordon first: the submission waits for it, then reads the new
#     version of the row and refuses (55000, "cordoned"); nothing stored;
#   * the cordon rolled back: the waiting submission goes through;
#   * REPEATABLE READ: a cluster row updated after the transaction's
#     snapshot in a column other than its key is locked and read as the
#     snapshot has it (FOR KEY SHARE does not conflict with such an update);
#     its key updated, the submission fails with a serialization failure
#     (40001), as FOR KEY SHARE in a statement does;
#   * the cluster renamed meanwhile: the new version carries another key,
#     so the submission names the cluster as missing (22023).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t/lib';
use PaidbTest;

my $node = PostgreSQL::Test::Cluster->new('placement_locks');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
CREATE EXTENSION paidb CASCADE;
INSERT INTO paidb.cluster (name) VALUES ('x'), ('y'), ('z'), ('r'), ('k'), ('n');
CREATE FUNCTION job(n text) RETURNS jsonb LANGUAGE sql AS $$
SELECT jsonb_build_object('metadata', jsonb_build_object('name', n,
         'labels', '{"userName": "alice", "virtualCluster": "default"}'::jsonb),
       'spec', jsonb_build_object('executionType', 'Start'))
$$;
});

sub settled { return lock_wait_settled($node, @_); }

sub jobs_named
{
	my ($name) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM paidb.framework WHERE name = '$name'");
}

my $submitter = $node->background_psql('postgres', on_error_stop => 0);
my $admin = $node->background_psql('postgres', on_error_stop => 0);
my $submitter_pid = $submitter->query_safe('SELECT pg_backend_pid()');
my $admin_pid = $admin->query_safe('SELECT pg_backend_pid()');

# ---- the submission first
$submitter->query_safe(q{BEGIN; SELECT paidb.put_framework_request(job('first'), now(), '{}', 'x')});
$admin->query_until(qr/sent/, "\\echo sent\nSELECT paidb.remove_cluster('x');\n");
is(settled($admin_pid, 'remove_cluster'), 'waits', 'remove_cluster waits for a submission placing a job in the cluster');
$submitter->query_safe('COMMIT');
$admin->query('SELECT 1');
like($admin->{stderr}, qr/cluster "x" has 1 jobs/, 'then counts the job and refuses')
  or diag("stderr: $admin->{stderr}");
$admin->{stderr} = '';
is($node->safe_psql('postgres', q{SELECT state FROM paidb.cluster WHERE name = 'x'}), 'active', 'x stays active');
is($node->safe_psql('postgres', q{SELECT cluster FROM paidb.framework WHERE name = 'first'}), 'x', 'the job is in x');

# ---- the cordon first
$admin->query_safe(q{BEGIN; UPDATE paidb.cluster SET state = 'cordoned' WHERE name = 'y'});
$submitter->query_until(qr/sent/,
	"\\echo sent\nSELECT paidb.put_framework_request(job('cordoned'), now(), '{}', 'y');\n");
# an update of a non-key column takes FOR NO KEY UPDATE, which FOR KEY SHARE
# does not wait for: the submission reads the row's committed version
is(settled($submitter_pid, 'put_framework_request'), 'done',
	'a submission does not wait for an uncommitted cordon (a non-key update)');
is(jobs_named('cordoned'), '1', 'and places its job in the cluster still active for it');
$admin->query_safe('COMMIT');

$admin->query_safe(q{BEGIN; SELECT 1 FROM paidb.cluster WHERE name = 'z' FOR UPDATE;
                     UPDATE paidb.cluster SET state = 'cordoned' WHERE name = 'z'});
$submitter->query_until(qr/sent/,
	"\\echo sent\nSELECT paidb.put_framework_request(job('locked'), now(), '{}', 'z');\n");
is(settled($submitter_pid, 'put_framework_request'), 'waits',
	'a submission waits for a transaction holding its cluster row FOR UPDATE');
$admin->query_safe('COMMIT');
$submitter->query('SELECT 1');
like($submitter->{stderr}, qr/cluster "z" is cordoned: it takes no new jobs/,
	'then reads the row as committed and refuses: the cluster is cordoned')
  or diag("stderr: $submitter->{stderr}");
$submitter->{stderr} = '';
is(jobs_named('locked'), '0', 'nothing is stored');

# ---- the lock holder rolls back
$node->safe_psql('postgres', q{UPDATE paidb.cluster SET state = 'active' WHERE name = 'z'});
$admin->query_safe(q{BEGIN; SELECT 1 FROM paidb.cluster WHERE name = 'z' FOR UPDATE;
                     UPDATE paidb.cluster SET state = 'cordoned' WHERE name = 'z'});
$submitter->query_until(qr/sent/,
	"\\echo sent\nSELECT paidb.put_framework_request(job('rolledback'), now(), '{}', 'z');\n");
is(settled($submitter_pid, 'put_framework_request'), 'waits', 'a submission waits again');
$admin->query_safe('ROLLBACK');
$submitter->query('SELECT 1');
is($submitter->{stderr}, '', 'and goes through once the cordon is rolled back');
is($node->safe_psql('postgres', q{SELECT cluster FROM paidb.framework WHERE name = 'rolledback'}), 'z',
	'its job is in z');

# ---- REPEATABLE READ and a row updated after the snapshot
$submitter->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM paidb.cluster});
$admin->query_safe(q{UPDATE paidb.cluster SET api_server = 'https://r.example:6443', state = 'cordoned' WHERE name = 'r'});
$submitter->query(q{SELECT paidb.put_framework_request(job('snapshotrow'), now(), '{}', 'r')});
is($submitter->{stderr}, '',
	'REPEATABLE READ: a cluster row updated (not its key) after the snapshot is read as the snapshot has it')
  or diag("stderr: $submitter->{stderr}");
$submitter->{stderr} = '';
$submitter->query_safe('COMMIT');
is(jobs_named('snapshotrow'), '1', 'the job is stored');

$submitter->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM paidb.cluster});
$admin->query_safe(q{UPDATE paidb.cluster SET name = 'k2' WHERE name = 'k'});
$submitter->query(q{SELECT paidb.put_framework_request(job('stale'), now(), '{}', 'k')});
like($submitter->{stderr}, qr/could not serialize access due to concurrent update/,
	'REPEATABLE READ: a cluster whose key was updated after the snapshot is a serialization failure')
  or diag("stderr: $submitter->{stderr}");
$submitter->{stderr} = '';
$submitter->query_safe('ROLLBACK');
is(jobs_named('stale'), '0', 'nothing is stored');

# ---- the key changed while the submission waited
$admin->query_safe(q{BEGIN; UPDATE paidb.cluster SET name = 'n2' WHERE name = 'n'});
$submitter->query_until(qr/sent/,
	"\\echo sent\nSELECT paidb.put_framework_request(job('renamed'), now(), '{}', 'n');\n");
is(settled($submitter_pid, 'put_framework_request'), 'waits', 'a submission waits for a key update of its cluster');
$admin->query_safe('COMMIT');
$submitter->query('SELECT 1');
like($submitter->{stderr}, qr/cluster "n" does not exist/, 'then finds no cluster of that name')
  or diag("stderr: $submitter->{stderr}");
$submitter->{stderr} = '';
is(jobs_named('renamed'), '0', 'nothing is stored');

$submitter->quit;
$admin->quit;
$node->stop;
done_testing();
