# One cluster's failure never slows another, and a partition loses nothing
# (SPEC §11).  One node drives:
#   default   kube-fake A (healthy; the paidb.k8s_* settings)
#   p         kube-fake P (healthy, then partitioned in part 3)
#   hung      a listener that accepts connections and never answers
#   refused   a port that refuses connections (bound, never listening)
#   e500      kube-fake E5 answering 500 to every API request
#   e429      kube-fake E4 answering 429 (Retry-After: 1) to every API request
#   garbage   hostile-api "bad_chunk": every answer is a broken chunked body
#   trickle   hostile-api "slow": every answer one byte a second
#   wgarbage  hostile-api "watch_garbage": watches stream garbage lines
#             (lists and writes pass through to kube-fake G)
# Parts 1 and 2 run with paidb.k8s_timeout = 20s and paidb.resync_interval
# = 60s, parts 3 and 4 with 3s and 3s (by reload).
#
#  1. baseline: 20 jobs submitted to the default cluster, while only healthy
#     clusters exist, are created and reach SUCCEEDED (and are deleted from
#     their API server) in T_base seconds;
#  2. isolation: the seven broken clusters are registered, each gets its
#     three workers and reports a last_error in cluster_status, and holds
#     jobs of its own (fresh ones submitted just before the run, so their
#     sync workers are busy failing during it); 20 more jobs to the default
#     cluster complete within 2 * T_base + 10 s, each created once in fake A
#     only; the broken clusters' jobs keep their state (WAITING, not synced,
#     not deleted, same cluster and placement, nothing created in another
#     fake); every cluster has 3 workers; the workers of default and p kept
#     their pids throughout;
#  3. partition of p (its API port refused, the fake keeping its state):
#     a running job and a job created while p's controller was paused (it
#     completes inside the fake during the partition) keep their rows
#     unchanged for a window longer than 3 resync intervals plus a timeout
#     in which p's workers provably failed; a job submitted meanwhile stays
#     WAITING and unsynced; nothing of p's is created in any other fake; the
#     default cluster keeps working; once p answers again, the watch resumes
#     and every job converges (the completed one to SUCCEEDED, the new one
#     created once and SUCCEEDED, the running one not created again);
#     neither p's nor default's workers were restarted by it;
#  4. the same with a partition that hangs (API port holds every request)
#     and the watch history compacted meanwhile: the watcher must list
#     again, and the jobs converge the same way.
#
# Why 2 * T_base + 10 s: scheduling noise on a loaded 2-core machine is
# proportional to the work (the factor 2) plus some jitter of the batch
# (the 10 s); the baseline is measured in the same run, on the same
# machine, just before (about 1 s when idle).  Coupling is made costlier
# than that bound: the hung and trickling clusters hold a request for the
# whole k8s_timeout (20 s > 2 * T_base + 10 s whenever T_base < 5 s), so
# even one request of the healthy cluster waiting on them fails the check,
# and with resync_interval at 60 s a wake-up of the healthy sync worker
# lost to (or waiting behind) another cluster's shows as a stall of up to
# a minute instead of being hidden by a 3 s safety-net rescan.
#
# Every wait polls with a deadline; the only timed waits are the partition
# windows, during which the rows are checked continuously, and which end
# only once p's workers have counted new errors (they did try).
use strict;
use warnings;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use HostileApi;
use KubeFake;
use PaidbTest;

my $json = JSON::PP->new->canonical->allow_nonref;
my $SLOW = $ENV{PAIDB_TEST_SLOW} // 1;
my $N = 20;

# ---------------------------------------------------------------- helpers

# A text value as an SQL literal (NULL for undef).
sub lit { return PaidbTest::sql_literal(@_); }

# A listener that accepts connections and never reads or answers, in a child
# process: its port.  It keeps the last 500 connections open.
my @children;

