# Moving a waiting job to another cluster (SPEC §11, paidb.move_job) against
# two kube-fakes, A (the "default" cluster, the node's paidb.k8s_* settings)
# and B (cluster "b", inserted at run time), proving from the fakes' request
# logs and from a sampler of their contents that the moved job never has two
# live frameworks, and ends in the right state, in each step that can fail:
#  1. a plain move A -> B of a job held WAITING (kube-fake hold-state
#     AttemptPreparing): B is sent nothing about the job before A answered
#     a DELETE with 404; B creates it once, labelled placement "2"; A never
#     gets another create; it runs to SUCCEEDED in B;
#  2. A unreachable (its API port refuses) while the job moves: for many
#     resync intervals the job keeps moving_from = default and its row does
#     not change, and nothing about it reaches B; once A is back the delete
#     goes through and B creates it;
#  3. B failing the create (a hung create that times out, two 500s, a 503
#     after the create was executed): it is retried, created once in B, and
#     A is sent nothing more after its 404;
#  4. a sync worker killed mid-move: (a) A's DELETE executes but its answer
#     is lost, A's sync worker is terminated (SIGTERM) before any 404 came
#     back; (b) B's create is in flight (hung) when B's sync worker is
#     SIGKILLed (the postmaster restarts every backend); (c) PostgreSQL
#     stopped (immediate) and started while A holds the DELETE: afterwards
#     exactly one framework in B, none in A;
#  5. force => true with A unreachable: B creates it at once, a
#     MovedUnconfirmed framework_event says so; A's old copy, which runs and
#     fails meanwhile (its deletes answered 503), never changes the job; it
#     is deleted once A answers; the job follows B only.
# "Never two": a child process samples every 0.2 s the number of frameworks
# in B, then in A (through the admin port, which works while the API port
# is paused), during every scenario but the forced one; since B may only
# create after A confirmed the delete, reading B first makes a sample of 2
# a real overlap, never a race of the sampler.
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use Time::Local qw(timegm);
use KubeFake;
use PaidbTest;

my $json = JSON::PP->new->canonical->allow_nonref;

# ---------------------------------------------------------------- set-up

my %fake;
$fake{$_} = PaidbTest::start_fake(args => [ '--log-name', '--log-agent' ]) for qw(a b);

my $node = PaidbTest::start_node('move', $fake{a}, state_log => 1, resync_interval => '1s',
	conf => "max_worker_processes = 20\npaidb.k8s_timeout = '3s'\n");

# A text value as an SQL literal (NULL for undef).
sub lit { return PaidbTest::sql_literal(@_); }

# Wait until a cluster has its three workers, each a live backend, both
# watchers watching; with %old (worker => pid), until each has a new pid.
sub wait_cluster_workers
{
	my ($cluster, %old) = @_;
	my $not_old = join('', map { " AND NOT (s.worker = " . lit($_) . " AND s.pid = $old{$_})" } sort keys %old);
	return poll($node, qq{SELECT count(*) = 3
	    AND bool_and(s.pid IS NOT NULL
	        AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = s.pid)
	        AND (s.worker = 'sync' OR s.state = 'watching')$not_old)
	  FROM paidb.status() s WHERE s.cluster = } . lit($cluster)
		  . q{ AND s.worker IN ('sync', 'framework watcher', 'event watcher')});
}

# The pid of a cluster's worker.
sub pid_of
{
	my ($cluster, $worker) = @_;
	return query($node, 'SELECT coalesce(pid, 0) FROM paidb.status() WHERE cluster = ' . lit($cluster)
		  . ' AND worker = ' . lit($worker));
}

# Wait until a cluster's framework watcher has passed everything its fake
# holds now.
sub watcher_passed
{
	my ($cluster, $fk) = @_;
	my $rv = $fk->resource_version;
	return poll($node, "SELECT resource_version::text::bigint >= $rv FROM paidb.cluster_status WHERE cluster = "
		  . lit($cluster));
}

$node->safe_psql('postgres', sprintf(q{INSERT INTO paidb.cluster (name, api_server, namespace)
    VALUES ('b', %s, 'default')}, lit($fake{b}->url)));
