# "Upgrade Test" of OpenPAI's database-controller test plan ("Upgrade from
# v1.0.y / v1.1.y"): a cluster that already has jobs when paidb arrives.
# Before CREATE EXTENSION the API server (kube-fake) holds, as an older
# OpenPAI left them:
#   * a running job (v1.0 style: no requestGeneration annotation),
#   * a completed job with retry history (v1.1 style: requestGeneration "3"),
#     whose two retried attempts OpenPAI's fluentd had written to the history
#     table under md5(name+attempt+retry) keys,
#   * a completed job without retries;
# and the extension is created together with those history rows.  Retain
# mode is off, so anything paidb took for an orphan would be deleted.
# Expected: the frameworks are imported (not deleted), the running job
# keeps running and completes normally, the completed ones are recorded with
# the right state and retries, and the history rows keep their keys.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use KubeFake;
use PaidbTest;

my $t0 = time();
my $fake = PaidbTest::start_fake();

my $running = job_name('olduser', 'running-job');
my $retried = job_name('olduser', 'completed-with-retries');
my $done = job_name('olduser', 'completed-no-retries');

# ---- what the older OpenPAI created
my $req = job_request($running, user => 'olduser', job => 'running-job', hold_state => 'AttemptRunning');
my ($code) = $fake->api(POST => fw_path(), $req);
is($code, 201, 'old cluster: the running job exists');
$req = job_request($retried, user => 'olduser', job => 'completed-with-retries', exit_codes => '1,1,0',
	max_retry => 3, run_seconds => '0.1', annotations => { requestGeneration => '3' });
($code) = $fake->api(POST => fw_path(), $req);
is($code, 201, 'old cluster: the job with retries exists');
$req = job_request($done, user => 'olduser', job => 'completed-no-retries', run_seconds => '0.1');
($code) = $fake->api(POST => fw_path(), $req);
is($code, 201, 'old cluster: the job without retries exists');