sub hung_listener
{
	my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp',
		Listen => 128, ReuseAddr => 1) or die "listen: $!";
	my $port = $srv->sockport;
	my $parent = $$;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		my $sel = IO::Select->new($srv);
		my @held;
		while (getppid() == $parent)
		{
			next unless $sel->can_read(0.5);
			my $c = $srv->accept or next;
			push @held, $c;
			close(shift @held) if @held > 500;
		}
		POSIX::_exit(0);
	}
	close($srv);
	push @children, $pid;
	return $port;
}

END
{
	local $?;
	for my $pid (@children)
	{
		kill 'TERM', $pid;
		waitpid($pid, 0);
	}
}

# A port that refuses connections: a TCP socket bound to it and never
# listening (the kernel answers RST; nobody else can take the port).
sub refusing_port
{
	my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp')
	  or die "bind: $!";
	return ($s, $s->sockport);
}

# ---------------------------------------------------------------- set-up

my %fake;
$fake{a} = PaidbTest::start_fake();
$fake{p} = PaidbTest::start_fake();
$fake{e5} = PaidbTest::start_fake();
$fake{e4} = PaidbTest::start_fake();
$fake{g} = PaidbTest::start_fake();

my $node = PaidbTest::start_node('isolation', $fake{a}, retain_mode => 'on', resync_interval => '60s',
	conf => "max_worker_processes = 40\npaidb.k8s_timeout = '20s'\n");

# A cluster's workers in status(): "event watcher=PID,framework watcher=PID,sync=PID".
sub pids_of
{
	my ($cluster) = @_;
	return query($node, q{SELECT coalesce(string_agg(worker || '=' || coalesce(pid::text, '-'), ',' ORDER BY worker), '')
	    FROM paidb.status() WHERE cluster = } . lit($cluster));
}

# Wait until a cluster has exactly its three workers, each a live backend
# (with $watching: both watchers watching, i.e. their LIST went through).
sub wait_cluster_workers
{
	my ($cluster, $watching, $secs) = @_;
	my $w = $watching ? " AND (s.worker = 'sync' OR s.state = 'watching')" : '';
	return poll($node, qq{SELECT count(*) = 3
	    AND count(DISTINCT worker) = 3
	    AND bool_and(s.worker IN ('sync', 'framework watcher', 'event watcher'))
	    AND bool_and(s.pid IS NOT NULL
	        AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.pid)$w)
	  FROM paidb.status() s WHERE s.cluster = } . lit($cluster), 't', $secs);
}

# Errors counted by a cluster's workers: {worker => n}.
sub errors_of
{
	my ($cluster) = @_;
	my %out;
	for my $l (split /\n/, query($node, q{SELECT worker, coalesce(errors, 0) FROM paidb.status() WHERE cluster = }
		  . lit($cluster)))
	{
		my ($w, $n) = split /\|/, $l;
		$out{$w} = $n;
	}
	return \%out;
}