ok(wait_cluster_workers('b'), 'cluster b gets its three workers');
ok(wait_cluster_workers('default'), 'the default cluster has its three workers');

# The request log of a fake (started with --log-name --log-agent): a list of
# {start, end, method, target, code, name (creates), agent, line}; start =
# end - duration, which a delay in writing the line does not shift.
sub reqlog
{
	my ($fk) = @_;
	my @out;
	open(my $fh, '<', $fk->{request_log}) or return ();
	while (my $line = <$fh>)
	{
		chomp $line;
		next unless $line =~ m{^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(\.\d+)?Z (\S+) (\S+) (\S+) ([\d.]+)ms(?: name=(\S+))?(?: agent=(.*))?$};
		my $end = timegm($6, $5, $4, $3, $2 - 1, $1) + ($7 // 0);
		push @out, { end => $end, start => $end - $11 / 1000, method => $8, target => $9, code => $10,
			name => $12 // '', agent => $13 // '', line => $line };
	}
	close($fh);
	return @out;
}

# paidb's requests to a fake about one framework (by its path, or by the
# name in a create's body), in log order.
sub about
{
	my ($fk, $name) = @_;
	return grep {
		$_->{agent} =~ m{^paidb/}
		  && ($_->{name} eq $name || $_->{target} =~ m{/frameworks/\Q$name\E(?:[/?]|$)})
	} reqlog($fk);
}

# Lines of requests, for a diag.
sub lines
{
	return join("\n", map { $_->{line} } @_);
}

# Patch a framework's annotations directly in a fake (as the test, not paidb).
sub annotate
{
	my ($fk, $name, %ann) = @_;
	my ($code) = $fk->api(PATCH => fw_path($name), { metadata => { annotations => \%ann } },
		'application/merge-patch+json');
	return $code;
}

# Lift the hold-state annotation: the framework runs on to its end.
sub release { return PaidbTest::fake_release_hold(@_); }

# The moving parts of a job's row.
sub row
{
	my ($name) = @_;
	return query($node, q{SELECT cluster || ' ' || placement || ' ' || coalesce(moving_from, '-') || ' ' || state
	    || ' ' || coalesce(sub_state, '-') || ' ' || request_synced || ' ' || api_server_deleted
	    FROM paidb.framework WHERE name = } . lit($name));
}

# Move a job in one transaction that also reads its row back (before the
# commit: what move_job wrote, whatever the workers do next): "t CLUSTER
# PLACEMENT MOVING_FROM".
sub move
{
	my ($name, $cluster, $force) = @_;
	my $f = $force ? ', force => true' : '';
	my $out = query($node, "BEGIN;\nSELECT paidb.move_job(" . lit($name) . ", " . lit($cluster) . "$f);\n"
		  . "SELECT cluster || ' ' || placement || ' ' || coalesce(moving_from, '-') FROM paidb.framework WHERE name = "
		  . lit($name) . ";\nCOMMIT;");
	return join(' ', split /\n/, $out);
}

# Submit a job held WAITING (AttemptPreparing) and wait until it is so in A.
sub submit_held
{
	my ($name) = @_;
	submit($node, job_request($name, hold_state => 'AttemptPreparing'));
	ok(poll($node, "SELECT state = 'WAITING' AND sub_state = 'AttemptPreparing' AND request_synced
	    AND cluster = 'default' FROM paidb.framework WHERE name = " . lit($name)),
		"$name: held WAITING (AttemptPreparing) in cluster default");
	my $fw = fake_framework($fake{a}, $name);
	is(($fw // {})->{metadata}{labels}{'paidb.io/placement'}, '1', "$name: A's framework has placement \"1\"");
	return;
}

# Wait until the moved job's framework is in B and the job is synced there,
# check its labels, lift its hold and wait for SUCCEEDED (deleted from B).
sub run_in_b
{
	my ($name) = @_;
	ok(poll($node, "SELECT cluster = 'b' AND moving_from IS NULL AND request_synced AND sub_state = 'AttemptPreparing'
	    FROM paidb.framework WHERE name = " . lit($name)), "$name: created and synced in B, held WAITING there")
	  or diag('row: ' . row($name));
	my $fw = fake_framework($fake{b}, $name);
	ok($fw, "$name: its framework is in fake B");
	my $labels = ($fw // {})->{metadata}{labels} // {};
	is($json->encode($labels->{'paidb.io/placement'}), '"2"', "$name: B's framework has label paidb.io/placement \"2\"");
	is($labels->{'paidb.io/framework'}, $name, "$name: and label paidb.io/framework");
	is(release($fake{b}, $name), 200, "$name: hold lifted in B");
	ok(poll($node, "SELECT state = 'SUCCEEDED' AND api_server_deleted FROM paidb.framework WHERE name = " . lit($name)),
		"$name: runs to SUCCEEDED in B and is deleted there");
	return;
}

# The checks every non-forced move ends with.
sub moved_once
{
	my ($name, $t_move) = @_;
	is(query($node, q{SELECT cluster || ' ' || placement || ' ' || coalesce(moving_from, '-') || ' ' || state
	        || ' ' || coalesce(app_exit_code::text, '-') FROM paidb.framework WHERE name = } . lit($name)),
		'b 2 - SUCCEEDED 0', "$name: ends in cluster b, placement 2, SUCCEEDED with exit code 0");
	is(state_path($node, $name), 'WAITING RUNNING SUCCEEDED', "$name: its states were WAITING RUNNING SUCCEEDED");
	is(fake_creates($fake{b}, $name), 1, "$name: created exactly once in B");
	is(fake_create_attempts($fake{a}, $name), 1, "$name: A got no create after the move (only the first one)");
	ok(!fake_framework($fake{a}, $name) && !fake_framework($fake{b}, $name), "$name: gone from both fakes");

	my @a = about($fake{a}, $name);
	# the earliest 404 (a DELETE held in the fake may end with one later)
	my ($a404) = sort { $a->{start} <=> $b->{start} } grep { $_->{method} eq 'DELETE' && $_->{code} eq '404' } @a;
	ok($a404, "$name: A answered a DELETE of it with 404") or diag(lines(@a));
	my @b = about($fake{b}, $name);
	ok(@b, "$name: paidb sent B requests about it");
	if ($a404 && @b)
	{
		my @early = grep { $_->{start} <= $a404->{start} } @b;
		my ($first_b) = sort { $a <=> $b } map { $_->{start} } @b;
		is(scalar(@early), 0, sprintf("$name: every request to B came after A's 404 began (first one %.3f s after)",
			$first_b - $a404->{start}))
		  or diag("A's 404: $a404->{line}\nB too early:\n" . lines(@early));
		my @writes = grep { $_->{method} =~ /^(POST|PATCH|PUT)$/ && $_->{start} >= $t_move } @a;
		is(scalar(@writes), 0, "$name: no create or patch reached A after the move") or diag(lines(@writes));
		my @after = grep { $_->{start} > $a404->{end} } @a;
		diag("$name: requests to A after its 404:\n" . lines(@after)) if @after;
	}
	return;
}

# ---------------------------------------------------------------- the sampler

my @samplers;

# The frameworks of a fake now (admin port), or -1.
sub count_at
{
	my ($http, $port) = @_;
	my $res = $http->get("http://127.0.0.1:$port/_fake/state");
	return -1 unless $res->{success};
	my $st = eval { $json->decode($res->{content}) } or return -1;
	return $st->{objects}{frameworks} // 0;
}

# Start sampling "time, frameworks in B, frameworks in A" every 0.2 s.
sub start_sampler
{
	my $file = PostgreSQL::Test::Utils::tempdir() . '/samples';
	my $parent = $$;
	my ($pa, $pb) = ($fake{a}->admin_port, $fake{b}->admin_port);
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		my $http = HTTP::Tiny->new(timeout => 5);
		open(my $fh, '>', $file) or POSIX::_exit(1);
		$fh->autoflush(1);
		my $end = time() + 1800;
		while (getppid() == $parent && time() < $end)
		{
			my $t = time();
			my $nb = count_at($http, $pb);    # the new cluster first
			my $na = count_at($http, $pa);
			printf $fh "%.3f %d %d\n", $t, $nb, $na;
			usleep(200_000);
		}
		POSIX::_exit(0);
	}
	my $s = { pid => $pid, file => $file };
	push @samplers, $s;
	return $s;
}

# Stop a sampler: its samples [time, in B, in A].
sub stop_sampler
{
	my ($s) = @_;
	if (my $pid = delete $s->{pid})
	{
		kill 'TERM', $pid;
		waitpid($pid, 0);
	}
	my @out;
	open(my $fh, '<', $s->{file}) or return ();
	while (my $l = <$fh>)
	{
		push @out, [ split ' ', $l ] if $l =~ /^\S+ -?\d+ -?\d+$/;
	}
	close($fh);
	return @out;
}

END
{
	local $?;
	for my $s (@samplers)
	{
		next unless $s->{pid};
		kill 'TERM', $s->{pid};
		waitpid($s->{pid}, 0);
	}
}

# Never two frameworks at once in a sampler's samples; it saw the job in A
# and in B.
sub never_two
{
	my ($name, $s) = @_;
	my @s = stop_sampler($s);
	cmp_ok(scalar(@s), '>=', 3, "$name: the sampler took samples (" . scalar(@s) . ')');
	my @bad = grep { $_->[1] >= 0 && $_->[2] >= 0 && $_->[1] + $_->[2] > 1 } @s;
	is(scalar(@bad), 0, "$name: never two live frameworks (B then A sampled every 0.2 s)")
	  or diag('samples with two: ' . join('; ', map { "@$_" } @bad[ 0 .. ($#bad < 9 ? $#bad : 9) ]));
	ok((grep { $_->[2] == 1 } @s) && (grep { $_->[1] == 1 } @s), "$name: the sampler saw it in A, then in B");
	return;
}

# Nothing else is in either fake at the start of a scenario.
sub fakes_empty
{
	my ($tag) = @_;
	ok(wait_until(sub { $fake{a}->admin(GET => '/_fake/state')->{objects}{frameworks} == 0
		  && $fake{b}->admin(GET => '/_fake/state')->{objects}{frameworks} == 0 }),
		"$tag: no framework in either fake at the start");
	return;
}

# ============================================================ 1. plain move
{
	my $n = 'moveplain';
	fakes_empty('plain move');
	submit_held($n);
	my $s = start_sampler();
	my $t_move = time();
	is(move($n, 'b'), 't b 2 default', "$n: move_job returns true; cluster b, placement 2, moving_from default");
	run_in_b($n);
	never_two($n, $s);
	moved_once($n, $t_move);
	my @a = about($fake{a}, $n);
	my @dels = grep { $_->{method} eq 'DELETE' } @a;
	like($dels[0]{target} // '', qr/propagationPolicy=Foreground|\Q$n\E$/, "$n: A's copy was deleted with a DELETE");
}

# ============================================================ 2. the old cluster unreachable
{
	my $n = 'movedown';
	fakes_empty('A unreachable');
	submit_held($n);
	my $s = start_sampler();
	my $errors0 = query($node, q{SELECT errors FROM paidb.status() WHERE cluster = 'default' AND worker = 'sync'});
	$fake{a}->pause('refuse');
	my $t_move = time();
	is(move($n, 'b'), 't b 2 default', "$n: moved while A refuses connections");
	my $row = row($n);
	like($row, qr/^b 2 default WAITING /, "$n: moving from default, WAITING");
	# an observation window of 8 resync intervals: nothing may change
	my $changed = wait_until(sub {
		return 'row ' . row($n) if row($n) ne $row;
		return 'a create in B' if fake_create_attempts($fake{b}, $n) > 0;
		return 'a request about it in B' if about($fake{b}, $n);
		return 0;
	}, 8);
	is($changed, 0, "$n: for 8 s (8 resync intervals) with A down the row stays '$row' and B hears nothing of it");
	cmp_ok(query($node, q{SELECT errors FROM paidb.status() WHERE cluster = 'default' AND worker = 'sync'}), '>', $errors0,
		"$n: meanwhile A's sync worker tried and failed");
	is(query($node, q{SELECT moving_out FROM paidb.cluster_status WHERE cluster = 'default'}), '1',
		"$n: cluster_status shows one job moving out of default");
	ok(fake_framework($fake{b}, $n) ? 0 : 1, "$n: nothing in B");
	$fake{a}->resume;
	my $t_back = time();
	run_in_b($n);
	never_two($n, $s);
	moved_once($n, $t_move);
	my ($a404) = grep { $_->{method} eq 'DELETE' && $_->{code} eq '404' } about($fake{a}, $n);
	ok($a404 && $a404->{start} >= $t_back, "$n: A's 404 came after A was back");
}

# ============================================================ 3. the new cluster failing the create
{
	my $n = 'movefail';
	fakes_empty('B failing');
	submit_held($n);
	# the first create hangs past paidb.k8s_timeout (then fails), the next
	# one fails, the third is executed but its answer lost
	$fake{b}->latency(seconds => 5, count => 1, verb => 'create', resource => 'frameworks', name => $n);
	$fake{b}->fault(status => 500, count => 2, verb => 'create', resource => 'frameworks', name => $n);
	$fake{b}->fault(status => 503, count => 1, phase => 'after', verb => 'create', resource => 'frameworks', name => $n);
	my $s = start_sampler();
	my $t_move = time();
	is(move($n, 'b'), 't b 2 default', "$n: moved");
	run_in_b($n);
	never_two($n, $s);
	moved_once($n, $t_move);
	cmp_ok(fake_create_attempts($fake{b}, $n), '>=', 3, "$n: B was sent at least 3 creates (the failed ones)");
	my $left = $fake{b}->admin(GET => '/_fake/faults');
	is(scalar(@{ $left->{faults} }) + scalar(@{ $left->{latency} }), 0, "$n: every injected fault was hit")
	  or diag(explain $left);
	my ($a404) = grep { $_->{method} eq 'DELETE' && $_->{code} eq '404' } about($fake{a}, $n);
	my @after = grep { $_->{start} > $a404->{end} } about($fake{a}, $n);
	is(scalar(@after), 0, "$n: A untouched after its 404 while B failed") or diag(lines(@after));
	$fake{b}->clear_faults;
}

# ============================================================ 4a. A's sync worker terminated before the 404
{
	my $n = 'movekilla';
	fakes_empty('kill a');
	submit_held($n);
	# every DELETE of it is held 8 s (past paidb.k8s_timeout) and then
	# executed: the first one deletes it, no answer reaches paidb
	$fake{a}->latency(seconds => 8, count => -1, verb => 'delete', resource => 'frameworks', name => $n);
	my $s = start_sampler();
	my $t_move = time();
	is(move($n, 'b'), 't b 2 default', "$n: moved");
	ok(wait_until(sub { !fake_framework($fake{a}, $n) }), "$n: A's copy is deleted by a DELETE whose answer never came");
	like(row($n), qr/^b 2 default /, "$n: still moving from default");
	is(scalar(about($fake{b}, $n)), 0, "$n: nothing sent to B");
	my $pid = pid_of('default', 'sync');
	ok(kill('TERM', $pid), "$n: SIGTERM to the default cluster's sync worker $pid");
	ok(wait_cluster_workers('default', sync => $pid), "$n: a new sync worker of default runs");
	my $dels = fake_counter($fake{a}, 'delete frameworks');
	ok(wait_until(sub { fake_counter($fake{a}, 'delete frameworks') > $dels }),
		"$n: the new sync worker deletes again (held too)");
	like(row($n), qr/^b 2 default /, "$n: still moving from default (no 404 seen yet)");
	is(scalar(about($fake{b}, $n)), 0, "$n: still nothing sent to B");
	$fake{a}->clear_faults;
	run_in_b($n);
	never_two($n, $s);
	moved_once($n, $t_move);
}

# ============================================================ 4b. B's sync worker killed with its create in flight
{
	my $n = 'movekillb';
	fakes_empty('kill b');
	submit_held($n);
	$fake{b}->latency(seconds => 2.5, count => 1, verb => 'create', resource => 'frameworks', name => $n);
	my $creates0 = fake_counter($fake{b}, 'create frameworks');
	my $s = start_sampler();
	my $t_move = time();
	is(move($n, 'b'), 't b 2 default', "$n: moved");
	ok(wait_until(sub { fake_counter($fake{b}, 'create frameworks') > $creates0 }),
		"$n: B has received the create (held 2.5 s)");
	my $pid = pid_of('b', 'sync');
	my %old = map { $_ => pid_of($_, 'sync') } qw(default b);
	ok(kill('KILL', $pid), "$n: SIGKILL to cluster b's sync worker $pid");
	ok(wait_cluster_workers('b', sync => $old{b}), "$n: cluster b's workers run again");
	ok(wait_cluster_workers('default', sync => $old{default}),
		"$n: and the default cluster's (the postmaster restarted every backend)");
	# the killed worker's create is executed when its 2.5 s are over: wait
	# for it before the job may end (else it would create the framework of
	# a finished job again)
	ok(wait_until(sub { grep { $_->{method} eq 'POST' && $_->{end} - $_->{start} >= 2 } about($fake{b}, $n) }),
		"$n: the killed worker's held create has been executed and answered");
	run_in_b($n);
	never_two($n, $s);
	moved_once($n, $t_move);
	diag("$n: creates sent to B:\n" . lines(grep { $_->{method} eq 'POST' } about($fake{b}, $n)));
}

# ============================================================ 4c. PostgreSQL restarted mid-move
{
	my $n = 'moverestart';
	fakes_empty('restart');
	submit_held($n);
	my $s = start_sampler();
	$fake{a}->pause('hang');
	my $t_move = time();
	is(move($n, 'b'), 't b 2 default', "$n: moved while A holds every request");
	ok(poll($node, q{SELECT state = 'sending' FROM paidb.status() WHERE cluster = 'default' AND worker = 'sync'}),
		"$n: A's sync worker has a request hanging in A");
	like(row($n), qr/^b 2 default /, "$n: moving from default");
	$node->stop('immediate');
	$fake{a}->resume;
	$node->start;
	ok(wait_cluster_workers('default') && wait_cluster_workers('b'), "$n: the workers of both clusters run again");
	run_in_b($n);
	never_two($n, $s);
	moved_once($n, $t_move);
}

# ============================================================ 5. force, with A unreachable
{
	my $n = 'moveforce';
	fakes_empty('force');
	submit_held($n);
	my $uid_a = fake_framework($fake{a}, $n)->{metadata}{uid};
	my $s = start_sampler();
	$fake{a}->pause('refuse');
	my $t_move = time();
	is(move($n, 'b', 1), 't b 2 -', "$n: moved with force: cluster b, placement 2, moving_from NULL at once");
	ok(wait_until(sub { fake_creates($fake{b}, $n) == 1 }, 30), "$n: created in B at once, A still down");
	ok(fake_framework($fake{b}, $n), "$n: B has it");
	is(query($node, q{SELECT type || ' ' || (message LIKE '%default%b%')::int FROM paidb.framework_event
	        WHERE framework_name = 'moveforce' AND reason = 'MovedUnconfirmed'}),
		'Warning 1', "$n: a MovedUnconfirmed framework_event (Warning) names both clusters");
	is(query($node, q{SELECT count(*) FROM paidb.orphan WHERE cluster = 'default' AND name = 'moveforce'}), '1',
		"$n: its old copy is queued for deletion in default");
	ok(poll($node, "SELECT cluster = 'b' AND request_synced AND sub_state = 'AttemptPreparing'
	    FROM paidb.framework WHERE name = '$n'"), "$n: synced in B, held WAITING there");
	ok(watcher_passed('b', $fake{b}), "$n: b's watcher has passed B's copy");
	my $row_sql = q{SELECT state || ' ' || sub_state || ' ' || cluster || ' ' || placement || ' '
	    || coalesce(app_exit_code::text, '-') || ' ' || resource_version || ' ' || md5(paidb.snapshot(f)::text)
	    FROM paidb.framework f WHERE name = 'moveforce'};
	my $row = query($node, $row_sql);

	# A back, but its deletes of the old copy answered 503: the old copy
	# runs and fails with exit code 7 meanwhile
	$fake{a}->fault(status => 503, count => -1, verb => 'delete', resource => 'frameworks', name => $n);
	$fake{a}->resume;
	is(annotate($fake{a}, $n, 'kube-fake/hold-state' => undef, 'kube-fake/exit-codes' => '7'), 200,
		"$n: A's old copy is released to fail with exit code 7");
	ok(wait_until(sub {
		my $f = fake_framework($fake{a}, $n);
		return $f && ($f->{status}{state} // '') eq 'Completed';
	}), "$n: A's old copy completed (failed) in A");
	is(fake_framework($fake{a}, $n)->{metadata}{uid}, $uid_a, "$n: it is the old copy");
	ok(watcher_passed('default', $fake{a}), "$n: the default cluster's watcher has passed A's copy's changes");
	ok(wait_until(sub { grep { $_->{method} eq 'DELETE' && $_->{code} eq '503' } about($fake{a}, $n) }),
		"$n: A's sync worker tried to delete the old copy (answered 503)");
	ok(watcher_passed('default', $fake{a}), "$n: the default cluster's watcher has passed everything in A");
	ok(fake_framework($fake{a}, $n), "$n: A's old copy is still there");
	is(query($node, $row_sql), $row, "$n: the job's row did not change because of A's copy");

	$fake{a}->clear_faults;
	ok(wait_until(sub { !fake_framework($fake{a}, $n) }), "$n: A's old copy is deleted once A answers");
	ok(poll($node, q{SELECT count(*) = 0 FROM paidb.orphan WHERE name = 'moveforce'}), "$n: no orphan row left");
	is(query($node, $row_sql), $row, "$n: the job's row still did not change");
	is(release($fake{b}, $n), 200, "$n: hold lifted in B");
	ok(poll($node, "SELECT state = 'SUCCEEDED' AND api_server_deleted FROM paidb.framework WHERE name = '$n'"),
		"$n: runs to SUCCEEDED in B");
	is(query($node, "SELECT coalesce(app_exit_code::text, '-') || ' ' || cluster || ' ' || placement
	        FROM paidb.framework WHERE name = '$n'"), '0 b 2', "$n: exit code 0 (B's), not 7 (A's copy's)");
	is(state_path($node, $n), 'WAITING RUNNING SUCCEEDED', "$n: its states follow B only");
	is(fake_creates($fake{b}, $n), 1, "$n: created once in B");
	is(fake_create_attempts($fake{a}, $n), 1, "$n: no new create in A");
	my @s = stop_sampler($s);
	my @two = grep { $_->[1] + $_->[2] > 1 } @s;
	diag(sprintf("$n: two frameworks existed for %d samples (about %.1f s)", scalar(@two), 0.2 * @two));
	ok(!grep({ $_->[1] + $_->[2] > 2 } @s), "$n: never more than two");
}

# ============================================================ 6. a late create in the old cluster
# A create sent to A before the move is held there past paidb.k8s_timeout
# and executed only after A confirmed the framework absent (404) and B
# created it: A then holds a copy of another cluster (placement 1).  SPEC
# §11: it never changes the job, and the sync worker deletes it where it
# finds it (retain mode keeps what only the API server has, not a job's
# old copy; the default cluster has retain_mode on here).
{
	my $n = 'movelate';
	fakes_empty('late create');
	$fake{a}->latency(seconds => 8, count => 1, verb => 'create', resource => 'frameworks', name => $n);
	my $creates0 = fake_counter($fake{a}, 'create frameworks');
	submit($node, job_request($n, hold_state => 'AttemptPreparing'));
	ok(wait_until(sub { fake_counter($fake{a}, 'create frameworks') > $creates0 }), "$n: A has received the create (held 8 s)");
	is(query($node, "SELECT state FROM paidb.framework WHERE name = '$n'"), 'WAITING', "$n: the job is WAITING");
	is(move($n, 'b'), 't b 2 default', "$n: moved while its create is held in A");
	ok(poll($node, "SELECT cluster = 'b' AND moving_from IS NULL AND request_synced AND sub_state = 'AttemptPreparing'
	    FROM paidb.framework WHERE name = '$n'"), "$n: created and synced in B");
	my ($a404) = grep { $_->{method} eq 'DELETE' && $_->{code} eq '404' } about($fake{a}, $n);
	ok($a404, "$n: A answered 404 before the held create was executed");
	ok(wait_until(sub { fake_creates($fake{a}, $n) == 1 }), "$n: then A's held create is executed (201)");
	my $copy = fake_framework($fake{a}, $n);
	is(($copy // {})->{metadata}{labels}{'paidb.io/placement'}, '1', "$n: A has a copy of placement 1");
	my $row_sql = q{SELECT state || ' ' || sub_state || ' ' || cluster || ' ' || placement || ' '
	    || coalesce(moving_from, '-') || ' ' || resource_version || ' ' || md5(paidb.snapshot(f)::text)
	    FROM paidb.framework f WHERE name = 'movelate'};
	ok(watcher_passed('b', $fake{b}), "$n: b's watcher has passed B's copy");
	my $row = query($node, $row_sql);
	ok(wait_until(sub { !fake_framework($fake{a}, $n) }, 30), "$n: A's late copy is deleted by the default cluster's sync worker")
	  or diag("A's copy still there after 30 s; paidb.orphan: "
		  . query($node, q{SELECT coalesce(string_agg(cluster || '/' || name || ' uid=' || coalesce(uid, '-'), ', '), 'none')
		        FROM paidb.orphan WHERE name = 'movelate'})
		  . "; A's requests about it:\n" . lines(about($fake{a}, $n)));
	is(query($node, $row_sql), $row, "$n: the job's row did not change because of A's copy");
	if (fake_framework($fake{a}, $n))
	{
		# not the spec; is it retain mode?  Turn it off for the default
		# cluster and make A's copy change (a MODIFIED event)
		# (new watcher and sync processes, so no cached retain mode matters)
		$node->safe_psql('postgres', q{UPDATE paidb.cluster SET retain_mode = false WHERE name = 'default'});
		my %old = map { $_ => pid_of('default', $_) } ('sync', 'framework watcher');
		kill 'TERM', values %old;
		wait_cluster_workers('default', %old);
		annotate($fake{a}, $n, 'test/poke' => '1');
		my $gone = wait_until(sub { !fake_framework($fake{a}, $n) }, 20);
		diag("$n: with paidb.cluster.retain_mode = false for default and one more event of A's copy, it is "
			  . ($gone ? 'deleted' : 'still not deleted') . '; paidb.orphan: '
			  . query($node, q{SELECT coalesce(string_agg(cluster || '/' || name, ', '), 'none') FROM paidb.orphan}));
		$node->safe_psql('postgres', q{UPDATE paidb.cluster SET retain_mode = NULL WHERE name = 'default'});
	}
	is(release($fake{b}, $n), 200, "$n: hold lifted in B");
	ok(poll($node, "SELECT state = 'SUCCEEDED' AND api_server_deleted FROM paidb.framework WHERE name = '$n'"),
		"$n: runs to SUCCEEDED in B");
	is(fake_creates($fake{b}, $n), 1, "$n: created once in B");
	# leave nothing behind
	$fake{a}->api(DELETE => fw_path($n)) if fake_framework($fake{a}, $n);
}

# ============================================================ the end
is(query($node, q{SELECT count(*) FROM paidb.framework WHERE moving_from IS NOT NULL}), '0', 'nothing is left moving');
is(join("\n", crash_lines($node, allow_kill => 1)), '', 'no paidb process crashed by itself');

done_testing();
