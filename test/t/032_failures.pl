# "Test in Certain Case" of OpenPAI's database-controller test plan: what
# happens to jobs when a part of the system fails, against kube-fake.
#
#   * database failure: PostgreSQL stops while a job runs; the job goes on in
#     the API server; a submission fails cleanly; after the restart the
#     framework watcher resumes from its stored resourceVersion (a WATCH, no
#     new LIST), the job is recorded as SUCCEEDED, and submissions work again;
#   * database controller failure: each of paidb's three workers is killed
#     with SIGKILL in turn while jobs are submitted and running.  (PostgreSQL
#     answers the death of any backend by SIGKILL with crash recovery: every
#     backend, the other workers included, restarts; a client submitting
#     meanwhile is refused and tries again, as rest-server would.  Unlike
#     OpenPAI, where the write merger was the database controller, paidb
#     takes submissions in SQL, so they are refused only while the server
#     itself recovers.)  Every job ends in the right state, retried attempts
#     are recorded once, and no framework is created twice;
#   * framework controller failure: with kube-fake's controller paused a
#     submitted job is created and synced but stays WAITING; resumed, it
#     runs to SUCCEEDED.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use KubeFake;
use PaidbTest;

my $t0 = time();
my $fake = PaidbTest::start_fake();
# (start_node turns restart_after_crash on, as on a real server: needed here)
my $node = PaidbTest::start_node('failures', $fake, state_log => 1);

# Submit, trying again while the server refuses connections (crash
# recovery); true once a submission went through.
sub submit_until_accepted
{
	my ($req) = @_;
	return wait_until(sub { my ($ret) = try_submit($node, $req); $ret == 0 });
}

# ============================================================ database failure
my $dbjob = job_name('frank', 'database-failure');
submit($node, job_request($dbjob, user => 'frank', job => 'database-failure', run_seconds => '4'));
ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$dbjob'"),
	'database failure: the job runs');
