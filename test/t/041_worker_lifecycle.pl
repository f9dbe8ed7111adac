# The life of paidb's background workers (SPEC §6, §7) against kube-fake:
# the sync worker is woken at COMMIT (not before, not by a ROLLBACK) and the
# create reaches the API server quickly; paidb.wakeup() wakes it; SIGHUP
# reloads the API server setting; a fast shutdown is prompt even with a
# watch open and requests hanging; a terminated worker is restarted and
# resumes; a standby runs no worker until it is promoted; without
# shared_preload_libraries the SQL functions work and status() says that no
# worker runs; status() and the server log never show the token; the
# workers stay small.
use strict;
use warnings;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use KubeFake;
use PaidbTest;

# (any single condition may take $PaidbTest::WAIT = 60 s to become true)
$PaidbTest::STEP = 0.01;

# The median of a list of numbers.
sub median
{
	my @s = sort { $a <=> $b } @_;
	return undef unless @s;
	return @s % 2 ? $s[$#s / 2] : ($s[@s / 2 - 1] + $s[@s / 2]) / 2;
}

# A framework request as rest-server builds it, with kube-fake annotations.
sub framework_json
{
	my ($name, %ann) = @_;
	return encode_json(bare_framework($name, annotations => { jobName => $name, userName => 'alice', %ann }));
}

# SQL that submits a job.
sub submit_sql
{
	my ($name, %ann) = @_;
	my $j = framework_json($name, %ann);
	return "SELECT name FROM paidb.put_framework_request(\$j\$$j\$j\$::jsonb)";
}

# The start time of the first framework create a fake logged after $since.
sub first_create_after
{
	my ($fake, $since) = @_;
	for my $r (@{ fake_request_times($fake) })
	{
		return $r->{start}
		  if $r->{method} eq 'POST' && $r->{target} =~ m{/frameworks(\?|$)}
		  && $r->{start} >= $since - 0.001;
	}
	return undef;
}

# ---------------------------------------------------------------- set-up
my ($token, $token_file) = PaidbTest::new_token('paidb-041-token-');
my ($fake1, $fake2, $fake3) = map { PaidbTest::start_fake(token_file => $token_file) } 1 .. 3;

my $node = PaidbTest::new_node('primary', $fake1, init => { allows_streaming => 1 },
	token_file => $token_file, resync_interval => '10s', retain_mode => 'off',
	restart_after_crash => 'off', conf => "max_connections = 20\n");

# One row of status() per worker: {worker => {pid, state, ...}}.
sub status_of
{
	my ($n) = @_;
	my %s;
	for my $line (split /\n/, $n->safe_psql('postgres',
		q{SELECT worker, coalesce(pid, 0), state, requests_sent, errors,
		         replace(coalesce(last_error, ''), E'\n', ' ')
		    FROM paidb.status()}))
	{
		my ($w, $pid, $state, $sent, $errors, $err) = split /\|/, $line, 6;
		$s{$w} = { pid => $pid, state => $state, sent => $sent, errors => $errors, last_error => $err };
	}
	return \%s;
}

# Wait until every worker of a node publishes a pid; returns the status.
sub wait_workers
{
	my ($n, $secs) = @_;
	my $st;
	wait_until(sub {
		$st = status_of($n);
		return 5 == grep { $_->{pid} > 0 && $_->{state} !~ /waiting|starting/ } values %$st;
	}, $secs);
	return $st;
}

my $st = wait_workers($node);
is(scalar(grep { $_->{pid} > 0 } values %$st), 5, 'five workers run on the primary')
  or diag explain $st;
is_deeply([ sort keys %$st ], [ 'event watcher', 'framework watcher', 'launcher', 'retention', 'sync' ],
	'status() names the sync worker, the two watchers, the launcher and the retention worker');
ok(wait_until(sub { $fake1->wait_for_watches(2, 1) }), 'both watchers watch the API server');
for my $w (sort keys %$st)
{
	ok(kill(0, $st->{$w}{pid}), "the $w pid $st->{$w}{pid} is a live process");
}

# ---------------------------------------------------------------- wake-up latency
# The time from the submitting transaction (clock_timestamp() inside it, just
# before its commit) to the start of the create at the API server.
my @lat;
for my $i (1 .. 11)
{
	my $name = "lat$i";
	my $t_in_xact = $node->safe_psql('postgres',
		"SELECT extract(epoch FROM clock_timestamp()) FROM (" . submit_sql($name) . ") s");
	my $arrived;
	wait_until(sub { $arrived = first_create_after($fake1, $t_in_xact) }, 10);
	if (defined $arrived)
	{
		push @lat, ($arrived - $t_in_xact) * 1000;
	}
	else
	{
		push @lat, 10_000;
	}
}
my $median = median(@lat);
diag(sprintf('commit -> create at the API server: median %.1f ms (%s ms)',
	$median, join(' ', map { sprintf('%.1f', $_) } @lat)));
cmp_ok($median, '<', 500, 'the create reaches the API server within 500 ms of COMMIT (median)');
cmp_ok((sort { $b <=> $a } @lat)[0], '<', 2000, 'every create arrives within 2 s of COMMIT');
is(fake_create_attempts($fake1, 'lat1') + 0, 1, 'the job was created once');

# ---------------------------------------------------------------- not before COMMIT
{
	my $s = $node->background_psql('postgres');
	$s->query_safe('BEGIN');
	$s->query_safe(submit_sql('open1'));
	# wake the worker on purpose: it must not see the uncommitted row
	$node->safe_psql('postgres', 'SELECT paidb.wakeup()');
	my $t_open = time();
	# an observation window: nothing may happen while the transaction is open
	wait_until(sub { fake_create_attempts($fake1, 'open1') > 0 }, 1.0);
	is(fake_create_attempts($fake1, 'open1') + 0, 0,
		'no create while the submitting transaction is open (1 s, wakeup() included)');
	my $before_commit = time();
	$s->query_safe('COMMIT');
	ok(wait_until(sub { fake_create_attempts($fake1, 'open1') > 0 }, 10),
		'the create arrives after COMMIT');
	my $arrived = first_create_after($fake1, $before_commit);
	diag(sprintf('open transaction: create %.1f ms after COMMIT was sent',
		((defined $arrived ? $arrived : time()) - $before_commit) * 1000));

	$s->query_safe('BEGIN');
	$s->query_safe(submit_sql('rolled1'));
	$s->query_safe('ROLLBACK');
	$s->quit;
	$node->safe_psql('postgres', 'SELECT paidb.wakeup()');
	wait_until(sub { fake_create_attempts($fake1, 'rolled1') > 0 }, 2.0);
	is(fake_create_attempts($fake1, 'rolled1') + 0, 0, 'a rolled-back submission never reaches the API server');
	is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework WHERE name = 'rolled1'}),
		'0', 'and leaves no row');
}