# Total errors counted by the workers of some clusters.
sub total_errors
{
	my (@clusters) = @_;
	return query($node, q{SELECT coalesce(sum(errors), 0) FROM paidb.status() WHERE cluster IN ('}
		  . join("', '", @clusters) . q{')});
}

# Submit many jobs in one psql session (one transaction each): [[request, cluster]].
sub submit_many
{
	my (@jobs) = @_;
	my $sql = '';
	for my $j (@jobs)
	{
		my ($req, $cluster) = @$j;
		$sql .= 'SELECT name FROM paidb.put_framework_request(' . sql_json($req)
		  . ", now(), '{}'::jsonb, " . lit($cluster) . ");\n";
	}
	query($node, $sql);
	return;
}

# A job name of 32 lower-case hex digits (the event watcher takes it).
sub jn { return job_name('isolation', $_[0]); }

# Wait until every job named is SUCCEEDED and deleted from its API server.
sub all_done
{
	my ($names, $secs) = @_;
	my $n = scalar @$names;
	return poll($node, q{SELECT count(*) FILTER (WHERE state = 'SUCCEEDED' AND api_server_deleted) = } . $n
		  . q{ FROM paidb.framework WHERE name IN ('} . join("', '", @$names) . q{')}, 't', $secs);
}

# Submit $N jobs to the default cluster (cluster argument NULL) and time them
# until all are SUCCEEDED and deleted: (seconds, names) or (undef, names).
sub timed_batch
{
	my ($tag) = @_;
	my @names = map { jn("$tag-$_") } 1 .. $N;
	my $t0 = time();
	submit_many(map { [ job_request($_), undef ] } @names);
	my $ok = all_done(\@names, 240 * $SLOW);
	my $t = time() - $t0;
	return ($ok ? $t : undef, \@names);
}

# Lift a kube-fake hold-state annotation: the framework runs on to its end.
sub release { return PaidbTest::fake_release_hold(@_); }

# The fakes other than $key that could have been asked to create something.
sub other_fakes { my ($key) = @_; return grep { $_ ne $key } sort keys %fake; }

# ============================================================ 0. healthy clusters
$node->safe_psql('postgres', 'INSERT INTO paidb.cluster (name, api_server) VALUES (' . lit('p') . ', '
	  . lit($fake{p}->url) . ')');
ok(wait_cluster_workers('default', 1), 'the default cluster has its three workers, watching');
ok(wait_cluster_workers('p', 1, 60), 'cluster p gets its three workers, watching');
my %pids0 = (default => pids_of('default'), p => pids_of('p'));

# ============================================================ 1. baseline
my ($t_base, $base_names) = timed_batch('base');
ok(defined $t_base, "baseline: $N jobs in the default cluster reach SUCCEEDED with only healthy clusters");
$t_base //= 60;
note(sprintf('baseline: %d jobs in %.1f s', $N, $t_base));
for my $name (@$base_names)
{
	is(fake_creates($fake{a}, $name), 1, "baseline job $name was created once in fake A") or last;
}

# ============================================================ 2. isolation
my $hung_port = hung_listener();
my ($refuse_sock, $refused_port) = refusing_port();
$fake{e5}->fault(status => 500, count => -1);
$fake{e4}->fault(status => 429, count => -1, retryAfter => 1);
my %hostile;
$hostile{garbage} = HostileApi->start($fake{g});
$hostile{trickle} = HostileApi->start($fake{g});
$hostile{wgarbage} = HostileApi->start($fake{g});
$hostile{garbage}->mode('bad_chunk');
$hostile{trickle}->mode('slow');
$hostile{wgarbage}->mode('watch_garbage');

my %broken_url = (
	hung => "http://127.0.0.1:$hung_port",
	refused => "http://127.0.0.1:$refused_port",
	e500 => $fake{e5}->url,
	e429 => $fake{e4}->url,
	garbage => $hostile{garbage}->url,
	trickle => $hostile{trickle}->url,
	wgarbage => $hostile{wgarbage}->url,
);
# the clusters none of whose requests succeed: their jobs stay unsynced
my @dead = qw(hung refused e500 e429 garbage trickle);
my @broken = (@dead, 'wgarbage');
# which fake could see a cluster's creates (none for hung and refused)
my %fake_of = (default => 'a', p => 'p', e500 => 'e5', e429 => 'e4', wgarbage => 'g');

$node->safe_psql('postgres', 'INSERT INTO paidb.cluster (name, api_server) VALUES '
	  . join(', ', map { '(' . lit($_) . ', ' . lit($broken_url{$_}) . ')' } @broken));
for my $c (@broken)
{
	ok(wait_cluster_workers($c, 0, 60), "broken cluster $c gets its three workers");
}

# two jobs in each broken cluster now
my %broken_jobs;
for my $c (@broken)
{
	$broken_jobs{$c} = [ map { jn("$c-$_") } 1 .. 2 ];
}
submit_many(map { my $c = $_; map { [ job_request($_), $c ] } @{ $broken_jobs{$c} } } @broken);
for my $c (@broken)
{
	ok(poll($node, q{SELECT last_error IS NOT NULL AND workers = 3 FROM paidb.cluster_status WHERE cluster = } . lit($c),
			't', 60),
		"cluster_status: $c has 3 workers and a last_error")
	  and note("$c: " . query($node, 'SELECT last_error FROM paidb.cluster_status WHERE cluster = ' . lit($c)));
}
for my $c (@dead)
{
	ok(poll($node, q{SELECT coalesce(errors, 0) > 0 FROM paidb.status() WHERE worker = 'sync' AND cluster = } . lit($c),
			't', 60),
		"the sync worker of $c has met its failure");
}

# one more job each, just before the run: their sync workers wake up and
# fail during it
for my $c (@broken)
{
	push @{ $broken_jobs{$c} }, jn("$c-3");
}
my $err_before = total_errors(@broken);
submit_many(map { [ job_request(jn("$_-3")), $_ ] } @broken);
my ($t_iso, $iso_names) = timed_batch('iso');
my $bound = 2 * $t_base + 10;
ok(defined $t_iso, "with seven broken clusters, $N jobs in the default cluster reach SUCCEEDED");
$t_iso //= 1e9;
cmp_ok($t_iso, '<=', $bound * $SLOW, sprintf('... within 2 * baseline + 10 s (%.1f s; baseline %.1f s)', $t_iso, $t_base));
note(sprintf('with broken clusters: %d jobs in %.1f s (baseline %.1f s, bound %.1f s)', $N, $t_iso, $t_base, $bound));
cmp_ok(total_errors(@broken), '>', $err_before, 'the broken clusters kept failing during the run');
for my $name (@$iso_names)
{
	is(fake_creates($fake{a}, $name), 1, "job $name was created once in fake A") or last;
}
my @elsewhere = grep { my $n = $_; grep { fake_create_attempts($fake{$_}, $n) } other_fakes('a') } @$iso_names;
is("@elsewhere", '', "no default job was sent to another cluster's API server");

# the broken clusters' jobs kept their state
for my $c (@dead)
{
	is(query($node, q{SELECT string_agg(state || ' ' || request_synced || ' ' || api_server_deleted || ' ' || cluster
	        || ' ' || placement || ' ' || coalesce(moving_from, '-'), ',') FROM paidb.framework WHERE name IN ('}
		  . join("', '", @{ $broken_jobs{$c} }) . q{')}),
		join(',', ("WAITING false false $c 1 -") x 3),
		"$c: its three jobs are WAITING, unsynced, not deleted, still in $c (placement 1)");
}
is(query($node, q{SELECT string_agg(cluster || ' ' || placement, ',') FROM paidb.framework WHERE name IN ('}
	  . join("', '", @{ $broken_jobs{wgarbage} }) . q{')}),
	'wgarbage 1,wgarbage 1,wgarbage 1', 'wgarbage: its jobs are still in wgarbage (placement 1)');
for my $c (@broken)
{
	my $own = $fake_of{$c} // '';
	for my $name (@{ $broken_jobs{$c} })
	{
		my @where = grep { fake_create_attempts($fake{$_}, $name) } other_fakes($own);
		is("@where", '', "$c job $name: no create in any other fake");
	}
}
is(query($node, q{SELECT string_agg(cluster || ':' || workers, ',' ORDER BY cluster) FROM paidb.cluster_status}),
	join(',', map { "$_:3" } sort('default', 'p', @broken)), 'cluster_status: every cluster has its three workers');
note('last errors: ' . query($node, q{SELECT string_agg(cluster || ': ' || coalesce(last_error, '-'), E'\n' ORDER BY cluster)
    FROM paidb.cluster_status}));
is(query($node, q{SELECT count(*) FROM paidb.cluster_status WHERE cluster IN ('default', 'p')
        AND last_contact > now() - interval '30 seconds'}), '2', 'the healthy clusters were in contact lately');
is(pids_of('default'), $pids0{default}, "the default cluster's workers kept their pids");
is(pids_of('p'), $pids0{p}, "cluster p's workers kept their pids");

# ============================================================ 3. partition: refused
# short timeouts from now on: the partition windows below cover several
# resync intervals and timeouts
$node->append_conf('postgresql.conf', "paidb.k8s_timeout = '3s'\npaidb.resync_interval = '3s'\n");
$node->reload;
ok(poll($node, q{SELECT current_setting('paidb.k8s_timeout') || ' ' || current_setting('paidb.resync_interval')}, '3s 3s'),
	'paidb.k8s_timeout and paidb.resync_interval are 3s by reload');

# The columns of a job that nothing may change while its cluster is away.
sub rows_of
{
	my (@names) = @_;
	return query($node, q{SELECT string_agg(name || ' ' || coalesce(state, '-') || ' ' || coalesce(sub_state, '-')
	        || ' ' || request_synced || ' ' || api_server_deleted || ' ' || cluster || ' ' || placement
	        || ' ' || coalesce(moving_from, '-') || ' ' || request_generation
	        || ' ' || coalesce(resource_version::text, '-') || ' ' || md5(paidb.snapshot(f)::text), E'\n' ORDER BY name)
	    FROM paidb.framework f WHERE name IN ('} . join("', '", @names) . q{')});
}

# Wait until p's framework watcher has passed everything fake P holds now.
sub p_watcher_passed
{
	my $rv = $fake{p}->resource_version;
	return poll($node, "SELECT resource_version::text::bigint >= $rv FROM paidb.cluster_status WHERE cluster = 'p'");
}

# One partition of p: $how->() cuts it, $heal->() heals it; $tag names the jobs.
sub partition
{
	my ($tag, $how, $heal, $what) = @_;
	my $held = jn("$tag-held");
	my $done = jn("$tag-done");
	my $new = jn("$tag-new");
	my $dflt = jn("$tag-default");

	submit_many([ job_request($held, hold_state => 'AttemptRunning'), 'p' ]);
	ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$held'"),
		"$what: a job runs in p");
	# a job that completes inside the fake while p is away
	$fake{p}->admin(POST => '/_fake/controller/pause');
	submit_many([ job_request($done), 'p' ]);
	ok(poll($node, "SELECT request_synced FROM paidb.framework WHERE name = '$done'"), "$what: a second job was created in p");
	ok(p_watcher_passed(), "$what: p's watcher has seen everything fake P holds");
	my $rows = rows_of($held, $done);
	like($rows, qr/^\S+ RUNNING AttemptRunning true false p 1 - /m, "$what: the running job's row before");
	like($rows, qr/^\S+ WAITING \S+ true false p 1 - /m, "$what: the created job's row before (no status yet)");
	my $lists = fake_counter($fake{p}, 'list frameworks');
	my $err0 = errors_of('p');
	my $pids_default = pids_of('default');

	$how->();
	$fake{p}->admin(POST => '/_fake/controller/resume');
	my $t_cut = time();
	submit_many([ job_request($new), 'p' ], [ job_request($dflt), undef ]);

	# the window: rows checked continuously; it ends once p's sync worker and
	# framework watcher have each counted a new error and at least 3 resync
	# intervals plus a timeout have passed
	my ($changed, $new_changed) = ('', '');
	my $tried = 0;
	my $end = time() + 120 * $SLOW;
	while (time() < $end)
	{
		my $now = rows_of($held, $done);
		if ($now ne $rows) { $changed = $now; last; }
		my $n = query($node, "SELECT state || ' ' || request_synced || ' ' || api_server_deleted || ' ' || cluster
		    || ' ' || placement FROM paidb.framework WHERE name = '$new'");
		if ($n ne 'WAITING false false p 1') { $new_changed = $n; last; }
		my $e = errors_of('p');
		$tried = ($e->{sync} // 0) > ($err0->{sync} // 0)
		  && ($e->{'framework watcher'} // 0) > ($err0->{'framework watcher'} // 0);
		last if $tried && time() - $t_cut >= 13;
		usleep(300_000);
	}
	ok($tried, "$what: p's sync worker and framework watcher tried and failed")
	  or diag(explain($err0, errors_of('p')));
	is($changed, '', "$what: the rows of p's running and created jobs did not change")
	  or diag("before:\n$rows\nafter:\n$changed");
	is($new_changed, '', "$what: a job submitted to p meanwhile stays WAITING, unsynced, in p");
	note(sprintf('%s: watched the rows for %.1f s', $what, time() - $t_cut));
	ok(poll($node, q{SELECT last_error IS NOT NULL AND workers = 3 FROM paidb.cluster_status WHERE cluster = 'p'}),
		"$what: cluster_status shows p's last_error and its three workers");
	ok(all_done([$dflt], 60 * $SLOW), "$what: a job of the default cluster completes meanwhile");
	is(fake_creates($fake{a}, $dflt), 1, "$what: ... created once in fake A");
	for my $name ($held, $done, $new)
	{
		my @where = grep { fake_create_attempts($fake{$_}, $name) } other_fakes('p');
		is("@where", '', "$what: nothing of p's job $name was sent to another cluster");
	}
	is(pids_of('default'), $pids_default, "$what: the default cluster's workers kept their pids");

	$heal->();
	ok(all_done([ $done, $new ], 120 * $SLOW),
		"$what: once p answers, the job completed meanwhile and the one submitted meanwhile reach SUCCEEDED");
	is(fake_creates($fake{p}, $new), 1, "$what: the job submitted meanwhile was created once in p");
	is(fake_create_attempts($fake{p}, $done), 1, "$what: the job completed meanwhile was not created again");
	ok(p_watcher_passed(), "$what: p's watcher caught up with fake P");
	is(query($node, "SELECT state || ' ' || request_synced || ' ' || api_server_deleted || ' ' || cluster FROM paidb.framework WHERE name = '$held'"),
		'RUNNING true false p', "$what: the running job is still running in p");
	is(fake_create_attempts($fake{p}, $held), 1, "$what: the running job was not created again");
	is(release($fake{p}, $held), 200, "$what: the running job's hold lifted");
	ok(all_done([$held], 60 * $SLOW), "$what: the running job reaches SUCCEEDED");
	note(sprintf('%s: p was listed %d more times', $what, fake_counter($fake{p}, 'list frameworks') - $lists));
	return fake_counter($fake{p}, 'list frameworks') - $lists;
}

partition('cut', sub { $fake{p}->pause('refuse') }, sub { $fake{p}->resume }, 'partition (refused)');

# ============================================================ 4. partition: hung, history lost
my $relisted = partition('hang', sub {
		$fake{p}->pause('hang');
		# the watch history is gone meanwhile: the watcher must list again
		$fake{p}->compact;
	},
	sub {
		# what p's watcher passed before is gone from the history too
		$fake{p}->compact;
		$fake{p}->resume;
	}, 'partition (hung, history compacted)');
cmp_ok($relisted, '>=', 1, 'after the hung partition with a compacted history, p was listed again');

# ============================================================ the end
is(pids_of('default'), $pids0{default}, "at the end, the default cluster's workers still have their first pids");
is(pids_of('p'), $pids0{p}, "at the end, p's workers still have their first pids (no exit through the partitions)");
is(query($node, q{SELECT string_agg(cluster || ':' || workers, ',' ORDER BY cluster) FROM paidb.cluster_status}),
	join(',', map { "$_:3" } sort('default', 'p', @broken)), 'at the end, every cluster still has its three workers');
my @crash = crash_lines($node);
is(scalar(@crash), 0, 'no crash in the server log') or diag(join("\n", @crash));
close($refuse_sock);

done_testing();