my $stored_rv = query($node, "SELECT resource_version FROM paidb.watch_state WHERE watcher = 'frameworks'");
my $lists = fake_counter($fake, 'list frameworks');
my $watches = fake_counter($fake, 'watch frameworks');
$node->stop('fast');
ok(wait_until(sub { my $f = fake_framework($fake, $dbjob); $f && ($f->{status}{state} // '') eq 'Completed' }),
	'database failure: the job is not affected, it completes in the API server');
is(fake_framework($fake, $dbjob)->{status}{attemptStatus}{completionStatus}{code}, 0,
	'database failure: it succeeded there');
my $second = job_name('frank', 'database-failure-second');
my $second_req = job_request($second, user => 'frank', job => 'database-failure-second', run_seconds => '0.2');
my ($ret, undef, $err) = try_submit($node, $second_req);
isnt($ret, 0, 'database failure: another job cannot be submitted');
like($err, qr/could not connect|connection to server .* failed|Connection refused|No such file or directory/,
	'database failure: the client is told it cannot connect');

my $offset = -s $node->logfile;
$node->start;
ok(wait_for_workers($node), 'database failure: the workers run again after the start');
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$dbjob'", 'SUCCEEDED'),
	'database failure: the job is recorded as SUCCEEDED');
is(state_path($node, $dbjob), 'WAITING RUNNING SUCCEEDED', 'database failure: its path is complete');
my ($resumed) = log_since($node, $offset) =~ /paidb framework watcher: resuming the watch of frameworks at resourceVersion "(\d+)"/;
ok(defined $resumed && $resumed >= $stored_rv,
	"database failure: the framework watcher resumed from the stored resourceVersion ($stored_rv, resumed at "
	  . ($resumed // 'none') . ')');
is(fake_counter($fake, 'list frameworks'), $lists, 'database failure: no new LIST of frameworks');
cmp_ok(fake_counter($fake, 'watch frameworks'), '>', $watches, 'database failure: a new WATCH instead');
ok(poll($node, "SELECT api_server_deleted FROM paidb.framework WHERE name = '$dbjob'"),
	'database failure: the completed job is deleted from the API server');
is(submit($node, $second_req)->{created}, 't', 'database failure: after the start a job can be submitted');
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$second'", 'SUCCEEDED'),
	'database failure: and it runs to SUCCEEDED');

# ============================================================ database controller failure
# name => [expected state, retries]
my %expect;
my @long;
my $round = 0;
for my $worker ('sync', 'framework watcher', 'event watcher')
{
	$round++;
	my $tag = $worker =~ s/ /-/r;
	my $ok = job_name('grace', "kill-$tag-ok");
	my $fail = job_name('grace', "kill-$tag-fail");
	my $long = job_name('grace', "kill-$tag-long");
	submit($node, job_request($ok, user => 'grace', job => "kill-$tag-ok", run_seconds => '1.5'));
	submit($node, job_request($fail, user => 'grace', job => "kill-$tag-fail", exit_codes => '1',
		max_retry => 1, run_seconds => '0.5'));
	submit($node, job_request($long, user => 'grace', job => "kill-$tag-long", run_seconds => 'inf'));
	$expect{$ok} = [ 'SUCCEEDED', 0 ];
	$expect{$fail} = [ 'FAILED', 1 ];
	$expect{$long} = [ 'STOPPED', 0 ];
	push @long, $long;
	ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = '$ok'"),
		"kill $worker: a job is running");

	my %pids = map { $_ => worker_pid($node, $_) } ('sync', 'framework watcher', 'event watcher');
	is(query($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pids{$worker}"), '1',
		"kill $worker: its pid $pids{$worker} is a backend");
	# submitted just before the kill: its create is likely in flight
	my $pre = job_name('grace', "kill-$tag-pre");
	submit($node, job_request($pre, user => 'grace', job => "kill-$tag-pre", run_seconds => '0.3'));
	$expect{$pre} = [ 'SUCCEEDED', 0 ];
	ok(kill('KILL', $pids{$worker}), "kill $worker: SIGKILL sent to $pids{$worker}");
	# a submission while the server recovers: refused, tried again
	my $during = job_name('grace', "kill-$tag-during");
	ok(submit_until_accepted(job_request($during, user => 'grace', job => "kill-$tag-during", run_seconds => '0.3')),
		"kill $worker: a job submitted meanwhile is accepted once the server is back");
	$expect{$during} = [ 'SUCCEEDED', 0 ];
	ok(wait_for_workers($node, %pids), "kill $worker: the three workers run again (new pids)");
}

# the long jobs are stopped once every worker has been killed
for my $long (@long)
{
	ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = '$long'"), 'long job still RUNNING');
	query($node, "SELECT * FROM paidb.stop_framework('$long')");
}
for my $name (sort keys %expect)
{
	my ($state, $retries) = @{ $expect{$name} };
	ok(poll($node, "SELECT concat_ws(' ', state, retries, api_server_deleted) FROM paidb.framework WHERE name = '$name'",
			"$state $retries t"),
		"worker kills: job $name ends $state with $retries retries and is cleaned up");
}
my $counters = $fake->counters;
for my $name (sort keys %expect)
{
	is($counters->{creates}{frameworks}{$name} // 0, 1, "worker kills: job $name was created exactly once");
	my $attempts = $counters->{createAttempts}{frameworks}{$name} // 0;
	# a create whose confirmation was lost in a crash may be resent after
	# paidb.resync_interval (SPEC §6) and answered 409: allowed, not a second framework
	note("job $name: $attempts create requests") if $attempts > 1;
}
my @failed = grep { $expect{$_}[0] eq 'FAILED' } sort keys %expect;
is(query($node, "SELECT string_agg(framework_name || ':' || attempt_index || ':' || (uid = paidb.history_uid(framework_name, attempt_index)), ',' ORDER BY framework_name)
                 FROM paidb.framework_history WHERE framework_name IN ('" . join("','", @failed) . "')"),
	join(',', map { "$_:0:true" } sort @failed), 'worker kills: each retried attempt is in the history exactly once');
my $crashes = () = log_since($node) =~ /terminated by signal 9: Killed/g;
is($crashes, 3, 'worker kills: three SIGKILLs');
is(join("\n", crash_lines($node, allow_kill => 1)), '', 'worker kills: no process crashed by itself');

# ============================================================ framework controller failure
$fake->admin(POST => '/_fake/controller/pause');
my $fc = job_name('heidi', 'framework-controller-failure');
submit($node, job_request($fc, user => 'heidi', job => 'framework-controller-failure', run_seconds => '1'));
ok(wait_until(sub { fake_framework($fake, $fc) }), 'framework controller down: the framework is created');
ok(poll($node, "SELECT state = 'WAITING' AND request_synced FROM paidb.framework WHERE name = '$fc'"),
	'framework controller down: the job is synced and WAITING');
# everything the API server has now has reached the database (bookmarks carry the resourceVersion)
my $rv_now = $fake->resource_version;
ok(poll($node, "SELECT resource_version::bigint >= $rv_now FROM paidb.watch_state WHERE watcher = 'frameworks'"),
	'framework controller down: the watcher is up to date');
is(col($node, $fc, 'state'), 'WAITING', 'framework controller down: the job stays WAITING');
ok(!defined fake_framework($fake, $fc)->{status}, 'framework controller down: nothing drives it in the API server');
$fake->admin(POST => '/_fake/controller/resume');
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$fc'", 'SUCCEEDED'),
	'framework controller back: the job runs to SUCCEEDED');
is(state_path($node, $fc), 'WAITING RUNNING SUCCEEDED', 'framework controller back: WAITING -> RUNNING -> SUCCEEDED');

# ============================================================ the end
is(join("\n", crash_lines($node, allow_kill => 1)), '', 'no paidb process crashed by itself');
note(sprintf('032_failures took %.1f s', time() - $t0));
$node->stop;
done_testing();
