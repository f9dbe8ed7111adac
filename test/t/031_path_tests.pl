# "Path Test" of OpenPAI's database-controller test plan, against kube-fake.
# OpenPAI's write-merger and poller are paidb's SQL functions and its sync
# worker; "shutting down" one of them is done by failing its requests in the
# fake (fault injection), so the other parts keep running:
#
#   * rest-server checks conflicts: a job submitted twice is created once;
#     stopping a job that does not exist is refused (P0002);
#   * write merger, add/update: with nothing forwarded to the API server, two
#     equal requests give one row and one create;
#   * retain mode on: a framework created directly in the API server is left
#     alone; off: it is deleted;
#   * a requestGeneration changed in the API server marks the job
#     request_synced = false, and paidb puts its own request back;
#   * the poller's 404: a completed framework that vanished while the watcher
#     was down is marked api_server_deleted by a mocked DELETED event.
use strict;
use warnings;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use KubeFake;
use PaidbTest;

my $t0 = time();
my $fake = PaidbTest::start_fake();
my $node = PaidbTest::start_node('path_tests', $fake, retain_mode => 'on', state_log => 1);

# Set an annotation of a framework directly in the API server with a PUT
# (verb "update": faults on "patch" do not catch it), as someone else would.
sub put_annotation
{
	my ($name, $key, $value) = @_;
	for (1 .. 20)
	{
		my $obj = fake_framework($fake, $name) or return 404;
		$obj->{metadata}{annotations}{$key} = $value;
		my ($code) = $fake->api(PUT => fw_path($name), $obj);
		return $code unless $code == 409;    # 409: the controller wrote meanwhile
	}
	return 409;
}

# Keep the framework watcher out ("shut down the watcher"): its LIST and
# WATCH requests fail, its open watch is cut.  True once no watch is open.
sub block_watcher
{
	$fake->fault(status => 500, verb => 'list,watch', resource => 'frameworks', count => -1);
	$fake->cut_watches('reset', 'frameworks');
	return wait_until(sub { fake_watches($fake) == 0 });
}

# ============================================================ rest-server checks conflicts
# ---- Submit a job twice
my $dup = job_name('erin', 'submit-twice');
my $dup_req = job_request($dup, user => 'erin', job => 'submit-twice', run_seconds => '0.5');
my $first = submit($node, $dup_req);
my $second = submit($node, $dup_req);
is("$first->{created} $first->{changed} $first->{request_generation}", 't t 1', 'submit twice: the first creates the job');
is("$second->{created} $second->{changed} $second->{request_generation}", 'f f 1',
	'submit twice: the second is not taken (no change, generation 1)');
ok(poll($node, "SELECT state = 'SUCCEEDED' AND api_server_deleted FROM paidb.framework WHERE name = '$dup'"),
	'submit twice: the job runs once to SUCCEEDED and is cleaned up');
# what rest-server would send again, carrying the generation it read back
my %again = %$dup_req;
$again{metadata} = { %{ $dup_req->{metadata} },
	annotations => { %{ $dup_req->{metadata}{annotations} }, requestGeneration => '7' } };
my $third = submit($node, \%again);
is("$third->{created} $third->{changed} $third->{request_generation}", 'f f 1',
	'submit twice: the same request with another requestGeneration is no change either');
is(fake_creates($fake, $dup), 1, 'submit twice: the framework was created once in the API server');
is(col($node, $dup, 'request_generation'), '1', 'submit twice: still generation 1');

# ---- Stop a non-existent job
{
	my ($out, $err) = ('', '');
	my $ret = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT * FROM paidb.stop_framework('nosuchjob0000')",
		stdout => \$out, stderr => \$err);
	isnt($ret, 0, 'stop a non-existent job: refused');
	like($err, qr/ERROR:\s+P0002/, 'stop a non-existent job: SQLSTATE P0002 (no_data_found)');
	is(query($node, "SELECT count(*) FROM paidb.framework WHERE name = 'nosuchjob0000'"), '0',
		'stop a non-existent job: nothing is stored');
}