# ---------------------------------------------------------------- wakeup()
$node->safe_psql('postgres', q{
	CREATE ROLE rest_server LOGIN IN ROLE paidb_writer;
	CREATE ROLE nobody LOGIN;
});
is($node->safe_psql('postgres', 'SELECT paidb.wakeup()', extra_params => [ '-U', 'rest_server' ]),
	'', 'paidb_writer may call wakeup() (it returns void)');
{
	my ($rc, $out, $err) = $node->psql('postgres', 'SELECT paidb.wakeup()',
		extra_params => [ '-U', 'nobody' ]);
	like($err, qr/permission denied/, 'a role without paidb_writer may not call wakeup()');
}

# A job that runs until stopped; then its row is made due behind the sync
# worker's back (a direct write does not wake it): wakeup() must send it.
$node->safe_psql('postgres', submit_sql('hold1', 'kube-fake/run-seconds' => 'inf'));
ok($node->poll_query_until('postgres',
	q{SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = 'hold1'}),
	'a long-running job runs and is synced');
{
	my $patches = fake_counter($fake1, 'patch frameworks');
	$node->safe_psql('postgres',
		q{UPDATE paidb.framework SET request_synced = false, next_sync_at = NULL WHERE name = 'hold1'});
	# informative only: a direct write is outside the contract
	if (wait_until(sub { fake_counter($fake1, 'patch frameworks') > $patches }, 1.0))
	{
		diag('the sync worker found the directly updated row before wakeup()');
		$patches = fake_counter($fake1, 'patch frameworks');
		$node->safe_psql('postgres',
			q{UPDATE paidb.framework SET request_synced = false, next_sync_at = NULL WHERE name = 'hold1'});
	}
	my $t0 = time();
	$node->safe_psql('postgres', 'SELECT paidb.wakeup()', extra_params => [ '-U', 'rest_server' ]);
	ok(wait_until(sub { fake_counter($fake1, 'patch frameworks') > $patches }, 3),
		'wakeup() makes the sync worker send a due row at once');
	diag(sprintf('wakeup() -> patch: %.0f ms', (time() - $t0) * 1000));
	$node->safe_psql('postgres', q{UPDATE paidb.framework SET request_synced = true WHERE name = 'hold1'});
}