# Wait until the API server shows them as the old OpenPAI left them.
sub fake_state
{
	my ($name) = @_;
	my $f = fake_framework($fake, $name) or return '';
	return join(' ', $f->{status}{state} // '', $f->{status}{retryPolicyStatus}{totalRetriedCount} // '');
}
ok(wait_until(sub { fake_state($running) eq 'AttemptRunning 0' }), 'old cluster: one job is running');
ok(wait_until(sub { fake_state($retried) eq 'Completed 2' }), 'old cluster: one completed after 2 retries');
ok(wait_until(sub { fake_state($done) eq 'Completed 0' }), 'old cluster: one completed without retries');
my $running_before = fake_framework($fake, $running);

# ---- paidb arrives: the server starts, the extension is created along with
# the history rows OpenPAI had written and the test's state log (same
# transaction: the workers only start once the extension exists)
my $node = PaidbTest::new_node('upgrade', $fake, retain_mode => 'off', no_extension => 1);
install_sql();

# Two retried attempts of $retried as OpenPAI's fluentd stored them.
sub install_sql
{
	my @rows;
	for my $i (0, 1)
	{
		my $snap = {
			apiVersion => 'frameworkcontroller.microsoft.com/v1',
			kind => 'Framework',
			metadata => { name => $retried, annotations => { requestGeneration => '3' } },
			status => {
				state => 'AttemptCompleted',
				attemptStatus => {
					id => $i,
					completionStatus => { code => 1, phrase => 'ContainerUnrecognizedFailed',
						type => { name => 'Failed', attributes => [] } },
					taskRoleStatuses => [],
				},
				retryPolicyStatus => { totalRetriedCount => $i, accountableRetriedCount => $i, retryDelaySec => 0 },
			},
		};
		push @rows, sprintf("('%s', '%s', %d, 'retry', %s, '2020-08-01 00:00:0%d+00', '2020-08-01 00:00:0%d+00')",
			md5_hex("$retried+$i+retry"), $retried, $i, sql_json($snap), $i, $i);
	}
	$node->safe_psql('postgres', "BEGIN;
		CREATE EXTENSION paidb CASCADE;
		INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, history_type, snapshot_packed, inserted_at, updated_at)
		SELECT uid, name, attempt, type, paidb.pack_snapshot(snap::jsonb), inserted::timestamptz, updated::timestamptz FROM (VALUES " . join(",\n", @rows) . ")
		    v(uid, name, attempt, type, snap, inserted, updated);
		" . state_log_sql() . "
		COMMIT;");
}
my $history_before = query($node, "SELECT string_agg(uid || ' ' || attempt_index || ' ' || md5(paidb.snapshot(h)::text) || ' ' || inserted_at, ',' ORDER BY uid)
                                    FROM paidb.framework_history h");
ok(wait_for_workers($node), 'the three paidb workers run and both watchers watch');

# ---- the frameworks are imported, not deleted as orphans
ok(poll($node, "SELECT count(*) FROM paidb.framework WHERE name IN ('$running', '$retried', '$done')", '3'),
	'upgrade: the three jobs are imported');
is(query($node, 'SELECT count(*) FROM paidb.orphan'), '0', 'upgrade: none is an orphan');
ok(poll($node, "SELECT concat_ws(' ', state, sub_state, request_synced, request_generation, retries, api_server_deleted,
                                 submission_time = creation_time, user_name, job_name)
                  FROM paidb.framework WHERE name = '$running'",
		'RUNNING AttemptRunning t 1 0 f t olduser running-job'),
	'upgrade: the running job is RUNNING, synced, generation 1 (no annotation), submitted when created');
my $running_now = fake_framework($fake, $running);
is_deeply([ $running_now->{metadata}{uid}, $running_now->{status}{attemptStatus}{id}, $running_now->{status}{startTime} ],
	[ $running_before->{metadata}{uid}, 0, $running_before->{status}{startTime} ],
	'upgrade: the running job is untouched in the API server (same uid, same attempt)');
is(fake_creates($fake, $running), 1, 'upgrade: it was not created again');
ok(poll($node, "SELECT concat_ws(' ', state, request_generation, retries, app_exit_code, request_synced)
                  FROM paidb.framework WHERE name = '$retried'", 'SUCCEEDED 3 2 0 t'),
	'upgrade: the job with retries is SUCCEEDED, generation 3, 2 retries');
ok(poll($node, "SELECT concat_ws(' ', state, request_generation, retries, app_exit_code, request_synced)
                  FROM paidb.framework WHERE name = '$done'", 'SUCCEEDED 1 0 0 t'),
	'upgrade: the job without retries is SUCCEEDED, no retries');
ok(poll($node, "SELECT bool_and(api_server_deleted) FROM paidb.framework WHERE name IN ('$retried', '$done')"),
	'upgrade: the completed jobs are then deleted from the API server, as OpenPAI\'s poller did');

# ---- the history keeps its keys
is(query($node, "SELECT string_agg(uid || ' ' || attempt_index || ' ' || md5(paidb.snapshot(h)::text) || ' ' || inserted_at, ',' ORDER BY uid)
                  FROM paidb.framework_history h"), $history_before,
	'upgrade: the history rows are still there, same keys, same content');
is(query($node, "SELECT string_agg(paidb.history_uid('$retried', i), ',' ORDER BY i) FROM generate_series(0, 1) i"),
	join(',', map { md5_hex("$retried+$_+retry") } 0, 1), 'upgrade: paidb computes the same keys as OpenPAI');
is(query($node, "SELECT count(*) FROM paidb.framework_history WHERE framework_name IN ('$running', '$done')"), '0',
	'upgrade: no history for the jobs without retries');

# ---- the running job completes normally
is(query($node, qq{SELECT request_generation || ' ' || changed FROM paidb.patch_framework_request('$running',
	'{"metadata": {"annotations": {"kube-fake/hold-state": "released"}}}')}), '2 true',
	'upgrade: the running job can be changed (released)');
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$running'", 'SUCCEEDED'),
	'upgrade: the running job completes: SUCCEEDED');
ok(poll($node, "SELECT api_server_deleted AND request_generation = 2 FROM paidb.framework WHERE name = '$running'"),
	'upgrade: and is cleaned up like any job');
is(state_path($node, $running), 'RUNNING SUCCEEDED', 'upgrade: it went RUNNING -> SUCCEEDED, never back to WAITING');
is(state_path($node, $retried) . ' / ' . state_path($node, $done), 'SUCCEEDED / SUCCEEDED',
	'upgrade: the completed jobs were imported as completed');

# ---- retain mode off does delete what is not a job (the import was no accident)
my $stranger = job_name('mallory', 'after-upgrade');
($code) = $fake->api(POST => fw_path(), job_request($stranger, user => 'mallory', run_seconds => 'inf'));
is($code, 201, 'after the upgrade a framework is created directly in the API server');
ok(wait_until(sub { !defined fake_framework($fake, $stranger) }, 30), 'and, retain mode being off, it is deleted');

is(join("\n", crash_lines($node)), '', 'no paidb process crashed');
note(sprintf('033_upgrade took %.1f s', time() - $t0));
$node->stop;
done_testing();