# ============================================================ write merger: add/update FR
# "Write-merger doesn't forward request; shutdown database poller": every
# create of this framework is refused (503), so nothing reaches the API
# server; two equal requests are faked to the write merger.
my $wm = job_name('erin', 'write-merger-dedup');
my $wm_req = job_request($wm, user => 'erin', job => 'write-merger-dedup', run_seconds => '0.5');
$fake->fault(status => 503, verb => 'create', resource => 'frameworks', name => $wm, count => -1);
my $w1 = submit($node, $wm_req);
my $w2 = submit($node, $wm_req);
is("$w1->{created} $w1->{changed} $w1->{request_generation}", 't t 1', 'write merger: the first request is stored');
is("$w2->{created} $w2->{changed} $w2->{request_generation}", 'f f 1', 'write merger: the second is ignored');
is(query($node, "SELECT count(*) || ' ' || max(request_generation) || ' ' || bool_or(request_synced)
                 FROM paidb.framework WHERE name = '$wm'"), '1 1 false', 'write merger: one row, generation 1, not synced');
ok(wait_until(sub { fake_create_attempts($fake, $wm) >= 1 }), 'write merger: the sync worker tried to create it');
is(fake_creates($fake, $wm), 0, 'write merger: but nothing was created (the fault)');
$fake->admin(DELETE => '/_fake/faults');
ok(poll($node, "SELECT state = 'SUCCEEDED' AND request_synced FROM paidb.framework WHERE name = '$wm'"),
	'write merger: once forwarded, the job runs to SUCCEEDED');
is(fake_creates($fake, $wm), 1, 'write merger: exactly one framework was created');
is(col($node, $wm, 'request_generation'), '1', 'write merger: generation 1');

# ============================================================ retain mode
# ---- on: a framework created directly in the API server is not deleted
my $direct1 = job_name('mallory', 'direct-retained');
my ($code, $obj) = $fake->api(POST => fw_path(), job_request($direct1, user => 'mallory', run_seconds => 'inf'));
is($code, 201, 'retain mode on: a framework is created directly in the API server');
my $direct1_rv = $obj->{metadata}{resourceVersion};
ok(poll($node, "SELECT resource_version::bigint >= $direct1_rv FROM paidb.watch_state WHERE split_part(watcher, chr(64), 1) = 'frameworks'"),
	'retain mode on: the framework watcher has passed its creation');
# a whole sync round after that: a job submitted now is created, confirmed, completed and deleted
my $probe = job_name('erin', 'probe-retained');
submit($node, job_request($probe, user => 'erin', job => 'probe-retained', run_seconds => '0.2'));
ok(poll($node, "SELECT api_server_deleted FROM paidb.framework WHERE name = '$probe'"),
	'retain mode on: a job submitted afterwards went all the way through');
my $d1 = fake_framework($fake, $direct1);
ok($d1 && !$d1->{metadata}{deletionTimestamp}, 'retain mode on: the framework is not deleted');
is(query($node, "SELECT (SELECT count(*) FROM paidb.framework WHERE name = '$direct1')
                   || ' ' || (SELECT count(*) FROM paidb.orphan WHERE name = '$direct1')"),
	'0 0', 'retain mode on: it is neither adopted nor queued as an orphan');

# ---- off: it is deleted
query($node, "ALTER SYSTEM SET paidb.retain_mode = off");
query($node, "SELECT pg_reload_conf()");
ok(poll($node, 'SHOW paidb.retain_mode', 'off'), 'retain mode is turned off (reload)');
my $offset = -s $node->logfile;
my $direct2 = job_name('mallory', 'direct-deleted');
($code) = $fake->api(POST => fw_path(), job_request($direct2, user => 'mallory', run_seconds => 'inf'));
is($code, 201, 'retain mode off: a framework is created directly in the API server');
ok(wait_until(sub { !defined fake_framework($fake, $direct2) }, 30),
	'retain mode off: it is deleted from the API server within seconds');
ok(wait_until(sub { log_since($node, $offset) =~ /paidb deleted framework "$direct2" that the database does not know/ }),
	'retain mode off: the deletion is logged');
ok(poll($node, "SELECT count(*) = 0 FROM paidb.orphan WHERE name = '$direct2'"),
	'retain mode off: the orphan queue is empty again');
is(col($node, $direct2, 'count(*)'), '0', 'retain mode off: it was never a job');

# ============================================================ a generation changed in the API server
# "Shutdown database poller": the sync worker's patches of this framework
# fail; "then change its requestGeneration in API server".
my $gen = job_name('erin', 'generation-changed');
submit($node, job_request($gen, user => 'erin', job => 'generation-changed', run_seconds => 'inf'));
ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$gen'"),
	'generation: the job runs, synced');
my $sync_pid = worker_pid($node, 'sync');
$fake->fault(status => 500, verb => 'patch', resource => 'frameworks', name => $gen, count => -1);
is(put_annotation($gen, 'requestGeneration', '5'), 200, 'generation: requestGeneration set to 5 in the API server');
ok(poll($node, "SELECT request_synced FROM paidb.framework WHERE name = '$gen'", 'f'),
	'generation: the job is marked request_synced = false');
is(col($node, $gen, "request_generation || ' ' || state"), '1 RUNNING', 'generation: the stored request stays generation 1');
ok(wait_until(sub { grep { $_->[2] eq '500' } fake_requests($fake, 'PATCH', qr{/frameworks/$gen$}) }),
	'generation: the sync worker tries to patch its request back (refused by the fault)');
is(fake_framework($fake, $gen)->{metadata}{annotations}{requestGeneration}, '5',
	'generation: the API server still has generation 5');
$fake->admin(DELETE => '/_fake/faults');
ok(poll($node, "SELECT request_synced FROM paidb.framework WHERE name = '$gen'"),
	'generation: once the patch goes through the job is request_synced again');
is(fake_framework($fake, $gen)->{metadata}{annotations}{requestGeneration}, '1',
	'generation: the API server has paidb\'s generation 1 again');
is(fake_creates($fake, $gen), 1, 'generation: patched back, not created again');
is(worker_pid($node, 'sync'), $sync_pid, 'generation: the sync worker survived its failed patches (same pid)');
query($node, "SELECT * FROM paidb.stop_framework('$gen')");
ok(poll($node, "SELECT state = 'STOPPED' AND api_server_deleted FROM paidb.framework WHERE name = '$gen'"),
	'generation: the job can still be stopped');

# ============================================================ the poller's 404
# Seed: submit a job; shut down the watcher after the job starts; wait until
# the job succeeded; stop the poller; start the watcher; stop the watcher;
# delete the framework manually; start the poller.  The watcher is kept out
# by failing its LIST/WATCH requests, the poller (sync worker) by failing
# its DELETEs of this framework.  The fake can only clear all faults at
# once, so "start X" is "clear all, add the other fault again": both are in
# place before each clear, and the part being kept out is then in its
# backoff, far from the millisecond between the two calls.
my $p404 = job_name('erin', 'poller-404');
submit($node, job_request($p404, user => 'erin', job => 'poller-404', hold_state => 'AttemptRunning'));
ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$p404'"),
	'404: the job runs (held)');
# 1. shut down the watcher after the job starts
ok(block_watcher(), '404: the framework watcher is shut out');
# 2. wait until the job succeeded (released through paidb: the sync worker still patches)
is(query($node, qq{SELECT request_generation FROM paidb.patch_framework_request('$p404',
	'{"metadata": {"annotations": {"kube-fake/hold-state": "released"}}}')}), '2', '404: the job is released');
ok(wait_until(sub { my $f = fake_framework($fake, $p404); $f && ($f->{status}{state} // '') eq 'Completed' }),
	'404: the job completes in the API server');
is(col($node, $p404, 'state'), 'RUNNING', '404: the database, without its watcher, still says RUNNING');
# 3. stop the poller
$sync_pid = worker_pid($node, 'sync');
$fake->fault(status => 500, verb => 'delete', resource => 'frameworks', name => $p404, count => -1);
# 4. start the watcher
$fake->admin(DELETE => '/_fake/faults');
$fake->fault(status => 500, verb => 'delete', resource => 'frameworks', name => $p404, count => -1);
ok(poll($node, "SELECT concat_ws(' ', sub_state, state, request_synced, api_server_deleted)
                  FROM paidb.framework WHERE name = '$p404'", 'Completed SUCCEEDED t f'),
	'404: after the watcher is back the job is Completed and request_synced, not deleted');
ok(wait_until(sub { grep { $_->[2] eq '500' } fake_requests($fake, 'DELETE', qr{/frameworks/$p404(\?|$)}) }),
	'404: the sync worker tries to delete the completed framework (refused)');
# 5. stop the watcher
ok(block_watcher(), '404: the framework watcher is shut out again');
# 6. delete the framework manually
is(fake_delete_directly($fake, $p404), 200, '404: the framework is deleted manually');
ok(wait_until(sub { !defined fake_framework($fake, $p404) }), '404: it is gone from the API server');
# 7. start the poller
$fake->admin(DELETE => '/_fake/faults');
$fake->fault(status => 500, verb => 'list,watch', resource => 'frameworks', count => -1);
ok(poll($node, "SELECT api_server_deleted FROM paidb.framework WHERE name = '$p404'"),
	'404: finally the job is marked api_server_deleted');
is(fake_watches($fake), 0, '404: no watch was open, so the watcher did not bring the deletion');
ok(scalar(grep { $_->[2] eq '404' } fake_requests($fake, 'DELETE', qr{/frameworks/$p404(\?|$)})),
	'404: the sync worker\'s DELETE got 404 (and mocked the DELETED event)');
is(col($node, $p404, "concat_ws(' ', state, request_synced, num_nonnulls(config_secret_def, user_extension_secret_def,
		priority_class_def, docker_secret_def, token_secret_def))"),
	'SUCCEEDED t 0', '404: the job keeps its state');
is(worker_pid($node, 'sync'), $sync_pid, '404: the sync worker survived its failed deletes (same pid)');
# the watcher comes back; nothing changes
$fake->admin(DELETE => '/_fake/faults');
ok(poll($node, "SELECT state = 'watching' FROM paidb.status() WHERE worker = 'framework watcher'")
	  && wait_until(sub { fake_watches($fake) >= 1 }),
	'404: the framework watcher watches again');
is(col($node, $p404, "concat_ws(' ', state, api_server_deleted)"), 'SUCCEEDED t', '404: the job stays deleted and SUCCEEDED');

# ============================================================ the end
is(join("\n", crash_lines($node)), '', 'no paidb process crashed');
note(sprintf('031_path_tests took %.1f s', time() - $t0));
$node->stop;
done_testing();