# ---------------------------------------------------------------- load and memory
$node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 300) i,
	  paidb.put_framework_request(jsonb_build_object(
	    'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
	    'metadata', jsonb_build_object('name', 'load' || i,
	        'annotations', jsonb_build_object('kube-fake/exit-codes', CASE WHEN i % 3 = 0 THEN '1,0' ELSE '0' END)),
	    'spec', jsonb_build_object('executionType', 'Start',
	        'retryPolicy', jsonb_build_object('fancyRetryPolicy', false, 'maxRetryCount', 1),
	        'taskRoles', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskNumber', 2,
	            'task', jsonb_build_object('pod', jsonb_build_object('spec', jsonb_build_object(
	                'containers', jsonb_build_array(jsonb_build_object('name', 'c', 'image', 'busybox'))))))))))});
ok($node->poll_query_until('postgres',
	q{SELECT count(*) = 300 FROM paidb.framework WHERE name LIKE 'load%' AND state = 'SUCCEEDED' AND api_server_deleted}),
	'300 jobs ran to SUCCEEDED and their frameworks were deleted');
is($node->safe_psql('postgres',
	q{SELECT count(*) FROM paidb.framework WHERE name LIKE 'load%' AND retries <> CASE WHEN substr(name, 5)::int % 3 = 0 THEN 1 ELSE 0 END}),
	'0', 'every retry was seen');

$st = status_of($node);
for my $w (sort keys %$st)
{
	my $pid = $st->{$w}{pid};
	my %m;
	if (open(my $fh, '<', "/proc/$pid/status"))
	{
		while (<$fh>) { $m{$1} = $2 if /^(VmRSS|VmHWM|RssAnon|RssShmem):\s+(\d+) kB/; }
		close($fh);
	}
	# under ASan (test/suites/90_asan.sh) shadow memory, redzones and the
	# quarantine multiply a process's memory: the bound grows by this factor
	my $limit_mb = 64 * ($ENV{PAIDB_TEST_MEMORY_FACTOR} // 1);
	ok(defined $m{VmRSS} && $m{VmRSS} < $limit_mb * 1024,
		"the $w stays under $limit_mb MB: VmRSS " . int(($m{VmRSS} // 0) / 1024) . ' MB');
	diag(sprintf('%s: VmRSS %.1f MB, VmHWM %.1f MB, RssAnon %.1f MB, RssShmem %.1f MB', $w,
		map { ($m{$_} // 0) / 1024 } qw(VmRSS VmHWM RssAnon RssShmem)));
}

# ---------------------------------------------------------------- restart after a crash
# (the launcher last: a new launcher starts every cluster's workers afresh)
for my $w ('sync', 'framework watcher', 'event watcher', 'retention', 'launcher')
{
	my $old = status_of($node)->{$w}{pid};
	my $lists = fake_counter($fake1, 'list frameworks');
	my $watches = fake_counter($fake1, 'watch frameworks');
	my $t0 = time();
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($old)");
	my $new;
	ok(wait_until(sub {
		my $p = status_of($node)->{$w}{pid};
		$new = $p if $p > 0 && $p != $old;
		return $new;
	}, 10), "the $w is restarted after pg_terminate_backend");
	my $dt = time() - $t0;
	cmp_ok($dt, '<', 3, sprintf('the new %s pid appears within 3 s (%.1f s)', $w, $dt));
	if ($w eq 'framework watcher')
	{
		ok(wait_until(sub { fake_counter($fake1, 'watch frameworks') > $watches }, 10),
			'the restarted framework watcher watches again');
		is(fake_counter($fake1, 'list frameworks'), $lists,
			'it resumed from the stored resourceVersion without listing');
	}
}
$node->safe_psql('postgres', submit_sql('after1'));
ok($node->poll_query_until('postgres',
	q{SELECT state = 'SUCCEEDED' FROM paidb.framework WHERE name = 'after1'}),
	'work goes on after the restarts');
is(fake_create_attempts($fake1, 'after1') + 0, 1, 'the new job was created once');

# ---------------------------------------------------------------- SIGHUP
$node->append_conf('postgresql.conf', "paidb.k8s_api_server = '" . $fake2->url . "'\n");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres',
	"SELECT current_setting('paidb.k8s_api_server') = '" . $fake2->url . "'"),
	'the new API server setting is in effect');
# the workers reload at their next wake-up; a job submitted now goes to fake2
my $t_hup = time();
$node->safe_psql('postgres', submit_sql('hup1'));
ok(wait_until(sub { fake_create_attempts($fake2, 'hup1') > 0 }, 15),
	'after SIGHUP a new job is created in the second API server');
is(fake_create_attempts($fake1, 'hup1') + 0, 0, 'and not in the first');
ok(wait_until(sub { $fake2->wait_for_watches(1, 1) }, 15), 'the watchers moved to the second API server');

# ---------------------------------------------------------------- SIGTERM: fast shutdown
$fake2->pause('hang');
$node->safe_psql('postgres', submit_sql('hang1'));
ok(wait_until(sub { status_of($node)->{sync}{state} eq 'sending' }, 10),
	'the sync worker has a request hanging in the API server');
my @pids = map { $_->{pid} } values %{ status_of($node) };
my $t_stop = time();
my $stopped = $node->stop('fast', fail_ok => 1);
my $stop_secs = time() - $t_stop;
ok($stopped, 'pg_ctl stop -m fast succeeds');
cmp_ok($stop_secs, '<', 5, sprintf('and takes under 5 s with a watch open and requests hanging (%.1f s)', $stop_secs));
ok(!grep({ $_ > 0 && kill(0, $_) } @pids), 'no worker process is left');
$fake2->resume;
$node->start;
$st = wait_workers($node);
is(scalar(grep { $_->{pid} > 0 } values %$st), 5, 'the workers run again after the restart');
ok(wait_until(sub { fake_create_attempts($fake2, 'hang1') > 0 }, 30),
	'the job whose request hung at the shutdown is created after the restart');
ok($node->poll_query_until('postgres',
	q{SELECT state = 'SUCCEEDED' FROM paidb.framework WHERE name = 'hang1'}),
	'and it runs to SUCCEEDED');

# ---------------------------------------------------------------- standby
$node->backup('bk');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'bk', has_streaming => 1);
$standby->append_conf('postgresql.conf', "paidb.k8s_api_server = '" . $fake3->url . "'\n");
$standby->start;
$node->safe_psql('postgres', submit_sql('replicated1'));
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework WHERE name = 'replicated1'}),
	'1', 'the standby replays paidb tables');
# an observation window: a standby must not talk to the API server
wait_until(sub { $fake3->counters->{total} > 0 }, 2.0);
is($standby->safe_psql('postgres', 'SELECT count(*) FROM paidb.status() WHERE pid IS NOT NULL'),
	'0', 'status() on the standby shows no worker pid');
is($standby->safe_psql('postgres',
	q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'paidb%'}),
	'0', 'no paidb worker process runs on the standby');
is($fake3->counters->{total}, 0, 'the standby sent no request to its API server');
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'), 'the standby is promoted');
$st = wait_workers($standby, 30);
is(scalar(grep { $_->{pid} > 0 } values %$st), 5, 'after promotion its five workers run')
  or diag explain $st;
ok(wait_until(sub { ($fake3->counters->{total} // 0) > 0 }, 30),
	'and they talk to the API server');
my $standby_status = $standby->safe_psql('postgres', 'SELECT paidb.status()::text');
$standby->stop('fast');

# ---------------------------------------------------------------- without preloading
my $plain = PostgreSQL::Test::Cluster->new('nopreload');
$plain->init;
$plain->append_conf('postgresql.conf', "paidb.k8s_api_server = '" . $fake3->url . "'\n");
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION paidb CASCADE');
is($plain->safe_psql('postgres', submit_sql('plain1')), 'plain1',
	'without preloading, put_framework_request works');
is($plain->safe_psql('postgres', q{SELECT state FROM paidb.framework WHERE name = 'plain1'}),
	'WAITING', 'and the job is WAITING');
is($plain->safe_psql('postgres', 'SELECT count(*) FROM paidb.status() WHERE pid IS NULL'),
	'4', 'status() lists the four workers without a pid');
like($plain->safe_psql('postgres', 'SELECT string_agg(DISTINCT state, \',\') FROM paidb.status()'),
	qr/not running.*shared_preload_libraries/, 'and says that no worker runs');
is($plain->safe_psql('postgres', 'SELECT paidb.wakeup()'), '', 'wakeup() is harmless there');
my $plain_log = slurp_file($plain->logfile);
$plain->stop('fast');

# ---------------------------------------------------------------- no credential anywhere
my $status_text = $node->safe_psql('postgres', 'SELECT paidb.status()::text');
unlike($status_text . $standby_status, qr/\Q$token\E/, 'status() never shows the token');
unlike(slurp_file($node->logfile) . slurp_file($standby->logfile) . $plain_log, qr/\Q$token\E/,
	'the server logs never contain the token');
unlike(join('', map { $_->output } $fake1, $fake2, $fake3), qr/Traceback/, 'kube-fake reported no internal error');

$node->stop('fast');
done_testing();
